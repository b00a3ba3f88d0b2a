"""Nadaraya–Watson kernel regression (Nadaraya, 1964; Watson, 1964) as dot-product attention.

The regression estimate at a query x is a kernel-weighted average of training targets y_i,

    f(x) = Σ_i K(x, x_i) y_i / Σ_j K(x, x_j),   K(x, x_i) = exp(-|x - x_i|² / (2σ²)).

Expanding the square, -|x - x_i|²/(2σ²) = x_iᵀ x / σ² - |x_i|²/(2σ²) - |x|²/(2σ²). The last
term is the same for every i and cancels in the ratio, so the weights are a softmax over i of
``k_iᵀ q + b_i`` with keys k_i = x_i, query q = x / σ² and a bias per key b_i = -|x_i|²/(2σ²).
When all keys have the same length the bias cancels too, and it is plain dot-product attention.
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float

from ..attention import attend, attention_weights

__all__ = ["gaussian_kernel", "kernel_regression_attention", "nadaraya_watson"]


def gaussian_kernel(
    inputs: Float[Array, "Nin D"],
    queries: Float[Array, "Nout D"],
    bandwidth: float | Float[Array, ""],
) -> Float[Array, "Nin Nout"]:
    """``K[i, n] = exp(-|q_n - x_i|² / (2σ²))``: 1 at distance 0, falling with distance."""
    squared_distances = jnp.sum((inputs[:, None, :] - queries[None, :, :]) ** 2, axis=-1)
    return jnp.exp(-squared_distances / (2 * bandwidth**2))


def nadaraya_watson(
    inputs: Float[Array, "Nin D"],
    targets: Float[Array, "Nin Dy"],
    queries: Float[Array, "Nout D"],
    bandwidth: float | Float[Array, ""],
) -> Float[Array, "Nout Dy"]:
    """The estimator as written: kernel weights, divided by their sum for each query."""
    kernel = gaussian_kernel(inputs, queries, bandwidth)
    return (kernel / kernel.sum(axis=0, keepdims=True)).T @ targets


def kernel_regression_attention(
    inputs: Float[Array, "Nin D"],
    targets: Float[Array, "Nin Dy"],
    queries: Float[Array, "Nout D"],
    bandwidth: float | Float[Array, ""],
    *,
    key_bias: bool = True,
) -> Float[Array, "Nout Dy"]:
    """The same estimate as attention: keys x_i, queries x / σ², a bias -|x_i|²/(2σ²) per key.

    ``key_bias=False`` leaves the bias out: still the estimator when all |x_i| are equal, not
    otherwise.
    """
    bias = -jnp.sum(inputs**2, axis=1, keepdims=True) / (2 * bandwidth**2) if key_bias else None
    weights = attention_weights(inputs, queries / bandwidth**2, bias=bias)
    return attend(targets, weights)
