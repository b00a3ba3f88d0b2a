"""Each token normalised on its own: LayerNorm, and RMSNorm, its centring-free special case."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

__all__ = ["LayerNorm", "RMSNorm"]


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
        """Unit gain γ and zero shift β, so that the layer starts as plain normalisation.

        Args:
            dim: D, the width of a token.
            eps: added to the variance inside the square root.
        """
        self.weight = jnp.ones(dim)
        self.bias = jnp.zeros(dim)
        self.eps = eps

    def __call__(self, x: Float[ArrayLike, "... D"]) -> Float[Array, "... D"]:
        """Normalise every token (the last axis), each on its own.

        Raises:
            ValueError: if the last axis is not D wide.
        """
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError(
                f"LayerNorm of width {self.weight.shape[0]} got input of shape {x.shape}"
            )
        mean = x.mean(-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(variance + self.eps) * self.weight + self.bias


class RMSNorm(eqx.Module):
    r"""``x̄_d = x_d / ρ(x) · γ_d``, ``ρ(x) = sqrt(mean_d x_d² + eps)`` (Zhang and Sennrich 2019).

    Derivation from :class:`LayerNorm`: drop the centring (μ = 0) and the shift (β = 0). The
    variance about zero is then the mean square, so σ becomes the root mean square ρ. What is
    kept is the re-scaling, which makes the output independent of the token's overall scale
    (``RMSNorm(c x) = RMSNorm(x)`` for c > 0, up to ``eps``); what is lost is invariance to adding
    a constant to every feature. On a token whose features already have zero mean the two
    normalisations agree exactly, and RMSNorm costs one reduction instead of two. Llama-family
    models use it before attention, before the MLP and, per head, on keys and queries (QK-norm).
    """

    weight: Float[Array, " D"]
    eps: float = eqx.field(static=True)

    def __init__(self, dim: int, *, eps: float = 1e-6):
        """Unit gain γ over ``dim`` = D features.

        Args:
            dim: D, the width of a token (K when it normalises keys or queries).
            eps: added to the mean square inside the square root.
        """
        self.weight = jnp.ones(dim)
        self.eps = eps

    def __call__(self, x: Float[ArrayLike, "... D"]) -> Float[Array, "... D"]:
        """Normalise every token (the last axis), each on its own.

        Raises:
            ValueError: if the last axis is not D wide.
        """
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError(
                f"RMSNorm of width {self.weight.shape[0]} got input of shape {x.shape}"
            )
        mean_square = (x * x).mean(-1, keepdims=True)
        return x * jax.lax.rsqrt(mean_square + self.eps) * self.weight
