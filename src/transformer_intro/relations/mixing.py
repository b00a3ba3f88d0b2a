"""Token mixing without content: the Random Synthesizer, MLP-Mixer and FNet.

Tay et al., 2021; Tolstikhin et al., 2021; Lee-Thorp et al., 2022.

With zero key and query projections every score is zero, and a learned score bias Ψ is all that
is left: ``A = softmax_{n'}(Ψ)`` is one fixed mixing matrix, the same for every input. Such a head
mixes tokens the way a Mixer's token-mixing layer does, with one restriction: softmax(Ψ) is
positive with columns summing to one, and every such matrix Λ is softmax(log Λ). FNet replaces
attention by the real part of a two-dimensional discrete Fourier transform, a fixed *linear* map
``X ↦ Re(𝓕_D X 𝓕_N)``; attention with content is not linear in X.
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float

__all__ = ["fourier_matrices", "fourier_mixing", "mixing_bias"]


def mixing_bias(mixing: Float[Array, "N N"], *, atol: float = 1e-5) -> Float[Array, "N N"]:
    """The score bias Ψ with ``softmax_{n'}(Ψ) = Λ``: ``Ψ = log Λ``, for the mixing matrix Λ.

    Raises ValueError when no single content-free head can express Λ: it has an entry that is
    not positive, or a column that does not sum to one.
    """
    if mixing.ndim != 2 or mixing.shape[0] != mixing.shape[1]:
        raise ValueError(f"a token-mixing matrix is N x N, got shape {mixing.shape}")
    if not bool(jnp.all(mixing > 0)):
        raise ValueError(
            "a softmax is positive: a mixing matrix with an entry <= 0 is not the softmax "
            "of any score bias"
        )
    column_sums = mixing.sum(axis=0)
    if not bool(jnp.allclose(column_sums, 1.0, atol=atol)):
        raise ValueError(
            f"softmax columns sum to one; this matrix's column sums range from "
            f"{float(column_sums.min()):.3g} to {float(column_sums.max()):.3g}"
        )
    return jnp.log(mixing)


def fourier_matrices(size: int) -> tuple[Float[Array, "S S"], Float[Array, "S S"]]:
    """Real and imaginary parts of the DFT matrix 𝓕 of a size.

    ``𝓕[j, j'] = e^{-2πi jj'/size} = cos(2π jj'/size) - i sin(2π jj'/size)``; returns the
    cosines and the sines.
    """
    index = jnp.arange(size)
    angles = 2 * jnp.pi * jnp.outer(index, index) / size
    return jnp.cos(angles), jnp.sin(angles)


def fourier_mixing(x: Float[Array, "N D"]) -> Float[Array, "N D"]:
    """FNet's mixing ``Re(𝓕_N x 𝓕_D) = cos_N x cos_D - sin_N x sin_D`` of the rows x.

    The rows x are the maths' Xᵀ; the cosines and sines are those of :func:`fourier_matrices`.
    Written as two real matrix products.
    """
    cos_n, sin_n = fourier_matrices(x.shape[0])
    cos_d, sin_d = fourier_matrices(x.shape[1])
    return cos_n @ x @ cos_d - sin_n @ x @ sin_d
