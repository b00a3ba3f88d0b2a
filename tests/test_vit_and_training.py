"""The Vision Transformer, its configurations, and training it on image classification."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from factories import tiny_vit, vit_block

from transformer_intro import CONFIGS, VisionTransformer, ViTConfig, count_parameters
from transformer_intro.activations import ACTIVATIONS
from transformer_intro.attention import from_equinox, to_equinox
from transformer_intro.block import BlockConfig
from transformer_intro.tasks import ImageClassification, random_shifts, shift_images
from transformer_intro.training import Recipe, fit

TINY = tiny_vit(2, block=vit_block(head_dim=8, value_dim=8), image_size=28, patch_size=7)


def assert_close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=tol, rtol=tol)


def toy_digits(n, seed=0):
    """A learnable stand-in for MNIST: each class lights up its own horizontal band."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n).astype(np.int32)
    images = rng.integers(0, 60, (n, 28, 28)).astype(np.uint8)
    for i, label in enumerate(labels):
        images[i, 2 * label + 4 : 2 * label + 7, 4:24] = 255
    return images, labels


def test_reference_configuration_matches_the_text():
    config = CONFIGS["reference"]
    assert (config.block.dim, config.patch_size, config.block.num_heads, config.num_blocks) == (
        128,
        4,
        8,
        8,
    )
    assert (config.block.mlp_hidden_dim, config.block.mlp_num_layers) == (128, 1)
    assert config.block.keys_dim == config.block.dim  # full-width heads
    model = VisionTransformer("reference", key=jax.random.PRNGKey(0))
    # Per block: 8 heads x (U_k, U_q, V: 3 x 128^2) + MLP (2 x 128^2 + 128 + 128) + 2 LayerNorms.
    per_block = 8 * 3 * 128**2 + 2 * 128**2 + 256 + 4 * 128
    tokeniser = 16 * 128 + 128
    head = 128 * 128 + 128 + 128 * 10 + 10
    assert count_parameters(model) == 8 * per_block + tokeniser + 49 * 128 + 128 + head


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_batched_forward_equals_vmapped_definition(name):
    # Two blocks of each configuration: the fast path differs from the definition in its last
    # block only, and every block before it runs the same code (the reference's eight blocks
    # would compile four times the program for no further coverage).
    model = VisionTransformer(CONFIGS[name].replace(num_blocks=2), key=jax.random.PRNGKey(1))
    images = jax.random.normal(jax.random.PRNGKey(2), (2, 1, 28, 28))
    fast = eqx.filter_jit(lambda m, x: m.batched(x))(model, images)
    assert_close(fast, eqx.filter_jit(lambda m, x: jax.vmap(m)(x))(model, images), 1e-4)
    # Training differentiates the fast path, whose last block computes the class token only.
    loss = lambda m, f: (f(m, images) ** 2).sum()
    g_fast = eqx.filter_jit(eqx.filter_grad(loss))(model, lambda m, x: m.batched(x))
    g_ref = eqx.filter_jit(eqx.filter_grad(loss))(model, lambda m, x: jax.vmap(m)(x))
    for a, b in zip(jax.tree_util.tree_leaves(g_fast), jax.tree_util.tree_leaves(g_ref)):
        assert_close(a, b, 1e-3)


def test_intermediates_expose_attention_of_every_block_and_head():
    model = VisionTransformer(TINY, key=jax.random.PRNGKey(3))
    image = jax.random.normal(jax.random.PRNGKey(4), (1, 28, 28))
    out = eqx.filter_jit(lambda m, x: m.intermediates(x))(model, image)
    assert out["attention_weights"].shape == (2, 2, 17, 17)
    assert_close(out["attention_weights"].sum(axis=2), jnp.ones((2, 2, 17)))
    assert_close(out["logits"], model(image))


def test_vit_prediction_depends_on_patch_positions():
    """Swapping two patches changes the logits: position embeddings break permutation symmetry."""
    model = VisionTransformer(TINY.replace(position_init_scale=1.0), key=jax.random.PRNGKey(5))
    image = jax.random.normal(jax.random.PRNGKey(6), (1, 28, 28))
    swapped = image.at[:, :7, :7].set(image[:, :7, 7:14]).at[:, :7, 7:14].set(image[:, :7, :7])
    assert not np.allclose(model(image), model(swapped), atol=1e-3)
    # Without position embeddings the class token cannot tell the two apart.
    flat = eqx.tree_at(
        lambda m: m.position_embedding.embeddings,
        model,
        jnp.zeros_like(model.position_embedding.embeddings),
    )
    assert_close(flat(image), flat(swapped), 1e-4)


@pytest.mark.unchecked  # the package's own error, for input its annotations exclude
def test_configuration_errors_name_the_problem():
    with pytest.raises(ValueError, match="patch size 5 does not divide"):
        ViTConfig(patch_size=5)
    with pytest.raises(ValueError, match="dim=66 is not divisible by num_heads=4"):
        ViTConfig(block=BlockConfig(dim=66, num_heads=4, mlp_hidden_dim=128))
    with pytest.raises(ValueError, match="at least one block"):
        ViTConfig(num_blocks=0)
    with pytest.raises(ValueError, match="unknown configuration"):
        VisionTransformer("huge", key=jax.random.PRNGKey(0))
    model = VisionTransformer(TINY, key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"expected an image of shape \(1, 28, 28\)"):
        model(jnp.ones((28, 28)))
    with pytest.raises(ValueError, match=r"\(1, 28, 28\)"):
        model.batched(jnp.ones((2, 3, 28, 28)))


def test_config_round_trips_through_json():
    config = CONFIGS["reference"]
    assert ViTConfig.from_json(config.to_json()) == config


def test_loss_falls_and_model_learns_on_a_small_subset():
    images, labels = toy_digits(512)
    task = ImageClassification((images, labels), (images, labels))
    model = VisionTransformer(TINY, key=jax.random.PRNGKey(7))
    before = task.evaluate(model)
    recipe = Recipe(steps=80, batch_size=64, learning_rate=3e-3, warmup_steps=5, decay="all")
    model, history = fit(model, task, recipe, eval_every=40, progress=False)
    assert history.train_loss[-1] < 0.5 * history.train_loss[0]
    assert history.evaluations[-1]["loss"] < before["loss"]
    assert history.evaluations[-1]["accuracy"] > 0.9 > before["accuracy"]
    logits = task.predict(model, images[:30])
    assert logits.shape == (30, 10) and (logits.argmax(1) == labels[:30]).mean() > 0.9


def test_batches_are_shifted_copies_of_training_images():
    images, labels = toy_digits(50, seed=2)
    labels = np.arange(50)  # a label names its image
    task = ImageClassification((images, labels), max_shift=2)
    batch = task.batch(jax.random.PRNGKey(0), 8)
    pixels = np.rint((np.asarray(batch["images"][:, 0]) + 1) * 255 / 2).astype(np.uint8)
    for image, label in zip(pixels, np.asarray(batch["labels"])):
        assert any(
            np.array_equal(image, shift_by_hand(images[label], r, c, 2))
            for r in range(5)
            for c in range(5)
        )
    again = task.batch(jax.random.PRNGKey(0), 8)
    np.testing.assert_array_equal(again["images"], batch["images"])  # same key, same batch


def test_to_equinox_accepts_a_vit_block():
    # Bug: the ViT's "identity" activation was a lambda of its own, which to_equinox refused.
    attention = VisionTransformer("default", key=jax.random.PRNGKey(0)).blocks[0].attention
    layer = to_equinox(attention)
    x = jax.random.normal(jax.random.PRNGKey(1), (5, attention.token_dim))
    assert_close(layer(x, x, x), attention(x))
    assert_close(from_equinox(layer)(x), attention(x))
    gelu = VisionTransformer("reference", key=jax.random.PRNGKey(0)).blocks[0].attention
    with pytest.raises(ValueError):
        to_equinox(gelu)  # a GELU on keys and queries has no Equinox counterpart


def test_every_activation_can_be_named_for_keys_queries_and_the_mlp():
    # One table: a name means the same function on keys and queries as in the MLP.
    for name, function in ACTIVATIONS.items():
        block = TINY.block.replace(qk_activation=name, activation=name)
        model = VisionTransformer(TINY.replace(block=block), key=jax.random.PRNGKey(0))
        assert model.blocks[0].attention.qk_activation is function
        assert model.blocks[0].mlp.activation is function
    plain = VisionTransformer(TINY, key=jax.random.PRNGKey(0)).blocks[0].attention
    assert plain.qk_activation is None  # the maths: nothing applied, recognised by no object
    with pytest.raises(ValueError, match="qk_activation must be one of"):
        TINY.block.replace(qk_activation="gelu")  # format 2's ViT name, read only from files
    with pytest.raises(ValueError, match="activation must be one of"):
        TINY.block.replace(activation="identity")


def shift_by_hand(image, row, col, max_shift):
    """The window of the zero-padded image whose top-left corner is at (row, col)."""
    height, width = image.shape
    return np.pad(image, max_shift)[row : row + height, col : col + width]


def test_device_shift_equals_the_shift_by_hand():
    rng = np.random.default_rng(0)
    images = rng.integers(1, 256, (12, 10, 10), dtype=np.uint8)
    rows, cols = rng.integers(0, 5, 12), rng.integers(0, 5, 12)
    shifted = np.asarray(shift_images(jnp.asarray(images), jnp.stack([rows, cols], axis=1), 2))
    reference = np.stack([shift_by_hand(i, r, c, 2) for i, r, c in zip(images, rows, cols)])
    np.testing.assert_array_equal(shifted, reference)
    # Negative control: rows and columns swapped is another translation, which the check tells
    # apart.
    swapped = np.asarray(shift_images(jnp.asarray(images), jnp.stack([cols, rows], axis=1), 2))
    assert not np.array_equal(swapped, reference)
    # Offsets (2, 2) leave the image in place; max_shift 0 is no shift at all.
    np.testing.assert_array_equal(
        shift_images(jnp.asarray(images), jnp.full((12, 2), 2), 2), images
    )
    assert random_shifts(jax.random.PRNGKey(0), images, 0) is images
    with pytest.raises(ValueError, match="max_shift"):
        random_shifts(jax.random.PRNGKey(0), images, 5)
