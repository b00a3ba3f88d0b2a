"""Turning raw inputs into tokens.

A lookup table for discrete symbols, a linear map for continuous vectors, and image patches cut
and projected in one strided convolution.
"""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int, PRNGKeyArray

# Subword tokens live in their own module; they belong beside Vocabulary, so re-export them here.
from transformer_intro.bpe import GPT2_PATTERN, BytePairEncoding  # noqa: F401

__all__ = [
    "BytePairEncoding",
    "ContinuousTokeniser",
    "DiscreteTokeniser",
    "GPT2_PATTERN",
    "PatchTokeniser",
    "Vocabulary",
    "check_patch_size",
    "patchify",
]


class DiscreteTokeniser(eqx.Module):
    """``x_n = z_{s_n}``: a symbol id looks up its row of a learned table.

    Symbol ``s_n ∈ {0, ..., |V|-1}`` gives row ``s_n`` of a (|V|, D) table.
    """

    table: Float[Array, "vocab D"]

    def __init__(self, vocab_size: int, dim: int, *, key: PRNGKeyArray):
        """Draw the table from a standard normal.

        Args:
            vocab_size: |V|, the number of symbols.
            dim: D, the width of a token.
            key: a PRNG key.
        """
        self.table = jax.random.normal(key, (vocab_size, dim))

    def __call__(self, symbols: Int[ArrayLike, " N"]) -> Float[Array, "N D"]:
        """The N tokens of N symbol ids; an id outside 0, ..., |V|-1 is an error."""
        # JAX clamps out-of-range indices silently; a tokeniser should say so instead.
        symbols = eqx.error_if(
            symbols,
            (symbols < 0) | (symbols >= self.table.shape[0]),
            f"token id out of range for a vocabulary of {self.table.shape[0]} symbols",
        )
        return self.table[symbols]


class ContinuousTokeniser(eqx.Module):
    """``x_n = W s_n + b`` for continuous inputs ``s_n ∈ R^{D_s}``, one shared W (D x D_s)."""

    projection: eqx.nn.Linear

    def __init__(self, in_dim: int, dim: int, *, key: PRNGKeyArray):
        """Initialise W and b as :class:`equinox.nn.Linear` does.

        Args:
            in_dim: D_s, the width of an input vector.
            dim: D, the width of a token.
            key: a PRNG key.
        """
        self.projection = eqx.nn.Linear(in_dim, dim, key=key)

    def __call__(self, s: Float[Array, "N Ds"]) -> Float[Array, "N D"]:
        """The N tokens of N input vectors.

        Raises:
            ValueError: when ``s`` is not an (N, D_s) array.
        """
        if s.ndim != 2 or s.shape[1] != self.projection.in_features:
            raise ValueError(
                f"expected inputs of shape (N, {self.projection.in_features}), got {s.shape}"
            )
        return jax.vmap(self.projection)(s)


def check_patch_size(height: int, width: int, patch_size: int) -> None:
    """Check that square patches of side ``patch_size`` tile a ``height`` x ``width`` image.

    Raises:
        ValueError: when ``patch_size`` is not a positive divisor of both sides.
    """
    if patch_size < 1 or height % patch_size or width % patch_size:
        raise ValueError(
            f"patch size {patch_size} does not divide the {height}x{width} image; "
            f"choose a divisor of both sides (for 28x28 MNIST: 1, 2, 4, 7, 14 or 28)"
        )


def patchify(image: Float[Array, "C H W"], patch_size: int) -> Float[Array, "N Cpp"]:
    """Cut an image into non-overlapping P x P patches, row by row.

    Each patch is flattened in (C, P, P) order, so the result is (N, C P P) with
    N = (H / P)(W / P).
    """
    c, h, w = image.shape
    check_patch_size(h, w, patch_size)
    p = patch_size
    grid = image.reshape(c, h // p, p, w // p, p)
    return grid.transpose(1, 3, 0, 2, 4).reshape((h // p) * (w // p), c * p * p)


class PatchTokeniser(eqx.Module):
    """Image patches to tokens by a convolution whose stride equals its kernel size.

    Each output position of the convolution sees exactly one patch and applies the same D filters
    to it, so this is "cut into patches, then one shared linear map" done in one operation.
    """

    convolution: eqx.nn.Conv2d
    patch_size: int = eqx.field(static=True)

    def __init__(self, patch_size: int, channels: int, dim: int, *, key: PRNGKeyArray):
        """Initialise the D filters as :class:`equinox.nn.Conv2d` does.

        Args:
            patch_size: P, the side of a square patch in pixels.
            channels: the number of channels of an image.
            dim: D, the width of a token.
            key: a PRNG key.

        Raises:
            ValueError: when ``patch_size`` is not positive.
        """
        if patch_size < 1:
            raise ValueError(f"patch size must be positive, got {patch_size}")
        self.convolution = eqx.nn.Conv2d(
            channels, dim, kernel_size=patch_size, stride=patch_size, key=key
        )
        self.patch_size = patch_size

    def __call__(self, image: Float[Array, "C H W"]) -> Float[Array, "N D"]:
        """The N = (H / P)(W / P) tokens of one image, patches taken row by row.

        Raises:
            ValueError: when ``image`` is not (C, H, W) with this tokeniser's C, or P does not
                divide H and W.
        """
        if image.ndim != 3 or image.shape[0] != self.convolution.in_channels:
            raise ValueError(
                f"expected one image of shape (C={self.convolution.in_channels}, H, W),"
                f" got {image.shape}"
            )
        check_patch_size(image.shape[1], image.shape[2], self.patch_size)
        features = self.convolution(image)  # (D, H/p, W/p)
        return features.reshape(features.shape[0], -1).T

    def linear_map(self) -> tuple[Float[Array, "D Cpp"], Float[Array, " D"]]:
        """The convolution as the shared linear map of :func:`patchify`'d patches.

        Returns:
            The (D, C P P) weight and the (D,) bias.
        """
        weight = self.convolution.weight
        return weight.reshape(weight.shape[0], -1), self.convolution.bias.reshape(-1)


class Vocabulary:
    """The symbols a text may contain, each with an integer id.

    This is the lookup that comes before a :class:`DiscreteTokeniser`. Characters (or any hashable
    strings) in, ids out, and back.

    ``specials`` (for example a padding symbol and start/end markers) take the first ids, in the
    order given; the symbols follow in sorted order, so a vocabulary built from the same text is
    the same on every machine. An unknown symbol is an error that names it, never a silent guess.
    """

    def __init__(self, symbols, *, specials: tuple[str, ...] = ()):
        """Number the specials, then the distinct symbols in sorted order.

        Args:
            symbols: an iterable of symbols (a string gives its characters); repeats are dropped.
            specials: symbols that take the first ids, in this order.

        Raises:
            ValueError: when there is no symbol besides the specials.
        """
        symbols = sorted(set(symbols) - set(specials))
        if not symbols:
            raise ValueError("a vocabulary needs at least one symbol; the text given was empty")
        self.symbols: tuple[str, ...] = tuple(specials) + tuple(symbols)
        self.specials: tuple[str, ...] = tuple(specials)
        self._ids = {symbol: i for i, symbol in enumerate(self.symbols)}

    @classmethod
    def from_text(cls, text: str, *, specials: tuple[str, ...] = ()) -> Vocabulary:
        """Every distinct character of ``text``."""
        return cls(text, specials=specials)

    def __len__(self) -> int:
        return len(self.symbols)

    def __contains__(self, symbol: str) -> bool:
        return symbol in self._ids

    def id(self, symbol: str) -> int:
        """The id of one symbol.

        Raises:
            ValueError: when ``symbol`` is not in the vocabulary.
        """
        if symbol not in self._ids:
            raise ValueError(f"symbol {symbol!r} is not in the vocabulary of {len(self)} symbols")
        return self._ids[symbol]

    def encode(self, text) -> np.ndarray:
        """The ids of ``text``'s symbols, as an int32 array; raises naming every unknown symbol."""
        if len(text) == 0:
            raise ValueError("cannot encode an empty text")
        unknown = sorted({s for s in text if s not in self._ids})
        if unknown:
            first = next(i for i, s in enumerate(text) if s not in self._ids)
            raise ValueError(
                f"{len(unknown)} symbol(s) not in the vocabulary:"
                f" {', '.join(map(repr, unknown[:10]))}"
                f" (first at position {first})"
            )
        return np.fromiter((self._ids[s] for s in text), dtype=np.int32, count=len(text))

    def decode(self, ids, *, skip_specials: bool = False) -> str:
        """The text of a sequence of ids (ids out of range are an error)."""
        ids = np.asarray(ids).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= len(self)):
            raise ValueError(
                f"id out of range for a vocabulary of {len(self)} symbols: {ids.min()}..{ids.max()}"
            )
        skip = set(range(len(self.specials))) if skip_specials else set()
        return "".join(self.symbols[i] for i in ids.tolist() if i not in skip)

    def __repr__(self) -> str:
        return f"Vocabulary({len(self)} symbols, specials={self.specials})"
