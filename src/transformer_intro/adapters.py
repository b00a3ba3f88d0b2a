"""Low-rank adapters (LoRA, Hu et al. 2021): a frozen matrix plus a trained update of rank r.

A linear map ``y = W x`` is adapted to ``y = W x + (alpha / r) Z R x`` (the book's letters;
Hu et al. write B A), with ``R`` (r x D_in) drawn at random and ``Z`` (D_out x r) zero at the
start, so that the adapted map is exactly the original one until training moves ``Z``. Only
``R`` and ``Z`` are trained, in the fields ``a`` and ``b``: ``W`` enters through
``jax.lax.stop_gradient``, so its gradient is zero, and an optimiser without weight decay leaves
it unchanged. After training, ``Z R`` can be added into ``W`` once (:meth:`LoRALinear.merged`),
and the adapted layer costs nothing more than the original.

``alpha`` defaults to the rank r, so the scale alpha / r is 1. Hu et al. hold alpha fixed
instead when they change r: with Adam, the first steps move every entry of Z by about the
learning rate, so the change of Z R x grows with r, and dividing by r keeps it the same size
at every rank (a change of r then needs little retuning of the learning rate). Pass ``alpha``
to do the same.

:class:`LoRALinear` is one adapted matrix, :class:`LoRALanguageModel` a
:class:`~transformer_intro.models.LanguageModel` whose attention projections are adapted; its
``batched`` merges the updates into the frozen weights and runs the model, so the tasks and
:func:`~transformer_intro.training.fit` train it like any other model.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .models.language_model import LanguageModel, LMConfig

__all__ = [
    "PROJECTIONS",
    "LoRALanguageModel",
    "LoRALinear",
    "lora_parameter_count",
    "projection_matrix",
]

#: The attention projections an adapter can wrap, by short name -> field of MultiHeadAttention.
PROJECTIONS = {
    "query": "query_projections",
    "key": "key_projections",
    "value": "value_projections",
    "output": "output_projections",
}


class LoRALinear(eqx.Module):
    """``y = W x + (alpha / r) Z R x`` with ``W`` frozen (D_out x D_in) and ``Z R`` of rank r.

    Attributes:
        weight: W, the frozen matrix (D_out, D_in); no gradient reaches it.
        R: (r, D_in), drawn from N(0, 1 / D_in) (Hu et al.'s A).
        Z: (D_out, r), zero at initialisation (Hu et al.'s B), so that the adapted model
            starts as the original.
        scale: alpha / r (1 by default, alpha = r).
    """

    weight: Float[Array, "out inp"]
    R: Float[Array, "r inp"]  # the chapter's letters, not Python's lower case
    Z: Float[Array, "out r"]
    scale: float = eqx.field(static=True)

    def __init__(self, weight, rank: int, *, alpha: float | None = None, key: PRNGKeyArray):
        """Wrap ``weight`` with an update of rank ``rank``; ``alpha`` defaults to ``rank``: scale 1.

        Raises:
            ValueError: if ``rank`` is not between 1 and the smaller side of ``weight``.
        """
        weight = jnp.asarray(weight)
        d_out, d_in = weight.shape
        if not 1 <= rank <= min(d_out, d_in):
            raise ValueError(f"rank must be between 1 and {min(d_out, d_in)}, got {rank}")
        self.weight = weight
        self.R = jax.random.normal(key, (rank, d_in), weight.dtype) / jnp.sqrt(d_in)
        self.Z = jnp.zeros((d_out, rank), weight.dtype)
        self.scale = float(rank if alpha is None else alpha) / rank

    @property
    def rank(self) -> int:
        """r, the rank of the update."""
        return self.R.shape[0]

    def update(self) -> Float[Array, "out inp"]:
        """(alpha / r) Z R, the change the adapter makes to W."""
        return self.scale * self.Z @ self.R

    def merged(self) -> Float[Array, "out inp"]:
        """W + (alpha / r) Z R: one matrix that computes the adapted map (W still frozen)."""
        return jax.lax.stop_gradient(self.weight) + self.update()

    def __call__(self, x: Float[Array, " inp"]) -> Float[Array, " out"]:
        """The adapted map on one vector: W x + (alpha / r) Z (R x), never forming Z R."""
        return jax.lax.stop_gradient(self.weight) @ x + self.scale * (self.Z @ (self.R @ x))


def projection_matrix(array: Float[Array, ...], name: str) -> Float[Array, "out inp"]:
    """An attention projection as one matrix, rows = outputs.

    The query, key and value projections are stored per head as (H, K, D): stacked, they are
    the (H K, D) matrix. The output projections are stored as (H, D, Dv), head h's O_h; side by
    side they are W_O = [O_1 ... O_H], (D, H Dv).
    """
    if name == "output":
        h, d, dv = array.shape
        return array.transpose(1, 0, 2).reshape(d, h * dv)
    return array.reshape(-1, array.shape[-1])


def _projection_array(matrix: Float[Array, "out inp"], like: Array, name: str) -> Array:
    """The inverse of :func:`projection_matrix`: the matrix in the layout of ``like``."""
    if name == "output":
        h, d, dv = like.shape
        return matrix.reshape(d, h, dv).transpose(1, 0, 2)
    return matrix.reshape(like.shape)


class LoRALanguageModel(eqx.Module):
    """A language model whose attention projections carry low-rank adapters.

    Attributes:
        base: the frozen model (no gradient reaches it).
        adapters: one dict per block, projection name -> :class:`LoRALinear` (whose ``weight``
            is that projection as a matrix, see :func:`projection_matrix`).
    """

    base: LanguageModel
    adapters: tuple[dict[str, LoRALinear], ...]

    def __init__(
        self,
        base: LanguageModel,
        rank: int,
        *,
        alpha: float | None = None,
        parts: tuple[str, ...] = ("query", "key", "value", "output"),
        key: PRNGKeyArray,
    ):
        """Adapt the projections ``parts`` of every block of ``base`` with rank ``rank``.

        ``alpha`` defaults to ``rank`` (scale 1), as in :class:`LoRALinear`.
        """
        unknown = set(parts) - set(PROJECTIONS)
        if unknown:
            raise ValueError(
                f"unknown projections {sorted(unknown)}; choose from {list(PROJECTIONS)}"
            )
        self.base = base
        keys = jax.random.split(key, (len(base.blocks), len(parts)))
        self.adapters = tuple(
            {
                part: LoRALinear(
                    projection_matrix(getattr(block.attention, PROJECTIONS[part]), part),
                    rank,
                    alpha=alpha,
                    key=k,
                )
                for part, k in zip(parts, block_keys, strict=True)
            }
            for block, block_keys in zip(base.blocks, keys, strict=True)
        )

    @property
    def config(self) -> LMConfig:
        """The base model's configuration."""
        return self.base.config

    def merged(self) -> LanguageModel:
        """The base model with every adapted projection replaced by W + (alpha / r) Z R.

        Every array of the base model enters through ``stop_gradient``: gradients of a loss of
        the merged model reach the adapters' R and Z only.
        """
        frozen = jax.tree.map(
            lambda leaf: jax.lax.stop_gradient(leaf) if eqx.is_inexact_array(leaf) else leaf,
            self.base,
        )
        for i, adapters in enumerate(self.adapters):
            for part, adapter in adapters.items():
                field = PROJECTIONS[part]
                like = getattr(frozen.blocks[i].attention, field)
                new = _projection_array(adapter.merged(), like, part)
                frozen = eqx.tree_at(
                    lambda m, i=i, field=field: getattr(m.blocks[i].attention, field), frozen, new
                )
        return frozen

    def __call__(self, symbols, **kwargs):
        """The adapted model's logits for one sequence (as ``LanguageModel.__call__``)."""
        return self.merged()(symbols, **kwargs)

    def batched(self, symbols, **kwargs):
        """The adapted model's logits for a batch (as ``LanguageModel.batched``)."""
        return self.merged().batched(symbols, **kwargs)


def lora_parameter_count(
    config: LMConfig, rank: int, parts: tuple[str, ...] = ("query", "key", "value", "output")
) -> int:
    """How many numbers the adapters of :class:`LoRALanguageModel` train: r (D_out + D_in) each.

    The query projection is (H K) x D, the key and value projections (H_kv K) x D, the output
    projection D x (H K) (with value width K), in each of the M blocks.
    """
    d, h, k = config.block.dim, config.block.num_heads, config.block.keys_dim
    g = config.block.num_kv_heads or h
    sides = {"query": (h * k, d), "key": (g * k, d), "value": (g * k, d), "output": (d, h * k)}
    per_block = sum(rank * sum(sides[p]) for p in parts)
    return config.num_blocks * per_block
