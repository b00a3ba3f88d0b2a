"""The language model's configuration options: the defaults are chapter 9's model, unchanged, and
every option changes the model in the way it names."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_intro.mlp import MLP, GatedMLP
from transformer_intro.models.language_model import (
    ACTIVATIONS,
    LanguageModel,
    LMConfig,
    cached_logits,
)
from transformer_intro.normalisation import LayerNorm, RMSNorm
from transformer_intro.training import load_checkpoint, save_checkpoint

ROOT = Path(__file__).resolve().parents[1]
SMALL = LMConfig(vocab_size=13, window=10, dim=24, num_heads=6, num_blocks=2, mlp_hidden_dim=40)

# One changed value per option, away from the default.
OPTIONS = {
    "norm": "rms",
    "norm_eps": 1e-1,
    "mlp": "gated",
    "activation": "relu2",
    "num_kv_heads": 2,
    "qk_norm": True,
    "rotary_base": 100.0,
    "rotary_layout": "half",
    "attention_bias": True,
    "tied_embeddings": True,
    "positions": "learned",
}


def ids(n=9, seed=1, vocab=13):
    return jnp.asarray(np.random.default_rng(seed).integers(0, vocab, n), jnp.int32)


def randomised(model, seed=3):
    """The model with every array redrawn: zero-initialised biases and unit gains would hide an
    option (a zero query bias changes nothing)."""
    leaves, tree = jax.tree_util.tree_flatten(model)
    keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
    leaves = [
        x + 0.3 * jax.random.normal(k, x.shape) if isinstance(x, jax.Array) else x
        for x, k in zip(leaves, keys)
    ]
    return jax.tree_util.tree_unflatten(tree, leaves)


def test_chapter_9_checkpoint_gives_the_logits_it_gave_before_the_options():
    # tests/fixtures/chapter9_logits.npz was written by the code before LMConfig had options.
    model, _ = load_checkpoint(ROOT / "book/checkpoints/shakespeare_lm.eqx")
    reference = np.load(ROOT / "tests/fixtures/chapter9_logits.npz")
    logits = np.asarray(model(jnp.asarray(reference["ids"])))
    np.testing.assert_allclose(logits, reference["logits"], rtol=0, atol=1e-6)
    # Negative control: the same checkpoint read into another configuration does not match.
    assert isinstance(model.blocks[0].attention_norm, LayerNorm)
    assert isinstance(model.blocks[0].mlp, MLP)
    assert model.unembedding is not None


def test_defaults_are_chapter_9s_model():
    config = LMConfig(vocab_size=5)
    assert (config.norm, config.mlp, config.activation) == ("layer", "mlp", "gelu_tanh")
    assert ACTIVATIONS["gelu_tanh"] is jax.nn.gelu  # jax.nn.gelu's default is the tanh form
    assert config.num_kv_heads is None and not config.qk_norm and not config.tied_embeddings
    assert (config.rotary_base, config.rotary_layout) == (10_000.0, "interleaved")


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_each_option_changes_the_model(option):
    x = ids()
    base = randomised(LanguageModel(SMALL, key=jax.random.PRNGKey(0)))
    changed_config = SMALL.replace(**{option: OPTIONS[option]})
    changed = randomised(LanguageModel(changed_config, key=jax.random.PRNGKey(0)))
    # Negative control: the same configuration twice gives the same function.
    again = randomised(LanguageModel(SMALL.replace(), key=jax.random.PRNGKey(0)))
    np.testing.assert_array_equal(base(x), again(x))
    assert not np.allclose(base(x), changed(x), atol=1e-3)
    # Whatever the option, the fast and the cached paths compute the same function.
    np.testing.assert_allclose(changed.batched(x[None])[0], changed(x), atol=2e-5, rtol=2e-5)
    np.testing.assert_allclose(cached_logits(changed, x, 4), changed(x), atol=2e-5, rtol=2e-5)


def test_options_build_the_parts_they_name():
    config = SMALL.replace(
        norm="rms",
        mlp="gated",
        activation="silu",
        mlp_bias=False,
        num_kv_heads=2,
        tied_embeddings=True,
    )
    model = LanguageModel(config, key=jax.random.PRNGKey(0))
    block = model.blocks[0]
    assert isinstance(block.attention_norm, RMSNorm) and isinstance(model.final_norm, RMSNorm)
    assert isinstance(block.mlp, GatedMLP) and block.mlp.gate.bias is None
    assert block.mlp.activation is jax.nn.silu
    assert block.attention.key_projections.shape == (2, 4, 24)  # G = 2 key-value heads
    assert block.attention.query_projections.shape == (6, 4, 24)
    assert model.empty_cache()[0][0].shape == (2, 10, 4)  # the cache holds G heads
    assert model.unembedding is None
    x = ids()
    hidden = model.final_norm(_last_hidden(model, x))
    np.testing.assert_allclose(model(x), hidden @ model.tokeniser.table.T, atol=1e-5)
    relu2 = ACTIVATIONS["relu2"](jnp.array([-2.0, 0.5, 3.0]))
    np.testing.assert_allclose(relu2, [0.0, 0.25, 9.0])


def _last_hidden(model, x):
    from transformer_intro.attention import causal_mask

    h = model.embed(x)
    for block in model.blocks:
        h = block(h, causal_mask(x.shape[0]))
    return h


@pytest.mark.parametrize(
    "bad",
    [
        {"norm": "batch"},
        {"mlp": "moe"},
        {"activation": "tanh"},
        {"num_kv_heads": 4},
        {"rotary_layout": "spiral"},
        {"mlp_bias": False},
        {"norm_eps": 0.0},
    ],
)
def test_bad_options_are_clear_errors(bad):
    with pytest.raises(ValueError, match=next(iter(bad)).split("_")[0]):
        SMALL.replace(**bad)


def test_checkpoint_round_trip_with_every_option(tmp_path):
    config = SMALL.replace(
        norm="rms",
        norm_eps=1e-6,
        mlp="gated",
        activation="silu",
        mlp_bias=False,
        num_kv_heads=3,
        qk_norm=True,
        rotary_base=1e5,
        rotary_layout="half",
        attention_bias=True,
        tied_embeddings=True,
    )
    assert LMConfig.from_json(config.to_json()) == config
    model = randomised(LanguageModel(config, key=jax.random.PRNGKey(4)))
    path = save_checkpoint(tmp_path / "lm.eqx", model)
    loaded, _ = load_checkpoint(path)
    assert loaded.config == config
    np.testing.assert_array_equal(loaded(ids()), model(ids()))
