"""Convolution as multi-head self-attention (Cordonnier, Loukas & Jaggi, 2020).

A convolution with an r x r window reads, for every pixel p, the r² neighbours p + Δ and applies one
weight matrix W_Δ to each. Attention can do the same with one content-blind head per offset Δ_h:
its keys and queries are zero and its score is a quadratic bias in the relative position
δ = p_n' - p_n of input n' and output n,

    Ψ_h[n', n] = -α (|δ|² - 2 Δ_hᵀ δ) = -α |δ - Δ_h|² + α |Δ_h|²,

so column n of A_h = softmax_{n'}(Ψ_h) peaks at the input p_n + Δ_h and all other inputs get weight
at most about e^{-α} of it. With value maps V_h = W_{Δ_h}, ``Y = Σ_h V_h X A_h`` tends to the
convolution as α grows. Zero tokens around the image (padding) give a "same"-size output.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..attention import attend, attention_weights

__all__ = [
    "convolution",
    "convolution_as_attention",
    "grid_positions",
    "kernel_offsets",
    "quadratic_position_bias",
]


def grid_positions(shape: tuple[int, ...]) -> Float[Array, "N d"]:
    """Integer coordinates of every cell of a grid, one row per cell, in row-major order."""
    axes = jnp.meshgrid(*[jnp.arange(size) for size in shape], indexing="ij")
    return jnp.stack([axis.ravel() for axis in axes], axis=-1).astype(jnp.float32)


def kernel_offsets(window: tuple[int, ...]) -> Float[Array, "H d"]:
    """The offset Δ_h of every entry of a centred window, in the row-major order of the kernel."""
    if any(size % 2 == 0 for size in window):
        raise ValueError(f"the window must have odd sizes to have a centre, got {window}")
    return grid_positions(window) - jnp.array([(size - 1) // 2 for size in window])


def quadratic_position_bias(
    key_positions: Float[Array, "Nin d"],
    query_positions: Float[Array, "Nout d"],
    offset: Float[Array, " d"],
    alpha: float | Float[Array, ""],
) -> Float[Array, "Nin Nout"]:
    """``Ψ[n', n] = -α (|δ|² - 2 Δᵀ δ)`` with ``δ = p_n' - p_n``: a score peaked at ``p_n + Δ``."""
    delta = key_positions[:, None, :] - query_positions[None, :, :]
    return -alpha * (jnp.sum(delta**2, axis=-1) - 2 * delta @ offset)


def convolution_as_attention(
    x: Float[Array, "*spatial Cin"],
    kernel: Float[Array, "*window Cout Cin"],
    alpha: float | Float[Array, ""],
    *,
    offsets: Float[Array, "H d"] | None = None,
) -> Float[Array, "*spatial Cout"]:
    """Multi-head self-attention with one content-blind head per kernel entry.

    Args:
        x: a signal on a grid of any dimension (a sequence (N, C) or an image (H, W, C)), with its
            channels last.
        kernel: one (Cout, Cin) matrix per window entry, window sizes odd.
        alpha: sharpness of the quadratic position score; the convolution is the limit α → ∞.
        offsets: the Δ_h of the heads, one per kernel entry in row-major order. Defaults to
            :func:`kernel_offsets`, which is what the convolution needs; anything else puts the
            kernel's weights at the wrong places.

    Returns:
        the outputs of the real (unpadded) tokens, on the grid of x.
    """
    spatial, window = x.shape[:-1], kernel.shape[:-2]
    if len(spatial) != len(window) or kernel.shape[-1] != x.shape[-1]:
        raise ValueError(
            f"kernel {kernel.shape} must have a window of the same dimension as the grid of x "
            f"{x.shape} and Cin = {x.shape[-1]} input channels"
        )
    if offsets is None:
        offsets = kernel_offsets(window)
    margins = [(size - 1) // 2 for size in window]
    padded = jnp.pad(x, [(m, m) for m in margins] + [(0, 0)])
    tokens = padded.reshape(-1, x.shape[-1])  # zero tokens included: they are inputs only
    key_positions = grid_positions(padded.shape[:-1]) - jnp.array(margins)
    query_positions = grid_positions(spatial)
    value_maps = kernel.reshape(-1, *kernel.shape[-2:])  # V_h = W_{Δ_h}, (H, Cout, Cin)
    # Content-blind: keys and queries are zero, the score is the position bias alone.
    blind_keys = jnp.zeros((tokens.shape[0], 1))
    blind_queries = jnp.zeros((query_positions.shape[0], 1))

    def head(offset, value_map):
        bias = quadratic_position_bias(key_positions, query_positions, offset, alpha)
        weights = attention_weights(blind_keys, blind_queries, bias=bias)  # (Nin, Nout)
        return attend(tokens @ value_map.T, weights)

    outputs = jax.vmap(head)(offsets, value_maps).sum(axis=0)
    return outputs.reshape(*spatial, kernel.shape[-2])


def convolution(
    x: Float[Array, "*spatial Cin"], kernel: Float[Array, "*window Cout Cin"]
) -> Float[Array, "*spatial Cout"]:
    """The same-size, zero-padded convolution of deep learning (a cross-correlation), by XLA."""
    dims = x.ndim - 1
    lhs = jnp.moveaxis(x, -1, 0)[None]  # (1, Cin, *spatial)
    rhs = jnp.moveaxis(kernel, (-2, -1), (0, 1))  # (Cout, Cin, *window)
    out = jax.lax.conv_general_dilated(lhs, rhs, window_strides=(1,) * dims, padding="SAME")
    return jnp.moveaxis(out[0], 0, -1)
