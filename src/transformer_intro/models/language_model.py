"""A decoder-only (GPT-style) character language model: the transformer block under a causal mask.

The model reads symbols ``s_1, ..., s_N`` and outputs, at every position n, logits for the next
symbol: a categorical distribution ``p(s_{n+1} | s_1, ..., s_n)``. The causal mask stops output n
from reading any input after n, so one pass over a window of N symbols trains N predictions at
once, and the product of the predictions is the probability of the whole window.

Generation appends one sampled symbol at a time. :func:`generate` keeps every block's keys and
values in a preallocated cache (:meth:`MultiHeadAttention.extend`), so each new symbol costs one
token's work; ``generate(..., cache=False)`` recomputes the whole window for every symbol.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

from ..attention import causal_mask
from ..block import TransformerBlock
from ..normalisation import LayerNorm
from ..positions import PositionEmbedding
from ..tokenisers import DiscreteTokeniser, Vocabulary

__all__ = [
    "LMConfig",
    "LanguageModel",
    "SHAKESPEARE_CONFIG",
    "cached_logits",
    "complete",
    "generate",
    "sample_symbol",
    "time_generation",
]


@dataclasses.dataclass(frozen=True)
class LMConfig:
    """Every choice that shapes a :class:`LanguageModel`. Plain values, so it saves as JSON."""

    vocab_size: int
    window: int = 128  # the longest context the model reads, in symbols
    dim: int = 128
    num_heads: int = 4
    num_blocks: int = 4
    mlp_hidden_dim: int = 512
    positions: Literal["learned", "rotary"] = "rotary"
    embedding_init_scale: float = 0.02

    def __post_init__(self):
        if self.vocab_size < 1 or self.window < 1 or self.num_blocks < 1:
            raise ValueError(f"vocab_size, window and num_blocks must be positive, got {self}")
        if self.dim % self.num_heads:
            raise ValueError(f"dim={self.dim} is not divisible by num_heads={self.num_heads}")
        if self.positions not in ("learned", "rotary"):
            raise ValueError(f"positions must be 'learned' or 'rotary', got {self.positions!r}")

    def replace(self, **changes) -> LMConfig:
        return dataclasses.replace(self, **changes)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> LMConfig:
        return cls(**json.loads(text))


class LanguageModel(eqx.Module):
    """Symbols -> tokens (+ positions) -> M causal transformer blocks -> LayerNorm -> logits.

    ``__call__`` maps one sequence of N <= window symbol ids to (N, V) logits, row n predicting
    symbol n + 1. Each head's values are factored through D / H dimensions (``value_dim``), the
    usual GPT layout; positions are learned embeddings or rotary.
    """

    tokeniser: DiscreteTokeniser
    position_embedding: PositionEmbedding | None
    blocks: tuple[TransformerBlock, ...]
    final_norm: LayerNorm
    unembedding: eqx.nn.Linear
    config: LMConfig = eqx.field(static=True)

    def __init__(self, config: LMConfig, *, key: PRNGKeyArray):
        token_key, position_key, block_key, out_key = jax.random.split(key, 4)
        d = config.dim
        tokeniser = DiscreteTokeniser(config.vocab_size, d, key=token_key)
        self.tokeniser = eqx.tree_at(
            lambda t: t.table, tokeniser, tokeniser.table * config.embedding_init_scale
        )
        rotary = config.positions == "rotary"
        self.position_embedding = (
            None
            if rotary
            else PositionEmbedding(
                config.window, d, init_scale=config.embedding_init_scale, key=position_key
            )
        )
        self.blocks = tuple(
            TransformerBlock(
                d,
                config.num_heads,
                config.mlp_hidden_dim,
                value_dim=d // config.num_heads,
                rotary=rotary,
                key=k,
            )
            for k in jax.random.split(block_key, config.num_blocks)
        )
        self.final_norm = LayerNorm(d)
        self.unembedding = eqx.nn.Linear(d, config.vocab_size, key=out_key)
        self.config = config

    def _check(self, symbols: Array, start: int = 0) -> None:
        n = symbols.shape[-1]
        if n == 0:
            raise ValueError("the context is empty: give the model at least one symbol")
        if start + n > self.config.window:
            raise ValueError(
                f"a context of {start + n} symbols is longer than the model's window of "
                f"{self.config.window}"
            )

    def embed(
        self, symbols: Int[Array, " N"], start: Int[Array, ""] | int = 0
    ) -> Float[Array, "N D"]:
        x = self.tokeniser(symbols)
        if self.position_embedding is not None:
            table = self.position_embedding.table()
            x = x + jax.lax.dynamic_slice_in_dim(table, start, symbols.shape[0])
        return x

    def readout(self, x: Float[Array, "... D"]) -> Float[Array, "... V"]:
        x = self.final_norm(x)
        return x @ self.unembedding.weight.T + self.unembedding.bias

    def __call__(self, symbols: Int[Array, " N"], *, causal: bool = True) -> Float[Array, "N V"]:
        """Next-symbol logits at every position of one sequence. ``causal=False`` drops the mask
        (a model that peeks at the future: only for demonstrating why the mask is there)."""
        self._check(symbols)
        x = self.embed(symbols)
        mask = causal_mask(symbols.shape[0]) if causal else None
        for block in self.blocks:
            x = block(x, mask)
        return self.readout(x)

    def batched(self, symbols: Int[Array, "B N"]) -> Float[Array, "B N V"]:
        """``jax.vmap(self)(symbols)`` through the blocks' fast batched paths.

        This is what training uses.
        """
        self._check(symbols)
        x = jax.vmap(self.embed)(symbols)
        mask = causal_mask(symbols.shape[1])
        for block in self.blocks:
            x = block.batched(x, mask)
        return self.readout(x)

    def attention_maps(self, symbols: Int[Array, " N"]) -> Float[Array, "M H N N"]:
        """``A_h[n', n]`` of every head of every block on one sequence (columns sum to one)."""
        self._check(symbols)
        x = self.embed(symbols)
        mask = causal_mask(symbols.shape[0])
        maps = []
        for block in self.blocks:
            maps.append(block.attention.attention_weights(jax.vmap(block.attention_norm)(x), mask))
            x = block(x, mask)
        return jnp.stack(maps)

    # -- generation with a key-value cache -------------------------------------------------------

    def empty_cache(self) -> tuple:
        """One preallocated (keys, values) pair per block, each of the window's length."""
        return tuple(block.empty_cache(self.config.window) for block in self.blocks)

    def extend(
        self, symbols: Int[Array, " T"], cache: tuple, start: Int[Array, ""] | int
    ) -> tuple[Float[Array, "T V"], tuple]:
        """Logits for T new symbols at positions ``start, ...``.

        The earlier ones are read from ``cache``.
        """
        x = self.embed(symbols, start)
        new_cache = []
        for block, block_cache in zip(self.blocks, cache):
            x, block_cache = block.extend(x, block_cache, start)
            new_cache.append(block_cache)
        return self.readout(x), tuple(new_cache)


# The chapter's model (trained with `tasks.SHAKESPEARE_RECIPE`; benchmarks/lm_time_to_loss.py
# times them): validation loss below 1.75 nats/char on the held-out plays.
SHAKESPEARE_CONFIG = LMConfig(
    vocab_size=84, window=64, dim=128, num_heads=4, num_blocks=4, mlp_hidden_dim=512
)


# ---------------------------------------------------------------------------------------------
# Sampling
# ---------------------------------------------------------------------------------------------


def sample_symbol(
    logits: Float[Array, " V"],
    key: PRNGKeyArray,
    temperature: float = 1.0,
    top_k: int | None = None,
) -> Int[Array, ""]:
    """Draw a symbol from ``softmax(logits / temperature)`` restricted to the ``top_k`` likeliest.

    ``temperature=0`` is greedy decoding, the limit of ever lower temperatures.
    """
    if temperature < 0:
        raise ValueError(f"temperature must be non-negative, got {temperature}")
    if temperature == 0:
        return jnp.argmax(logits)
    if top_k is not None:
        if not 1 <= top_k <= logits.shape[-1]:
            raise ValueError(
                f"top_k must be between 1 and the vocabulary size {logits.shape[-1]}, got {top_k}"
            )
        kth = jax.lax.top_k(logits, top_k)[0][-1]
        logits = jnp.where(logits >= kth, logits, -jnp.inf)
    return jax.random.categorical(key, logits / temperature)


def _check_generation(model: LanguageModel, prompt: Array, num_symbols: int) -> None:
    model._check(prompt)
    if num_symbols < 1:
        raise ValueError(f"num_symbols must be at least 1, got {num_symbols}")


@eqx.filter_jit
def cached_logits(
    model: LanguageModel, symbols: Int[Array, " N"], prefill: int
) -> Float[Array, "N V"]:
    """The logits of every position computed as generation computes them: the first ``prefill``
    symbols in one pass, then one symbol at a time through the cache (the symbols are given, not
    sampled). Equal to ``model(symbols)``."""
    model._check(symbols)
    if not 1 <= prefill <= symbols.shape[0]:
        raise ValueError(
            f"prefill must be between 1 and the {symbols.shape[0]} symbols, got {prefill}"
        )
    first, cache = model.extend(symbols[:prefill], model.empty_cache(), 0)

    def step(cache, position):
        symbol = jax.lax.dynamic_slice_in_dim(symbols, position, 1)
        logits, cache = model.extend(symbol, cache, position)
        return cache, logits[0]

    _, rest = jax.lax.scan(step, cache, jnp.arange(prefill, symbols.shape[0]))
    return jnp.concatenate([first, rest])


@eqx.filter_jit
def _generate_cached(model, prompt, key, num_symbols: int, temperature: float, top_k: int | None):
    window = model.config.window
    keep = window // 2  # when the cache is full, the newest half of the window is kept
    logits, cache = model.extend(prompt, model.empty_cache(), 0)
    context = jnp.zeros(window, prompt.dtype).at[: prompt.shape[0]].set(prompt)

    def step(carry, step_key):
        logits, cache, context, length = carry
        symbol = sample_symbol(logits[-1], step_key, temperature, top_k).astype(prompt.dtype)

        def append(_):
            new_context = jax.lax.dynamic_update_slice(context, symbol[None], (length,))
            new_logits, new_cache = model.extend(symbol[None], cache, length)
            return new_logits[-1], new_cache, new_context, length + 1

        def slide(_):
            # The window is full: keep its newest symbols and rebuild the cache from them.
            kept = jnp.concatenate([context[window - keep + 1 :], symbol[None]])
            new_logits, new_cache = model.extend(kept, model.empty_cache(), 0)
            return (
                new_logits[-1],
                new_cache,
                jnp.zeros_like(context).at[:keep].set(kept),
                jnp.int32(keep),
            )

        logits, cache, context, length = jax.lax.cond(length < window, append, slide, None)
        return (logits[None], cache, context, length), symbol

    carry = (logits[-1:], cache, context, jnp.int32(prompt.shape[0]))
    _, symbols = jax.lax.scan(step, carry, jax.random.split(key, num_symbols))
    return symbols


@eqx.filter_jit
def _generate_uncached(model, prompt, key, num_symbols: int, temperature: float, top_k: int | None):
    window = model.config.window
    context = jnp.zeros(window, prompt.dtype).at[: prompt.shape[0]].set(prompt)

    def step(carry, step_key):
        context, length = carry
        # The whole window, every step; positions after the last symbol are masked out causally.
        logits = model(context)[length - 1]
        symbol = sample_symbol(logits, step_key, temperature, top_k).astype(prompt.dtype)
        full = length == window
        context = jnp.where(full, jnp.roll(context, -1), context)
        length = jnp.where(full, length, length + 1)
        context = jax.lax.dynamic_update_slice(context, symbol[None], (length - 1,))
        return (context, length), symbol

    _, symbols = jax.lax.scan(
        step, (context, jnp.int32(prompt.shape[0])), jax.random.split(key, num_symbols)
    )
    return symbols


def generate(
    model: LanguageModel,
    prompt: Int[Array, " P"],
    num_symbols: int,
    key: PRNGKeyArray,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    cache: bool = True,
) -> Int[Array, " num_symbols"]:
    """``num_symbols`` new symbol ids sampled one at a time after ``prompt``.

    With ``cache=True`` one jitted ``lax.scan`` does it all: the prompt fills the key-value cache
    in one pass (the prefill), then each step samples a symbol and runs the model on that symbol
    alone. When the window is full, the newest half of it is kept and the cache rebuilt from it.
    ``cache=False`` recomputes the window for every symbol, sliding it by one once it is full.
    The prompt itself must fit the window.
    """
    prompt = jnp.asarray(prompt, jnp.int32)
    _check_generation(model, prompt, num_symbols)
    fn = _generate_cached if cache else _generate_uncached
    return fn(model, prompt, key, num_symbols, temperature, top_k)


def complete(
    model: LanguageModel,
    vocabulary: Vocabulary,
    prompt: str,
    num_symbols: int,
    key: PRNGKeyArray,
    **options,
) -> str:
    """The prompt followed by ``num_symbols`` sampled characters, as text."""
    ids = vocabulary.encode(prompt)
    return prompt + vocabulary.decode(np.asarray(generate(model, ids, num_symbols, key, **options)))


def time_generation(
    model: LanguageModel,
    prompt: Int[Array, " P"],
    num_symbols: int,
    key: PRNGKeyArray,
    *,
    cache: bool,
    repeats: int = 3,
    **options,
) -> float:
    """Best-of-``repeats`` seconds to generate ``num_symbols`` symbols.

    Timed after one call that compiles.
    """
    generate(model, prompt, num_symbols, key, cache=cache, **options).block_until_ready()
    best = math.inf
    for _ in range(repeats):
        tic = time.perf_counter()
        generate(model, prompt, num_symbols, key, cache=cache, **options).block_until_ready()
        best = min(best, time.perf_counter() - tic)
    return best
