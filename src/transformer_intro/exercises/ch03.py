"""Chapter 3 (multi-head self-attention): heads as blocks of columns, V_h = O_h W_h, the layer."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..attention import MultiHeadAttention
from .core import Case, Diagnosis, Exercise


def _split_cases():
    rng = np.random.default_rng(7)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    return [
        Case("N = 5, H = 2, K = 3", (n(5, 6), 2)),
        Case("N = 4, H = 3, K = 2", (n(4, 6), 3)),
        Case("one head, N = 3, K = 4", (n(3, 4), 1)),
    ]


SPLIT_HEADS = Exercise(
    name="split_heads",
    chapter=3,
    title="Keys or queries of all heads cut into one array per head",
    reference=lambda x, num_heads: x.reshape(x.shape[0], num_heads, -1).transpose(1, 0, 2),
    cases=_split_cases,
    output="(H, N, K)",
    diagnoses=(
        Diagnosis.like(
            "reshape_only",
            "reshaped straight to (H, N, K): that mixes tokens and heads; reshape to (N, H, K) "
            "first, then move the head axis to the front",
            lambda x, num_heads: x.reshape(num_heads, x.shape[0], -1),
        ),
        Diagnosis.like(
            "strided_heads",
            "each head took every H-th column: head h owns the K consecutive columns "
            "h K, ..., (h + 1) K - 1",
            lambda x, num_heads: x.reshape(x.shape[0], -1, num_heads).transpose(2, 0, 1),
        ),
        Diagnosis.like(
            "tokens_first",
            "the head axis is not first: return (H, N, K), one (N, K) array per head",
            lambda x, num_heads: x.reshape(x.shape[0], num_heads, -1),
        ),
    ),
)


def _layer(U_q, U_k, W, O):
    H, K, D = U_q.shape
    layer = MultiHeadAttention(D, H, K, W.shape[1], key=jax.random.PRNGKey(0))
    return eqx.tree_at(
        lambda m: (m.query_projections, m.key_projections, m.value_projections,
                   m.output_projections),
        layer, (jnp.asarray(U_q), jnp.asarray(U_k), jnp.asarray(W), jnp.asarray(O)),
    )  # fmt: skip


def _value_map_cases():
    rng = np.random.default_rng(8)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    return [
        Case("H = 2, D = 4, D_v = 2", (n(2, 2, 4), n(2, 4, 2))),
        Case("H = 3, D = 3, D_v = 3", (n(3, 3, 3), n(3, 3, 3))),
    ]


VALUE_MAPS = Exercise(
    name="value_maps",
    chapter=3,
    title="Every head's value map V_h = O_h W_h",
    reference=lambda W, O: _layer(
        np.zeros((W.shape[0], 1, W.shape[2]), np.float32),
        np.zeros((W.shape[0], 1, W.shape[2]), np.float32),
        W,
        O,
    ).value_maps(),  # fmt: skip
    cases=_value_map_cases,
    output="(H, D, D)",
    diagnoses=(
        Diagnosis.like(
            "transposed_maps",
            "each V_h is transposed: V_h = O_h W_h maps a token x to O_h (W_h x)",
            lambda W, O: jnp.swapaxes(O @ W, 1, 2),
        ),
        Diagnosis.like(
            "summed_heads",
            "the heads are added into one map: return one V_h per head, shape (H, D, D)",
            lambda W, O: (O @ W).sum(0),
        ),
        Diagnosis.like(
            "W_then_O",
            "you multiplied W_h O_h: the value projection W_h acts first, so V_h = O_h W_h",
            lambda W, O: W @ O,
        ),
    ),
)


def _mhsa_cases():
    rng = np.random.default_rng(9)
    n = lambda *shape: (rng.normal(size=shape) / np.sqrt(shape[-1])).astype(np.float32)
    return [
        Case("N = 5, D = 4, H = 2, K = 2, D_v = 2",
             (2 * n(5, 4), n(2, 2, 4), n(2, 2, 4), n(2, 2, 4), n(2, 4, 2))),
        Case("N = 3, D = 6, H = 3, K = 4, D_v = 2",
             (2 * n(3, 6), n(3, 4, 6), n(3, 4, 6), n(3, 2, 6), n(3, 6, 2))),
    ]  # fmt: skip


def _mhsa(x, U_q, U_k, W, O):
    return _layer(U_q, U_k, W, O)(jnp.asarray(x))


def _variant(**options):
    def layer(x, U_q, U_k, W, O):
        H, K, D = U_q.shape
        m = MultiHeadAttention(D, H, K, W.shape[1], key=jax.random.PRNGKey(0), **options)
        m = eqx.tree_at(
            lambda m: (m.query_projections, m.key_projections, m.value_projections,
                       m.output_projections),
            m, (jnp.asarray(U_q), jnp.asarray(U_k), jnp.asarray(W), jnp.asarray(O)),
        )  # fmt: skip
        return m(jnp.asarray(x))

    return layer


def _over_queries(x, U_q, U_k, W, O):
    y = 0
    for h in range(U_q.shape[0]):
        scores = (x @ U_k[h].T) @ (x @ U_q[h].T).T / jnp.sqrt(U_q.shape[1])
        y = y + jax.nn.softmax(scores, axis=1).T @ x @ (O[h] @ W[h]).T
    return y


MULTI_HEAD_SELF_ATTENTION = Exercise(
    name="multi_head_self_attention",
    chapter=3,
    title="Multi-head self-attention, Y = sum_h V_h X A_h",
    reference=_mhsa,
    cases=_mhsa_cases,
    output="(N, D)",
    diagnoses=(
        Diagnosis.like(
            "mean_of_heads",
            "the heads are averaged: the layer adds them, Y = sum_h V_h X A_h",
            _variant(combine_heads="mean"),
        ),
        Diagnosis.like(
            "unscaled",
            "no 1/sqrt(K) scale: divide every head's scores by sqrt(K)",
            _variant(scaled=False),
        ),
        Diagnosis.like(
            "over_queries",
            "the weights sum over queries, not keys: each head's softmax runs down the "
            "columns (axis 0, over the inputs n')",
            _over_queries,
        ),
    ),
)

EXERCISES = [SPLIT_HEADS, VALUE_MAPS, MULTI_HEAD_SELF_ATTENTION]
