"""Each layer's ``batched`` method against ``jax.vmap`` of its one-example ``__call__``.

A layer keeps a ``batched`` method only where it is faster than ``jax.vmap(layer)``. This times
both, forward and backward (the gradient with respect to the layer and its input, as training
needs), on the shapes of the book's two trained models (for the patch tokeniser, whose fast
path went, that path is the patches multiplied as one matrix):

* chapter 8's ViT ("default": 64 images, 17 tokens of width 64, four heads of width 16);
* chapter 9's language model (32 windows of 64 characters, width 128, four rotary heads, a
  causal mask), and a gated MLP of the same width (hidden width 344, as 4 D 2/3 rounds).

Every case compiles once per variant; then ``--rounds`` rounds alternate the variants, each
round taking the best of ``--calls`` calls. The ratio is batched / vmap per round, and the
median over rounds is printed: below 1 the fast path pays.

    python benchmarks/batched_paths.py [--rounds 5] [--calls 10] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp

from transformer_intro.attention import MultiHeadSelfAttention, causal_mask
from transformer_intro.block import TransformerBlock
from transformer_intro.mlp import MLP, GatedMLP
from transformer_intro.models import SHAKESPEARE_CONFIG
from transformer_intro.models.vit import CONFIGS
from transformer_intro.tokenisers import PatchTokeniser, patchify

REPO = Path(__file__).resolve().parents[1]


def patches_as_one_product(tokeniser: PatchTokeniser, images):
    """The patch tokeniser's former fast path: patches taken out, then one matrix product."""
    weight, bias = tokeniser.linear_map()
    patches = jax.vmap(patchify, in_axes=(0, None))(images, tokeniser.patch_size)
    b, n, cpp = patches.shape
    return (patches.reshape(b * n, cpp) @ weight.T + bias).reshape(b, n, -1)


def _cases() -> dict[str, tuple]:
    """name -> (layer, input, batched(layer, x), one(layer, x) for one example)."""
    keys = iter(jax.random.split(jax.random.PRNGKey(0), 16))
    vit = CONFIGS["default"].block
    lm = SHAKESPEARE_CONFIG.block
    vit_x = jax.random.normal(next(keys), (64, 17, vit.dim))
    lm_x = jax.random.normal(next(keys), (32, 64, lm.dim))
    images = jax.random.normal(next(keys), (64, 1, 28, 28))
    mask = causal_mask(64)
    return {
        "vit_patch_tokeniser": (
            PatchTokeniser(7, 1, vit.dim, key=next(keys)),
            images,
            patches_as_one_product,
            lambda t, x: t(x),
        ),
        "vit_mlp": (
            MLP(vit.dim, vit.mlp_hidden_dim, 1, key=next(keys)),
            vit_x,
            lambda m, x: m.batched(x),
            lambda m, x: jax.vmap(m)(x),
        ),
        "vit_attention": (
            MultiHeadSelfAttention(
                vit.dim, vit.num_heads, key=next(keys), **vit.attention_options()
            ),
            vit_x,
            lambda a, x: a.batched(x),
            lambda a, x: a(x),
        ),
        "vit_block": (
            TransformerBlock(vit, key=next(keys)),
            vit_x,
            lambda b, x: b.batched(x),
            lambda b, x: b(x),
        ),
        "lm_mlp": (
            MLP(lm.dim, lm.mlp_hidden_dim, 1, key=next(keys)),
            lm_x,
            lambda m, x: m.batched(x),
            lambda m, x: jax.vmap(m)(x),
        ),
        "lm_gated_mlp": (
            GatedMLP(lm.dim, 344, key=next(keys)),
            lm_x,
            lambda m, x: m.batched(x),
            lambda m, x: jax.vmap(m)(x),
        ),
        "lm_attention": (
            MultiHeadSelfAttention(lm.dim, lm.num_heads, key=next(keys), **lm.attention_options()),
            lm_x,
            lambda a, x: a.batched(x, mask),
            lambda a, x: a(x, mask),
        ),
        "lm_block": (
            TransformerBlock(lm, key=next(keys)),
            lm_x,
            lambda b, x: b.batched(x, mask),
            lambda b, x: b(x, mask),
        ),
    }


def _step(forward):
    """The jitted gradient of ``sum(forward(layer, x) * cotangent)`` in the layer and x."""

    @eqx.filter_jit
    def step(layer, x, cotangent):
        def loss(layer, x):
            return jnp.sum(forward(layer, x) * cotangent)

        return eqx.filter_grad(loss)(layer, x)

    return step


def _best(fn, calls: int) -> float:
    best = float("inf")
    for _ in range(calls):
        tic = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - tic)
    return best


def measure_case(layer, x, batched, one, rounds: int, calls: int) -> dict:
    """Both variants' times (ms) per round, their median ratio and their gradients' difference."""
    variants = {
        "batched": _step(batched),
        "vmap": _step(lambda layer, x: jax.vmap(lambda e: one(layer, e))(x)),
    }
    out = jax.eval_shape(batched, layer, x)
    cotangent = jax.random.normal(jax.random.PRNGKey(1), out.shape)
    grads = {v: step(layer, x, cotangent) for v, step in variants.items()}  # compiles
    difference = max(
        float(jnp.max(jnp.abs(a - b)))
        for a, b in zip(
            jax.tree.leaves(eqx.filter(grads["batched"], eqx.is_array)),
            jax.tree.leaves(eqx.filter(grads["vmap"], eqx.is_array)),
        )
    )
    times = {v: [] for v in variants}
    for _ in range(rounds):
        for v, step in variants.items():
            times[v].append(_best(functools.partial(step, layer, x, cotangent), calls))
    ratios = [b / v for b, v in zip(times["batched"], times["vmap"])]
    return {
        "input_shape": list(x.shape),
        "batched_ms": [1e3 * t for t in times["batched"]],
        "vmap_ms": [1e3 * t for t in times["vmap"]],
        "ratio_batched_over_vmap": statistics.median(ratios),
        "ratio_range": [min(ratios), max(ratios)],
        "largest_gradient_difference": difference,
    }


def measure(rounds: int, calls: int) -> dict:
    results = {}
    for name, case in _cases().items():
        r = results[name] = measure_case(*case, rounds, calls)
        print(
            f"{name:22s} batched {statistics.median(r['batched_ms']):8.3f} ms"
            f"  vmap {statistics.median(r['vmap_ms']):8.3f} ms"
            f"  ratio {r['ratio_batched_over_vmap']:.2f}"
            f" ({r['ratio_range'][0]:.2f}-{r['ratio_range'][1]:.2f})"
            f"  |grad diff| {r['largest_gradient_difference']:.1e}",
            flush=True,
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--out", default=None, help="write the figures here as JSON")
    args = parser.parse_args()
    from report import machine, write_json  # beside this script

    load_before = os.getloadavg()
    results = measure(args.rounds, args.calls)
    if args.out:
        out = Path(args.out)
        write_json(
            out,
            {
                "command": f"python benchmarks/batched_paths.py --rounds {args.rounds}"
                f" --calls {args.calls}",
                "machine": machine(),
                "load_average_before": load_before,
                "load_average_after": os.getloadavg(),
                "cases": results,
            },
        )
        print("written", out.relative_to(REPO) if out.is_relative_to(REPO) else out)


if __name__ == "__main__":
    main()
