"""Attention: the properties the text states.

Also cross-checks against independent implementations.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_intro import (
    MultiHeadAttention,
    MultiHeadSelfAttention,
    SelfAttention,
    SharedProjectionAttention,
    attend,
    attention_weights,
    causal_mask,
    dot_product_attention_weights,
    from_equinox,
    padding_mask,
    qkv_attention,
    qkv_weights,
    to_equinox,
)

N, D, H = 6, 8, 2


@pytest.fixture
def x():
    return jax.random.normal(jax.random.PRNGKey(1), (N, D))


def assert_close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=tol, rtol=tol)


@pytest.mark.parametrize(
    "make",
    [
        lambda x: dot_product_attention_weights(x),
        lambda x: SharedProjectionAttention(D, 4, key=jax.random.PRNGKey(2)).attention_weights(x),
        lambda x: SelfAttention(D, 4, key=jax.random.PRNGKey(3)).attention_weights(x),
    ],
)
def test_columns_of_attention_matrix_sum_to_one_and_are_positive(x, make):
    weights = make(x)
    assert weights.shape == (N, N)
    assert_close(weights.sum(axis=0), jnp.ones(N))
    assert (weights > 0).all()
    # Rows need not sum to one: the normalisation runs down the columns only.
    assert not np.allclose(weights.sum(axis=1), 1.0, atol=1e-3)


def test_attention_matches_explicit_formula(x):
    weights = dot_product_attention_weights(x)
    scores = np.exp(np.asarray(x) @ np.asarray(x).T)
    assert_close(weights, scores / scores.sum(axis=0, keepdims=True), 1e-4)


def test_output_is_weighted_average_of_inputs(x):
    weights = dot_product_attention_weights(x)
    y = attend(x, weights)
    for n in range(N):
        assert_close(y[n], sum(weights[m, n] * x[m] for m in range(N)))


def test_shared_projection_scores_symmetric_but_normalised_matrix_not(x):
    layer = SharedProjectionAttention(D, 4, key=jax.random.PRNGKey(4))
    scores = layer.scores(x)
    assert_close(scores, scores.T)
    weights = layer.attention_weights(x)
    assert not np.allclose(weights, weights.T, atol=1e-3)


def test_separate_key_query_projections_give_asymmetric_scores(x):
    layer = SelfAttention(D, 4, key=jax.random.PRNGKey(5))
    scores = layer.scores(x)
    assert not np.allclose(scores, scores.T, atol=1e-3)
    # ... and with U_k = U_q they become symmetric again.
    tied = eqx.tree_at(lambda l: l.query_projection, layer, layer.key_projection)
    assert_close(tied.scores(x), tied.scores(x).T)


def test_scaling_divides_scores_by_sqrt_k(x):
    k, q = x[:, :4], x[:, 4:]
    scaled = attention_weights(k, q, scaled=True)
    assert_close(scaled, attention_weights(k / 2.0, q, scaled=False))


def test_causal_mask_forbids_attending_to_later_tokens(x):
    weights = dot_product_attention_weights(x, mask=causal_mask(N))
    assert_close(jnp.triu(weights.T, k=1), jnp.zeros((N, N)))  # A[n', n] = 0 for n' > n
    assert_close(weights.sum(0), jnp.ones(N))
    assert_close(weights[:, 0], jnp.eye(N)[0])  # the first token can only see itself


def test_padding_mask_gives_padding_zero_weight(x):
    is_real = jnp.array([True, True, True, True, False, False])
    weights = dot_product_attention_weights(x, mask=padding_mask(is_real))
    assert_close(weights[4:], jnp.zeros((2, N)))
    assert_close(weights.sum(0), jnp.ones(N))
    # Outputs of the real tokens are as if the padding were not there.
    assert_close(attend(x, weights)[:4], attend(x[:4], dot_product_attention_weights(x[:4])))


@pytest.mark.unchecked  # the package's own error, for input its annotations exclude
def test_mismatched_keys_and_queries_raise():
    with pytest.raises(ValueError, match="same width K"):
        attention_weights(jnp.ones((3, 4)), jnp.ones((3, 5)))


def test_cross_attention_weights_have_one_column_per_query():
    keys = jax.random.normal(jax.random.PRNGKey(0), (7, 4))
    queries = jax.random.normal(jax.random.PRNGKey(1), (3, 4))
    weights = attention_weights(keys, queries)
    assert weights.shape == (7, 3)
    assert_close(weights.sum(0), jnp.ones(3))


def test_self_attention_matches_jax_dot_product_attention(x):
    # jax.nn.dot_product_attention needs values as wide as keys, so K = D here.
    layer = SelfAttention(D, D, scaled=True, key=jax.random.PRNGKey(6))
    keys, queries = x @ layer.key_projection.T, x @ layer.query_projection.T
    # jax.nn.dot_product_attention takes (T, N_heads, H) and normalises over keys for each query.
    expected = jax.nn.dot_product_attention(queries[:, None], keys[:, None], x[:, None])[:, 0]
    assert_close(layer(x), expected)


# --- multi-head self-attention ---------------------------------------------------------------


@pytest.mark.parametrize("value_dim", [None, 3])
def test_mhsa_is_sum_over_heads_of_text_form(x, value_dim):
    layer = MultiHeadSelfAttention(D, H, 4, value_dim, scaled=False, key=jax.random.PRNGKey(7))
    expected = 0.0
    for h in range(H):
        keys = x @ layer.key_projections[h].T
        queries = x @ layer.query_projections[h].T
        a_h = jax.nn.softmax(keys @ queries.T, axis=0)
        # Maths: V_h X A_h with X of shape D x N; transpose back to rows.
        expected = expected + (layer.value_maps()[h] @ x.T @ a_h).T
    assert_close(layer(x), expected)


@pytest.mark.parametrize("value_dim", [None, 3])
@pytest.mark.parametrize("scaled", [True, False])
def test_mhsa_equals_qkv_concat_form(x, value_dim, scaled):
    layer = MultiHeadSelfAttention(D, H, 4, value_dim, scaled=scaled, key=jax.random.PRNGKey(8))
    assert_close(layer(x), qkv_attention(x, qkv_weights(layer), H, scaled=scaled))


@pytest.mark.parametrize("value_dim", [None, 4])
def test_mhsa_equals_equinox_multihead_attention(x, value_dim):
    layer = MultiHeadSelfAttention(D, H, value_dim=value_dim, key=jax.random.PRNGKey(9))
    assert_close(layer(x), to_equinox(layer)(x, x, x))


def test_from_equinox_round_trip(x):
    biased = eqx.nn.MultiheadAttention(
        H, D, qk_size=3, vo_size=5, use_query_bias=True, key=jax.random.PRNGKey(10)
    )
    with pytest.raises(ValueError, match="biases"):
        from_equinox(biased)
    unbiased = eqx.nn.MultiheadAttention(
        H,
        D,
        qk_size=3,
        vo_size=5,
        use_query_bias=False,
        use_key_bias=False,
        use_value_bias=False,
        use_output_bias=False,
        key=jax.random.PRNGKey(10),
    )
    layer = from_equinox(unbiased)
    assert_close(layer(x), unbiased(x, x, x))
    assert_close(to_equinox(layer)(x, x, x), unbiased(x, x, x))


def test_to_equinox_refuses_what_equinox_cannot_express():
    with pytest.raises(ValueError, match="scaled"):
        to_equinox(MultiHeadSelfAttention(D, H, scaled=False, key=jax.random.PRNGKey(0)))


@pytest.mark.parametrize(
    "options",
    [
        dict(),
        dict(value_dim=3),
        dict(value_dim=None, combine_heads="mean", qk_activation=jax.nn.gelu),
        dict(rotary=True),
        dict(scaled=False, head_dim=6),
    ],
)
@pytest.mark.parametrize("masked", [False, True])
def test_batched_path_equals_vmapped_definition(options, masked):
    layer = MultiHeadSelfAttention(D, H, key=jax.random.PRNGKey(11), **options)
    xs = jax.random.normal(jax.random.PRNGKey(12), (3, N, D))
    mask = causal_mask(N) if masked else None
    assert_close(layer.batched(xs, mask), jax.vmap(lambda s: layer(s, mask))(xs))
    # Gradients agree too: the fast path is what training differentiates.
    loss = lambda m, f: (f(m) ** 2).sum()
    g_fast = eqx.filter_grad(loss)(layer, lambda m: m.batched(xs, mask))
    g_ref = eqx.filter_grad(loss)(layer, lambda m: jax.vmap(lambda s: m(s, mask))(xs))
    for a, b in zip(jax.tree_util.tree_leaves(g_fast), jax.tree_util.tree_leaves(g_ref)):
        assert_close(a, b, 1e-4)


@pytest.mark.parametrize(
    "options",
    [
        dict(),
        dict(value_dim=None, combine_heads="mean", qk_activation=jax.nn.gelu),
        dict(rotary=True),
    ],
)
@pytest.mark.parametrize("masked", [False, True])
def test_batched_num_outputs_is_the_first_outputs_of_the_full_layer(options, masked):
    layer = MultiHeadSelfAttention(D, H, key=jax.random.PRNGKey(17), **options)
    xs = jax.random.normal(jax.random.PRNGKey(18), (3, N, D))
    mask = causal_mask(N) if masked else None
    full = lambda m: m.batched(xs, mask)[:, :2]
    first = lambda m: m.batched(xs, mask, num_outputs=2)
    assert first(layer).shape == (3, 2, D)
    assert_close(first(layer), full(layer))
    # The other tokens still matter, as keys and values: their gradients must come out the same.
    loss = lambda m, f: (f(m) ** 2).sum()
    for a, b in zip(
        jax.tree_util.tree_leaves(eqx.filter_grad(loss)(layer, first)),
        jax.tree_util.tree_leaves(eqx.filter_grad(loss)(layer, full)),
    ):
        assert_close(a, b, 1e-4)
    grad_x = jax.grad(lambda x: (layer.batched(x, mask, num_outputs=2) ** 2).sum())(xs)
    assert_close(grad_x, jax.grad(lambda x: (layer.batched(x, mask)[:, :2] ** 2).sum())(xs), 1e-4)


@pytest.mark.parametrize("num_outputs", [0, N + 1])
def test_batched_num_outputs_out_of_range_raises(num_outputs):
    layer = MultiHeadSelfAttention(D, H, key=jax.random.PRNGKey(0))
    with pytest.raises(
        ValueError, match=f"num_outputs must be between 1 and the number of tokens {N}"
    ):
        layer.batched(jnp.ones((2, N, D)), num_outputs=num_outputs)


def test_mhsa_is_permutation_equivariant(x):
    layer = MultiHeadSelfAttention(D, H, key=jax.random.PRNGKey(13))
    perm = jax.random.permutation(jax.random.PRNGKey(14), N)
    assert_close(layer(x[perm]), layer(x)[perm])


def test_rotary_attention_depends_on_relative_position_and_breaks_equivariance(x):
    layer = MultiHeadSelfAttention(D, H, rotary=True, key=jax.random.PRNGKey(15))
    perm = jnp.array([1, 0, 2, 3, 4, 5])
    assert not np.allclose(layer(x[perm]), layer(x)[perm], atol=1e-3)
    # Scores depend on positions only through their difference: shifting both positions by the
    # same amount leaves a key-query score unchanged.
    from transformer_intro import rotate_pairs

    k, q = jax.random.normal(jax.random.PRNGKey(16), (2, 1, 4))
    score = lambda m, n: (rotate_pairs(k, jnp.array([m])) @ rotate_pairs(q, jnp.array([n])).T)[0, 0]
    assert_close(score(2, 5), score(7, 10))
    assert not np.isclose(score(2, 5), score(2, 6))


def test_width_not_divisible_by_heads_raises():
    with pytest.raises(ValueError, match="not divisible by num_heads=3"):
        MultiHeadSelfAttention(8, 3, key=jax.random.PRNGKey(0))
    MultiHeadSelfAttention(8, 3, head_dim=4, key=jax.random.PRNGKey(0))  # explicit K is fine


@pytest.mark.unchecked  # the package's own error, for input its annotations exclude
def test_wrong_input_shape_raises():
    layer = MultiHeadSelfAttention(D, H, key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"shape \(N, 8\)"):
        layer(jnp.ones((N, D + 1)))
    with pytest.raises(ValueError, match="batch"):
        layer.batched(jnp.ones((N, D)))


# -- cross-attention and per-example masks: the same module, keys and values from a second sequence


@pytest.mark.parametrize("value_dim", [None, 3])
def test_cross_attention_equals_equinox_with_separate_key_value_input(x, value_dim):
    layer = MultiHeadAttention(D, H, value_dim=value_dim, key=jax.random.PRNGKey(20))
    context = jax.random.normal(jax.random.PRNGKey(21), (N + 3, D))
    assert layer(x, context=context).shape == (N, D)
    assert_close(layer(x, context=context), to_equinox(layer)(x, context, context))
    # Negative control: reading x itself is a different function.
    assert not np.allclose(layer(x, context=context), layer(x), atol=1e-3)


def test_cross_attention_weights_are_context_by_query_and_column_stochastic(x):
    layer = MultiHeadAttention(D, H, key=jax.random.PRNGKey(22))
    context = jax.random.normal(jax.random.PRNGKey(23), (N + 3, D))
    is_real = jnp.arange(N + 3) < N + 1
    weights = layer.attention_weights(x, padding_mask(is_real)[:, :N], context=context)
    assert weights.shape == (H, N + 3, N)
    assert_close(weights.sum(1), jnp.ones((H, N)))
    assert_close(weights[:, N + 1 :], jnp.zeros((H, 2, N)))


@pytest.mark.parametrize("value_dim", [None, 3])
def test_batched_cross_attention_with_per_example_masks_equals_vmap(value_dim):
    layer = MultiHeadAttention(D, H, value_dim=value_dim, key=jax.random.PRNGKey(24))
    b, m = 3, N + 2
    x = jax.random.normal(jax.random.PRNGKey(25), (b, N, D))
    context = jax.random.normal(jax.random.PRNGKey(26), (b, m, D))
    lengths = jnp.array([m, 3, 1])
    masks = jax.vmap(lambda length: jnp.broadcast_to((jnp.arange(m) < length)[:, None], (m, N)))(
        lengths
    )
    expected = jax.vmap(lambda xi, ci, mi: layer(xi, mi, context=ci))(x, context, masks)
    assert_close(layer.batched(x, masks, context=context), expected)
    # Negative control: one mask for all three examples is not the same function.
    assert not np.allclose(layer.batched(x, masks[0], context=context), expected, atol=1e-3)


def test_batched_self_attention_with_per_example_masks_equals_vmap(x):
    layer = MultiHeadAttention(D, H, key=jax.random.PRNGKey(27))
    batch = jnp.stack([x, 2 * x])
    masks = jnp.stack([causal_mask(N), padding_mask(jnp.arange(N) < 4)])
    expected = jax.vmap(layer)(batch, masks)
    assert_close(layer.batched(batch, masks), expected)


@pytest.mark.unchecked  # the package's own error, for input its annotations exclude
def test_cross_attention_errors_name_the_problem(x):
    layer = MultiHeadAttention(D, H, key=jax.random.PRNGKey(28))
    with pytest.raises(ValueError, match="context must hold tokens of width"):
        layer(x, context=jnp.zeros((4, D + 1)))
    with pytest.raises(ValueError, match="mask must have shape"):
        layer.batched(x[None], jnp.ones((N, N), bool), context=jnp.zeros((1, N + 1, D)))
    rotary = MultiHeadAttention(D, H, rotary=True, key=jax.random.PRNGKey(29))
    with pytest.raises(ValueError, match="rotary"):
        rotary(x, context=x)
    assert MultiHeadSelfAttention is MultiHeadAttention
