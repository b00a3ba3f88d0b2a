"""Write ``tests/fixtures/train_js.json``: what the page's trainer (``_interactive/train.js``) must
reproduce, computed by the book's own code.

A small chapter-9 model (:class:`~transformer_intro.models.language_model.LanguageModel`, rotary
positions, GELU MLP, LayerNorms; the configuration below) with the package's initial weights, a
few batches of windows cut from Hamlet, and, in float64 (``jax_enable_x64``):

* ``jax.grad`` of :meth:`NextSymbolPrediction.loss` (the mean next-symbol cross-entropy) at the
  initial weights and the first batch;
* three optimiser steps of the book's own ``Recipe.optimiser()`` (clipping by the global norm,
  AdamW with a warm-up and cosine schedule, weight decay on the matrices), one batch each: the
  loss, the gradient and the weights after each step.

Numbers are stored as base64 of float64 little-endian bytes, in the order
``transformer_intro.export`` lists a model's tensors. ``tests/test_train_js.py`` runs
``tests/js/train_check.js`` on it. Run from the repository root:
``.venv/bin/python scripts/make_train_js_fixture.py``; with ``--losses DUMP OUT`` it writes JAX's
losses for the steps the page recorded (:func:`training_losses`) instead.

The module also holds :func:`model_from_flat` and :func:`flat_from_model`, which
``tests/browser/test_train_ch09.py`` and ``benchmarks/train_in_page.py`` use to move weights
between the page's flat layout and the package's model.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from transformer_intro.block import BlockConfig  # noqa: E402
from transformer_intro.datasets.shakespeare import load_play  # noqa: E402
from transformer_intro.export import _tensors  # noqa: E402
from transformer_intro.files import write_atomically  # noqa: E402
from transformer_intro.models.language_model import LanguageModel, LMConfig  # noqa: E402
from transformer_intro.tasks import NextSymbolPrediction, random_windows  # noqa: E402
from transformer_intro.training.recipe import Recipe  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "train_js.json"

# Small enough for a committed file; every part of chapter 9's model is there (two blocks, two
# heads of K = 4, so the query projection (H K, D) is square, as the transposed-weight control
# needs).
CONFIG = {"window": 8, "dim": 8, "num_heads": 2, "num_blocks": 2, "mlp_hidden_dim": 16}
BATCH = 3
STEPS = 3
# Chapter 9's recipe in shape (warm-up, cosine, decay of the matrices, b2 = 0.99, clipping), with
# a short schedule and a clipping norm the gradients exceed, so every branch is exercised.
RECIPE = Recipe(
    steps=10,
    batch_size=BATCH,
    learning_rate=1e-2,
    warmup_steps=2,
    final_learning_rate=1e-3,
    weight_decay=0.1,
    decay="matrices",
    b2=0.99,
    clip_norm=0.5,
)


# The fields of a Recipe the page's trainer reads (the rest are the defaults: AdamW, one call).
RECIPE_FIELDS = (
    "steps",
    "batch_size",
    "learning_rate",
    "warmup_steps",
    "final_learning_rate",
    "weight_decay",
    "decay",
    "b1",
    "b2",
    "clip_norm",
)


def lm_config(config: dict, vocab_size: int) -> LMConfig:
    """The package's configuration for the page's ``config`` (window, dim, heads, blocks, MLP)."""
    dim, heads = int(config["dim"]), int(config["num_heads"])
    block = BlockConfig(
        dim=dim,
        num_heads=heads,
        mlp_hidden_dim=int(config["mlp_hidden_dim"]),
        value_dim=dim // heads,
        rotary=True,
    )
    return LMConfig(
        vocab_size=vocab_size,
        window=int(config["window"]),
        block=block,
        num_blocks=int(config["num_blocks"]),
    )


def flat_from_model(model: LanguageModel) -> np.ndarray:
    """Every array of the model, in export order, one after the other (the page's layout)."""
    return np.concatenate([a.reshape(-1) for _, a in _tensors(model)]).astype(np.float64)


def model_from_flat(config: LMConfig, flat, dtype=jnp.float64) -> LanguageModel:
    """A :class:`LanguageModel` holding ``flat`` (the page's layout), its arrays in ``dtype``.

    Raises:
        ValueError: if ``flat`` does not hold exactly the model's number of parameters.
    """
    skeleton = LanguageModel(config, key=jax.random.PRNGKey(0))
    arrays, rest = eqx.partition(skeleton, eqx.is_inexact_array)
    leaves, tree = jax.tree_util.tree_flatten(arrays)
    flat = np.asarray(flat, np.float64)
    total = sum(leaf.size for leaf in leaves)
    if flat.size != total:
        raise ValueError(f"the model has {total} parameters, the flat array {flat.size}")
    out, offset = [], 0
    for leaf in leaves:
        out.append(jnp.asarray(flat[offset : offset + leaf.size].reshape(leaf.shape), dtype))
        offset += leaf.size
    return eqx.combine(jax.tree_util.tree_unflatten(tree, out), rest)


def encode(array: np.ndarray) -> str:
    """float64 little-endian bytes in base64."""
    return base64.b64encode(np.asarray(array, "<f8").tobytes()).decode("ascii")


def fixture() -> dict:
    """The fixture's contents (see the module's docstring)."""
    text = load_play("hamlet")[:20_000]
    symbols = sorted(set(text))
    ids = np.array([symbols.index(c) for c in text], np.int32)
    config = lm_config(CONFIG, len(symbols))
    model = LanguageModel(config, key=jax.random.PRNGKey(0))
    model = model_from_flat(config, flat_from_model(model))  # the same weights, in float64
    task = NextSymbolPrediction(ids, window=config.window)
    windows = [
        np.asarray(
            random_windows(task.train_ids, jax.random.PRNGKey(t + 1), BATCH, config.window + 1)
        )
        for t in range(STEPS)
    ]

    def loss(m, w):
        return task.loss(m, jnp.asarray(w))[0]

    value_and_grad = eqx.filter_jit(eqx.filter_value_and_grad(loss))
    optimiser = RECIPE.optimiser()
    params = model
    state = optimiser.init(eqx.filter(params, eqx.is_inexact_array))
    steps = []
    for w in windows:
        value, grads = value_and_grad(params, w)
        flat_grad = flat_from_model(grads)
        updates, state = optimiser.update(grads, state, eqx.filter(params, eqx.is_inexact_array))
        params = eqx.apply_updates(params, updates)
        steps.append(
            {
                "loss": float(value),
                "grad_norm": float(np.linalg.norm(flat_grad)),
                "grad": encode(flat_grad),
                "params_after": encode(flat_from_model(params)),
            }
        )
    recipe = {k: getattr(RECIPE, k) for k in RECIPE_FIELDS}
    config_out = dict(CONFIG, vocab_size=len(symbols), norm_eps=config.block.norm_eps)
    config_out["rotary_base"] = config.block.rotary_base
    return {
        "about": "written by scripts/make_train_js_fixture.py; checked by tests/test_train_js.py",
        "config": config_out,
        "recipe": recipe,
        "batch": BATCH,
        "windows": [w.reshape(-1).tolist() for w in windows],
        "params": encode(flat_from_model(model)),
        "steps": steps,
    }


def training_losses(dump: dict, variant: str = "same") -> list[float]:
    """JAX's losses over the steps the page recorded (``bookTrain``'s "dump" message).

    The book's ``LanguageModel`` from the page's initial weights, trained in float64 by the book's
    ``Recipe.optimiser()`` on the page's batches, in order. ``variant`` is a control:
    ``"no_clipping"`` trains without clipping the gradient, ``"reversed"`` takes the batches in
    reverse order; the page must miss both.
    """
    config = lm_config(dump["config"], int(dump["config"]["vocab_size"]))
    fields = {k: dump["recipe"][k] for k in RECIPE_FIELDS}
    if variant == "no_clipping":
        fields["clip_norm"] = None
    recipe = Recipe(**fields)
    model = model_from_flat(config, dump["initial"])
    n = config.window
    windows = [np.asarray(w, np.int32).reshape(-1, n + 1) for w in dump["windows"]]
    if variant == "reversed":
        windows = windows[::-1]
    task = NextSymbolPrediction(np.zeros(n + 1, np.int32), window=n)
    value_and_grad = eqx.filter_jit(eqx.filter_value_and_grad(lambda m, w: task.loss(m, w)[0]))
    optimiser = recipe.optimiser()
    state = optimiser.init(eqx.filter(model, eqx.is_inexact_array))
    losses = []
    for w in windows:
        value, grads = value_and_grad(model, jnp.asarray(w))
        updates, state = optimiser.update(grads, state, eqx.filter(model, eqx.is_inexact_array))
        model = eqx.apply_updates(model, updates)
        losses.append(float(value))
    return losses


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--losses":
        # tests/browser/test_train_ch09.py: the page's dump in, JAX's losses (and controls') out
        dump = json.loads(Path(sys.argv[2]).read_text())
        out = {v: training_losses(dump, v) for v in ("same", "no_clipping", "reversed")}
        Path(sys.argv[3]).write_text(json.dumps(out))
        return
    data = json.dumps(fixture(), indent=1) + "\n"
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(FIXTURE, data)
    print(f"wrote {FIXTURE.relative_to(REPO)} ({FIXTURE.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
