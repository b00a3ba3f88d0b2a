"""Low-rank adapters: identity at start, merging, parameter counts, frozen weights, saving."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from factories import lm_block, tiny_lm

from transformer_intro.adapters import (
    LoRALanguageModel,
    LoRALinear,
    lora_parameter_count,
    projection_matrix,
)
from transformer_intro.models import LanguageModel
from transformer_intro.pretrained import SMOLLM2_135M
from transformer_intro.training import (
    CheckpointError,
    load_adapter,
    load_checkpoint,
    save_adapter,
    save_checkpoint,
    weights_fingerprint,
)

CONFIG = tiny_lm(vocab_size=11, num_blocks=2, block=lm_block(num_heads=4))
SYMBOLS = jnp.array([1, 4, 2, 7, 3, 0, 5])


def _model():
    return LanguageModel(CONFIG, key=jax.random.PRNGKey(0))


def _moved(lora, key=jax.random.PRNGKey(1)):
    """The adapters with B drawn at random (as after some training)."""
    leaves, treedef = jax.tree.flatten(lora.adapters)
    keys = jax.random.split(key, len(leaves))
    moved = jax.tree.unflatten(
        treedef, [0.1 * jax.random.normal(k, x.shape) for k, x in zip(keys, leaves)]
    )
    return eqx.tree_at(
        lambda m: [a.Z for block in m.adapters for a in block.values()],
        lora,
        [a.Z for block in moved for a in block.values()],
    )


def test_linear_is_the_original_at_initialisation_and_merges():
    w = jax.random.normal(jax.random.PRNGKey(0), (5, 7))
    x = jax.random.normal(jax.random.PRNGKey(1), (7,))
    layer = LoRALinear(w, 3, alpha=6.0, key=jax.random.PRNGKey(2))
    assert layer.scale == 2.0 and layer.rank == 3
    assert np.array_equal(layer(x), w @ x)
    layer = eqx.tree_at(lambda m: m.Z, layer, jnp.ones((5, 3)))
    expected = w @ x + 2.0 * jnp.ones((5, 3)) @ (layer.R @ x)
    np.testing.assert_allclose(layer(x), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layer.merged() @ x, layer(x), rtol=1e-5, atol=1e-6)
    # control: merging without the scale alpha / r gives another map
    assert not np.allclose((w + layer.Z @ layer.R) @ x, layer(x), atol=1e-3)


def _first_adam_change(rank, alpha, x, key):
    """|W' x - W x| after one Adam step on sum(c * y), from R drawn with ``key``: (D_out,)."""
    layer = LoRALinear(jnp.zeros((40, x.shape[0])), rank, alpha=alpha, key=key)
    c = jnp.linspace(-1.0, 1.0, 40) + 0.01  # no zero: every output's gradient has a sign
    params, static = eqx.partition(layer, eqx.is_inexact_array)
    loss = lambda p: jnp.sum(c * eqx.combine(p, static)(x))
    optimiser = optax.adam(1e-3, eps=1e-12)
    updates, _ = optimiser.update(jax.grad(loss)(params), optimiser.init(params), params)
    moved = eqx.combine(optax.apply_updates(params, updates), static)
    return jnp.abs(moved(x) - layer(x)), layer


def test_default_alpha_is_the_rank_and_scale_one():
    assert LoRALinear(jnp.zeros((4, 6)), 3, key=jax.random.PRNGKey(0)).scale == 1.0
    lora = LoRALanguageModel(_model(), 2, key=jax.random.PRNGKey(3))
    assert {a.scale for block in lora.adapters for a in block.values()} == {1.0}


def test_first_adam_step_grows_with_the_rank_unless_alpha_is_held():
    """Hu et al.'s reason for alpha / r: Adam's first step moves each entry of Z by the
    learning rate, so Z R x moves by eta * scale * |R x|_1, a sum of r terms."""
    x = jax.random.normal(jax.random.PRNGKey(5), (512,))
    change, layer = _first_adam_change(8, 8.0, x, jax.random.PRNGKey(6))
    expected = 1e-3 * layer.scale * jnp.abs(layer.R @ x).sum()
    np.testing.assert_allclose(change, jnp.full(40, expected), rtol=1e-4)
    keys = jax.random.split(jax.random.PRNGKey(7), 32)
    mean = lambda rank, alpha: float(
        np.mean([_first_adam_change(rank, alpha, x, k)[0].mean() for k in keys])
    )
    # alpha = r (the default): four times the rank, about four times the change
    assert 3.5 < mean(32, 32.0) / mean(8, 8.0) < 4.5
    # alpha held at 8: the same change at both ranks (the control of the line above)
    assert 0.9 < mean(32, 8.0) / mean(8, 8.0) < 1.1


def test_rank_out_of_range_is_refused():
    with pytest.raises(ValueError, match="rank"):
        LoRALinear(jnp.zeros((4, 3)), 4, key=jax.random.PRNGKey(0))


def test_projection_matrix_round_trip():
    attention = _model().blocks[0].attention
    for part, field in (("query", "query_projections"), ("output", "output_projections")):
        array = getattr(attention, field)
        matrix = projection_matrix(array, part)
        assert matrix.shape == ((16, 16) if part == "output" else (16, 16))
    o = attention.output_projections  # (H, D, Dv): W_O = [O_1 ... O_H]
    w_o = projection_matrix(o, "output")
    np.testing.assert_array_equal(w_o[:, : o.shape[2]], o[0])


def test_adapted_model_is_exactly_the_original_at_initialisation():
    model = _model()
    lora = LoRALanguageModel(model, 2, key=jax.random.PRNGKey(3))
    assert np.array_equal(lora(SYMBOLS), model(SYMBOLS))
    assert np.array_equal(lora.batched(SYMBOLS[None]), model.batched(SYMBOLS[None]))


def test_merged_model_equals_the_unmerged_adapters():
    model = _model()
    lora = _moved(LoRALanguageModel(model, 2, alpha=4.0, key=jax.random.PRNGKey(3)))
    merged = lora.merged()
    x = jax.random.normal(jax.random.PRNGKey(4), (16,))
    attention = merged.blocks[1].attention
    for part, field in (("query", "query_projections"), ("output", "output_projections")):
        adapter = lora.adapters[1][part]
        np.testing.assert_allclose(
            projection_matrix(getattr(attention, field), part) @ x, adapter(x), rtol=1e-5, atol=1e-6
        )
    assert not np.allclose(merged(SYMBOLS), model(SYMBOLS), atol=1e-3)  # control: it changed


def test_gradients_reach_only_a_and_b():
    lora = _moved(LoRALanguageModel(_model(), 2, key=jax.random.PRNGKey(3)))
    grads = eqx.filter_grad(lambda m: m(SYMBOLS).sum() ** 2 / 1e3)(lora)
    base = [g for g in jax.tree.leaves(grads.base) if g is not None]
    assert base and all(not np.any(g) for g in base)
    for block in grads.adapters:
        for adapter in block.values():
            assert np.any(adapter.R) and np.any(adapter.Z)
            assert not np.any(adapter.weight)


def test_parameter_count():
    lora = LoRALanguageModel(_model(), 2, key=jax.random.PRNGKey(3))
    counted = sum(a.R.size + a.Z.size for block in lora.adapters for a in block.values())
    assert counted == lora_parameter_count(CONFIG, 2)
    # SmolLM2-135M at r = 8: per block 8 (1152 + 768 + 768 + 1152), 30 blocks
    assert lora_parameter_count(SMOLLM2_135M, 8) == 30 * 8 * (1152 + 768 + 768 + 1152) == 921_600
    assert lora_parameter_count(SMOLLM2_135M, 8, ("query", "value")) == 30 * 8 * (1152 + 768)


def test_unknown_projection_is_refused():
    with pytest.raises(ValueError, match="unknown"):
        LoRALanguageModel(_model(), 2, parts=("gate",), key=jax.random.PRNGKey(0))


# ---------------------------------------------------------------------------------------------
# Saving the adapter alone
# ---------------------------------------------------------------------------------------------

WIDE = tiny_lm(vocab_size=11, num_blocks=2, block=lm_block(64, 4, 256))


def _wide_lora(parts=("query", "value")):
    base = LanguageModel(WIDE, key=jax.random.PRNGKey(0))
    return _moved(LoRALanguageModel(base, 2, alpha=4.0, parts=parts, key=jax.random.PRNGKey(3)))


def test_adapter_file_is_small_and_round_trips_bit_for_bit(tmp_path):
    lora = _wide_lora()
    small = save_adapter(tmp_path / "adapter.eqx", lora, extra={"play": "hamlet"})
    full = save_checkpoint(tmp_path / "full.eqx", lora.base)
    # R and Z of rank 2 on two projections of two blocks: 2 * 2 * 2 * (64 + 64) numbers.
    assert lora_parameter_count(WIDE, 2, ("query", "value")) == 1024
    ratio = full.stat().st_size / small.stat().st_size
    assert ratio > 30, (full.stat().st_size, small.stat().st_size)
    loaded, info = load_adapter(small, lora.base)
    assert info.extra == {"play": "hamlet"} and info.header["adapter"]["rank"] == 2
    assert loaded.adapters[0].keys() == {"query", "value"}
    batch = jnp.stack([SYMBOLS, SYMBOLS[::-1]])
    assert np.array_equal(loaded.batched(batch), lora.batched(batch))
    assert not np.array_equal(loaded.batched(batch), lora.base.batched(batch))  # control
    # A base rebuilt from the full checkpoint is the same base: its fingerprint agrees.
    rebuilt, _ = load_checkpoint(full)
    assert weights_fingerprint(rebuilt) == weights_fingerprint(lora.base)
    again, _ = load_adapter(small, rebuilt)
    assert np.array_equal(again.batched(batch), lora.batched(batch))


def test_adapter_onto_the_wrong_base_is_refused(tmp_path):
    lora = _wide_lora()
    path = save_adapter(tmp_path / "adapter.eqx", lora)
    other_weights = LanguageModel(WIDE, key=jax.random.PRNGKey(1))
    with pytest.raises(CheckpointError, match="other weights"):
        load_adapter(path, other_weights)
    one_weight_moved = eqx.tree_at(
        lambda m: m.blocks[1].attention.key_projections,
        lora.base,
        replace_fn=lambda x: x.at[0, 0, 0].add(1e-3),
    )
    with pytest.raises(CheckpointError, match="other weights"):
        load_adapter(path, one_weight_moved)
    other_config = LanguageModel(WIDE.replace(num_blocks=3), key=jax.random.PRNGKey(0))
    with pytest.raises(CheckpointError, match="num_blocks: 2 there, 3 here"):
        load_adapter(path, other_config)


def test_truncated_or_mistaken_adapter_files_are_refused(tmp_path):
    lora = _wide_lora()
    path = save_adapter(tmp_path / "adapter.eqx", lora)
    data = path.read_bytes()
    cut = tmp_path / "cut.eqx"
    cut.write_bytes(data[: len(data) - 100])
    with pytest.raises(CheckpointError, match="truncated"):
        load_adapter(cut, lora.base)
    longer = tmp_path / "longer.eqx"
    longer.write_bytes(data + b"\0")
    with pytest.raises(CheckpointError, match="bytes after"):
        load_adapter(longer, lora.base)
    # Each reader refuses the other's file and says which reader to use.
    with pytest.raises(CheckpointError, match="load_adapter"):
        load_checkpoint(path)
    full = save_checkpoint(tmp_path / "full.eqx", lora.base)
    with pytest.raises(CheckpointError, match="load_checkpoint"):
        load_adapter(full, lora.base)


def test_adapter_with_moved_frozen_weights_is_not_saved(tmp_path):
    lora = _wide_lora()
    moved = eqx.tree_at(lambda m: m.adapters[0]["query"].weight, lora, replace_fn=lambda w: 2 * w)
    with pytest.raises(ValueError, match="differs from the base"):
        save_adapter(tmp_path / "adapter.eqx", moved)
