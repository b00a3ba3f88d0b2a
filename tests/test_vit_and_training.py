"""The Vision Transformer, its configurations, and training: loss falls, checkpoints resume exactly."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_intro import CONFIGS, VisionTransformer, ViTConfig, count_parameters
from transformer_intro.datasets.mnist import random_shift
from transformer_intro.train import (
    History,
    TrainConfig,
    epoch_keys,
    epoch_order,
    evaluate,
    fit,
    load_checkpoint,
    random_shifts,
    save_checkpoint,
    shift_images,
    training_batch,
)

TINY = ViTConfig(
    patch_size=7, dim=16, num_heads=2, head_dim=8, value_dim=8, num_blocks=2, mlp_hidden_dim=32
)


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
    assert (config.dim, config.patch_size, config.num_heads, config.num_blocks) == (128, 4, 8, 8)
    assert (config.mlp_hidden_dim, config.mlp_num_layers) == (128, 1)
    assert config.head_dim == config.dim  # full-width heads
    model = VisionTransformer("reference", key=jax.random.PRNGKey(0))
    # Per block: 8 heads x (U_k, U_q, V: 3 x 128^2) + MLP (2 x 128^2 + 128 + 128) + 2 LayerNorms.
    per_block = 8 * 3 * 128**2 + 2 * 128**2 + 256 + 4 * 128
    tokeniser = 16 * 128 + 128
    head = 128 * 128 + 128 + 128 * 10 + 10
    assert count_parameters(model) == 8 * per_block + tokeniser + 49 * 128 + 128 + head


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_batched_forward_equals_vmapped_definition(name):
    model = VisionTransformer(name, key=jax.random.PRNGKey(1))
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


def test_configuration_errors_name_the_problem():
    with pytest.raises(ValueError, match="patch size 5 does not divide"):
        ViTConfig(patch_size=5)
    with pytest.raises(ValueError, match="dim=66 is not divisible by num_heads=4"):
        ViTConfig(dim=66, num_heads=4)
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
    model = VisionTransformer(TINY, key=jax.random.PRNGKey(7))
    before = evaluate(model, images, labels)
    config = TrainConfig(epochs=10, batch_size=64, learning_rate=3e-3, warmup_steps=5)
    model, history = fit(model, (images, labels), (images, labels), config, progress=False)
    print(history)
    assert history.train_loss[-1] < 0.5 * history.train_loss[0]
    assert history.test_loss[-1] < before["loss"]
    assert history.test_accuracy[-1] > 0.9 > before["accuracy"]
    assert history.epoch == list(range(1, 11))


def test_same_seed_same_result_and_resume_equals_straight_through(tmp_path):
    images, labels = toy_digits(256, seed=1)
    # With augmentation on, so resuming must also replay each epoch's random shifts.
    config = TrainConfig(epochs=3, batch_size=64, learning_rate=2e-3, warmup_steps=2, max_shift=2)
    init = VisionTransformer(TINY, key=jax.random.PRNGKey(8))
    straight, history = fit(init, (images, labels), None, config, progress=False)
    again, _ = fit(init, (images, labels), None, config, progress=False)
    for a, b in zip(jax.tree_util.tree_leaves(straight), jax.tree_util.tree_leaves(again)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # The negative control: another seed draws other batches and shifts, and ends elsewhere.
    other, _ = fit(init, (images, labels), None, config.replace(seed=1), progress=False)
    assert not all(
        np.array_equal(np.asarray(a), np.asarray(b))
        for a, b in zip(jax.tree_util.tree_leaves(other), jax.tree_util.tree_leaves(straight))
    )

    path = tmp_path / "run.eqx"
    _, partial = fit(
        init,
        (images, labels),
        None,
        config,
        checkpoint_path=path,
        stop_after_epochs=1,
        progress=False,
    )
    assert partial.epoch == [1]
    resumed, resumed_history = fit(
        init, (images, labels), None, config, checkpoint_path=path, resume=True, progress=False
    )
    assert resumed_history.epoch == [1, 2, 3]
    assert resumed_history.train_images == [256, 512, 768]  # 4 steps of 64 per epoch
    assert resumed_history.images_per_second == 768 / resumed_history.train_seconds[-1]
    assert resumed_history.train_loss == pytest.approx(history.train_loss, rel=1e-5)
    for a, b in zip(jax.tree_util.tree_leaves(straight), jax.tree_util.tree_leaves(resumed)):
        assert_close(a, b, 1e-6)


def test_eval_every_follows_the_accuracy_within_epochs_without_changing_training():
    images, labels = toy_digits(320, seed=3)
    test = toy_digits(100, seed=4)
    config = TrainConfig(
        epochs=2, batch_size=32, learning_rate=3e-3, warmup_steps=2
    )  # 10 steps per epoch
    init = VisionTransformer(TINY, key=jax.random.PRNGKey(11))
    plain, plain_history = fit(init, (images, labels), test, config, progress=False)
    traced, history = fit(init, (images, labels), test, config, eval_every=4, progress=False)
    # Every 4th step, plus each epoch's end (steps 10 and 20); the epoch-end figures are the per-epoch ones.
    assert history.eval_step == [4, 8, 10, 12, 16, 20]
    assert [history.eval_accuracy[2], history.eval_accuracy[5]] == history.test_accuracy
    assert (
        history.eval_seconds == sorted(history.eval_seconds)
        and history.eval_seconds[-1] == history.train_seconds[-1]
    )
    assert plain_history.eval_step == []
    # Evaluating along the way must not change what is learned.
    for a, b in zip(jax.tree_util.tree_leaves(plain), jax.tree_util.tree_leaves(traced)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(ValueError, match="eval_every"):
        fit(init, (images, labels), None, config, eval_every=4, progress=False)


def test_first_reached_and_held_from_read_the_evaluations():
    history = History(
        eval_step=[100, 200, 300, 400, 500],
        eval_seconds=[1.0, 2.0, 3.0, 4.0, 5.0],
        eval_accuracy=[0.90, 0.96, 0.95, 0.97, 0.98],
    )
    assert history.first_reached(0.957) == (200, 2.0)
    assert history.held_from(0.957) == (400, 4.0)  # it dipped below at step 300
    assert history.first_reached(0.98) == history.held_from(0.98) == (500, 5.0)
    assert history.first_reached(0.99) is None and history.held_from(0.99) is None
    with pytest.raises(ValueError, match="eval_every"):
        History().first_reached(0.5)
    with pytest.raises(ValueError, match="no epoch"):
        History().images_per_second


def test_checkpoint_round_trip_and_missing_file(tmp_path):
    model = VisionTransformer(TINY, key=jax.random.PRNGKey(9))
    path = save_checkpoint(tmp_path / "m.eqx", model, metadata={"note": "hello"})
    loaded, opt_state, header = load_checkpoint(path)
    assert opt_state is None and header["note"] == "hello"
    assert loaded.config == model.config
    for a, b in zip(jax.tree_util.tree_leaves(model), jax.tree_util.tree_leaves(loaded)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert not any(p.suffix == ".tmp" for p in tmp_path.iterdir())
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_checkpoint(tmp_path / "absent.eqx")


def test_batch_larger_than_data_raises():
    images, labels = toy_digits(10)
    with pytest.raises(ValueError, match="larger than"):
        fit(
            VisionTransformer(TINY, key=jax.random.PRNGKey(0)),
            (images, labels),
            None,
            TrainConfig(batch_size=64),
            progress=False,
        )


def test_micro_batched_gradient_equals_full_batch_gradient():
    from transformer_intro.train import batch_gradients

    images, labels = toy_digits(32, seed=2)
    model = VisionTransformer(TINY, key=jax.random.PRNGKey(10))
    full = eqx.filter_jit(batch_gradients)(model, images, labels)
    micro = eqx.filter_jit(batch_gradients)(model, images, labels, 8)
    assert_close(full[0], micro[0], 1e-5)
    assert_close(full[1], micro[1])
    for a, b in zip(jax.tree_util.tree_leaves(full[2]), jax.tree_util.tree_leaves(micro[2])):
        assert_close(a, b, 1e-5)
    with pytest.raises(ValueError, match="micro-batch size 5 does not divide the batch size 32"):
        batch_gradients(model, images, labels, 5)


def test_optimizer_step_takes_any_loss_and_equals_train_step():
    from transformer_intro.train import (
        loss_and_accuracy,
        make_optimizer,
        optimizer_step,
        train_step,
    )

    images, labels = toy_digits(16, seed=3)
    model = VisionTransformer(TINY, key=jax.random.PRNGKey(11))
    optimizer = make_optimizer(TrainConfig(learning_rate=1e-2, schedule="constant"), 10)
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    generic, _, loss, accuracy = optimizer_step(
        model, opt_state, optimizer, loss_and_accuracy, images, labels
    )
    specific, _, loss_ref, _ = train_step(model, opt_state, images, labels, optimizer)
    assert_close(loss, loss_ref)
    for a, b in zip(jax.tree_util.tree_leaves(generic), jax.tree_util.tree_leaves(specific)):
        assert_close(a, b)
    # Negative control: the step moved the weights.
    assert not np.allclose(generic.head.layers[0].weight, model.head.layers[0].weight)


def test_checkpoint_loads_into_a_model_of_the_callers_making(tmp_path):
    model = VisionTransformer(TINY, key=jax.random.PRNGKey(12))
    path = save_checkpoint(tmp_path / "m.eqx", model)
    like = VisionTransformer(TINY, key=jax.random.PRNGKey(13))
    loaded, _, _ = load_checkpoint(path, model_like=like)
    np.testing.assert_array_equal(
        np.asarray(loaded.head.layers[0].weight), np.asarray(model.head.layers[0].weight)
    )
    assert not np.allclose(like.head.layers[0].weight, model.head.layers[0].weight)


# ---------------------------------------------------------------------------------------------
# The on-device input pipeline
# ---------------------------------------------------------------------------------------------


def shift_by_hand(image, row, col, max_shift):
    """The window of the zero-padded image whose top-left corner is at (row, col)."""
    height, width = image.shape
    return np.pad(image, max_shift)[row : row + height, col : col + width]


def test_device_shift_equals_the_numpy_shift_for_the_same_offsets():
    rng = np.random.default_rng(0)
    images = rng.integers(1, 256, (12, 10, 10), dtype=np.uint8)
    reference = random_shift(images, 2, np.random.default_rng(3))
    draws = np.random.default_rng(
        3
    )  # the same generator: random_shift draws the rows, then the columns
    rows, cols = draws.integers(0, 5, 12), draws.integers(0, 5, 12)
    shifted = np.asarray(shift_images(jnp.asarray(images), jnp.stack([rows, cols], axis=1), 2))
    np.testing.assert_array_equal(shifted, reference)
    for image, out, row, col in zip(images, shifted, rows, cols):
        np.testing.assert_array_equal(out, shift_by_hand(image, row, col, 2))
    # Negative control: rows and columns swapped is another translation, which the check tells apart.
    swapped = np.asarray(shift_images(jnp.asarray(images), jnp.stack([cols, rows], axis=1), 2))
    assert not np.array_equal(swapped, reference)
    # Offsets (2, 2) leave the image in place; max_shift 0 is no shift at all.
    np.testing.assert_array_equal(
        shift_images(jnp.asarray(images), jnp.full((12, 2), 2), 2), images
    )
    assert random_shifts(jax.random.PRNGKey(0), images, 0) is images
    with pytest.raises(ValueError, match="max_shift"):
        random_shifts(jax.random.PRNGKey(0), images, 5)


def test_each_epoch_gets_a_fresh_permutation_and_fresh_shifts():
    n, batch_size, max_shift = 50, 8, 2
    rng = np.random.default_rng(1)
    images = jnp.asarray(rng.integers(1, 256, (n, 12, 12), dtype=np.uint8))
    labels = jnp.arange(n, dtype=jnp.int32)  # a label names its image
    orders = [np.asarray(epoch_order(epoch_keys(0, epoch)[0], n, batch_size)) for epoch in range(2)]
    for order in orders:
        assert order.shape == (6, 8)
        assert len(set(order.ravel())) == 48 and order.min() >= 0 and order.max() < n
    assert not np.array_equal(orders[0], orders[1])
    np.testing.assert_array_equal(
        np.asarray(epoch_order(epoch_keys(0, 1)[0], n, batch_size)), orders[1]
    )
    assert not np.array_equal(
        np.asarray(epoch_order(epoch_keys(1, 1)[0], n, batch_size)), orders[1]
    )

    def batch(epoch, step, order=orders[0]):
        out_images, out_labels = training_batch(
            images, labels, jnp.asarray(order), epoch_keys(0, epoch)[1], step, max_shift
        )
        return np.asarray(out_images), np.asarray(out_labels)

    first, first_labels = batch(0, 0)
    np.testing.assert_array_equal(first_labels, orders[0][0])
    # Every image is its own original, translated by some offset within the range.
    for image, label in zip(first, first_labels):
        assert any(
            np.array_equal(image, shift_by_hand(np.asarray(images[label]), r, c, max_shift))
            for r in range(5)
            for c in range(5)
        )
    np.testing.assert_array_equal(batch(0, 0)[0], first)  # same (seed, epoch, step): same shifts
    # The same examples in another epoch, or at another step, are shifted afresh.
    assert not np.array_equal(batch(1, 0)[0], first)
    assert not np.array_equal(batch(0, 1, order=np.roll(orders[0], 1, axis=0))[0], first)
