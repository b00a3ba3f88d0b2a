"""The encoder-decoder transformer (Vaswani et al. 2017): one sequence in, another out.

The encoder is a stack of ordinary transformer blocks over the source tokens; every source token
may read every other (bidirectional), except padding, which no token reads. The decoder is a stack
of :class:`DecoderLayer`: causal self-attention over the target tokens produced so far, then
*cross-attention*, in which the target tokens ask the queries and the encoder's outputs answer
them, then the token-wise MLP, each wrapped in a pre-norm residual connection. Both kinds of
attention are the package's one :class:`~transformer_intro.attention.MultiHeadAttention`.

Masks follow the package's convention: ``mask[n', n] = False`` forbids output n from reading
input n'. Padding is the id ``pad_id`` in both sequences. A source has N_s tokens and a target
N_t (the shapes call them M and N); cross-attention matrices are N_s x N_t.
"""

from __future__ import annotations

import dataclasses
import math
import numbers

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from ..attention import MultiHeadAttention, causal_mask, padding_mask
from ..block import BlockConfig, TransformerBlock
from ..config import ModelConfig, register_model, short_repr
from ..normalisation import LayerNorm, RMSNorm
from ..positions import PositionEmbedding
from ..tokenisers import DiscreteTokeniser

__all__ = ["DecoderLayer", "EncoderDecoder", "EncoderDecoderConfig"]

# Both stacks of chapter 10's model: four heads with full D x D value maps, a GELU MLP.
_DEFAULT_BLOCK = BlockConfig(dim=64, num_heads=4, mlp_hidden_dim=128)


@dataclasses.dataclass(frozen=True)
class EncoderDecoderConfig(ModelConfig):
    """Every choice that shapes an :class:`EncoderDecoder`. Plain values, so it saves as JSON.

    Attributes:
        source_vocab_size: the number of source symbols.
        target_vocab_size: |V|, the number of target symbols.
        max_source_length: the longest source, in tokens.
        max_target_length: the longest target, in tokens.
        encoder: the encoder's blocks' configuration; its norm is also the encoder's final one.
        decoder: the decoder layers' configuration (their self-attention and MLP, and the
            cross-attention, which is of the same kind without rotary positions); its norm is
            also the decoder's final one. D, ``dim``, must be the encoder's.
        encoder_layers: the number of encoder blocks.
        decoder_layers: the number of decoder layers.
        position_scale: the standard deviation of the initial learned position embeddings.
        pad_id: the padding id, in sources and targets alike.

    Raises:
        ValueError: on construction, if a size is not a whole number >= 1, the two stacks'
            widths differ, ``position_scale`` is negative, or ``pad_id`` is not an id of both
            vocabularies.
    """

    source_vocab_size: int
    target_vocab_size: int
    max_source_length: int
    max_target_length: int
    encoder: BlockConfig = _DEFAULT_BLOCK
    decoder: BlockConfig = _DEFAULT_BLOCK
    encoder_layers: int = 2
    decoder_layers: int = 2
    position_scale: float = 1.0
    pad_id: int = 0

    def __post_init__(self):
        """Check the choices together, so that a bad one fails here and not deep in the model."""
        sizes = (
            "source_vocab_size", "target_vocab_size", "max_source_length", "max_target_length",
            "encoder_layers", "decoder_layers",
        )  # fmt: skip
        for name in sizes:
            _require_whole(name, getattr(self, name), 1)
        for name in ("encoder", "decoder"):
            if not isinstance(getattr(self, name), BlockConfig):
                kind = type(getattr(self, name)).__name__
                raise TypeError(f"{name} must be a BlockConfig, got a {kind}")
        if self.encoder.dim != self.decoder.dim:
            raise ValueError(
                f"the decoder reads the encoder's tokens: encoder.dim={self.encoder.dim} and "
                f"decoder.dim={self.decoder.dim} must be equal"
            )
        scale = self.position_scale
        real = isinstance(scale, numbers.Real) and not isinstance(scale, bool)
        if not (real and math.isfinite(scale) and scale >= 0):
            raise ValueError(f"position_scale must be a finite number >= 0, got {scale!r}")
        smallest = min(self.source_vocab_size, self.target_vocab_size)
        _require_whole("pad_id", self.pad_id, 0)
        if self.pad_id >= smallest:
            raise ValueError(
                f"pad_id={self.pad_id} is not an id of both vocabularies "
                f"(source {self.source_vocab_size}, target {self.target_vocab_size} symbols)"
            )

    def __repr__(self) -> str:
        return short_repr(self, 4)

    def build(self, *, key: PRNGKeyArray) -> EncoderDecoder:
        """The :class:`EncoderDecoder` of this configuration, its weights drawn with ``key``."""
        return EncoderDecoder(self, key=key)


def _require_whole(name: str, value, least: int) -> None:
    # bool is an int to Python, but encoder_layers=True is a mistake, not a count.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
        raise ValueError(f"{name} must be a whole number >= {least}, got {value!r}")


class DecoderLayer(eqx.Module):
    r"""One decoder layer on one target sequence Y (rows), reading the encoder's outputs Z.

    Sub-layer by sub-layer::

        Y1 = Y  + MHSA(LayerNorm(Y), causal mask)   each token reads itself and earlier ones
        Y2 = Y1 + MHA(LayerNorm(Y1), context=Z)     cross-attention: queries from Y1, keys and
                                                    values from Z
        Y' = Y2 + MLP(LayerNorm(Y2))

    The first and last lines are a :class:`TransformerBlock`'s two sub-layers, so the layer is a
    block with a cross-attention sub-layer between them.
    """

    block: TransformerBlock
    cross_attention_norm: LayerNorm | RMSNorm
    cross_attention: MultiHeadAttention

    def __init__(self, config: BlockConfig, *, key: PRNGKeyArray):
        """Build the block (self-attention and MLP) and the cross-attention with its norm.

        Args:
            config: the block's configuration, which the cross-attention shares (without
                rotary positions).
            key: a PRNG key.
        """
        block_key, cross_key = jax.random.split(key)
        self.block = TransformerBlock(config, key=block_key)
        self.cross_attention_norm = config.make_norm()
        self.cross_attention = config.cross_attention(key=cross_key)

    @property
    def self_attention(self) -> MultiHeadAttention:
        """The causal self-attention, the block's."""
        return self.block.attention

    def _cross(self, y, memory, source_is_real):
        mask = padding_mask(source_is_real, y.shape[0])
        return y + self.cross_attention(self.cross_attention_norm(y), mask, context=memory)

    def __call__(
        self, y: Float[Array, "N D"], memory: Float[Array, "M D"], source_is_real: Bool[Array, " M"]
    ) -> Float[Array, "N D"]:
        """The layer on one target sequence.

        Args:
            y: the N_t target tokens, as rows.
            memory: the encoder's N_s outputs Z, which offer keys and values.
            source_is_real: which source tokens are real rather than padding; no target token
                reads padding.

        Returns:
            ``Y'``, shape (N_t, D).
        """
        y = self.block.attention_residual(y, causal_mask(y.shape[0]))
        return self.block.mlp_residual(self._cross(y, memory, source_is_real))

    def batched(
        self,
        y: Float[Array, "B N D"],
        memory: Float[Array, "B M D"],
        source_is_real: Bool[Array, "B M"],
    ) -> Float[Array, "B N D"]:
        """``jax.vmap(self)(y, memory, source_is_real)`` through the fast batched paths."""
        n = y.shape[1]
        y = self.block.attention_residual_batched(y, causal_mask(n))
        cross_mask = jax.vmap(padding_mask, in_axes=(0, None))(source_is_real, n)
        y = y + self.cross_attention.batched(
            self.cross_attention_norm(y), cross_mask, context=memory
        )
        return self.block.mlp_residual_batched(y)

    def cross_attention_weights(
        self, y: Float[Array, "N D"], memory: Float[Array, "M D"], source_is_real: Bool[Array, " M"]
    ) -> Float[Array, "H M N"]:
        """``A_h[n', n]``: how much target token n reads source token n', given the layer's input y.

        Each column sums to one over the real source tokens. The shape is (H, N_s, N_t).
        """
        n = y.shape[0]
        y = self.block.attention_residual(y, causal_mask(n))
        return self.cross_attention.attention_weights(
            self.cross_attention_norm(y), padding_mask(source_is_real, n), context=memory
        )


@register_model(EncoderDecoderConfig)
class EncoderDecoder(eqx.Module):
    """Source ids -> encoder -> memory; target ids so far and memory -> decoder -> logits.

    ``__call__`` is the readable one-example definition (teacher forcing: the logits for every
    target position at once); :meth:`batched` computes the same for a batch with the fast paths;
    :meth:`greedy_decode` generates a target one token at a time.

    Logits are over the target vocabulary, |V| of them per position (``V`` in the shapes).
    """

    source_embedding: DiscreteTokeniser
    source_positions: PositionEmbedding
    encoder: tuple[TransformerBlock, ...]
    encoder_norm: LayerNorm | RMSNorm
    target_embedding: DiscreteTokeniser
    target_positions: PositionEmbedding
    decoder: tuple[DecoderLayer, ...]
    decoder_norm: LayerNorm | RMSNorm
    unembedding: eqx.nn.Linear
    config: EncoderDecoderConfig = eqx.field(static=True)

    def __init__(self, config: EncoderDecoderConfig, *, key: PRNGKeyArray):
        """Build the embeddings, the encoder, the decoder and the unembedding.

        Args:
            config: the vocabularies, lengths and padding, and each stack's blocks.
            key: a PRNG key.
        """
        self.config = config
        d = config.encoder.dim
        keys = iter(jax.random.split(key, 5 + config.encoder_layers + config.decoder_layers))
        self.source_embedding = DiscreteTokeniser(config.source_vocab_size, d, key=next(keys))
        # Positions start as large as the unit-variance symbol embeddings, so that from the first
        # step attention can tell the first digit of a year from the last.
        self.source_positions = PositionEmbedding(
            config.max_source_length, d, init_scale=config.position_scale, key=next(keys)
        )
        self.encoder = tuple(
            TransformerBlock(config.encoder, key=next(keys)) for _ in range(config.encoder_layers)
        )
        self.encoder_norm = config.encoder.make_norm()
        self.target_embedding = DiscreteTokeniser(config.target_vocab_size, d, key=next(keys))
        self.target_positions = PositionEmbedding(
            config.max_target_length, d, init_scale=config.position_scale, key=next(keys)
        )
        self.decoder = tuple(
            DecoderLayer(config.decoder, key=next(keys)) for _ in range(config.decoder_layers)
        )
        self.decoder_norm = config.decoder.make_norm()
        self.unembedding = eqx.nn.Linear(d, config.target_vocab_size, key=next(keys))

    @property
    def pad_id(self) -> int:
        """The padding id, in sources and targets alike."""
        return self.config.pad_id

    @property
    def max_source_length(self) -> int:
        """The longest source the model reads, in tokens."""
        return self.source_positions.embeddings.shape[0]

    @property
    def max_target_length(self) -> int:
        """The longest target the model writes, in tokens."""
        return self.target_positions.embeddings.shape[0]

    # -- one example -------------------------------------------------------------------------------

    def encode(self, source: Int[Array, " M"]) -> Float[Array, "M D"]:
        """The encoder's outputs ("memory"), one per source token; padding is read by no token.

        Raises:
            ValueError: if the source is longer than the model reads.
        """
        self._check_source(source.shape[-1])
        x = self.source_positions(self.source_embedding(source))
        mask = padding_mask(source != self.pad_id)
        for block in self.encoder:
            x = block(x, mask)
        return self.encoder_norm(x)

    def decode(
        self,
        memory: Float[Array, "M D"],
        source_is_real: Bool[Array, " M"],
        target_inputs: Int[Array, " N"],
    ) -> Float[Array, "N V"]:
        """Logits for the next target token at every position, reading the targets up to there.

        Args:
            memory: the encoder's outputs, from :meth:`encode`.
            source_is_real: which source tokens are real rather than padding.
            target_inputs: the N_t target ids so far, starting with the start id.

        Returns:
            Logits, shape (N_t, |V|); row n predicts target token n + 1.

        Raises:
            ValueError: if the target is longer than the model writes.
        """
        self._check_target(target_inputs.shape[-1])
        y = self.target_positions(self.target_embedding(target_inputs))
        for layer in self.decoder:
            y = layer(y, memory, source_is_real)
        return jax.vmap(self.unembedding)(self.decoder_norm(y))

    def __call__(
        self, source: Int[Array, " M"], target_inputs: Int[Array, " N"]
    ) -> Float[Array, "N V"]:
        """Teacher forcing on one example: the (N_t, |V|) logits of every target position.

        Raises:
            ValueError: if the source or the target is longer than the model allows.
        """
        return self.decode(self.encode(source), source != self.pad_id, target_inputs)

    def cross_attention_weights(
        self, source: Int[Array, " M"], target_inputs: Int[Array, " N"]
    ) -> Float[Array, "L H M N"]:
        """Every decoder layer's cross-attention matrices ``A_h[n', n]``.

        Target token n reads source token n'; the shape is (layers, H, N_s, N_t), and each column
        sums to one.
        """
        memory, source_is_real = self.encode(source), source != self.pad_id
        y = self.target_positions(self.target_embedding(target_inputs))
        weights = []
        for layer in self.decoder:
            weights.append(layer.cross_attention_weights(y, memory, source_is_real))
            y = layer(y, memory, source_is_real)
        return jnp.stack(weights)

    # -- a batch, through the fast paths -----------------------------------------------------------

    def encode_batched(self, sources: Int[Array, "B M"]) -> Float[Array, "B M D"]:
        """``jax.vmap(self.encode)(sources)`` through the fast batched paths.

        Raises:
            ValueError: if the sources are longer than the model reads.
        """
        self._check_source(sources.shape[-1])
        x = self.source_positions.table()[: sources.shape[1]] + self.source_embedding.table[sources]
        mask = jax.vmap(padding_mask)(sources != self.pad_id)  # one (M, M) mask per example
        for block in self.encoder:
            x = block.batched(x, mask)
        return self.encoder_norm(x)

    def decode_batched(
        self,
        memory: Float[Array, "B M D"],
        source_is_real: Bool[Array, "B M"],
        target_inputs: Int[Array, "B N"],
    ) -> Float[Array, "B N V"]:
        """``jax.vmap(self.decode)(memory, source_is_real, target_inputs)``, through the fast paths.

        Raises:
            ValueError: if the targets are longer than the model writes.
        """
        self._check_target(target_inputs.shape[-1])
        y = (
            self.target_positions.table()[: target_inputs.shape[1]]
            + self.target_embedding.table[target_inputs]
        )
        for layer in self.decoder:
            y = layer.batched(y, memory, source_is_real)
        y = self.decoder_norm(y)
        return y @ self.unembedding.weight.T + self.unembedding.bias

    def batched(
        self, sources: Int[Array, "B M"], target_inputs: Int[Array, "B N"]
    ) -> Float[Array, "B N V"]:
        """``jax.vmap(self)(sources, target_inputs)``, laid out for speed."""
        return self.decode_batched(
            self.encode_batched(sources), sources != self.pad_id, target_inputs
        )

    def greedy_decode(
        self, sources: Int[Array, "B M"], start_id: int, length: int | None = None
    ) -> Int[Array, "B N"]:
        """Generate targets one token at a time, each the most likely given the ones before it.

        Returns ``length`` tokens after ``start_id`` (the decoder's full length by default); the
        start id itself is not among them. There is no cache: every step runs the decoder over
        the whole (fixed-length) buffer and reads the logits at the position just filled. The
        decoder is causal, so positions not yet filled cannot change them, and the buffer's shape
        stays fixed for the compiler.

        Args:
            sources: B source sequences of ids, padded with ``pad_id``.
            start_id: the id that starts every target.
            length: how many tokens to generate; the longest target the model writes by default.

        Returns:
            The generated ids, (B, length).

        Raises:
            ValueError: if ``length`` is longer than the model writes.
        """
        length = self.max_target_length if length is None else length
        self._check_target(length)
        batch = sources.shape[0]
        memory, source_is_real = self.encode_batched(sources), sources != self.pad_id
        buffer = jnp.full((batch, length), self.pad_id, sources.dtype).at[:, 0].set(start_id)
        generated = jnp.full((batch, length), self.pad_id, sources.dtype)

        def step(t, state):
            buffer, generated = state
            next_token = self.decode_batched(memory, source_is_real, buffer)[:, t].argmax(-1)
            next_token = next_token.astype(buffer.dtype)
            # At the last position there is no room left in the buffer: JAX drops that update.
            return buffer.at[:, t + 1].set(next_token), generated.at[:, t].set(next_token)

        _, generated = jax.lax.fori_loop(0, length, step, (buffer, generated))
        return generated

    # -- checks ------------------------------------------------------------------------------------

    def _check_source(self, length: int) -> None:
        if length > self.max_source_length:
            raise ValueError(
                f"source of {length} tokens is longer than the "
                f"{self.max_source_length} the model reads"
            )

    def _check_target(self, length: int) -> None:
        if length > self.max_target_length:
            raise ValueError(
                f"target of {length} tokens is longer than the "
                f"{self.max_target_length} the model writes"
            )
