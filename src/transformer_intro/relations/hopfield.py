"""Modern Hopfield networks (Ramsauer et al., 2021): the attention update is their update rule.

Store N patterns as the rows of an (N, D) array X (columns x_n of the maths' D x N array). A state
ξ is updated by

    ξ ← X softmax(β Xᵀ ξ)            (maths: patterns as columns)

which is attention with keys and values X and one query β ξ. The update never raises the energy

    E(ξ) = -β⁻¹ log Σ_n exp(β x_nᵀ ξ) + ½ ξᵀ ξ + β⁻¹ log N + ½ ρ²,   ρ = max_n |x_n|,

and for well-separated patterns one step from near a pattern lands on it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..attention import attend, attention_weights

__all__ = ["attention_update", "hopfield_energy", "hopfield_iterates", "hopfield_update"]


def hopfield_energy(
    state: Float[Array, " D"], patterns: Float[Array, "N D"], beta: float
) -> Float[Array, ""]:
    """Ramsauer et al.'s energy of state ξ, bounded below by 0."""
    largest_norm = jnp.max(jnp.linalg.norm(patterns, axis=1))
    separation = jax.nn.logsumexp(beta * patterns @ state) / beta
    return (
        -separation
        + 0.5 * state @ state
        + jnp.log(patterns.shape[0]) / beta
        + 0.5 * largest_norm**2
    )


def hopfield_update(
    state: Float[Array, " D"], patterns: Float[Array, "N D"], beta: float
) -> Float[Array, " D"]:
    """One step of the update rule, ``ξ ← X softmax(β Xᵀ ξ)``, written out."""
    probabilities = jax.nn.softmax(beta * patterns @ state)
    return patterns.T @ probabilities


def attention_update(
    states: Float[Array, "Q D"], patterns: Float[Array, "N D"], beta: float
) -> Float[Array, "Q D"]:
    """The package's attention with keys = values = the patterns and queries β ξ, for Q states."""
    return attend(patterns, attention_weights(patterns, beta * states))


def hopfield_iterates(
    state: Float[Array, " D"], patterns: Float[Array, "N D"], beta: float, steps: int
) -> Float[Array, "{steps}+1 D"]:
    """The state and its first ``steps`` updates."""

    def step(current, _):
        following = hopfield_update(current, patterns, beta)
        return following, following

    _, later = jax.lax.scan(step, state, None, length=steps)
    return jnp.concatenate([state[None], later])
