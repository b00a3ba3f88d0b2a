"""How fast can this CPU multiply matrices, and how much arithmetic does a train step need?

Two numbers bound any train-step speed: the FLOPs of one step (counted by XLA) and the rate at
which the machine does matrix products, the bulk of those FLOPs. This script measures the second
for large square matrices and for the shapes of the `reference` model's per-head projections (as
the forward pass and the two backward products lay them out), in float32 and bfloat16 with
float32 accumulation, and prints the first. It asserts nothing.

    python benchmarks/matmul_peak.py [--batch-size 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from transformer_intro import VisionTransformer, get_config
from transformer_intro.tasks import ImageClassification
from transformer_intro.training import gradients

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def _product(layout: str):
    """A jitted product of two (rows, cols) operands in one of the layouts a dense layer meets."""
    contract = {
        "x @ w": lambda x, w: jnp.dot(x, w, preferred_element_type=jnp.float32),  # forward
        "g @ w.T": lambda g, w: jnp.dot(
            g, w.T, preferred_element_type=jnp.float32
        ),  # input gradient
        "x.T @ g": lambda x, g: jnp.dot(
            x.T, g, preferred_element_type=jnp.float32
        ),  # weight gradient
    }[layout]
    return jax.jit(contract)


def matmul_shapes(layout: str, m: int, k: int, n: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Operand shapes for an (m, k) x (k, n) product written in ``layout``."""
    return {"x @ w": ((m, k), (k, n)), "g @ w.T": ((m, k), (n, k)), "x.T @ g": ((k, m), (k, n))}[
        layout
    ]


def matmul_gflops(layout: str, m: int, k: int, n: int, dtype: str, seconds: float = 0.5) -> float:
    """Sustained GFLOP/s of one (m, k) x (k, n) product, its operands already in ``dtype``."""
    shape_a, shape_b = matmul_shapes(layout, m, k, n)
    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal(shape_a), DTYPES[dtype])
    b = jnp.asarray(rng.standard_normal(shape_b), DTYPES[dtype])
    product = _product(layout)
    product(a, b).block_until_ready()
    repeats, elapsed = 0, 0.0
    start = time.perf_counter()
    while elapsed < seconds:
        out = product(a, b)
        repeats += 1
        if repeats % 8 == 0:
            out.block_until_ready()
            elapsed = time.perf_counter() - start
    out.block_until_ready()
    elapsed = time.perf_counter() - start
    return 2 * m * k * n * repeats / elapsed / 1e9


def train_step_flops_per_image(config: str, batch_size: int) -> float:
    """FLOPs of the forward and backward pass per image.

    As XLA counts them for the compiled step.
    """
    model = VisionTransformer(config, key=jax.random.PRNGKey(0))
    params, static = eqx.partition(model, eqx.is_inexact_array)
    size = model.config.image_size
    task = ImageClassification((np.zeros((batch_size, size, size), np.uint8), np.zeros(batch_size)))
    batch = task.batch(jax.random.PRNGKey(0), batch_size)
    step_gradients = jax.jit(lambda p, b: gradients(eqx.combine(p, static), b, task.loss))
    cost = step_gradients.lower(params, batch).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return cost["flops"] / batch_size


def peak_table(batch_size: int, rounds: int) -> dict[tuple[str, str], float]:
    """Median GFLOP/s over interleaved rounds for every (case, dtype)."""
    config = get_config("reference")
    tokens = batch_size * (config.num_patches + 1)
    # One head's keys, values and queries come from one product (MultiHeadSelfAttention.batched).
    width, projected = config.block.dim, 2 * config.block.keys_dim + config.block.dim
    cases = {
        "2048 x 2048 x 2048": ("x @ w", 2048, 2048, 2048),
        "projection, forward (x @ w)": ("x @ w", tokens, width, projected),
        "projection, input gradient (g @ w.T)": ("g @ w.T", tokens, projected, width),
        "projection, weight gradient (x.T @ g)": ("x.T @ g", width, tokens, projected),
    }
    rates = {(case, dtype): [] for case in cases for dtype in DTYPES}
    for _ in range(rounds):
        for (case, dtype), values in rates.items():
            values.append(matmul_gflops(*cases[case], dtype))
    return {key: float(np.median(values)) for key, values in rates.items()}


def best_rate(table: dict[tuple[str, str], float], dtype: str) -> float:
    return max(rate for (_, kind), rate in table.items() if kind == dtype)


def print_peak_table(table: dict[tuple[str, str], float], batch_size: int) -> None:
    print(
        f"\nmatrix products on {os.cpu_count()} CPU cores, shapes of batch {batch_size} "
        "(median GFLOP/s; bfloat16 operands accumulate in float32)"
    )
    for case in dict.fromkeys(case for case, _ in table):
        print(
            f"  {case:40s} float32 {table[case, 'float32']:6.0f}   "
            f"bfloat16 {table[case, 'bfloat16']:6.0f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    table = peak_table(args.batch_size, args.rounds)
    print_peak_table(table, args.batch_size)
    flops = train_step_flops_per_image("reference", args.batch_size)
    peak = best_rate(table, "float32")
    print(
        f"\n`reference` train step: {flops / 1e9:.2f} GFLOP per image "
        "(XLA's count, forward + backward)"
    )
    print(
        f"  at the best float32 rate above, even with no other work: "
        f"{peak * 1e9 / flops:.0f} images/s at most"
    )


if __name__ == "__main__":
    main()
