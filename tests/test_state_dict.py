"""The one state-dict filler behind the GPT-2 and Llama converters (pretrained/state_dict.py)."""

import equinox as eqx
import jax
import numpy as np
import pytest

from transformer_intro.models import LanguageModel
from transformer_intro.pretrained.gpt2 import gpt2_config, gpt2_from_state_dict
from transformer_intro.pretrained.llama import model_from_hf_tensors
from transformer_intro.pretrained.smollm2 import smollm2_config
from transformer_intro.pretrained.state_dict import (
    Checkpoint,
    fill,
    leaf_paths,
    stack_blocks,
)

LLAMA = smollm2_config(
    vocab_size=13, dim=8, num_blocks=3, num_heads=2, num_kv_heads=1, mlp_hidden_dim=12,
    context_length=16,
)  # fmt: skip
GPT2 = gpt2_config(vocab_size=13, context_length=16, dim=8, num_heads=2, num_blocks=3)


def skeleton(config):
    return eqx.filter_eval_shape(LanguageModel, config, key=jax.random.PRNGKey(0))


def arrays_of(model) -> dict[str, np.ndarray]:
    """The model's weights by dotted path, as the filler takes them."""
    flat = jax.tree_util.tree_flatten_with_path(eqx.filter(model, eqx.is_array))[0]
    return {
        jax.tree_util.keystr(p, simple=True, separator="."): np.asarray(a)
        for p, a in flat
        if a is not None
    }


def assert_same_model(a, b):
    leaves_a, tree_a = jax.tree.flatten(eqx.filter(a, eqx.is_array))
    leaves_b, tree_b = jax.tree.flatten(eqx.filter(b, eqx.is_array))
    assert tree_a == tree_b
    for x, y in zip(leaves_a, leaves_b, strict=True):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("config", [LLAMA, GPT2], ids=["llama", "gpt2"])
def test_a_fill_equals_the_model_built_directly(config):
    model = LanguageModel(config, key=jax.random.PRNGKey(1))
    arrays = arrays_of(model)
    assert set(arrays) == set(leaf_paths(skeleton(config)))
    filled = fill(skeleton(config), arrays)
    assert arrays == {}  # placed and let go: the checkpoint is not held beside the model
    assert_same_model(filled, model)
    assert np.array_equal(filled(np.arange(5)), model(np.arange(5)))
    # The same check tells models apart: another key gives other weights.
    other = LanguageModel(config, key=jax.random.PRNGKey(2))
    with pytest.raises(AssertionError):
        assert_same_model(filled, other)


def test_a_wrong_shape_is_named_with_both_shapes():
    arrays = arrays_of(LanguageModel(LLAMA, key=jax.random.PRNGKey(1)))
    arrays["blocks.1.attention.query_projections"] = np.zeros((2, 8, 4))
    with pytest.raises(ValueError) as error:
        fill(skeleton(LLAMA), arrays)
    message = str(error.value)
    assert "blocks.1.attention.query_projections (array (2, 8, 4), model (2, 4, 8))" in message
    assert "no place" not in message and "no array" not in message


def test_arrays_left_over_are_named():
    arrays = arrays_of(LanguageModel(LLAMA, key=jax.random.PRNGKey(1)))
    arrays["blocks.3.mlp.up.weight"] = np.zeros((12, 8))  # a fourth block the model lacks
    arrays["unembedding.weight"] = np.zeros((13, 8))  # the model's read-out is tied
    with pytest.raises(ValueError, match="no place in the model") as error:
        fill(skeleton(LLAMA), arrays)
    assert "blocks.3.mlp.up.weight, unembedding.weight" in str(error.value)


def test_weights_left_unfilled_are_named():
    arrays = arrays_of(LanguageModel(LLAMA, key=jax.random.PRNGKey(1)))
    del arrays["final_norm.weight"], arrays["blocks.2.mlp.down.weight"]
    with pytest.raises(ValueError, match="with no array") as error:
        fill(skeleton(LLAMA), arrays)
    assert "blocks.2.mlp.down.weight, final_norm.weight" in str(error.value)


def test_a_long_list_is_cut_short():
    with pytest.raises(ValueError, match="down.weight and 19 more$"):
        fill(skeleton(LLAMA), {})  # 2 outside the blocks and 3 x 9 in them: 10 of 29 shown


def test_stacked_blocks_fill_a_scanned_model():
    model = LanguageModel(LLAMA, key=jax.random.PRNGKey(1))
    stacked = stack_blocks(arrays_of(model), LLAMA.num_blocks)
    assert stacked["blocks.mlp.up.weight"].shape == (3, 12, 8)
    assert_same_model(fill(skeleton(LLAMA.replace(scan_blocks=True)), stacked), model.stacked())
    # A part missing from one block stays per block, so that the filler names it.
    partial = arrays_of(model)
    del partial["blocks.1.mlp.up.weight"]
    kept = stack_blocks(partial, LLAMA.num_blocks)
    assert "blocks.0.mlp.up.weight" in kept and "blocks.mlp.up.weight" not in kept


def test_a_checkpoint_names_missing_and_unread_tensors():
    checkpoint = Checkpoint({"a": np.ones(2, np.float16), "b": np.ones(3), "c": np.ones(1)})
    assert checkpoint["a"].dtype == np.float32
    with pytest.raises(KeyError, match="no tensor 'd'"):
        checkpoint["d"]
    with pytest.raises(ValueError, match="does not use: b, c"):
        checkpoint.check_all_read()
    checkpoint.check_all_read(ignored=lambda name: name in "bc")


def hf_state_dict(model: LanguageModel) -> dict[str, np.ndarray]:
    """A Hugging Face Llama state dict holding ``model``'s weights (the converter's inverse)."""
    config = model.config
    h, k, d = config.block.num_heads, config.block.keys_dim, config.block.dim
    state = {
        "model.embed_tokens.weight": model.tokeniser.table,
        "model.norm.weight": model.final_norm.weight,
    }
    for m, block in enumerate(model.blocks):
        p = f"model.layers.{m}."
        attention = block.attention
        state |= {
            p + "input_layernorm.weight": block.attention_norm.weight,
            p + "post_attention_layernorm.weight": block.mlp_norm.weight,
            p + "self_attn.q_proj.weight": attention.query_projections.reshape(-1, d),
            p + "self_attn.k_proj.weight": attention.key_projections.reshape(-1, d),
            p + "self_attn.v_proj.weight": attention.value_projections.reshape(-1, d),
            p + "self_attn.o_proj.weight": attention.output_projections.transpose(1, 0, 2).reshape(
                d, h * k
            ),
            p + "mlp.gate_proj.weight": block.mlp.gate.weight,
            p + "mlp.up_proj.weight": block.mlp.up.weight,
            p + "mlp.down_proj.weight": block.mlp.down.weight,
        }
    return {name: np.asarray(value) for name, value in state.items()}


def test_llama_state_dict_round_trip_with_and_without_scanned_blocks():
    model = LanguageModel(LLAMA, key=jax.random.PRNGKey(1))
    state = hf_state_dict(model)
    assert_same_model(model_from_hf_tensors(state, LLAMA), model)
    scanned = model_from_hf_tensors(state, LLAMA.replace(scan_blocks=True))
    assert_same_model(scanned, model.stacked())
    with pytest.raises(ValueError, match="does not use: model.layers.3.mlp.up_proj.weight"):
        model_from_hf_tensors(state | {"model.layers.3.mlp.up_proj.weight": np.ones(1)}, LLAMA)


def test_gpt2_with_scanned_blocks_equals_the_loop_stacked():
    rng = np.random.default_rng(0)
    d, v, t = GPT2.block.dim, GPT2.vocab_size, GPT2.window
    shapes = {"wte.weight": (v, d), "wpe.weight": (t, d), "ln_f.weight": (d,), "ln_f.bias": (d,)}
    for m in range(GPT2.num_blocks):
        p = f"h.{m}."
        shapes |= {
            p + "ln_1.weight": (d,), p + "ln_1.bias": (d,), p + "ln_2.weight": (d,),
            p + "ln_2.bias": (d,), p + "attn.c_attn.weight": (d, 3 * d),
            p + "attn.c_attn.bias": (3 * d,), p + "attn.c_proj.weight": (d, d),
            p + "attn.c_proj.bias": (d,), p + "mlp.c_fc.weight": (d, 4 * d),
            p + "mlp.c_fc.bias": (4 * d,), p + "mlp.c_proj.weight": (4 * d, d),
            p + "mlp.c_proj.bias": (d,),
        }  # fmt: skip
    state = {name: rng.normal(size=shape).astype(np.float32) for name, shape in shapes.items()}
    loop = gpt2_from_state_dict(state, GPT2)
    assert_same_model(gpt2_from_state_dict(state, GPT2.replace(scan_blocks=True)), loop.stacked())
    np.testing.assert_array_equal(loop.blocks[2].mlp_norm.bias, state["h.2.ln_2.bias"])
