"""A decoder-only (GPT-style) character language model: the transformer block under a causal mask.

The model reads symbols ``s_1, ..., s_N`` and outputs, at every position n, logits for the next
symbol: a categorical distribution ``p(s_{n+1} | s_1, ..., s_n)``. The causal mask stops output n
from reading any input after n, so one pass over a window of N symbols trains N predictions at
once, and the product of the predictions is the probability of the whole window.

Generation appends one sampled symbol at a time (:mod:`.generation`): the model keeps every
block's keys and values in a preallocated cache (:meth:`LanguageModel.extend`), so each new
symbol costs one token's work. Its matrices may be kept in GGUF's block formats for generation
(:func:`.quantised.quantise_model`).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, Int, PRNGKeyArray

from ..attention import causal_mask
from ..block import BlockConfig, TransformerBlock
from ..config import ModelConfig, register_model, short_repr
from ..normalisation import LayerNorm, RMSNorm
from ..positions import PositionEmbedding
from ..tokenisers import DiscreteTokeniser

__all__ = ["LMConfig", "LanguageModel", "SHAKESPEARE_BLOCK", "SHAKESPEARE_CONFIG"]

# Chapter 9's block: four heads of width 32 with factored values, rotary positions, a GELU MLP.
SHAKESPEARE_BLOCK = BlockConfig(dim=128, num_heads=4, mlp_hidden_dim=512, value_dim=32, rotary=True)


@dataclasses.dataclass(frozen=True)
class LMConfig(ModelConfig):
    """Every choice that shapes a :class:`LanguageModel`. Plain values, so it saves as JSON.

    The defaults are chapter 9's model; the block's options express today's models (SmolLM2 and
    the Llama family: ``norm="rms"``, ``mlp="gated"`` with ``activation="silu"`` (SwiGLU),
    ``num_kv_heads``, ``rotary_base``, ``rotary_layout="half"``, with ``tied_embeddings`` here)
    and GPT-2 (``learned_positions`` here, ``attention_bias``, ``tied_embeddings``).

    Attributes:
        vocab_size: |V|, the number of symbols (or subword tokens).
        window: the longest context the model reads, in symbols.
        block: every block's configuration (D is ``block.dim``; rotary positions are
            ``block.rotary``); the final norm before the read-out is of the blocks' kind.
        num_blocks: M.
        learned_positions: a table of learned position embeddings added to the tokens.
        embedding_init_scale: standard deviation of the initial embedding tables.
        tied_embeddings: the read-out is the token table transposed, without a bias.
        scan_blocks: store the M blocks as one block whose arrays have a leading axis of M,
            and run them with one ``lax.scan``: XLA then compiles one block instead of M (the
            same numbers; see :meth:`LanguageModel.stacked`). Compiling is faster, decoding on
            a CPU slower (each step copies its block's weights out of the stack):
            ``benchmarks/scan_blocks.py`` measures both.
    """

    vocab_size: int
    window: int = 128
    block: BlockConfig = SHAKESPEARE_BLOCK
    num_blocks: int = 4
    learned_positions: bool = False
    embedding_init_scale: float = 0.02
    tied_embeddings: bool = False
    scan_blocks: bool = False

    WRITTEN_ONLY_WHEN_SET: ClassVar[tuple[str, ...]] = ("scan_blocks",)

    def __post_init__(self):
        if self.vocab_size < 1 or self.window < 1 or self.num_blocks < 1:
            raise ValueError(f"vocab_size, window and num_blocks must be positive, got {self}")
        if not isinstance(self.block, BlockConfig):
            raise TypeError(f"block must be a BlockConfig, got a {type(self.block).__name__}")

    def __repr__(self) -> str:
        # The sizes always; the other options only where they differ from chapter 9's model.
        return short_repr(self, 4)

    def build(self, *, key: PRNGKeyArray) -> LanguageModel:
        """The :class:`LanguageModel` of this configuration, its weights drawn with ``key``."""
        return LanguageModel(self, key=key)


@register_model(LMConfig)
class LanguageModel(eqx.Module):
    """Symbols -> tokens (+ positions) -> M causal transformer blocks -> norm -> logits.

    ``__call__`` maps one sequence of N <= window symbol ids to (N, |V|) logits, row n predicting
    symbol n + 1. Each head's values are factored through D / H dimensions (``value_dim``), the
    usual GPT layout; positions are learned embeddings or rotary. The :class:`LMConfig` chooses
    the blocks' parts: chapter 9's character model, GPT-2 and SmolLM2 are all this class.
    """

    tokeniser: DiscreteTokeniser
    position_embedding: PositionEmbedding | None
    # M blocks, or with config.scan_blocks one block whose arrays have a leading axis of M
    blocks: tuple[TransformerBlock, ...] | TransformerBlock
    final_norm: LayerNorm | RMSNorm
    unembedding: eqx.nn.Linear | None
    config: LMConfig = eqx.field(static=True)

    def __init__(self, config: LMConfig, *, key: PRNGKeyArray):
        """Initialise the token table, positions, M blocks and read-out from ``config``.

        Args:
            config: the sizes (|V|, window, D, H, M) and the choice of each part.
            key: a PRNG key.
        """
        token_key, position_key, block_key, out_key = jax.random.split(key, 4)
        d = config.block.dim
        tokeniser = DiscreteTokeniser(config.vocab_size, d, key=token_key)
        self.tokeniser = eqx.tree_at(
            lambda t: t.table, tokeniser, tokeniser.table * config.embedding_init_scale
        )
        self.position_embedding = (
            PositionEmbedding(
                config.window, d, init_scale=config.embedding_init_scale, key=position_key
            )
            if config.learned_positions
            else None
        )
        block_keys = jax.random.split(block_key, config.num_blocks)
        if config.scan_blocks:
            self.blocks = eqx.filter_vmap(lambda k: TransformerBlock(config.block, key=k))(
                block_keys
            )
        else:
            self.blocks = tuple(TransformerBlock(config.block, key=k) for k in block_keys)
        self.final_norm = config.block.make_norm()
        self.unembedding = (
            None if config.tied_embeddings else eqx.nn.Linear(d, config.vocab_size, key=out_key)
        )
        self.config = config

    def _check(self, symbols: ArrayLike, start: int = 0) -> None:
        n = symbols.shape[-1]
        if n == 0:
            raise ValueError("the context is empty: give the model at least one symbol")
        if start + n > self.config.window:
            raise ValueError(
                f"a context of {start + n} symbols is longer than the model's window of "
                f"{self.config.window}"
            )

    def embed(
        self, symbols: Int[ArrayLike, " N"], start: Int[Array, ""] | int = 0
    ) -> Float[Array, "N D"]:
        """The tokens ``x_n`` of N symbol ids at positions ``start, ..., start + N - 1``.

        With learned positions, each token is its row of the table plus its position's embedding;
        with rotary positions, the blocks add the positions and this is the table row alone.
        """
        x = self.tokeniser(symbols)
        if self.position_embedding is not None:
            table = self.position_embedding.table()
            x = x + jax.lax.dynamic_slice_in_dim(table, start, symbols.shape[0])
        return x

    def readout(self, x: Float[Array, "... D"]) -> Float[Array, "... V"]:
        """Logits over the |V| symbols from the last block's tokens.

        The final norm, then the read-out matrix; with tied embeddings the read-out is the token
        table itself, so logit v is ``e_vᵀ x̄_n``.
        """
        x = self.final_norm(x)
        if self.unembedding is None:
            return x @ self.tokeniser.table.T  # a table in blocks multiplies so too
        return x @ self.unembedding.weight.T + self.unembedding.bias

    def __call__(
        self, symbols: Int[ArrayLike, " N"], *, causal: bool = True
    ) -> Float[Array, "N V"]:
        """Next-symbol logits at every position of one sequence: row n predicts symbol n + 1.

        ``causal=False`` drops the mask (a model that peeks at the future: only for demonstrating
        why the mask is there).
        """
        self._check(symbols)
        x = self.embed(symbols)
        mask = causal_mask(symbols.shape[0]) if causal else None
        x, _ = self._through_blocks(lambda block, x, _: (block(x, mask), None), x)
        return self.readout(x)

    def batched(self, symbols: Int[ArrayLike, "B N"]) -> Float[Array, "B N V"]:
        """``jax.vmap(self)(symbols)`` through the blocks' fast batched paths.

        This is what training uses.
        """
        self._check(symbols)
        x = jax.vmap(self.embed)(symbols)
        mask = causal_mask(symbols.shape[1])
        x, _ = self._through_blocks(lambda block, x, _: (block.batched(x, mask), None), x)
        return self.readout(x)

    def attention_maps(self, symbols: Int[ArrayLike, " N"]) -> Float[Array, "M H N N"]:
        """``A_h[n', n]`` of every head of every block on one sequence (columns sum to one)."""
        self._check(symbols)
        x = self.embed(symbols)
        mask = causal_mask(symbols.shape[0])

        def block_and_map(block, x, _):
            weights = block.attention.attention_weights(jax.vmap(block.attention_norm)(x), mask)
            return block(x, mask), weights

        _, maps = self._through_blocks(block_and_map, x)
        return jnp.stack(maps)

    def _through_blocks(self, apply, x, per_block=None):
        """``x`` through the M blocks in order, ``x, out_m = apply(block_m, x, per_block[m])``.

        Returns the last ``x`` and the M outputs: with scanned blocks, one ``lax.scan`` over the
        stacked arrays (and ``per_block``) stacks them along a leading axis; otherwise a Python
        loop, which XLA unrolls, returns them as a tuple (``per_block`` is then a sequence).
        Matrices kept in blocks are not sliced by the scan: step m reads matrix m in the stack
        (their ``of_layer(m)``, :meth:`~transformer_intro.quantisation.QuantisedMatrix.of_layer`),
        where a slice would be copied before every product.
        """
        if self.config.scan_blocks:
            matrices, others = eqx.partition(self.blocks, _is_matrix, is_leaf=_is_matrix)
            arrays, rest = eqx.partition(others, eqx.is_array)

            def step(x, inputs):
                m, block_arrays, extra = inputs
                layers = jax.tree.map(lambda w: w.of_layer(m), matrices, is_leaf=_is_matrix)
                block = eqx.combine(block_arrays, rest, layers, is_leaf=_is_matrix)
                return apply(block, x, extra)

            steps = jnp.arange(self.config.num_blocks)
            return jax.lax.scan(step, x, (steps, arrays, per_block))
        outputs = []
        for m, block in enumerate(self.blocks):
            x, out = apply(block, x, None if per_block is None else per_block[m])
            outputs.append(out)
        return x, tuple(outputs)

    def stacked(self) -> LanguageModel:
        """This model with scanned blocks (``scan_blocks=True``).

        The same numbers: the M blocks' arrays stacked along a leading axis.
        """
        if self.config.scan_blocks:
            return self
        arrays = [eqx.filter(block, eqx.is_array) for block in self.blocks]
        stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *arrays)
        blocks = eqx.combine(stacked, eqx.filter(self.blocks[0], eqx.is_array, inverse=True))
        with_blocks = eqx.tree_at(lambda m: m.blocks, self, blocks)
        # the configuration is static: the structure comes from a model built with the new one
        skeleton = eqx.filter_eval_shape(
            LanguageModel, self.config.replace(scan_blocks=True), key=jax.random.PRNGKey(0)
        )
        return jax.tree.unflatten(jax.tree.structure(skeleton), jax.tree.leaves(with_blocks))

    # -- generation with a key-value cache -------------------------------------------------------

    def empty_cache(self, window: int | None = None, dtype=jnp.float32) -> tuple:
        """One preallocated (keys, values) pair per block, each of shape (H_kv, window, K).

        H_kv is the number of key-value heads; ``window`` is the model's window by default. With
        scanned blocks, one pair for all M blocks, of shape (M, H_kv, window, K).
        """
        window = self.config.window if window is None else window
        if not 1 <= window <= self.config.window:
            raise ValueError(f"window must be between 1 and {self.config.window}, got {window}")
        if self.config.scan_blocks:
            # one block's cache, with a leading axis of M (the cache takes no weights' values)
            one = jax.tree.map(lambda a: a[0], eqx.filter(self.blocks, eqx.is_array))
            block = eqx.combine(one, eqx.filter(self.blocks, eqx.is_array, inverse=True))
            keys, values = block.empty_cache(window, dtype)
            return tuple(
                jnp.broadcast_to(a, (self.config.num_blocks, *a.shape)) for a in (keys, values)
            )
        return tuple(block.empty_cache(window, dtype) for block in self.blocks)

    def extend_tokens(
        self, symbols: Int[Array, " T"], cache: tuple, start: Int[Array, ""] | int
    ) -> tuple[Float[Array, "T D"], tuple]:
        """The last block's tokens for T new symbols at positions ``start, ...``, and the cache.

        The earlier symbols are read from ``cache``. :meth:`readout` turns any of the tokens into
        logits; a prompt needs only its last one's.
        """
        x = self.embed(symbols, start)
        return self._through_blocks(lambda block, x, c: block.extend(x, c, start), x, cache)

    def extend(
        self, symbols: Int[Array, " T"], cache: tuple, start: Int[Array, ""] | int
    ) -> tuple[Float[Array, "T V"], tuple]:
        """Logits for T new symbols at positions ``start, ...``.

        The earlier ones are read from ``cache``.
        """
        x, cache = self.extend_tokens(symbols, cache, start)
        return self.readout(x), cache


def _is_matrix(x) -> bool:
    """A stack of matrices that gives matrix m without a copy (one kept in blocks)."""
    return hasattr(x, "of_layer")


# The chapter's model (trained with `tasks.SHAKESPEARE_RECIPE`; benchmarks/lm_time_to_loss.py
# times them): validation loss below 1.75 nats/char on the held-out plays.
SHAKESPEARE_CONFIG = LMConfig(vocab_size=84, window=64, block=SHAKESPEARE_BLOCK, num_blocks=4)
