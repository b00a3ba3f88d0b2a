"""A language model with its matrices kept in GGUF's block formats, for generation.

:func:`quantise_model` keeps every attention projection, every MLP matrix and a tied token table
as a :class:`~transformer_intro.quantisation.QuantisedMatrix` (blocks of 32 along each matrix's
input axis, :func:`~transformer_intro.quantisation.quantise`); norms, biases, positions and an
untied read-out stay float32. :func:`dequantise_model` gives the float model it computes.

The layers multiply by a matrix in blocks as by an array (``weight @ x`` in the MLPs,
``x @ table.T`` in the read-out, ``table[ids]`` in the embedding), with one exception, which this
module owns: attention's output projections are kept as one matrix ``W_O = [O_1 ... O_H]``,
(D, H Dv), as GGUF files store them, where the float layer holds ``O_1, ..., O_H`` as (H, D, Dv).
:class:`QuantisedSelfAttention` is the attention that multiplies by its matrices in that layout.
It generates (``extend``, so :mod:`.generation`); the float paths refuse it, with the fix.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..attention import MultiHeadSelfAttention
from ..block import TransformerBlock
from ..quantisation import QuantisedMatrix, holds_blocks, quantise, with_vector_format
from .language_model import LanguageModel

__all__ = [
    "QuantisedSelfAttention",
    "dequantise_model",
    "quantise_model",
    "with_quantised_attention",
]


class QuantisedSelfAttention(MultiHeadSelfAttention):
    """Self-attention whose projections are in blocks (:class:`QuantisedMatrix`).

    Its fields are those of :class:`~transformer_intro.attention.MultiHeadAttention`: the query,
    key and value projections stand for (H, K, D) arrays, and ``output_projections`` for ``W_O``,
    (D, H Dv). Its :meth:`extend` is the float layer's, with the two products done on blocks.
    """

    def _heads_of(self, weights: QuantisedMatrix, x: Float[Array, "T D"]) -> Array:
        """``W_h x_t`` for every head and new token, (H, T, K): one pass over the blocks."""
        return jax.vmap(weights)(x).transpose(1, 0, 2)

    def _tokens_from_heads(self, heads: Float[Array, "H T Dv"]) -> Float[Array, "T D"]:
        """``W_O`` times the heads' outputs side by side: the sum over heads in one product."""
        side_by_side = heads.transpose(1, 0, 2).reshape(heads.shape[1], -1)  # (T, H Dv)
        y = jax.vmap(self.output_projections)(side_by_side)
        y = y if self.combine_heads == "sum" else y / self.num_heads
        return self._add_output_bias(y)

    def __call__(self, *args, **kwargs):
        """Refused: the float path (:func:`dequantise_model` gives the float model)."""
        raise _generation_only("__call__")

    def batched(self, *args, **kwargs):
        """Refused: the float path (:func:`dequantise_model` gives the float model)."""
        raise _generation_only("batched")

    def attention_weights(self, *args, **kwargs):
        """Refused: the float path (:func:`dequantise_model` gives the float model)."""
        raise _generation_only("attention_weights")


def _generation_only(method: str) -> ValueError:
    return ValueError(
        f"attention with its matrices in blocks only generates (extend); {method} needs the "
        "float model: dequantise_model(model) from transformer_intro.models.quantised"
    )


def _recast(attention: MultiHeadSelfAttention, cls: type) -> MultiHeadSelfAttention:
    """The same fields, as an instance of ``cls`` (the float class or its quantised subclass)."""
    if type(attention) is cls:
        return attention
    recast = object.__new__(cls)
    for field in dataclasses.fields(attention):
        object.__setattr__(recast, field.name, getattr(attention, field.name))
    return recast


def _each_block(model: LanguageModel, change) -> LanguageModel:
    """The model with ``change`` applied to each block (to its one stacked block when scanned)."""
    if model.config.scan_blocks:
        blocks = change(model.blocks)
    else:
        blocks = tuple(change(b) for b in model.blocks)
    return eqx.tree_at(lambda m: m.blocks, model, blocks)


def with_quantised_attention(model: LanguageModel) -> LanguageModel:
    """The model with every block's attention a :class:`QuantisedSelfAttention`.

    For a model whose matrices were put in blocks directly
    (:func:`~transformer_intro.pretrained.gguf.quantised_model_from_gguf` does, from a file's
    bytes); :func:`quantise_model` calls it.
    """

    def recast(block: TransformerBlock) -> TransformerBlock:
        attention = _recast(block.attention, QuantisedSelfAttention)
        return eqx.tree_at(lambda b: b.attention, block, attention)

    return _each_block(model, recast)


def _linears(mlp) -> list[eqx.nn.Linear]:
    """The linear layers of an MLP, in order."""
    is_linear = lambda x: isinstance(x, eqx.nn.Linear)  # noqa: E731
    return [x for x in jax.tree.leaves(mlp, is_leaf=is_linear) if is_linear(x)]


def quantise_model(
    model: LanguageModel, format: str = "Q8_0", vector_format: str | None = None
) -> LanguageModel:
    """The model with its matrices kept in a GGUF block format, for generation.

    The model generates (``extend``, so :mod:`.generation`) with the blocks unpacked inside each
    product; :func:`dequantise_model` is the float model it computes. With
    ``vector_format="Q8_0"`` each matrix rounds the vectors it multiplies to Q8_0 blocks first,
    as llama.cpp does (about twice as fast on a CPU;
    :func:`~transformer_intro.quantisation.with_vector_format`).

    Raises:
        ValueError: if the model is quantised already, a matrix's input width is not a multiple
            of 32, or the attention has no output projections.
    """
    if holds_blocks(model):
        raise ValueError("the model is quantised already")

    def quantised_block(block: TransformerBlock) -> TransformerBlock:
        a = block.attention
        if a.output_projections is None:
            raise ValueError("quantised attention needs output projections (value_dim)")
        out = a.output_projections  # (..., H, D, Dv) -> W_O, (..., D, H Dv)
        w_o = jnp.swapaxes(out, -3, -2).reshape(*out.shape[:-3], out.shape[-2], -1)
        projections = (a.query_projections, a.key_projections, a.value_projections)
        block = eqx.tree_at(
            lambda b: (
                b.attention.query_projections,
                b.attention.key_projections,
                b.attention.value_projections,
                b.attention.output_projections,
            ),
            block,
            (*(quantise(w, format) for w in projections), quantise(w_o, format)),
        )
        return eqx.tree_at(
            lambda b: [layer.weight for layer in _linears(b.mlp)],
            block,
            [quantise(layer.weight, format) for layer in _linears(block.mlp)],
        )

    quantised = with_quantised_attention(_each_block(model, quantised_block))
    if quantised.unembedding is None:
        table = quantise(quantised.tokeniser.table, format)
        quantised = eqx.tree_at(lambda m: m.tokeniser.table, quantised, table)
    return with_vector_format(quantised, vector_format)


def dequantise_model(model: LanguageModel) -> LanguageModel:
    """The float32 model that a quantised one computes.

    Every block is turned back into weights, the output projections into their (H, D, Dv) layout,
    and the attention into the float layer.
    """

    def float_block(block: TransformerBlock) -> TransformerBlock:
        attention = _recast(block.attention, MultiHeadSelfAttention)
        w_o = attention.output_projections
        if isinstance(w_o, QuantisedMatrix):
            h = attention.num_heads
            matrix = w_o.dequantised()  # (..., D, H Dv) -> (..., H, D, Dv)
            out = jnp.swapaxes(matrix.reshape(*matrix.shape[:-1], h, -1), -3, -2)
            attention = eqx.tree_at(lambda a: a.output_projections, attention, out)
        return eqx.tree_at(lambda b: b.attention, block, attention)

    is_matrix = lambda x: isinstance(x, QuantisedMatrix)  # noqa: E731
    return jax.tree.map(
        lambda x: x.dequantised() if is_matrix(x) else x,
        _each_block(model, float_block),
        is_leaf=is_matrix,
    )
