"""Softmax attention read as a recurrence.

The key-value cache, the online softmax (Milakov & Gimelshein, 2018), and attention as a
fast-weight memory (Schlag, Irie & Schmidhuber, 2021).

Causal softmax attention has no fixed-size state: generating token n needs every earlier key and
value, the *key-value cache*, which grows by one row per token. The cache here is the attention
layer's own (``MultiHeadAttention.empty_cache`` and ``extend``), read through one head whose
weights pass keys, queries and values through unchanged. What can be streamed is the other
direction, the keys: for one query, the softmax-weighted sum over keys is a scan with a running
maximum m, a running normaliser l and a running weighted sum o,

    m_j = max(m_{j-1}, s_j),   l_j = l_{j-1} e^{m_{j-1} - m_j} + e^{s_j - m_j},
    o_j = o_{j-1} e^{m_{j-1} - m_j} + e^{s_j - m_j} v_j,      y = o_N / l_N.

Linear attention without the normaliser is a memory matrix W written with the *sum rule*
W_n = W_{n-1} + v_n k_nᵀ and read with y_n = W_n q_n; the *delta rule*
W_n = W_{n-1} + β_n (v_n - W_{n-1} k_n) k_nᵀ first removes what the key already retrieves.
"""

from __future__ import annotations

from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..attention import MultiHeadAttention

__all__ = [
    "fast_weight_memory",
    "kv_cache_attention",
    "kv_cache_layer",
    "online_softmax_attention",
]


def kv_cache_layer(key_dim: int, value_dim: int) -> MultiHeadAttention:
    """The package's attention layer with one head that reads ``k``, ``q``, ``v`` out of a token.

    The token is ``x = [k; q; v]``, of width ``2 K + Dv``.

    ``U_k = [I 0 0]``, ``U_q = [0 I 0]``, ``W = [0 0 I]`` and ``O = [0; 0; I]``, unscaled scores:
    the layer's output for a token is ``[0; 0; y]``, with ``y`` the attention output over the
    values. It lets raw keys, queries and values go through the layer's own key-value cache
    (:meth:`~transformer_intro.attention.MultiHeadAttention.empty_cache` and ``extend``).
    """
    width = 2 * key_dim + value_dim
    layer = MultiHeadAttention(
        width, 1, head_dim=key_dim, value_dim=value_dim, scaled=False, key=jax.random.PRNGKey(0)
    )
    columns = jnp.eye(width)
    keys, queries, values = (
        columns[:key_dim],
        columns[key_dim : 2 * key_dim],
        columns[2 * key_dim :],
    )
    return eqx.tree_at(
        lambda m: (
            m.key_projections,
            m.query_projections,
            m.value_projections,
            m.output_projections,
        ),
        layer,
        (keys[None], queries[None], values[None], values.T[None]),
    )


def kv_cache_attention(
    keys: Float[Array, "N K"], queries: Float[Array, "N K"], values: Float[Array, "N Dv"]
) -> Float[Array, "N Dv"]:
    """Causal softmax attention computed one token at a time, as a decoder generates.

    The state of the recurrence is the attention layer's key-value cache: step n writes ``k_n,
    v_n`` into it with :meth:`~transformer_intro.attention.MultiHeadAttention.extend` and lets
    ``q_n`` attend to the n + 1 cached tokens. The cache is allocated at its final size N by
    ``empty_cache`` (shapes in a ``jax.lax.scan`` must not change) and ``extend`` masks the rows
    not yet written. The layer is :func:`kv_cache_layer`, so no projection changes the inputs.
    """
    if keys.ndim != 2 or keys.shape != queries.shape or values.shape[0] != keys.shape[0]:
        raise ValueError(
            "keys and queries must be (N, K) arrays of one shape and values (N, Dv), got "
            f"{keys.shape}, {queries.shape} and {values.shape}"
        )
    num_tokens, key_dim = keys.shape
    layer = kv_cache_layer(key_dim, values.shape[1])
    tokens = jnp.concatenate([keys, queries, values], axis=1)  # x_n = [k_n; q_n; v_n]

    def step(cache, token):
        n, x = token
        y, cache = layer.extend(x[None], cache, n)
        return cache, y[0, 2 * key_dim :]

    initial = layer.empty_cache(num_tokens, dtype=tokens.dtype)
    _, outputs = jax.lax.scan(step, initial, (jnp.arange(num_tokens), tokens))
    return outputs


def online_softmax_attention(
    keys: Float[Array, "Nin K"],
    queries: Float[Array, "Nout K"],
    values: Float[Array, "Nin Dv"],
    *,
    rescale: bool = True,
) -> Float[Array, "Nout Dv"]:
    """``attend(values, attention_weights(keys, queries))`` with the keys streamed one at a time.

    ``rescale=False`` forgets to rescale the running sums when the maximum changes: it is the
    deliberate mistake the tests and the book use as a negative control.
    """

    def step(state, token):
        running_max, normaliser, weighted_sum = state  # (Nout,), (Nout,), (Nout, Dv)
        key, value = token
        scores = queries @ key  # s_j for every query
        new_max = jnp.maximum(running_max, scores)
        correction = jnp.exp(running_max - new_max) if rescale else jnp.ones_like(scores)
        weight = jnp.exp(scores - new_max)
        normaliser = normaliser * correction + weight
        weighted_sum = weighted_sum * correction[:, None] + weight[:, None] * value
        return (new_max, normaliser, weighted_sum), None

    num_queries = queries.shape[0]
    initial = (
        jnp.full(num_queries, -jnp.inf),
        jnp.zeros(num_queries),
        jnp.zeros((num_queries, values.shape[1])),
    )
    (_, normaliser, weighted_sum), _ = jax.lax.scan(step, initial, (keys, values))
    return weighted_sum / normaliser[:, None]


def fast_weight_memory(
    keys: Float[Array, "N K"],
    queries: Float[Array, "N K"],
    values: Float[Array, "N Dv"],
    *,
    rule: Literal["sum", "delta"] = "sum",
    learning_rates: Float[Array, " N"] | None = None,
) -> tuple[Float[Array, "N Dv"], Float[Array, "Dv K"]]:
    """Write ``v_n`` under ``k_n`` into a Dv x K memory W, then read it with ``q_n``.

    Returns the reads ``y_n = W_n q_n`` after every write and the final memory. With the sum rule
    the reads are unnormalised causal linear attention; the delta rule (learning rates β_n,
    default 1) overwrites what a repeated key stored before.
    """
    if rule not in ("sum", "delta"):
        raise ValueError(f"rule must be 'sum' or 'delta', got {rule!r}")
    if learning_rates is None:
        learning_rates = jnp.ones(keys.shape[0])

    def step(memory, token):
        key, query, value, rate = token
        if rule == "sum":
            memory = memory + jnp.outer(value, key)
        else:
            memory = memory + rate * jnp.outer(value - memory @ key, key)
        return memory, memory @ query

    initial = jnp.zeros((values.shape[1], keys.shape[1]))
    memory, reads = jax.lax.scan(step, initial, (keys, queries, values, learning_rates))
    return reads, memory
