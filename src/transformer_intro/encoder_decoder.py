"""The encoder-decoder transformer (Vaswani et al. 2017): one sequence in, another out.

The encoder is a stack of ordinary transformer blocks over the source tokens; every source token
may read every other (bidirectional), except padding, which no token reads. The decoder is a stack
of :class:`DecoderLayer`: causal self-attention over the target tokens produced so far, then
*cross-attention*, in which the target tokens ask the queries and the encoder's outputs answer
them, then the token-wise MLP, each wrapped in a pre-norm residual connection. Both kinds of
attention are the package's one :class:`~transformer_intro.attention.MultiHeadAttention`.

Masks follow the package's convention: ``mask[m, n] = False`` forbids output n from reading input m.
Padding is the id ``pad_id`` in both sequences.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray
from tqdm import tqdm  # plain text bar, as in train.py

from .attention import MultiHeadAttention, causal_mask, padding_mask
from .block import TransformerBlock
from .mlp import MLP
from .normalisation import LayerNorm
from .positions import PositionEmbedding
from .tokenisers import DiscreteTokeniser
from .train import TrainConfig, make_optimizer, optimizer_step


def cross_attention_mask(source_is_real: Bool[Array, " M"], num_targets: int) -> Bool[Array, "M N"]:
    """Every target token may read every real source token, and no padding."""
    return jnp.broadcast_to(source_is_real[:, None], (source_is_real.shape[0], num_targets))


class DecoderLayer(eqx.Module):
    r"""One decoder layer on one target sequence Y (rows), reading the encoder's outputs Z::

    Y1 = Y  + MHSA(LayerNorm(Y), causal mask)          each token reads itself and earlier ones
    Y2 = Y1 + MHA(LayerNorm(Y1), context=Z)            cross-attention: queries from Y1, keys and values from Z
    Y' = Y2 + MLP(LayerNorm(Y2))
    """

    self_attention_norm: LayerNorm
    self_attention: MultiHeadAttention
    cross_attention_norm: LayerNorm
    cross_attention: MultiHeadAttention
    mlp_norm: LayerNorm
    mlp: MLP

    def __init__(
        self,
        token_dim: int,
        num_heads: int,
        mlp_hidden_dim: int,
        *,
        value_dim: int | None = None,
        mlp_activation: Callable = jax.nn.gelu,
        key: PRNGKeyArray,
    ):
        self_key, cross_key, mlp_key = jax.random.split(key, 3)
        self.self_attention_norm = LayerNorm(token_dim)
        self.self_attention = MultiHeadAttention(
            token_dim, num_heads, value_dim=value_dim, key=self_key
        )
        self.cross_attention_norm = LayerNorm(token_dim)
        self.cross_attention = MultiHeadAttention(
            token_dim, num_heads, value_dim=value_dim, key=cross_key
        )
        self.mlp_norm = LayerNorm(token_dim)
        self.mlp = MLP(token_dim, mlp_hidden_dim, activation=mlp_activation, key=mlp_key)

    def __call__(
        self, y: Float[Array, "N D"], memory: Float[Array, "M D"], source_is_real: Bool[Array, " M"]
    ) -> Float[Array, "N D"]:
        n = y.shape[0]
        y = y + self.self_attention(self.self_attention_norm(y), causal_mask(n))
        y = y + self.cross_attention(
            self.cross_attention_norm(y), cross_attention_mask(source_is_real, n), context=memory
        )
        return y + jax.vmap(self.mlp)(self.mlp_norm(y))

    def batched(
        self,
        y: Float[Array, "B N D"],
        memory: Float[Array, "B M D"],
        source_is_real: Bool[Array, "B M"],
    ) -> Float[Array, "B N D"]:
        """``jax.vmap(self)(y, memory, source_is_real)`` through the fast batched paths."""
        n = y.shape[1]
        y = y + self.self_attention.batched(self.self_attention_norm(y), causal_mask(n))
        cross_mask = jax.vmap(cross_attention_mask, in_axes=(0, None))(source_is_real, n)
        y = y + self.cross_attention.batched(
            self.cross_attention_norm(y), cross_mask, context=memory
        )
        return y + self.mlp.batched(self.mlp_norm(y))

    def cross_attention_weights(
        self, y: Float[Array, "N D"], memory: Float[Array, "M D"], source_is_real: Bool[Array, " M"]
    ) -> Float[Array, "H M N"]:
        """``A_h[m, n]``: how much target token n reads source token m (columns sum to one), given
        this layer's input y."""
        n = y.shape[0]
        y = y + self.self_attention(self.self_attention_norm(y), causal_mask(n))
        return self.cross_attention.attention_weights(
            self.cross_attention_norm(y), cross_attention_mask(source_is_real, n), context=memory
        )


class EncoderDecoder(eqx.Module):
    """Source token ids -> encoder -> memory; target ids so far + memory -> decoder -> logits.

    ``__call__`` is the readable one-example definition (teacher forcing: the logits for every
    target position at once); :meth:`batched` computes the same for a batch with the fast paths;
    :meth:`greedy_decode` generates a target one token at a time.
    """

    source_embedding: DiscreteTokeniser
    source_positions: PositionEmbedding
    encoder: tuple[TransformerBlock, ...]
    encoder_norm: LayerNorm
    target_embedding: DiscreteTokeniser
    target_positions: PositionEmbedding
    decoder: tuple[DecoderLayer, ...]
    decoder_norm: LayerNorm
    unembedding: eqx.nn.Linear
    pad_id: int = eqx.field(static=True)

    def __init__(
        self,
        source_vocab_size: int,
        target_vocab_size: int,
        *,
        max_source_length: int,
        max_target_length: int,
        token_dim: int = 64,
        num_heads: int = 4,
        mlp_hidden_dim: int = 128,
        encoder_layers: int = 2,
        decoder_layers: int = 2,
        value_dim: int | None = None,
        position_scale: float = 1.0,
        pad_id: int = 0,
        key: PRNGKeyArray,
    ):
        keys = iter(jax.random.split(key, 5 + encoder_layers + decoder_layers))
        self.source_embedding = DiscreteTokeniser(source_vocab_size, token_dim, key=next(keys))
        # Positions start as large as the unit-variance symbol embeddings, so that from the first
        # step attention can tell the first digit of a year from the last.
        self.source_positions = PositionEmbedding(
            max_source_length, token_dim, init_scale=position_scale, key=next(keys)
        )
        self.encoder = tuple(
            TransformerBlock(
                token_dim, num_heads, mlp_hidden_dim, value_dim=value_dim, key=next(keys)
            )
            for _ in range(encoder_layers)
        )
        self.encoder_norm = LayerNorm(token_dim)
        self.target_embedding = DiscreteTokeniser(target_vocab_size, token_dim, key=next(keys))
        self.target_positions = PositionEmbedding(
            max_target_length, token_dim, init_scale=position_scale, key=next(keys)
        )
        self.decoder = tuple(
            DecoderLayer(token_dim, num_heads, mlp_hidden_dim, value_dim=value_dim, key=next(keys))
            for _ in range(decoder_layers)
        )
        self.decoder_norm = LayerNorm(token_dim)
        self.unembedding = eqx.nn.Linear(token_dim, target_vocab_size, key=next(keys))
        self.pad_id = pad_id

    @property
    def max_source_length(self) -> int:
        return self.source_positions.embeddings.shape[0]

    @property
    def max_target_length(self) -> int:
        return self.target_positions.embeddings.shape[0]

    # -- one example -------------------------------------------------------------------------------

    def encode(self, source: Int[Array, " M"]) -> Float[Array, "M D"]:
        """The encoder's outputs ("memory"), one per source token; padding is read by no token."""
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
        """Logits for the next target token at every position, reading the targets up to there."""
        self._check_target(target_inputs.shape[-1])
        y = self.target_positions(self.target_embedding(target_inputs))
        for layer in self.decoder:
            y = layer(y, memory, source_is_real)
        return jax.vmap(self.unembedding)(self.decoder_norm(y))

    def __call__(
        self, source: Int[Array, " M"], target_inputs: Int[Array, " N"]
    ) -> Float[Array, "N V"]:
        return self.decode(self.encode(source), source != self.pad_id, target_inputs)

    def cross_attention_weights(
        self, source: Int[Array, " M"], target_inputs: Int[Array, " N"]
    ) -> Float[Array, "L H M N"]:
        """Every decoder layer's cross-attention matrices ``A_h[m, n]`` (target n reads source m)."""
        memory, source_is_real = self.encode(source), source != self.pad_id
        y = self.target_positions(self.target_embedding(target_inputs))
        weights = []
        for layer in self.decoder:
            weights.append(layer.cross_attention_weights(y, memory, source_is_real))
            y = layer(y, memory, source_is_real)
        return jnp.stack(weights)

    # -- a batch, through the fast paths -----------------------------------------------------------

    def encode_batched(self, sources: Int[Array, "B M"]) -> Float[Array, "B M D"]:
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
        """Generate targets one token at a time, each the most likely next token given the ones
        before it: ``length`` tokens after ``start_id`` (the decoder's full length by default).

        Without a cache: every step runs the decoder over the whole (fixed-length) buffer and reads
        the logits at the position just filled. The decoder is causal, so positions not yet filled
        cannot change them, and the buffer's shape stays fixed for the compiler.
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

    # -- checks --------------------------------------------------------------------------------------

    def _check_source(self, length: int) -> None:
        if length > self.max_source_length:
            raise ValueError(
                f"source of {length} tokens is longer than the {self.max_source_length} the model reads"
            )

    def _check_target(self, length: int) -> None:
        if length > self.max_target_length:
            raise ValueError(
                f"target of {length} tokens is longer than the {self.max_target_length} the model writes"
            )


def sequence_loss(
    model: EncoderDecoder,
    sources: Int[Array, "B M"],
    target_inputs: Int[Array, "B N"],
    targets: Int[Array, "B N"],
) -> tuple[Float[Array, ""], Float[Array, ""]]:
    """Teacher forcing's loss: mean cross-entropy over the real (non-padding) target tokens, and
    the fraction of them predicted right. Padded target positions weigh nothing."""
    logits = model.batched(sources, target_inputs)
    is_real = targets != model.pad_id
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
    count = jnp.maximum(is_real.sum(), 1)
    loss = jnp.where(is_real, losses, 0.0).sum() / count
    accuracy = jnp.where(is_real, logits.argmax(-1) == targets, False).sum() / count
    return loss, accuracy


def train(
    model: EncoderDecoder,
    sources: Int[Array, "S M"],
    target_inputs: Int[Array, "S N"],
    targets: Int[Array, "S N"],
    *,
    steps: int,
    batch_size: int,
    learning_rate: float = 3e-3,
    warmup_steps: int = 100,
    weight_decay: float = 0.01,
    seed: int = 0,
    progress: bool = True,
) -> tuple[EncoderDecoder, dict[str, list[float]]]:
    """``steps`` steps of AdamW with teacher forcing on batches drawn in a seeded shuffled order.

    Returns the trained model and a history of the loss and the per-token accuracy on each
    training batch, and the seconds since the start at which each step was dispatched (JAX runs
    ahead of Python); the last entry waits for the finished model, so it is the whole training
    time, compilation included.
    """
    if len(sources) < batch_size:
        raise ValueError(
            f"batch size {batch_size} is larger than the {len(sources)} training pairs"
        )
    config = TrainConfig(
        learning_rate=learning_rate, warmup_steps=warmup_steps, weight_decay=weight_decay
    )
    optimizer = make_optimizer(config, steps)
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    rng = np.random.default_rng(seed)
    per_epoch = len(sources) // batch_size
    history = {"loss": [], "accuracy": [], "seconds": []}
    start = time.perf_counter()
    order = None
    for step in tqdm(range(steps), disable=not progress, unit="step", ncols=80):
        if step % per_epoch == 0:
            order = rng.permutation(len(sources))
        batch = order[(step % per_epoch) * batch_size : (step % per_epoch + 1) * batch_size]
        model, opt_state, loss, accuracy = optimizer_step(
            model,
            opt_state,
            optimizer,
            sequence_loss,
            sources[batch],
            target_inputs[batch],
            targets[batch],
        )
        history["loss"].append(loss)
        history["accuracy"].append(accuracy)
        history["seconds"].append(time.perf_counter() - start)
    jax.block_until_ready(model)
    history["seconds"][-1] = time.perf_counter() - start
    history["loss"] = [float(x) for x in history["loss"]]
    history["accuracy"] = [float(x) for x in history["accuracy"]]
    return model, history
