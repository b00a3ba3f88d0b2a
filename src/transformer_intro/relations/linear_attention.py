"""Linear attention as a recurrent network, and its gated form.

Linear attention: Katharopoulos et al., 2020; the gated form and state-space duality: Dao & Gu,
2024.

Causal linear attention replaces exp(k_n'ᵀ q_n) by φ(k_n')ᵀ φ(q_n) with a positive feature map φ:

    y_n = Σ_{n'≤n} v_n' φ(k_n')ᵀ φ(q_n) / Σ_{n'≤n} φ(k_n')ᵀ φ(q_n) = S_nᵀ φ(q_n) / z_nᵀ φ(q_n),
    S_n = S_{n-1} + φ(k_n) v_nᵀ,   z_n = z_{n-1} + φ(k_n),

a recurrence with a fixed-size state (S_n, z_n). With a decay a_n ∈ (0, 1] in the state update,
S_n = a_n S_{n-1} + k_n v_nᵀ and y_n = S_nᵀ q_n, the same outputs are a masked attention
``y_n = Σ_n' L[n', n] (k_n'ᵀ q_n) v_n'`` with ``L[n', n] = Π_{r=n'+1}^{n} a_r`` for n' ≤ n.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from ..attention import attend, causal_mask

__all__ = [
    "decay_mask",
    "elu_plus_one",
    "gated_linear_recurrence",
    "linear_attention",
    "linear_attention_recurrence",
    "linear_attention_weights",
    "masked_linear_attention",
]


def elu_plus_one(x: Array) -> Array:
    """The feature map of Katharopoulos et al., positive everywhere: elu(x) + 1."""
    return jax.nn.elu(x) + 1


def linear_attention_weights(
    keys: Float[Array, "N K"],
    queries: Float[Array, "N K"],
    *,
    causal: bool = True,
    feature_map: Callable = elu_plus_one,
) -> Float[Array, "N N"]:
    """Column-normalised ``A[n', n] ∝ φ(k_n')ᵀ φ(q_n)``, restricted to n' ≤ n when causal."""
    similarities = feature_map(keys) @ feature_map(queries).T
    if causal:
        similarities = jnp.where(causal_mask(keys.shape[0]), similarities, 0.0)
    return similarities / similarities.sum(axis=0, keepdims=True)


def linear_attention(
    keys: Float[Array, "N K"],
    queries: Float[Array, "N K"],
    values: Float[Array, "N Dv"],
    *,
    causal: bool = True,
    feature_map: Callable = elu_plus_one,
) -> Float[Array, "N Dv"]:
    """The parallel form: build the N x N matrix, then average the values with it."""
    weights = linear_attention_weights(keys, queries, causal=causal, feature_map=feature_map)
    return attend(values, weights)


def linear_attention_recurrence(
    keys: Float[Array, "N K"],
    queries: Float[Array, "N K"],
    values: Float[Array, "N Dv"],
    *,
    feature_map: Callable = elu_plus_one,
) -> Float[Array, "N Dv"]:
    """The recurrent form: a K x Dv state S and a K-vector z, updated once per token."""

    def step(state, token):
        memory, normaliser = state
        key, query, value = token
        memory = memory + jnp.outer(key, value)
        normaliser = normaliser + key
        return (memory, normaliser), memory.T @ query / (normaliser @ query)

    features_k, features_q = feature_map(keys), feature_map(queries)
    initial = (jnp.zeros((keys.shape[1], values.shape[1])), jnp.zeros(keys.shape[1]))
    _, outputs = jax.lax.scan(step, initial, (features_k, features_q, values))
    return outputs


def decay_mask(decays: Float[Array, " N"]) -> Float[Array, "N N"]:
    """``L[n', n] = Π_{r=n'+1}^{n} a_r`` for n' ≤ n and 0 above: the mask of state-space duality.

    All decays 1 give the causal mask; a constant γ gives ``γ^(n - n')`` (retention). The decays
    must lie in (0, 1].
    """
    if decays.ndim != 1:
        raise ValueError(f"decays must be one number per token, shape (N,), got {decays.shape}")
    allowed = causal_mask(decays.shape[0])
    log_products = jnp.cumsum(jnp.log(decays))  # Σ_{r ≤ n} log a_r
    exponents = log_products[None, :] - log_products[:, None]  # [n', n] = Σ_{n' < r ≤ n}
    return jnp.where(allowed, jnp.exp(jnp.where(allowed, exponents, 0.0)), 0.0)


def masked_linear_attention(
    keys: Float[Array, "N K"],
    queries: Float[Array, "N K"],
    values: Float[Array, "N Dv"],
    mask: Float[Array, "N N"] | Bool[Array, "N N"],
) -> Float[Array, "N Dv"]:
    """``y_n = Σ_n' L[n', n] (k_n'ᵀ q_n) v_n'``: unnormalised attention weighted by a mask L."""
    return attend(values, mask * (keys @ queries.T))


def gated_linear_recurrence(
    keys: Float[Array, "N K"],
    queries: Float[Array, "N K"],
    values: Float[Array, "N Dv"],
    decays: Float[Array, " N"],
) -> Float[Array, "N Dv"]:
    """``S_n = a_n S_{n-1} + k_n v_nᵀ``, ``y_n = S_nᵀ q_n``: a linear state-space recurrence."""

    def step(memory, token):
        key, query, value, decay = token
        memory = decay * memory + jnp.outer(key, value)
        return memory, memory.T @ query

    initial = jnp.zeros((keys.shape[1], values.shape[1]))
    _, outputs = jax.lax.scan(step, initial, (keys, queries, values, decays))
    return outputs
