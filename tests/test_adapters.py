"""Low-rank adapters: identity at initialisation, merging, parameter counts, frozen weights."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_intro.adapters import (
    LoRALanguageModel,
    LoRALinear,
    lora_parameter_count,
    projection_matrix,
)
from transformer_intro.models import LanguageModel, LMConfig
from transformer_intro.pretrained import SMOLLM2_135M

CONFIG = LMConfig(vocab_size=11, window=8, dim=16, num_heads=4, num_blocks=2, mlp_hidden_dim=32)
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
        lambda m: [a.b for block in m.adapters for a in block.values()],
        lora,
        [a.b for block in moved for a in block.values()],
    )


def test_linear_is_the_original_at_initialisation_and_merges():
    w = jax.random.normal(jax.random.PRNGKey(0), (5, 7))
    x = jax.random.normal(jax.random.PRNGKey(1), (7,))
    layer = LoRALinear(w, 3, alpha=6.0, key=jax.random.PRNGKey(2))
    assert layer.scale == 2.0 and layer.rank == 3
    assert np.array_equal(layer(x), w @ x)
    layer = eqx.tree_at(lambda m: m.b, layer, jnp.ones((5, 3)))
    expected = w @ x + 2.0 * jnp.ones((5, 3)) @ (layer.a @ x)
    np.testing.assert_allclose(layer(x), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layer.merged() @ x, layer(x), rtol=1e-5, atol=1e-6)
    # control: merging without the scale alpha / r gives another map
    assert not np.allclose((w + layer.b @ layer.a) @ x, layer(x), atol=1e-3)


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
            assert np.any(adapter.a) and np.any(adapter.b)
            assert not np.any(adapter.weight)


def test_parameter_count():
    lora = LoRALanguageModel(_model(), 2, key=jax.random.PRNGKey(3))
    counted = sum(a.a.size + a.b.size for block in lora.adapters for a in block.values())
    assert counted == lora_parameter_count(CONFIG, 2)
    # SmolLM2-135M at r = 8: per block 8 (1152 + 768 + 768 + 1152), 30 blocks
    assert lora_parameter_count(SMOLLM2_135M, 8) == 30 * 8 * (1152 + 768 + 768 + 1152) == 921_600
    assert lora_parameter_count(SMOLLM2_135M, 8, ("query", "value")) == 30 * 8 * (1152 + 768)


def test_unknown_projection_is_refused():
    with pytest.raises(ValueError, match="unknown"):
        LoRALanguageModel(_model(), 2, parts=("gate",), key=jax.random.PRNGKey(0))
