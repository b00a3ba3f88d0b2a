"""Positional information: position embeddings, and rotary embeddings inside attention.

Learned and sinusoidal embeddings are added to the tokens or concatenated with them; rotary
embeddings rotate keys and queries, so that position enters attention itself.

Every layer of a transformer block is permutation equivariant, so without these a transformer
cannot tell "Chelsea beats Arsenal" from "Arsenal beats Chelsea".
"""

from __future__ import annotations

from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray

__all__ = ["PositionEmbedding", "half_to_interleaved", "rotate_pairs", "sinusoidal_embeddings"]


def sinusoidal_embeddings(
    num_positions: int, dim: int, *, base: float = 10_000.0
) -> Float[Array, "N P"]:
    """Vaswani et al. (2017): ``PE[n, 2i] = sin(n ω_i)``, ``PE[n, 2i+1] = cos(n ω_i)``.

    Here ``ω_i = base^(-2i/D)`` for i = 0, ..., D/2 - 1. The text writes only sines,
    ``[sin(ω_1 n), ..., sin(ω_D n)]``; pairing each sine with a cosine of the same frequency makes
    a shift in position a rotation of each pair, which is what lets a linear map read off
    relative positions.

    Args:
        num_positions: N, the number of positions n = 0, ..., N - 1.
        dim: D, the width of each embedding (the annotation's P); must be even.
        base: the base of the frequencies.

    Returns:
        The table PE, shape (N, D), one row per position.

    Raises:
        ValueError: if ``dim`` is odd.
    """
    if dim % 2:
        raise ValueError(f"sinusoidal embeddings need an even width, got {dim}")
    positions = jnp.arange(num_positions, dtype=jnp.float32)[:, None]
    frequencies = base ** (-jnp.arange(0, dim, 2, dtype=jnp.float32) / dim)
    angles = positions * frequencies  # (N, P/2)
    return jnp.stack([jnp.sin(angles), jnp.cos(angles)], axis=-1).reshape(num_positions, dim)


class PositionEmbedding(eqx.Module):
    """Adds or concatenates one embedding per position to a sequence of tokens.

    The table has one row per position, of width P here (the shapes' name for it); the tokens
    have width D.

    * ``kind="learned"``: a trainable (N, P) table (ViT, Dosovitskiy et al. 2021).
    * ``kind="sinusoidal"``: the fixed table of :func:`sinusoidal_embeddings`; no gradient
      reaches it.
    * ``combine="add"`` needs P = D and returns (N, D); ``"concat"`` returns (N, D + P), the
      text's ``x_n = tokenise_1(s_n) ⊙ tokenise_2(n)`` (⊙ is concatenation). Adding is
      concatenating followed by the fixed linear map ``[I I]``, so it is the cheaper special case.
    """

    embeddings: Float[Array, "N P"]
    kind: Literal["learned", "sinusoidal"] = eqx.field(static=True)
    combine: Literal["add", "concat"] = eqx.field(static=True)

    def __init__(
        self,
        num_positions: int,
        dim: int,
        *,
        kind: Literal["learned", "sinusoidal"] = "learned",
        combine: Literal["add", "concat"] = "add",
        init_scale: float = 0.02,
        key: PRNGKeyArray | None = None,
    ):
        """Build the table: drawn at random (learned) or computed (sinusoidal).

        Args:
            num_positions: the longest sequence the table covers.
            dim: P, the width of each position's embedding.
            kind: "learned" or "sinusoidal".
            combine: "add" or "concat".
            init_scale: the standard deviation of a learned table's initial entries.
            key: a PRNG key; needed for a learned table only.

        Raises:
            ValueError: if a learned table gets no key, or ``kind`` or ``combine`` names no known
                choice.
        """
        if kind == "learned":
            if key is None:
                raise ValueError("learned position embeddings need a PRNG key")
            self.embeddings = init_scale * jax.random.normal(key, (num_positions, dim))
        elif kind == "sinusoidal":
            self.embeddings = sinusoidal_embeddings(num_positions, dim)
        else:
            raise ValueError(f"kind must be 'learned' or 'sinusoidal', got {kind!r}")
        if combine not in ("add", "concat"):
            raise ValueError(f"combine must be 'add' or 'concat', got {combine!r}")
        self.kind = kind
        self.combine = combine

    def table(self) -> Float[Array, "N P"]:
        """The embeddings, with the gradient stopped when they are the fixed sinusoidal table."""
        return self.embeddings if self.kind == "learned" else jax.lax.stop_gradient(self.embeddings)

    def __call__(self, x: Float[Array, "N D"]) -> Float[Array, "N Dout"]:
        """The tokens with position n's embedding added to, or concatenated with, token n.

        Raises:
            ValueError: if the sequence is longer than the table, or the widths differ in "add".
        """
        n, d = x.shape
        if n > self.embeddings.shape[0]:
            raise ValueError(
                f"sequence of {n} tokens is longer than the "
                f"{self.embeddings.shape[0]} positions embedded"
            )
        table = self.table()[:n]
        if self.combine == "concat":
            return jnp.concatenate([x, table], axis=-1)
        if d != table.shape[1]:
            raise ValueError(
                f"cannot add position embeddings of width {table.shape[1]} to tokens of width {d}"
            )
        return x + table


def rotate_pairs(
    x: Float[Array, "... N K"],
    positions: Int[Array, " N"],
    *,
    base: float = 10_000.0,
    layout: Literal["interleaved", "half"] = "interleaved",
) -> Float[Array, "... N K"]:
    """Rotary position embedding (Su et al. 2024): rotate coordinate pair i of token n by n ω_i.

    For a key at position n' and a query at position n,
    ``R(n' ω)k · R(n ω)q = k · R((n - n') ω)q``: the score depends on the positions only through
    their difference. The frequencies are
    ``ω_i = base^(-2i/K)`` for i = 0, ..., K/2 - 1: a larger ``base`` makes the slowest pairs turn
    more slowly, so positions far apart stay distinguishable (Llama 3 and SmolLM2 use 500,000 and
    100,000 where the original used 10,000).

    Which coordinates form pair i is a convention. ``layout="interleaved"`` (Su et al., and the
    GGUF files of llama.cpp) pairs ``(2i, 2i+1)``; ``layout="half"`` (Hugging Face's Llama) pairs
    ``(i, i + K/2)``. The two are the same rotation after permuting the K coordinates, and since
    keys and queries are permuted alike, their dot products, and so the attention, are equal: a
    checkpoint's ``U_q`` and ``U_k`` rows are stored in the order its layout expects.

    Args:
        x: keys or queries of width K (even), any leading axes, tokens on the second-to-last.
        positions: the position of each of the N tokens.
        base: the base of the frequencies.
        layout: "interleaved" or "half", as above.

    Raises:
        ValueError: if K is odd or ``layout`` names no known choice.
    """
    k = x.shape[-1]
    if k % 2:
        raise ValueError(f"rotary embeddings need an even width, got {k}")
    if layout not in ("interleaved", "half"):
        raise ValueError(f"layout must be 'interleaved' or 'half', got {layout!r}")
    frequencies = base ** (-jnp.arange(0, k, 2, dtype=jnp.float32) / k)
    angles = positions[:, None].astype(jnp.float32) * frequencies  # (N, K/2)
    cos, sin = jnp.cos(angles), jnp.sin(angles)
    if layout == "half":
        first, second = x[..., : k // 2], x[..., k // 2 :]
        return jnp.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)
    pairs = x.reshape(*x.shape[:-1], k // 2, 2)
    even, odd = pairs[..., 0], pairs[..., 1]
    rotated = jnp.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1)
    return rotated.reshape(x.shape)


def half_to_interleaved(k: int) -> Int[Array, " K"]:
    """The permutation p with ``x_interleaved = x_half[p]``: coordinate 2i is i, 2i+1 is i + K/2.

    Raises:
        ValueError: if K is odd.
    """
    if k % 2:
        raise ValueError(f"rotary embeddings need an even width, got {k}")
    return jnp.stack([jnp.arange(k // 2), jnp.arange(k // 2) + k // 2], axis=-1).reshape(k)
