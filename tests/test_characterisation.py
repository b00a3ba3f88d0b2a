"""The one training loop reaches the parameters the three old loops reached.

``tests/fixtures/characterisation.npz`` holds, for a tiny ViT, language model and encoder-decoder,
the batches each old loop (commit 75c6773: ``train.fit``, ``train_language_model``,
``encoder_decoder.train``) drew and the parameters it ended with (made by
``tests/fixtures/make_characterisation.py``). Here ``training.fit`` is given the same batches, in
the same order, through a task that replays them, and the chapter's recipe written as a
:class:`Recipe`. Where the old loop compiled one step per call, ``steps_per_call=1`` gives
the same computation; the language model's old loop already ran 5 steps in one ``lax.scan``,
and so does the new one. Grouping the ViT's steps into a scan changes only float rounding.

On the machine that recorded the fixtures the same computations are bit-identical and the
scanned ViT within 1e-6. XLA's CPU kernels round differently on other processors: on an
AVX2-only AMD EPYC every comparison here differs, by at most 2.4e-6 of an array's largest entry
after 12 steps. So the check is a relative 1e-5 on every array, which a
run with two batches swapped misses by four orders of magnitude (``test_the_comparison_can_fail``).
Run with ``-s`` to see the differences and how many arrays are bit-identical.
"""

from __future__ import annotations

import re
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array

from transformer_intro import EncoderDecoder, LanguageModel, LMConfig, VisionTransformer, ViTConfig
from transformer_intro.block import BlockConfig
from transformer_intro.models import EncoderDecoderConfig
from transformer_intro.tasks import (
    ImageClassification,
    NextSymbolPrediction,
    SequenceToSequence,
    prepare_images,
)
from transformer_intro.training import Recipe, batch_key, fit

FIXTURE = np.load(Path(__file__).parent / "fixtures" / "characterisation.npz")
# Relative to each array's largest entry: above the rounding of another CPU's kernels (2.4e-6
# seen), far below what a change of computation does (0.19 for two batches swapped).
RTOL = 1e-5


class Replay(eqx.Module):
    """A task that hands ``fit`` recorded batches: step t's key selects batch t."""

    batches: object  # a pytree of arrays with the step as leading axis
    keys: Array  # (T, 2): the key fit passes at each step
    task: object  # whose loss is used
    prepare: object = eqx.field(static=True)  # applied to a batch inside the compiled step

    def __init__(self, batches, task, seed: int, prepare=lambda batch: batch):
        self.batches = batches
        self.prepare = prepare
        steps = jax.tree_util.tree_leaves(batches)[0].shape[0]
        self.keys = jnp.stack([batch_key(seed, t) for t in range(steps)])
        self.task = task

    def batch(self, key, batch_size):
        t = jnp.argmax(jnp.all(key == self.keys, axis=1))
        return self.prepare(jax.tree_util.tree_map(lambda b: b[t], self.batches))

    def loss(self, model, batch):
        return self.task.loss(model, batch)


def parameters(model) -> dict[str, np.ndarray]:
    flat = jax.tree_util.tree_leaves_with_path(eqx.filter(model, eqx.is_inexact_array))
    return {jax.tree_util.keystr(p, simple=True, separator="."): np.asarray(x) for p, x in flat}


def recorded(prefix: str, rename=lambda path: path) -> dict[str, np.ndarray]:
    return {
        rename(name.split("/", 1)[1]): FIXTURE[name]
        for name in FIXTURE.files
        if name.startswith(prefix + "/")
    }


def differences(model, expected: dict[str, np.ndarray]) -> dict[str, float]:
    """Per parameter array: max |new - old| / max |old|."""
    got = parameters(model)
    assert got.keys() == expected.keys()
    out = {}
    for name, old in expected.items():
        out[name] = float(np.abs(got[name] - old).max() / max(np.abs(old).max(), 1e-30))
    worst = max(out, key=out.get)
    identical = sum(np.array_equal(got[n], expected[n]) for n in expected)
    print(
        f"\n{identical}/{len(out)} arrays bit-identical; largest relative difference "
        f"{out[worst]:.2e} ({worst})"
    )
    return out


def vit_batches():
    return {
        "images": jnp.asarray(FIXTURE["vit_images"]),
        "labels": jnp.asarray(FIXTURE["vit_labels"]),
    }


def vit_prepare(batch):
    """Scale the recorded uint8 images inside the step, as the task's ``batch`` does."""
    return {"images": prepare_images(batch["images"]), "labels": batch["labels"]}


VIT_CONFIG = ViTConfig(
    image_size=8,
    patch_size=4,
    block=BlockConfig(dim=16, num_heads=2, mlp_hidden_dim=32),
    num_blocks=2,
)


def assert_matches(model, expected):
    assert max(differences(model, expected).values()) < RTOL


@pytest.mark.parametrize(
    "name, micro_batches, steps_per_call", [("vit", 1, 1), ("vit_micro", 2, 1), ("vit", 1, 4)]
)
def test_image_classification_equals_the_old_vit_loop(name, micro_batches, steps_per_call):
    # The old DEFAULT_RECIPE form: AdamW decaying every parameter, b2 = 0.999, cosine schedule.
    recipe = Recipe(
        steps=12,
        batch_size=16,
        learning_rate=2e-3,
        warmup_steps=3,
        weight_decay=0.05,
        decay="all",
        b2=0.999,
        steps_per_call=steps_per_call,
        micro_batches=micro_batches,
        seed=3,
    )
    rng = np.random.default_rng(0)
    task = ImageClassification((rng.integers(0, 256, (16, 8, 8), np.uint8), np.zeros(16)))
    model = VisionTransformer(VIT_CONFIG, key=jax.random.PRNGKey(1))
    model, _ = fit(
        model, Replay(vit_batches(), task, recipe.seed, vit_prepare), recipe, progress=False
    )
    assert_matches(model, recorded(name))


def test_next_symbol_prediction_equals_the_old_language_model_loop():
    # The old LMRecipe: AdamW decaying the matrices only, b2 = 0.99, clipping at 1, cosine to 1e-4.
    recipe = Recipe(
        steps=10,
        batch_size=4,
        learning_rate=3e-3,
        warmup_steps=2,
        final_learning_rate=1e-4,
        weight_decay=0.1,
        decay="matrices",
        b2=0.99,
        clip_norm=1.0,
        steps_per_call=5,
        seed=2,
    )
    config = LMConfig(
        vocab_size=11,
        window=8,
        block=BlockConfig(dim=16, num_heads=2, mlp_hidden_dim=32, value_dim=8, rotary=True),
        num_blocks=2,
    )
    task = NextSymbolPrediction(np.arange(40) % 11, window=8)
    model = LanguageModel(config, key=jax.random.PRNGKey(4))
    batches = jnp.asarray(FIXTURE["lm_windows"])
    model, _ = fit(model, Replay(batches, task, recipe.seed), recipe, progress=False)
    assert_matches(model, recorded("lm"))


def old_decoder_path(path: str) -> str:
    """A DecoderLayer parameter's path before the layer held a TransformerBlock."""
    path = re.sub(r"^(decoder\.\d+\.)self_attention(_norm)?\.", r"\1block.attention\2.", path)
    return re.sub(r"^(decoder\.\d+\.)mlp(_norm)?\.", r"\1block.mlp\2.", path)


def test_sequence_to_sequence_equals_the_old_encoder_decoder_loop():
    recipe = Recipe(
        steps=7,
        batch_size=8,
        learning_rate=4e-3,
        warmup_steps=3,
        weight_decay=0.01,
        decay="all",
        b2=0.999,
        steps_per_call=1,
        seed=5,
    )
    model = EncoderDecoder(
        EncoderDecoderConfig(
            9,
            7,
            max_source_length=6,
            max_target_length=5,
            encoder=BlockConfig(dim=16, num_heads=2, mlp_hidden_dim=32),
            decoder=BlockConfig(dim=16, num_heads=2, mlp_hidden_dim=32),
            encoder_layers=1,
            decoder_layers=2,
        ),
        key=jax.random.PRNGKey(6),
    )
    # The decoder layer's parameters moved into a block: start from the old initial values.
    initial = recorded("ed_init", old_decoder_path)
    assert initial.keys() == parameters(model).keys()
    leaves, treedef = jax.tree_util.tree_flatten_with_path(model)
    model = jax.tree_util.tree_unflatten(
        treedef,
        [
            jnp.asarray(initial[jax.tree_util.keystr(p, simple=True, separator=".")])
            if eqx.is_inexact_array(x)
            else x
            for p, x in leaves
        ],
    )
    batches = {
        "sources": jnp.asarray(FIXTURE["ed_sources"]),
        "target_inputs": jnp.asarray(FIXTURE["ed_target_inputs"]),
        "targets": jnp.asarray(FIXTURE["ed_targets"]),
    }
    task = SequenceToSequence(tuple(batches[k][0] for k in batches), start_id=1)
    model, _ = fit(model, Replay(batches, task, recipe.seed), recipe, progress=False)
    assert_matches(model, recorded("ed", old_decoder_path))


def test_the_comparison_can_fail():
    # The same ViT run with the batches of two steps swapped ends elsewhere.
    recipe = Recipe(
        steps=12,
        batch_size=16,
        learning_rate=2e-3,
        warmup_steps=3,
        weight_decay=0.05,
        decay="all",
        b2=0.999,
        steps_per_call=4,
        seed=3,
    )
    batches = vit_batches()
    order = np.arange(12)
    order[[0, 1]] = [1, 0]
    swapped = jax.tree_util.tree_map(lambda b: b[order], batches)
    task = ImageClassification((np.zeros((16, 8, 8), np.uint8), np.zeros(16)))
    model = VisionTransformer(VIT_CONFIG, key=jax.random.PRNGKey(1))
    model, _ = fit(model, Replay(swapped, task, recipe.seed, vit_prepare), recipe, progress=False)
    assert max(differences(model, recorded("vit")).values()) > 100 * RTOL
