"""The language model's configuration options: the defaults are chapter 9's model, unchanged, and
every option changes the model in the way it names."""

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from factories import lm_block, tiny_lm

from transformer_intro.activations import ACTIVATIONS
from transformer_intro.mlp import MLP, GatedMLP
from transformer_intro.models.generation import cached_logits
from transformer_intro.models.language_model import LanguageModel, LMConfig
from transformer_intro.normalisation import LayerNorm, RMSNorm
from transformer_intro.training import load_checkpoint, save_checkpoint

ROOT = Path(__file__).resolve().parents[1]
SMALL = tiny_lm(vocab_size=13, window=10, num_blocks=2, block=lm_block(24, 6, 40))

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
    "learned_positions": True,
}


def with_option(config: LMConfig, option: str) -> LMConfig:
    """``config`` with ``option`` set to its value in OPTIONS (in the block, or the model)."""
    if option == "tied_embeddings":
        return config.replace(tied_embeddings=True)
    if option == "learned_positions":  # learned positions in place of rotary ones
        return config.replace(learned_positions=True, block=config.block.replace(rotary=False))
    return config.replace(block=config.block.replace(**{option: OPTIONS[option]}))


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


def chapter_9_by_hand(model, ids, rotary=True):
    """Chapter 9's model written out with jnp, none of LMConfig's options: LayerNorm, causal
    attention with interleaved rotary pairs (base 10,000), a GELU MLP, a separate read-out."""

    def layer_norm(norm, x):
        mean = x.mean(-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(variance + norm.eps) * norm.weight + norm.bias

    def rotate(v):  # pair (2i, 2i+1) of token n turned by the angle n 10000^(-2i/K)
        if not rotary:
            return v
        n, k = v.shape
        angle = jnp.arange(n)[:, None] * 10_000.0 ** (-jnp.arange(0, k, 2) / k)
        even, odd = v[:, 0::2], v[:, 1::2]
        cos, sin = jnp.cos(angle), jnp.sin(angle)
        return jnp.stack([even * cos - odd * sin, even * sin + odd * cos], -1).reshape(n, k)

    x = model.tokeniser.table[ids]
    n = len(ids)
    causal = jnp.arange(n)[:, None] <= jnp.arange(n)[None, :]  # [n', n]: n' <= n
    for block in model.blocks:
        a, x_bar = block.attention, layer_norm(block.attention_norm, x)
        for h in range(a.num_heads):
            keys = rotate(x_bar @ a.key_projections[h].T)
            queries = rotate(x_bar @ a.query_projections[h].T)
            scores = keys @ queries.T / jnp.sqrt(keys.shape[1])
            weights = jax.nn.softmax(jnp.where(causal, scores, -jnp.inf), axis=0)
            x = x + weights.T @ (x_bar @ a.value_projections[h].T) @ a.output_projections[h].T
        first, second = block.mlp.layers
        hidden = jax.nn.gelu(layer_norm(block.mlp_norm, x) @ first.weight.T + first.bias)
        x = x + hidden @ second.weight.T + second.bias
    x = layer_norm(model.final_norm, x)
    return x @ model.unembedding.weight.T + model.unembedding.bias


def test_chapter_9_checkpoint_gives_the_logits_it_gave_before_the_options():
    model, _ = load_checkpoint(ROOT / "book/checkpoints/shakespeare_lm.eqx")
    assert isinstance(model.blocks[0].attention_norm, LayerNorm)
    assert isinstance(model.blocks[0].mlp, MLP)
    assert model.unembedding is not None
    reference = np.load(ROOT / "tests/fixtures/chapter9_logits.npz")
    ids = jnp.asarray(reference["ids"])
    logits = np.asarray(model(ids))
    # The model with its options at their defaults equals chapter 9's model written out by hand
    # (8.5e-6 apart on logits as large as 11: float32 rounding in another order).
    np.testing.assert_allclose(logits, chapter_9_by_hand(model, ids), rtol=0, atol=1e-4)
    # Negative control: the same weights without the rotation are another function.
    assert np.abs(chapter_9_by_hand(model, ids, rotary=False) - logits).max() > 1e-2
    # tests/fixtures/chapter9_logits.npz was written on a CPU by the code before LMConfig had
    # options. Other code for the same sums rounds in another order: 7.4e-6 apart on a CPU with
    # XLA's loop emitters (conftest.py), 1.2e-5 on an H200, in the float32 products that
    # conftest.py asks for.
    atol = 2e-5 if jax.default_backend() == "cpu" else 1e-4
    np.testing.assert_allclose(logits, reference["logits"], rtol=0, atol=atol)
    swapped = eqx.tree_at(lambda m: m.blocks[0].mlp, model, model.blocks[1].mlp)
    assert np.abs(np.asarray(swapped(ids)) - reference["logits"]).max() > 0.5


def test_defaults_are_chapter_9s_model():
    config = LMConfig(vocab_size=5)
    assert (config.block.norm, config.block.mlp, config.block.activation) == (
        "layer",
        "mlp",
        "gelu_tanh",
    )
    assert ACTIVATIONS["gelu_tanh"] is jax.nn.gelu  # jax.nn.gelu's default is the tanh form
    assert (
        config.block.num_kv_heads is None
        and not config.block.qk_norm
        and not config.tied_embeddings
    )
    assert (config.block.rotary_base, config.block.rotary_layout) == (10_000.0, "interleaved")


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_each_option_changes_the_model(option):
    x = ids()
    base = randomised(LanguageModel(SMALL, key=jax.random.PRNGKey(0)))
    changed_config = with_option(SMALL, option)
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
        block=SMALL.block.replace(
            num_kv_heads=2, norm="rms", mlp="gated", activation="silu", mlp_bias=False
        ),
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
@pytest.mark.unchecked  # the package's own error, for input its annotations exclude
def test_bad_options_are_clear_errors(bad):
    with pytest.raises(ValueError, match=next(iter(bad)).split("_")[0]):
        SMALL.replace(block=SMALL.block.replace(**bad))


def test_checkpoint_round_trip_with_every_option(tmp_path):
    config = SMALL.replace(
        block=SMALL.block.replace(
            num_kv_heads=3,
            qk_norm=True,
            attention_bias=True,
            rotary_base=1e5,
            rotary_layout="half",
            norm="rms",
            norm_eps=1e-6,
            mlp="gated",
            activation="silu",
            mlp_bias=False,
        ),
        tied_embeddings=True,
    )
    assert LMConfig.from_json(config.to_json()) == config
    model = randomised(LanguageModel(config, key=jax.random.PRNGKey(4)))
    path = save_checkpoint(tmp_path / "lm.eqx", model)
    loaded, _ = load_checkpoint(path)
    assert loaded.config == config
    np.testing.assert_array_equal(loaded(ids()), model(ids()))


def test_repr_shows_the_sizes_and_only_the_options_that_are_set():
    # Chapter 9 prints its configuration: the sizes, and the options that differ from the
    # text's block (factored values, rotary positions).
    config = LMConfig(vocab_size=84, window=64)
    assert repr(config) == (
        "LMConfig(vocab_size=84, window=64, block=BlockConfig(dim=128, num_heads=4, "
        "mlp_hidden_dim=512, value_dim=32, rotary=True), num_blocks=4)"
    )
    assert ", qk_norm=True, " in repr(config.replace(block=config.block.replace(qk_norm=True)))
