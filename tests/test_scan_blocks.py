"""Scanned blocks (``LMConfig(scan_blocks=True)``) compute what the loop over blocks computes.

The scanned model stores its M blocks as one block whose arrays have a leading axis of M and runs
them with ``lax.scan``. It must start from the same weights as the loop (the same key), and give
the same logits, attention maps, cached generation, gradients and checkpoint; a model whose
stacked blocks run in another order must not.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from factories import lm_block, tiny_lm

from transformer_intro.models.generation import cached_logits, generate
from transformer_intro.models.language_model import LanguageModel
from transformer_intro.training import load_checkpoint, save_checkpoint

CONFIG = tiny_lm(
    vocab_size=13,
    window=10,
    num_blocks=3,
    block=lm_block(
        16, 4, 24, num_kv_heads=2, rotary_layout="half", norm="rms", mlp="gated", activation="silu"
    ),
)
KEY = jax.random.PRNGKey(0)
SYMBOLS = jnp.array([1, 5, 2, 7, 7, 3, 0, 12, 4], jnp.int32)


@pytest.fixture(scope="module")
def models():
    loop = LanguageModel(CONFIG, key=KEY)
    return loop, LanguageModel(CONFIG.replace(scan_blocks=True), key=KEY)


def reversed_blocks(scanned: LanguageModel) -> LanguageModel:
    return eqx.tree_at(lambda m: m.blocks, scanned, jax.tree.map(lambda a: a[::-1], scanned.blocks))


def test_the_scanned_model_starts_from_the_loops_weights(models):
    loop, scanned = models
    assert isinstance(loop.blocks, tuple) and not isinstance(scanned.blocks, tuple)
    for ours, stacked in zip(jax.tree.leaves(scanned), jax.tree.leaves(loop.stacked())):
        np.testing.assert_array_equal(ours, stacked)
    query = scanned.blocks.attention.query_projections
    assert query.shape == (CONFIG.num_blocks, *loop.blocks[0].attention.query_projections.shape)
    np.testing.assert_array_equal(query[2], loop.blocks[2].attention.query_projections)
    assert scanned.stacked() is scanned


def test_scanned_blocks_give_the_loops_logits_maps_and_cache(models):
    loop, scanned = models
    np.testing.assert_allclose(scanned(SYMBOLS), loop(SYMBOLS), atol=1e-5)
    batch = jnp.stack([SYMBOLS, SYMBOLS[::-1]])
    np.testing.assert_allclose(scanned.batched(batch), loop.batched(batch), atol=1e-5)
    np.testing.assert_allclose(
        scanned.attention_maps(SYMBOLS), loop.attention_maps(SYMBOLS), atol=1e-6
    )
    np.testing.assert_allclose(cached_logits(scanned, SYMBOLS, 4), loop(SYMBOLS), atol=1e-5)
    keys, values = scanned.empty_cache(8)
    assert keys.shape == (3, 2, 8, 4) and values.shape == (3, 2, 8, 4)
    greedy = generate(loop, SYMBOLS[:3], 12, KEY, temperature=0.0)  # past the window: it slides
    np.testing.assert_array_equal(generate(scanned, SYMBOLS[:3], 12, KEY, temperature=0.0), greedy)
    # Negative control: the same blocks in another order are another model.
    assert np.abs(reversed_blocks(scanned)(SYMBOLS) - loop(SYMBOLS)).max() > 1e-2


def test_scanned_blocks_give_the_loops_gradients(models):
    loop, scanned = models
    inputs, targets = SYMBOLS[None, :-1], SYMBOLS[None, 1:]

    def loss(model):
        log_p = jax.nn.log_softmax(model.batched(inputs))
        return -jnp.take_along_axis(log_p, targets[..., None], axis=-1).mean()

    loop_grads = eqx.filter_grad(loss)(loop)
    scanned_grads = eqx.filter_grad(loss)(scanned)
    for ours, theirs in zip(
        jax.tree.leaves(scanned_grads), jax.tree.leaves(loop_grads.stacked()), strict=True
    ):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_a_scanned_model_round_trips_through_a_checkpoint(models, tmp_path):
    _, scanned = models
    save_checkpoint(tmp_path / "scanned.eqx", scanned)
    loaded, _ = load_checkpoint(tmp_path / "scanned.eqx")
    assert loaded.config.scan_blocks
    np.testing.assert_array_equal(loaded(SYMBOLS), scanned(SYMBOLS))
