"""The modern options of the book's layers: RMSNorm, the gated MLP, grouped-query attention,
QK-norm and the rotary layouts. Each is checked against an independent formula or library, or a
property it must have, with a negative control that shows the check can fail."""

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from factories import lm_block, tiny_lm

from transformer_intro.attention import MultiHeadAttention, causal_mask
from transformer_intro.block import BlockConfig, TransformerBlock
from transformer_intro.mlp import MLP, GatedMLP
from transformer_intro.models import LanguageModel, LMConfig
from transformer_intro.normalisation import LayerNorm, RMSNorm
from transformer_intro.positions import half_to_interleaved, rotate_pairs

jax.config.update("jax_default_matmul_precision", "highest")

D, H, G, K, N = 24, 6, 2, 8, 7


def tokens(seed=0, n=N, d=D):
    return jax.random.normal(jax.random.PRNGKey(seed), (n, d))


# -- RMSNorm ---------------------------------------------------------------------------------


def test_rmsnorm_formula_and_layernorm_on_centred_tokens():
    x = np.asarray(tokens())
    norm = eqx.tree_at(lambda m: m.weight, RMSNorm(D, eps=1e-6), jnp.linspace(0.5, 2.0, D))
    expected = x / np.sqrt((x**2).mean(-1, keepdims=True) + 1e-6) * np.linspace(0.5, 2.0, D)
    np.testing.assert_allclose(norm(x), expected, rtol=1e-5, atol=1e-6)
    # On zero-mean tokens RMSNorm is LayerNorm with no shift ...
    centred = x - x.mean(-1, keepdims=True)
    layer_norm = eqx.tree_at(lambda m: m.weight, LayerNorm(D, eps=1e-6), norm.weight)
    np.testing.assert_allclose(norm(centred), layer_norm(centred), rtol=1e-5, atol=1e-6)
    # ... and only on those (negative control).
    shifted = centred + 1.0
    assert np.abs(norm(shifted) - layer_norm(shifted)).max() > 0.1
    # Invariant to the token's scale, but not to a shift.
    np.testing.assert_allclose(norm(3.0 * x), norm(x), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="width"):
        norm(jnp.ones((3, D + 1)))


def test_rmsnorm_matches_torch():
    torch = pytest.importorskip("torch")
    x = np.asarray(tokens(1))
    gain = np.linspace(0.5, 2.0, D, dtype=np.float32)
    norm = eqx.tree_at(lambda m: m.weight, RMSNorm(D, eps=1e-5), jnp.asarray(gain))
    ref = torch.nn.functional.rms_norm(
        torch.tensor(x), (D,), weight=torch.tensor(gain), eps=1e-5
    ).numpy()
    np.testing.assert_allclose(norm(x), ref, rtol=1e-5, atol=1e-6)


# -- the gated MLP -------------------------------------------------------------------------------


@pytest.mark.unchecked  # the package's own error, for input its annotations exclude
def test_gated_mlp_formula_and_batched():
    mlp = GatedMLP(D, 40, key=jax.random.PRNGKey(0))
    x = np.asarray(tokens(2))
    w_gate, w_up, w_down = (np.asarray(l.weight) for l in (mlp.gate, mlp.up, mlp.down))
    z = x @ w_gate.T
    expected = ((z / (1 + np.exp(-z))) * (x @ w_up.T)) @ w_down.T  # SiLU(z) = z sigmoid(z)
    np.testing.assert_allclose(jax.vmap(mlp)(x), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mlp.batched(x[None]), jax.vmap(mlp)(x)[None], rtol=1e-5, atol=1e-6)
    assert mlp.gate.bias is None  # Llama-style: no biases
    with pytest.raises(ValueError, match="one token"):
        mlp(x)


def test_gated_mlp_with_an_open_gate_is_the_plain_mlp():
    gated = GatedMLP(D, 40, activation=jax.nn.gelu, use_bias=True, key=jax.random.PRNGKey(1))
    plain = MLP(D, 40, 1, activation=jax.nn.gelu, key=jax.random.PRNGKey(2))
    plain = eqx.tree_at(lambda m: m.layers, plain, (gated.gate, gated.down))
    open_gate = eqx.tree_at(
        lambda m: (m.up.weight, m.up.bias),
        gated,
        (jnp.zeros_like(gated.up.weight), jnp.ones_like(gated.up.bias)),
    )
    x = tokens(3)
    np.testing.assert_allclose(open_gate.batched(x), plain.batched(x), rtol=1e-6, atol=1e-6)
    # Negative control: the trained gate (random W_up) is not the plain MLP.
    assert np.abs(gated.batched(x) - plain.batched(x)).max() > 1e-2


# -- grouped-query attention -------------------------------------------------------------------


def gqa(num_kv_heads=G, key=0, **options):
    options = {"value_dim": K, **options}
    return MultiHeadAttention(
        D, H, K, num_kv_heads=num_kv_heads, key=jax.random.PRNGKey(key), **options
    )


def repeated_as_mha(layer, repeat=jnp.repeat):
    """The same layer as plain multi-head attention: each key-value head copied per query head."""
    r = layer.num_heads // layer.num_kv_heads
    mha = MultiHeadAttention(D, H, K, K, key=jax.random.PRNGKey(99), rotary=layer.rotary)
    mha = eqx.tree_at(
        lambda m: (
            m.query_projections,
            m.key_projections,
            m.value_projections,
            m.output_projections,
        ),
        mha,
        (
            layer.query_projections,
            repeat(layer.key_projections, r, axis=0),
            repeat(layer.value_projections, r, axis=0),
            layer.output_projections,
        ),
    )
    return mha


@pytest.mark.parametrize("num_kv_heads", [1, 2, 3, 6])
@pytest.mark.parametrize("rotary", [False, True])
def test_gqa_equals_mha_with_repeated_key_value_heads(num_kv_heads, rotary):
    layer = gqa(num_kv_heads, rotary=rotary)
    assert layer.key_projections.shape == (num_kv_heads, K, D)
    assert layer.value_projections.shape == (num_kv_heads, K, D)
    mha = repeated_as_mha(layer)
    x, mask = tokens(4), causal_mask(N)
    np.testing.assert_allclose(layer(x, mask), mha(x, mask), rtol=1e-5, atol=1e-6)
    batch = jnp.stack([x, tokens(5)])
    np.testing.assert_allclose(
        layer.batched(batch, mask), jax.vmap(mha, (0, None))(batch, mask), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        layer.attention_weights(x, mask), mha.attention_weights(x, mask), rtol=1e-5, atol=1e-6
    )


def test_gqa_grouping_order_matters():
    """Negative control: tiling the key-value heads (h -> h mod G) is a different layer."""
    layer = gqa(2)
    tiled = repeated_as_mha(layer, repeat=lambda a, r, axis: jnp.tile(a, (r, 1, 1)))
    x = tokens(6)
    assert np.abs(layer(x) - tiled(x)).max() > 1e-3


@pytest.mark.parametrize("num_kv_heads", [1, 2])
def test_gqa_cache_shrinks_and_extend_matches_the_full_pass(num_kv_heads):
    layer = gqa(num_kv_heads, rotary=True, rotary_layout="half", rotary_base=1e5, qk_norm=True)
    keys, values = layer.empty_cache(16)
    assert keys.shape == (num_kv_heads, 16, K) and values.shape == (num_kv_heads, 16, K)
    full = MultiHeadAttention(D, H, K, K, key=jax.random.PRNGKey(0)).empty_cache(16)
    assert full[0].size == keys.size * H // num_kv_heads  # H/G times smaller
    x = tokens(7)
    expected = layer(x, causal_mask(N))
    y, cache = layer.extend(x[:4], layer.empty_cache(16), 0)
    outputs = [y]
    for n in range(4, N):
        y, cache = layer.extend(x[n : n + 1], cache, n)
        outputs.append(y)
    np.testing.assert_allclose(jnp.concatenate(outputs), expected, rtol=1e-5, atol=1e-5)
    # Negative control: writing the new token at the wrong position changes the answer.
    _, cache = layer.extend(x[:4], layer.empty_cache(16), 0)
    wrong, _ = layer.extend(x[4:5], cache, 5)
    assert np.abs(wrong - expected[4:5]).max() > 1e-4


@pytest.mark.parametrize("num_kv_heads", [1, 2, 6])
def test_gqa_matches_jax_dot_product_attention(num_kv_heads):
    layer = gqa(num_kv_heads)
    x = tokens(8)
    q = jnp.einsum("hkd,nd->nhk", layer.query_projections, x)
    k = jnp.einsum("gkd,nd->ngk", layer.key_projections, x)
    v = jnp.einsum("gvd,nd->ngv", layer.value_projections, x)
    heads = jax.nn.dot_product_attention(q[None], k[None], v[None], is_causal=True)[0]
    expected = jnp.einsum("hdv,nhv->nd", layer.output_projections, heads)
    np.testing.assert_allclose(layer(x, causal_mask(N)), expected, rtol=1e-5, atol=1e-5)
    # Negative control: without the causal mask the two differ.
    assert np.abs(layer(x) - expected).max() > 1e-3


@pytest.mark.unchecked  # the package's own error, for input its annotations exclude
def test_gqa_bad_options():
    with pytest.raises(ValueError, match="multiple of num_kv_heads"):
        gqa(4)
    with pytest.raises(ValueError, match="rotary_layout"):
        gqa(2, rotary=True, rotary_layout="sideways")


# -- QK-norm ---------------------------------------------------------------------------------------


def test_qk_norm_bounds_the_scores_and_ignores_projection_scale():
    layer = gqa(2, qk_norm=True)
    x = tokens(9)
    keys, queries = layer.head_keys_queries(x)
    # Unit gains: every key and query has root mean square 1, so |k·q| <= K.
    np.testing.assert_allclose(jnp.sqrt((keys**2).mean(-1)), 1.0, rtol=1e-4)
    np.testing.assert_allclose(jnp.sqrt((queries**2).mean(-1)), 1.0, rtol=1e-4)
    big = eqx.tree_at(lambda m: m.key_projections, layer, 100.0 * layer.key_projections)
    np.testing.assert_allclose(big(x), layer(x), rtol=1e-4, atol=1e-5)
    # Negative control: without QK-norm the same change of scale changes the output.
    plain = eqx.tree_at(lambda m: (m.key_norm, m.query_norm), layer, (None, None))
    plain_big = eqx.tree_at(lambda m: m.key_projections, plain, 100.0 * plain.key_projections)
    assert np.abs(plain_big(x) - plain(x)).max() > 1e-2


# -- rotary positions ----------------------------------------------------------------------------


@pytest.mark.unchecked  # the package's own error, for input its annotations exclude
def test_rotary_layouts_equal_up_to_a_permutation():
    x = jax.random.normal(jax.random.PRNGKey(10), (3, N, K))
    positions = jnp.arange(N) + 5
    p = half_to_interleaved(K)
    half = rotate_pairs(x, positions, base=1e5, layout="half")
    interleaved = rotate_pairs(x[..., p], positions, base=1e5, layout="interleaved")
    np.testing.assert_allclose(half[..., p], interleaved, rtol=1e-6, atol=1e-6)
    # Negative control: without the permutation the layouts differ.
    assert np.abs(half - rotate_pairs(x, positions, base=1e5)).max() > 1e-2
    with pytest.raises(ValueError, match="layout"):
        rotate_pairs(x, positions, layout="diagonal")


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rotary_scores_depend_on_relative_position(layout):
    k, q = jax.random.normal(jax.random.PRNGKey(11), (2, 1, K))

    def score(m, n, base):
        rotated_k = rotate_pairs(k, jnp.array([m]), base=base, layout=layout)
        return (rotated_k @ rotate_pairs(q, jnp.array([n]), base=base, layout=layout).T)[0, 0]

    np.testing.assert_allclose(score(3, 10, 1e5), score(103, 110, 1e5), rtol=1e-4)
    assert abs(score(3, 10, 1e5) - score(3, 10, 1e4)) > 1e-4  # the base matters


def test_attention_with_half_layout_equals_interleaved_with_permuted_rows():
    layer = gqa(3, rotary=True, rotary_layout="half", rotary_base=1e5)
    p = half_to_interleaved(K)
    # The same weights (same key) with the other layout; its U_q, U_k rows then permuted.
    unpermuted = gqa(3, rotary=True, rotary_layout="interleaved", rotary_base=1e5)
    interleaved = eqx.tree_at(
        lambda m: (m.query_projections, m.key_projections),
        unpermuted,
        (layer.query_projections[:, p], layer.key_projections[:, p]),
    )
    x, mask = tokens(12), causal_mask(N)
    np.testing.assert_allclose(layer(x, mask), interleaved(x, mask), rtol=1e-5, atol=1e-5)
    assert np.abs(layer(x, mask) - unpermuted(x, mask)).max() > 1e-3


def test_rotary_half_matches_transformers():
    pytest.importorskip("torch")
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    import torch

    x = np.asarray(jax.random.normal(jax.random.PRNGKey(13), (H, N, K)))
    base = 1e5
    inv_freq = 1.0 / (base ** (torch.arange(0, K, 2, dtype=torch.float32) / K))
    angles = torch.outer(torch.arange(N, dtype=torch.float32), inv_freq)
    emb = torch.cat([angles, angles], -1)
    ref, _ = llama.apply_rotary_pos_emb(
        torch.tensor(x)[None], torch.tensor(x)[None], emb.cos()[None], emb.sin()[None]
    )
    ours = rotate_pairs(jnp.asarray(x), jnp.arange(N), base=base, layout="half")
    np.testing.assert_allclose(ours, ref[0].numpy(), rtol=1e-5, atol=1e-5)


# -- blocks that start as the identity ---------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"value_dim": K},
        {"value_dim": K, "attention_bias": True},
        {"mlp": "gated", "activation": "silu", "mlp_bias": False},
        {"mlp": "gated", "activation": "silu", "num_kv_heads": G, "qk_norm": True},
    ],
)
def test_zero_init_residual_block_starts_as_the_identity(options):
    x, mask = tokens(30), causal_mask(N)
    config = BlockConfig(dim=D, num_heads=H, mlp_hidden_dim=4 * D, **options)
    block = TransformerBlock(config.replace(zero_init_residual=True), key=jax.random.PRNGKey(31))
    np.testing.assert_array_equal(block(x, mask), x)
    # Negative control: the same block without the option changes its input.
    plain = TransformerBlock(config, key=jax.random.PRNGKey(31))
    assert jnp.abs(plain(x, mask) - x).max() > 0.1
    # Only the last maps differ: the other parameters are the plain block's.
    others = jax.tree_util.tree_leaves(block.attention_norm) + [block.attention.query_projections]
    plain_others = jax.tree_util.tree_leaves(plain.attention_norm) + [
        plain.attention.query_projections
    ]
    for a, b in zip(others, plain_others, strict=True):
        np.testing.assert_array_equal(a, b)


def test_zero_init_residual_gradients_reach_the_zero_maps_first():
    """At the start only the zeroed maps get a gradient: the rest of a branch is cut off
    behind a zero matrix until the first update moves it."""
    x, mask = tokens(32), causal_mask(N)
    block = TransformerBlock(
        BlockConfig(dim=D, num_heads=H, mlp_hidden_dim=4 * D, value_dim=K, zero_init_residual=True),
        key=jax.random.PRNGKey(33),
    )
    target = tokens(34)
    grads = jax.grad(lambda b: jnp.sum((b(x, mask) - target) ** 2))(block)
    assert jnp.abs(grads.attention.output_projections).max() > 1e-3
    assert jnp.abs(grads.mlp.layers[-1].weight).max() > 1e-3
    assert jnp.abs(grads.mlp.layers[-1].bias).max() > 1e-3
    for cut_off in (
        grads.attention.query_projections,
        grads.attention.value_projections,
        grads.mlp.layers[0].weight,
    ):
        np.testing.assert_array_equal(cut_off, 0.0)


def test_language_model_with_identity_blocks_reads_out_the_embedding():
    config = tiny_lm(11, 8, 3, block=lm_block(D, H, 2 * D, norm="rms", zero_init_residual=True))
    model = LanguageModel(config, key=jax.random.PRNGKey(35))
    symbols = jnp.array([1, 4, 2, 9, 0])
    x = model.embed(symbols)
    expected = jax.vmap(lambda t: model.unembedding(model.final_norm(t)))(x)
    np.testing.assert_allclose(model(symbols), expected, rtol=1e-6, atol=1e-6)
    assert LMConfig.from_json(config.to_json()) == config
    # A configuration saved before the option existed loads without it.
    old = json.loads(config.to_json())
    del old["block"]["zero_init_residual"]
    assert LMConfig.from_json(json.dumps(old)).block.zero_init_residual is False
    plain = LanguageModel(
        config.replace(block=config.block.replace(zero_init_residual=False)),
        key=jax.random.PRNGKey(35),
    )
    assert jnp.abs(plain(symbols) - expected).max() > 1e-2


# -- attention biases, and GPT-2 exactly ----------------------------------------------------------


def test_key_bias_cancels_and_value_bias_is_an_output_bias():
    """The reason the attention stores only a query and an output bias."""
    layer = gqa(6, use_bias=True)
    layer = eqx.tree_at(
        lambda m: (m.query_bias, m.output_bias),
        layer,
        (jax.random.normal(jax.random.PRNGKey(20), (H, K)), jnp.linspace(-1, 1, D)),
    )
    x, mask = tokens(21), causal_mask(N)
    b_k, b_v = jax.random.normal(jax.random.PRNGKey(22), (2, H, K))
    # A layer written out with all four biases, in plain numpy.
    q = np.einsum("hkd,nd->hnk", layer.query_projections, x) + np.asarray(layer.query_bias)[:, None]
    k = np.einsum("hkd,nd->hnk", layer.key_projections, x) + np.asarray(b_k)[:, None]
    v = np.einsum("hkd,nd->hnk", layer.value_projections, x) + np.asarray(b_v)[:, None]
    scores = np.einsum("hmk,hnk->hmn", k, q) / np.sqrt(K)
    scores = np.where(np.asarray(mask), scores, -np.inf)
    a = np.exp(scores - scores.max(1, keepdims=True))
    a = a / a.sum(1, keepdims=True)
    heads = np.einsum("hmn,hmv->hnv", a, v)
    full = np.einsum("hdv,hnv->nd", layer.output_projections, heads)
    folded = eqx.tree_at(
        lambda m: m.output_bias,
        layer,
        layer.output_bias + jnp.einsum("hdv,hv->d", layer.output_projections, b_v),
    )
    expected = full + np.asarray(layer.output_bias)
    np.testing.assert_allclose(folded(x, mask), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(folded.batched(x[None], mask)[0], expected, rtol=1e-5, atol=1e-5)
    y, _ = folded.extend(x, folded.empty_cache(N), 0)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    # Negative control: the value bias is not simply dropped.
    assert np.abs(layer(x, mask) - expected).max() > 1e-2


@pytest.fixture(scope="module")
def tiny_gpt2():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=97, n_positions=32, n_embd=64, n_layer=2, n_head=4, resid_pdrop=0.0
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # random biases and gains too, so that every weight is checked
        for name, p in model.named_parameters():
            if name.endswith("bias") or "ln" in name:
                p.copy_(
                    0.1 * torch.randn_like(p) + (1.0 if "ln" in name and "weight" in name else 0)
                )
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    ids = np.random.default_rng(0).integers(0, 97, size=24)
    with torch.no_grad():
        logits = model(torch.tensor(ids[None])).logits[0].numpy()
    return config, state, ids, logits


def test_gpt2_converted_gives_the_same_logits(tiny_gpt2):
    from transformer_intro.pretrained.gpt2 import gpt2_config_from_hf, gpt2_from_state_dict

    config, state, ids, expected = tiny_gpt2
    model = gpt2_from_state_dict(state, gpt2_config_from_hf(config.to_dict()))
    assert type(model).__name__ == "LanguageModel"  # the book's model, GPT-2's configuration
    logits = np.asarray(model(jnp.asarray(ids)))
    assert np.abs(logits - expected).max() < 1e-5
    # The fast batched path and the key-value cache give the same logits.
    np.testing.assert_allclose(model.batched(jnp.asarray(ids)[None])[0], logits, atol=1e-5)
    cached, _ = model.extend(jnp.asarray(ids), model.empty_cache(), 0)
    np.testing.assert_allclose(cached, logits, atol=1e-5)


@pytest.mark.parametrize(
    "first, second",
    [("h.0.ln_1.weight", "h.0.ln_2.weight"), ("h.1.mlp.c_fc.bias", "h.0.mlp.c_fc.bias")],
)
def test_gpt2_with_a_swapped_pair_of_weights_fails(tiny_gpt2, first, second):
    from transformer_intro.pretrained.gpt2 import gpt2_config_from_hf, gpt2_from_state_dict

    config, state, ids, expected = tiny_gpt2
    swapped = dict(state)
    a, b = f"transformer.{first}", f"transformer.{second}"
    swapped[a], swapped[b] = state[b], state[a]
    model = gpt2_from_state_dict(swapped, gpt2_config_from_hf(config.to_dict()))
    assert np.abs(np.asarray(model(jnp.asarray(ids))) - expected).max() > 1e-3
    with pytest.raises(KeyError, match="no tensor"):
        gpt2_from_state_dict(
            {k: v for k, v in state.items() if k != a}, gpt2_config_from_hf(config.to_dict())
        )


@pytest.mark.parametrize("prompt_length", [30, 36])
def test_generation_up_to_the_end_of_a_context_not_a_multiple_of_16(prompt_length):
    # A 40-token context: the prompt's padding to 16 must stop at the context's end, and the
    # cached generation must equal greedy decoding by full passes.
    from transformer_intro.models.generation import generate_ids
    from transformer_intro.pretrained.smollm2 import smollm2_config

    config = smollm2_config(
        vocab_size=50,
        dim=16,
        num_blocks=2,
        num_heads=2,
        num_kv_heads=1,
        mlp_hidden_dim=32,
        context_length=40,
    )
    model = LanguageModel(config, key=jax.random.PRNGKey(0))
    ids = np.asarray(jax.random.randint(jax.random.PRNGKey(1), (prompt_length,), 0, 50))
    num_tokens = 40 - prompt_length
    new = generate_ids(model, ids, num_tokens)
    # Greedy decoding by full passes over the whole context, compiled once: the model is causal,
    # so the zeros after position t do not change the logits at t.
    full_pass = eqx.filter_jit(lambda model, sequence: model(sequence))
    sequence = np.zeros(40, np.int32)
    sequence[:prompt_length] = ids
    for t in range(prompt_length, 40):
        sequence[t] = int(jnp.argmax(full_pass(model, jnp.asarray(sequence))[t - 1]))
    assert new.tolist() == sequence[prompt_length:].tolist()
    with pytest.raises(ValueError, match="exceed the model's context of 40"):
        generate_ids(model, ids, num_tokens + 1)


def test_generation_compiles_each_program_once_per_shape():
    # generate_ids compiles decoding ahead of the prompt's pass (for its memory peak); a second
    # prompt of the same padded length must reuse both programs, not compile them again.
    from transformer_intro.models.generation import generate_ids
    from transformer_intro.pretrained.smollm2 import smollm2_config

    config = smollm2_config(
        vocab_size=50, dim=16, num_blocks=2, num_heads=2, num_kv_heads=1, mlp_hidden_dim=32
    )
    model = LanguageModel(config, key=jax.random.PRNGKey(0))
    compilations = []

    def listener(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compilations.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        first = generate_ids(model, [3, 1, 4, 1, 5], 6)
        compiled_first = len(compilations)
        second = generate_ids(model, [2, 7, 1, 8, 2, 8], 6)
        compiled_second = len(compilations) - compiled_first
        generate_ids(model, [2, 7, 1, 8, 2, 8], 7)  # another number of tokens: decode again
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert compiled_first >= 2 and compiled_second == 0
    assert len(compilations) > compiled_first
    assert first.shape == second.shape == (6,)
