"""LayerNorm: each token normalised on its own, then scaled and shifted."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float


class LayerNorm(eqx.Module):
    """``x̄_d = (x_d - μ(x)) / σ(x) · γ_d + β_d`` for one token x (Ba et al. 2016).

    μ and σ are the mean and standard deviation over the D features of that token only (σ with a
    small ``eps`` inside the square root), so no statistic is shared between tokens or examples.
    Matches ``equinox.nn.LayerNorm``.
    """

    weight: Float[Array, " D"]
    bias: Float[Array, " D"]
    eps: float = eqx.field(static=True)

    def __init__(self, dim: int, *, eps: float = 1e-5):
        self.weight = jnp.ones(dim)
        self.bias = jnp.zeros(dim)
        self.eps = eps

    def __call__(self, x: Float[Array, "... D"]) -> Float[Array, "... D"]:
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError(
                f"LayerNorm of width {self.weight.shape[0]} got input of shape {x.shape}"
            )
        mean = x.mean(-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(variance + self.eps) * self.weight + self.bias
