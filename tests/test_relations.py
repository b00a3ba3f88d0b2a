"""Each relation of chapter 11: the construction equals the other architecture, and a deliberately
wrong variant (the negative control) is rejected by the same check."""

import jax
import jax.numpy as jnp
import pytest

from transformer_intro import attend, attention_weights, causal_mask
from transformer_intro.relations import (
    adjacency_mask,
    attention_update,
    convolution,
    convolution_as_attention,
    decay_mask,
    edge_softmax_attention,
    fast_weight_memory,
    fourier_mixing,
    gat_scores,
    gated_linear_recurrence,
    gatv2_scores,
    hopfield_energy,
    hopfield_iterates,
    hopfield_update,
    is_static,
    kernel_offsets,
    kernel_regression_attention,
    kv_cache_attention,
    kv_cache_layer,
    linear_attention,
    linear_attention_recurrence,
    masked_linear_attention,
    mixing_bias,
    nadaraya_watson,
    online_softmax_attention,
)


def error(a, b):
    return float(jnp.max(jnp.abs(a - b)))


def normal(seed, shape, scale=1.0):
    return scale * jax.random.normal(jax.random.PRNGKey(seed), shape)


@pytest.fixture(autouse=True)
def full_precision():
    with jax.default_matmul_precision("highest"):
        yield


def test_attention_weights_bias_is_added_to_the_scores():
    keys, queries, bias = normal(0, (5, 3)), normal(1, (4, 3)), normal(2, (5, 4))
    expected = jax.nn.softmax(keys @ queries.T + bias, axis=0)
    assert error(attention_weights(keys, queries, bias=bias), expected) < 1e-6
    # a per-key column broadcasts; a bias constant down each column changes nothing
    column = normal(3, (5, 1))
    assert (
        error(
            attention_weights(keys, queries, bias=column),
            jax.nn.softmax(keys @ queries.T + column, axis=0),
        )
        < 1e-6
    )
    assert (
        error(
            attention_weights(keys, queries, bias=normal(4, (1, 4))),
            attention_weights(keys, queries),
        )
        < 1e-6
    )
    masked = attention_weights(keys[:4], queries, bias=bias[:4], mask=causal_mask(4))
    assert jnp.all(masked[~causal_mask(4)] == 0)


# -- 1. convolution -----------------------------------------------------------------------------


@pytest.mark.parametrize("spatial, window", [((12,), (3,)), ((12,), (5,)), ((6, 7), (3, 3))])
def test_convolution_as_attention(spatial, window):
    x = normal(0, (*spatial, 2))
    kernel = normal(1, (*window, 3, 2))
    target = convolution(x, kernel)
    heads = jax.jit(convolution_as_attention)  # one compilation for every alpha and offsets
    offsets = kernel_offsets(window)
    assert error(heads(x, kernel, 40.0, offsets=offsets), target) < 1e-5
    # the error falls with alpha (roughly as e^-alpha)
    assert error(heads(x, kernel, 2.0, offsets=offsets), target) > 10 * error(
        heads(x, kernel, 8.0, offsets=offsets), target
    )
    # control: the kernel's weights at mirrored offsets
    wrong = heads(x, kernel, 40.0, offsets=-offsets)
    assert error(wrong, target) > 0.5


def test_convolution_rejects_even_windows():
    with pytest.raises(ValueError, match="odd"):
        kernel_offsets((2, 3))


# -- 2. linear attention and state-space duality ------------------------------------------------


def test_linear_attention_is_a_recurrence():
    keys, queries, values = normal(0, (10, 4)), normal(1, (10, 4)), normal(2, (10, 3))
    recurrent = linear_attention_recurrence(keys, queries, values)
    assert error(linear_attention(keys, queries, values), recurrent) < 1e-5
    assert error(linear_attention(keys, queries, values, causal=False), recurrent) > 0.1  # control


def test_gated_recurrence_is_masked_attention():
    keys, queries, values = normal(0, (10, 4)), normal(1, (10, 4)), normal(2, (10, 3))
    decays = jax.random.uniform(jax.random.PRNGKey(3), (10,), minval=0.5, maxval=1.0)
    mask = decay_mask(decays)
    n = jnp.arange(10)
    expected = jnp.array(
        [[float(jnp.prod(decays[i + 1 : j + 1])) if i <= j else 0.0 for j in n] for i in n]
    )
    assert error(mask, expected) < 1e-5
    recurrent = gated_linear_recurrence(keys, queries, values, decays)
    assert error(masked_linear_attention(keys, queries, values, mask), recurrent) < 1e-4
    # decays of one: the causal mask; a constant: retention's gamma^(n - n')
    assert error(decay_mask(jnp.ones(10)), causal_mask(10).astype(float)) < 1e-6
    retention = jnp.where(causal_mask(10), 0.9 ** (n[None, :] - n[:, None]).astype(float), 0.0)
    assert error(decay_mask(jnp.full(10, 0.9)), retention) < 1e-5
    # control: no causal mask
    assert (
        error(masked_linear_attention(keys, queries, values, jnp.ones((10, 10))), recurrent) > 0.5
    )


# -- 3. softmax attention as a recurrence -------------------------------------------------------


def causal_softmax_attention(keys, queries, values, causal=True):
    mask = causal_mask(keys.shape[0]) if causal else None
    return attend(values, attention_weights(keys, queries, mask=mask))


def test_kv_cache_decoding_equals_causal_attention():
    keys, queries, values = normal(0, (9, 4)), normal(1, (9, 4)), normal(2, (9, 3))
    decoded = kv_cache_attention(keys, queries, values)
    assert error(decoded, causal_softmax_attention(keys, queries, values)) < 1e-5
    assert error(decoded, causal_softmax_attention(keys, queries, values, causal=False)) > 0.1


def test_kv_cache_layer_passes_keys_queries_and_values_through():
    keys, queries, values = normal(0, (7, 4)), normal(1, (7, 4)), normal(2, (7, 3))
    layer = kv_cache_layer(4, 3)
    tokens = jnp.concatenate([keys, queries, values], axis=1)
    # The layer's readable path (no cache) gives [0; 0; y] for every token.
    y = layer(tokens, causal_mask(7))
    assert error(y[:, :8], jnp.zeros((7, 8))) == 0
    assert error(y[:, 8:], causal_softmax_attention(keys, queries, values)) < 1e-5
    # The cache is the layer's own: after a prefill of 5 tokens it holds their keys and values,
    # and the rows beyond stay empty until extend writes them.
    cache_keys, cache_values = layer.extend(tokens[:5], layer.empty_cache(7), 0)[1]
    assert cache_keys.shape == (1, 7, 4) and cache_values.shape == (1, 7, 3)
    assert error(cache_keys[0, :5], keys[:5]) == 0 and error(cache_values[0, :5], values[:5]) == 0
    assert not jnp.any(cache_keys[0, 5:]) and not jnp.any(cache_values[0, 5:])


def test_kv_cache_attention_uses_the_attention_layers_extend(monkeypatch):
    from transformer_intro.attention import MultiHeadAttention

    calls = []
    extend = MultiHeadAttention.extend

    def counting(self, *args, **kwargs):
        calls.append(args[0].shape)
        return extend(self, *args, **kwargs)

    monkeypatch.setattr(MultiHeadAttention, "extend", counting)
    kv_cache_attention(normal(0, (5, 2)), normal(1, (5, 2)), normal(2, (5, 3)))
    assert calls == [(1, 7)]  # traced once inside the scan, one token [k; q; v] per step


@pytest.mark.unchecked  # the package's own error, for input its annotations exclude
def test_kv_cache_attention_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="keys and queries"):
        kv_cache_attention(normal(0, (5, 2)), normal(1, (4, 2)), normal(2, (5, 3)))


def test_online_softmax_equals_the_parallel_form():
    keys, queries, values = normal(0, (16, 8)), normal(1, (5, 8), 2.0), normal(2, (16, 3))
    parallel = attend(values, attention_weights(keys, queries))
    assert error(online_softmax_attention(keys, queries, values), parallel) < 1e-5
    assert error(online_softmax_attention(keys, queries, values, rescale=False), parallel) > 0.1


@pytest.mark.unchecked  # the package's own error, for input its annotations exclude
def test_fast_weights_sum_rule_is_linear_attention_and_delta_rule_overwrites():
    keys, queries, values = normal(0, (8, 4)), normal(1, (8, 4)), normal(2, (8, 3))
    reads, _ = fast_weight_memory(keys, queries, values, rule="sum")
    assert error(reads, masked_linear_attention(keys, queries, values, causal_mask(8))) < 1e-5
    # a key written twice: orthonormal keys e1, e2, then e1 again with a new value
    k = jnp.eye(4)[jnp.array([0, 1, 0])]
    v = normal(3, (3, 3))
    _, delta = fast_weight_memory(k, k, v, rule="delta")
    _, summed = fast_weight_memory(k, k, v, rule="sum")
    assert error(delta @ k[0], v[2]) < 1e-5 and error(delta @ k[1], v[1]) < 1e-5
    assert error(summed @ k[0], v[2]) > 0.1  # control: the sum rule returns v1 + v3
    assert error(summed @ k[0], v[0] + v[2]) < 1e-6
    with pytest.raises(ValueError, match="rule"):
        fast_weight_memory(k, k, v, rule="product")


# -- 4. graphs ----------------------------------------------------------------------------------


def directed_graph(num_nodes=7):
    # a ring one way, a few chords, and self-loops so that every node has an incoming edge
    nodes = jnp.arange(num_nodes)
    senders = jnp.concatenate([nodes, nodes, jnp.array([0, 2, 5])])
    receivers = jnp.concatenate([nodes, (nodes + 1) % num_nodes, jnp.array([3, 6, 1])])
    return senders, receivers


def test_dense_masked_attention_equals_edge_list_attention():
    senders, receivers = directed_graph()
    keys, queries, values = normal(0, (7, 4)), normal(1, (7, 4)), normal(2, (7, 3))
    mask = adjacency_mask(senders, receivers, 7)
    dense = attend(values, attention_weights(keys, queries, mask=mask))
    assert error(edge_softmax_attention(keys, queries, values, senders, receivers), dense) < 1e-5
    # control: messages along the edges the wrong way
    assert error(edge_softmax_attention(keys, queries, values, receivers, senders), dense) > 0.1
    # the complete graph is plain attention
    everyone = jnp.repeat(jnp.arange(7), 7), jnp.tile(jnp.arange(7), 7)
    assert (
        error(
            edge_softmax_attention(keys, queries, values, *everyone),
            attend(values, attention_weights(keys, queries)),
        )
        < 1e-5
    )


def test_masked_attention_is_permutation_equivariant():
    senders, receivers = directed_graph()
    x = normal(0, (7, 4))
    mask = adjacency_mask(senders, receivers, 7)
    layer = lambda x, mask: attend(x, attention_weights(x, x, mask=mask))
    perm = jax.random.permutation(jax.random.PRNGKey(5), 7)
    assert error(layer(x[perm], mask[perm][:, perm]), layer(x, mask)[perm]) < 1e-5
    assert error(layer(x[perm], mask), layer(x, mask)[perm]) > 0.1  # control: graph not permuted


def test_gat_is_attention_with_another_score_and_its_ranking_is_static():
    senders, receivers = directed_graph()
    x, weight = normal(0, (7, 4)), normal(1, (5, 4))
    a_out, a_in = normal(2, (5,)), normal(3, (5,))
    scores = gat_scores(x, weight, a_out, a_in)
    features = x @ weight.T
    mask = adjacency_mask(senders, receivers, 7)
    blind = jnp.zeros((7, 1))
    dense = attend(features, attention_weights(blind, blind, bias=scores, mask=mask))
    sparse = edge_softmax_attention(
        blind, blind, features, senders, receivers, edge_scores=scores[senders, receivers]
    )
    assert error(dense, sparse) < 1e-5
    assert is_static(scores)
    keys, queries = normal(4, (7, 4)), normal(5, (7, 4))
    assert not is_static(keys @ queries.T)  # control: dot-product attention is dynamic
    assert not is_static(gatv2_scores(x, normal(6, (5, 4)), normal(7, (5, 4)), a_out))


# -- 5. token mixing without content ------------------------------------------------------------


def test_content_free_head_is_a_fixed_mixing_matrix():
    bias = normal(0, (6, 6))
    zero = jnp.zeros((3, 4))  # U_k = U_q = 0
    for seed in (1, 2):
        x = normal(seed, (6, 4))
        weights = attention_weights(x @ zero.T, x @ zero.T, bias=bias)
        assert error(weights, jax.nn.softmax(bias, axis=0)) < 1e-6
    u_k, u_q = normal(3, (3, 4)), normal(4, (3, 4))  # control: content back in
    a1, a2 = (
        attention_weights(x @ u_k.T, x @ u_q.T, bias=bias)
        for x in (normal(1, (6, 4)), normal(2, (6, 4)))
    )
    assert error(a1, a2) > 0.1


def test_which_mixing_matrices_one_head_expresses():
    mixing = jax.nn.softmax(normal(0, (6, 6)), axis=0) * 0.5 + 0.5 / 6
    blind = jnp.zeros((6, 1))
    assert error(attention_weights(blind, blind, bias=mixing_bias(mixing)), mixing) < 1e-6
    # control: columns summing to other numbers come back normalised, far from the target
    scaled = mixing * jnp.linspace(0.5, 2.0, 6)
    assert error(jax.nn.softmax(jnp.log(scaled), axis=0), scaled) > 0.1
    with pytest.raises(ValueError, match="sum to one"):
        mixing_bias(scaled)
    with pytest.raises(ValueError, match="positive"):
        mixing_bias(mixing.at[0, 0].set(-0.1))


def test_fourier_mixing_is_fft_and_linear_unlike_attention():
    x, x2 = normal(0, (8, 6)), normal(1, (8, 6))
    assert error(fourier_mixing(x), jnp.fft.fft2(x).real) < 1e-4
    assert error(fourier_mixing(2 * x - x2), 2 * fourier_mixing(x) - fourier_mixing(x2)) < 1e-4
    layer = lambda x: attend(x, attention_weights(x, x))
    assert error(layer(2 * x - x2), 2 * layer(x) - layer(x2)) > 0.5  # attention is not linear


# -- 6. modern Hopfield networks ----------------------------------------------------------------


def test_attention_update_is_one_hopfield_step_and_retrieves():
    patterns = normal(0, (10, 32))
    states = normal(1, (3, 32), 0.3)
    expected = jnp.stack([hopfield_update(s, patterns, 0.2) for s in states])
    assert error(attention_update(states, patterns, 0.2), expected) < 1e-5
    probe = patterns[4] + normal(2, (32,), 0.5)
    assert error(attention_update(probe[None], patterns, 1.0)[0], patterns[4]) < 1e-4
    averaged = attention_update(probe[None], patterns, 1e-4)[0]  # control: tiny beta averages
    assert error(averaged, patterns[4]) > 1.0
    assert error(averaged, patterns.mean(axis=0)) < 0.05


def test_hopfield_energy_never_rises():
    patterns = normal(0, (10, 32))
    for beta in (0.02, 0.1, 1.0):
        iterates = hopfield_iterates(normal(1, (32,)), patterns, beta, 8)
        energies = jax.vmap(lambda s, beta=beta: hopfield_energy(s, patterns, beta))(iterates)
        assert jnp.all(jnp.diff(energies) <= 1e-4 * (1 + jnp.abs(energies[:-1])))
        assert jnp.all(energies >= -1e-4)


# -- 7. kernel regression -----------------------------------------------------------------------


def test_nadaraya_watson_is_attention_with_a_key_bias():
    inputs, targets, queries = normal(0, (12, 2)), normal(1, (12, 1)), normal(2, (5, 2))
    direct = nadaraya_watson(inputs, targets, queries, bandwidth=0.7)
    assert error(kernel_regression_attention(inputs, targets, queries, 0.7), direct) < 1e-5
    no_bias = kernel_regression_attention(inputs, targets, queries, 0.7, key_bias=False)
    assert error(no_bias, direct) > 0.1  # control: keys of unequal length need the bias
    # keys of equal length: plain attention
    circle = inputs / jnp.linalg.norm(inputs, axis=1, keepdims=True)
    assert (
        error(
            kernel_regression_attention(circle, targets, queries, 0.7, key_bias=False),
            nadaraya_watson(circle, targets, queries, 0.7),
        )
        < 1e-5
    )


def test_kernel_regression_limits():
    inputs, targets, queries = normal(0, (12, 2)), normal(1, (12, 1)), normal(2, (5, 2))
    wide = kernel_regression_attention(inputs, targets, queries, bandwidth=1e3)
    assert error(wide, jnp.broadcast_to(targets.mean(axis=0), wide.shape)) < 1e-4
    narrow = kernel_regression_attention(inputs, targets, queries, bandwidth=1e-2)
    nearest = jnp.argmin(jnp.sum((queries[:, None] - inputs[None]) ** 2, axis=-1), axis=1)
    assert error(narrow, targets[nearest]) < 1e-5
