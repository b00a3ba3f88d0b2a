"""Generation for any :class:`~.language_model.LanguageModel`: one sampler, one decoding loop.

Generating appends one sampled token at a time. The prompt goes through the model in one causal
pass (:func:`prefill`), which fills every block's key-value cache; then :func:`decode` runs one
``lax.scan`` whose every step samples a token from the last logits (:func:`sample_token`) and
runs the model on that token alone, reading the earlier ones from the cache.

Two entry points share those two programs. :func:`generate` is chapter 9's: it samples at
temperature 1 by default and, once the window is full, keeps the newest half of it and rebuilds
the cache from it, so it can generate past the window. :func:`generate_ids` is chapter 15's, for a
large pretrained model: greedy by default, it pads the prompt so that prompts of similar lengths
share one compilation, sizes the cache to what the prompt and the new tokens need, and refuses
to run past the model's context.
"""

from __future__ import annotations

import math
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int, PRNGKeyArray

from ..tokenisers import Vocabulary
from ..xla_flags import optimised_jit
from .language_model import LanguageModel

# Not public, though importable: cached_logits (generation's arithmetic with given symbols, for
# chapter 9's check and the tests) and time_generation (a measurement of chapter 9 and
# benchmarks/lm_sampling_speed.py) are helpers around generation, not part of it.
__all__ = [
    "compiled_decode",
    "complete",
    "decode",
    "generate",
    "generate_ids",
    "padded_prompt",
    "prefill",
    "sample_token",
]

# Prompts given to generate_ids are padded to a multiple of this many tokens: prompts of similar
# lengths then share one compilation, and at most 15 padding tokens are computed for nothing.
PROMPT_MULTIPLE = 16
# The smallest temperature the sampler divides by; at 0 it returns the argmax instead.
_TINY_TEMPERATURE = 1e-6


# ---------------------------------------------------------------------------------------------
# The sampler


def check_sampling(
    vocab_size: int, temperature: float, top_k: int | None, top_p: float | None
) -> None:
    """Raise ``ValueError`` naming the option that is out of its range."""
    if temperature < 0:
        raise ValueError(f"temperature must be non-negative, got {temperature}")
    if top_k is not None and not 1 <= top_k <= vocab_size:
        raise ValueError(
            f"top_k must be between 1 and the vocabulary size {vocab_size}, got {top_k}"
        )
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")


def _keep_top_k(logits: Float[Array, " V"], k: int) -> Float[Array, " V"]:
    kth = jax.lax.top_k(logits, k)[0][-1]
    return jnp.where(logits >= kth, logits, -jnp.inf)


def _keep_nucleus(logits: Float[Array, " V"], p: Float[Array, ""] | float) -> Float[Array, " V"]:
    # The smallest set of likeliest tokens whose probabilities add up to at least p: a token is
    # kept when the tokens likelier than it add up to less than p (the likeliest always is).
    ordered = jnp.sort(logits)[::-1]
    probabilities = jax.nn.softmax(ordered)
    before = jnp.cumsum(probabilities) - probabilities
    smallest_kept = jnp.min(jnp.where(before < p, ordered, jnp.inf))
    return jnp.where(logits >= smallest_kept, logits, -jnp.inf)


def sample_token(
    logits: Float[Array, " V"],
    key: PRNGKeyArray,
    temperature: Float[Array, ""] | float = 1.0,
    top_k: int | None = None,
    top_p: Float[Array, ""] | float | None = None,
) -> Int[Array, ""]:
    """Draw a token from ``softmax(logits / temperature)``, kept to the likeliest few.

    ``top_k`` keeps the ``k`` likeliest tokens, ``top_p`` the smallest set of likeliest tokens
    whose probabilities add up to at least ``p`` (each when given). ``temperature=0`` is greedy
    decoding, the limit of ever lower temperatures. ``temperature`` and ``top_p`` may be arrays,
    so that greedy decoding and sampling share one compilation; ``top_k`` fixes a shape and is a
    Python int. Check the options with :func:`check_sampling`.
    """

    def sampled() -> Int[Array, ""]:
        scaled = logits / jnp.maximum(temperature, _TINY_TEMPERATURE)
        if top_k is not None:
            scaled = _keep_top_k(scaled, top_k)
        if top_p is not None:
            scaled = _keep_nucleus(scaled, top_p)
        return jax.random.categorical(key, scaled).astype(jnp.int32)

    def greedy() -> Int[Array, ""]:
        return jnp.argmax(logits).astype(jnp.int32)

    # a branch, not both and a choice: greedy decoding skips the random draw over the vocabulary
    return jax.lax.cond(jnp.asarray(temperature) > 0, sampled, greedy)


# ---------------------------------------------------------------------------------------------
# Prefill and the decoding loop


@optimised_jit
def prefill(
    model: LanguageModel, ids: Int[Array, " P"], length: Int[Array, ""] | int, window: int
) -> tuple[Float[Array, " V"], tuple]:
    """The prompt in one pass: the logits after its last real token, and the filled cache.

    ``ids`` may be padded past ``length`` (so that prompts of similar lengths share one
    compilation): a padding token's keys sit in the cache only until generation overwrites that
    slot with the next real token, which it does before any query can read it. The cache holds
    ``window`` tokens.
    """
    tokens, cache = model.extend_tokens(ids, model.empty_cache(window), 0)
    # Only the last real token's logits are needed: for SmolLM2 the read-out of the other tokens
    # would be a fifth of the prompt's work (49,152 x 576 per token).
    return model.readout(tokens[length - 1]), cache


def _cache_window(cache) -> int:
    # every block's keys: (H_kv, window, K), with scanned blocks (M, H_kv, window, K)
    return jax.tree.leaves(cache)[0].shape[-2]


@optimised_jit
def decode(
    model: LanguageModel,
    logits: Float[Array, " V"],
    cache: tuple,
    length: Int[Array, ""],
    key: PRNGKeyArray,
    num_tokens: int,
    temperature: Float[Array, ""],
    top_k: int | None = None,
    top_p: Float[Array, ""] | None = None,
    context: Int[Array, " W"] | None = None,
) -> Int[Array, " T"]:
    """``num_tokens`` tokens after a prompt of ``length`` tokens, one model step each, in one scan.

    ``logits`` and ``cache`` are :func:`prefill`'s. Without ``context`` the cache must have room
    for every new token. With ``context`` (the cache's ``W`` slots of token ids, the prompt
    first), a full cache slides: its newest half is kept and the cache rebuilt from it.
    """
    window = _cache_window(cache)
    keep = window // 2

    def append(logits, cache, context, length, token):
        new_logits, cache = model.extend(token[None], cache, length)
        if context is not None:
            context = jax.lax.dynamic_update_slice(context, token[None], (length,))
        return new_logits[-1], cache, context, length + 1

    def slide(logits, cache, context, length, token):
        kept = jnp.concatenate([context[window - keep + 1 :], token[None]])
        new_logits, cache = model.extend(kept, model.empty_cache(window), 0)
        return new_logits[-1], cache, jnp.zeros_like(context).at[:keep].set(kept), jnp.int32(keep)

    def step(carry, step_key):
        logits, cache, context, length = carry
        token = sample_token(logits, step_key, temperature, top_k, top_p)
        if context is None:
            carry = append(logits, cache, context, length, token)
        else:
            carry = jax.lax.cond(
                length < window, append, slide, logits, cache, context, length, token
            )
        return carry, token

    carry = (logits, cache, context, jnp.asarray(length, jnp.int32))
    _, tokens = jax.lax.scan(step, carry, jax.random.split(key, num_tokens))
    return tokens


def compiled_decode(model: LanguageModel, prompt: Int[Array, " P"], window: int, *args):
    """:func:`decode` compiled for the logits and cache that :func:`prefill` will return.

    ``args`` are :func:`decode`'s after the cache. Call it before :func:`prefill` runs:
    compiling a program over all the blocks (30 for SmolLM2) needs memory for a while, and
    before the prompt's pass that memory comes on top of the model alone, not of the model, the
    prompt's program and its cache, which lowers the peak (``benchmarks/pretrained_speed.py``
    prints it). Only shapes matter for compiling, so the logits and cache are stand-ins that
    take no memory. JAX keeps the result, so the next prompt of the same shapes is not compiled
    again.
    """
    shapes = eqx.filter_eval_shape(prefill, model, prompt, 1, window)
    stand_ins = jax.tree.map(lambda s: np.broadcast_to(np.zeros((), s.dtype), s.shape), shapes)
    return decode.lower(model, *stand_ins, *args).compile()


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def padded_prompt(model: LanguageModel, ids: np.ndarray, num_tokens: int) -> tuple[np.ndarray, int]:
    """The prompt zero-padded for :func:`prefill`, and the cache length it needs.

    The prompt is padded to a multiple of ``PROMPT_MULTIPLE`` tokens; the cache holds it and
    ``num_tokens`` more, rounded up to a multiple of 128 within the model's context.

    Raises:
        ValueError: when the prompt and the new tokens exceed the model's context.
    """
    if ids.size + num_tokens > model.config.window:
        raise ValueError(
            f"{ids.size} prompt tokens and {num_tokens} new ones exceed the model's context of "
            f"{model.config.window}"
        )
    # Padding never runs past the context, whatever multiple the context is of 16.
    prompt = np.zeros(min(_round_up(ids.size, PROMPT_MULTIPLE), model.config.window), np.int32)
    prompt[: ids.size] = ids
    window = min(_round_up(prompt.size + num_tokens, 128), model.config.window)
    return prompt, window


# ---------------------------------------------------------------------------------------------
# The two entry points


def _check_prompt(model: LanguageModel, prompt: Array, num_tokens: int) -> None:
    model._check(prompt)
    if num_tokens < 1:
        raise ValueError(f"the number of new tokens must be at least 1, got {num_tokens}")


def generate(
    model: LanguageModel,
    prompt: Int[ArrayLike, " P"],
    num_tokens: int,
    key: PRNGKeyArray,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    cache: bool = True,
) -> Int[Array, " num_tokens"]:
    """``num_tokens`` new token ids sampled one at a time after ``prompt``.

    With ``cache=True`` the prompt fills the key-value cache in one pass, then each step samples
    a token and runs the model on that token alone; when the window is full, its newest half is
    kept and the cache rebuilt from it. ``cache=False`` recomputes the window for every token,
    sliding it by one once it is full. The prompt itself must fit the window.
    """
    prompt = jnp.asarray(prompt, jnp.int32)
    _check_prompt(model, prompt, num_tokens)
    check_sampling(model.config.vocab_size, temperature, top_k, top_p)
    temperature = jnp.float32(temperature)
    top_p = None if top_p is None else jnp.float32(top_p)
    if not cache:
        return _generate_uncached(model, prompt, key, num_tokens, temperature, top_k, top_p)
    window, length = model.config.window, prompt.shape[0]
    logits, kv = prefill(model, prompt, length, window)
    length = jnp.int32(length)  # an array, so that prompts of any length share decode's program
    # the context of token ids is carried only when the window will fill up
    context = None
    if prompt.shape[0] + num_tokens > window:
        context = jnp.zeros(window, jnp.int32).at[: prompt.shape[0]].set(prompt)
    return decode(model, logits, kv, length, key, num_tokens, temperature, top_k, top_p, context)


@optimised_jit
def _generate_uncached(model, prompt, key, num_tokens: int, temperature, top_k, top_p):
    window = model.config.window
    context = jnp.zeros(window, jnp.int32).at[: prompt.shape[0]].set(prompt)

    def step(carry, step_key):
        context, length = carry
        # The whole window, every step; positions after the last token are masked out causally.
        logits = model(context)[length - 1]
        token = sample_token(logits, step_key, temperature, top_k, top_p)
        full = length == window
        context = jnp.where(full, jnp.roll(context, -1), context)
        length = jnp.where(full, length, length + 1)
        context = jax.lax.dynamic_update_slice(context, token[None], (length - 1,))
        return (context, length), token

    _, tokens = jax.lax.scan(
        step, (context, jnp.int32(prompt.shape[0])), jax.random.split(key, num_tokens)
    )
    return tokens


def generate_ids(
    model: LanguageModel,
    ids,
    num_tokens: int,
    *,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    key: PRNGKeyArray | None = None,
) -> np.ndarray:
    """``num_tokens`` new token ids after the prompt ``ids`` (greedy at temperature 0).

    The prompt is padded (:func:`padded_prompt`), and decoding is compiled before the prompt's
    pass (:func:`compiled_decode`), which lowers the memory peak of a large model.

    Raises:
        ValueError: on an empty prompt, no new tokens, options out of range, a temperature above
            0 without a key, or a prompt and new tokens longer than the model's context.
    """
    ids = np.asarray(ids, np.int32)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError(f"the prompt must be a non-empty list of token ids, got shape {ids.shape}")
    if num_tokens < 1:
        raise ValueError(f"num_tokens must be at least 1, got {num_tokens}")
    check_sampling(model.config.vocab_size, temperature, top_k, top_p)
    if temperature > 0 and key is None:
        raise ValueError("sampling at a temperature above 0 needs a PRNG key")
    prompt, window = padded_prompt(model, ids, num_tokens)
    prompt, length = jnp.asarray(prompt), jnp.int32(ids.size)
    key = jax.random.PRNGKey(0) if key is None else key
    options = (jnp.float32(temperature), top_k, None if top_p is None else jnp.float32(top_p))
    program = compiled_decode(model, prompt, window, length, key, num_tokens, *options)
    logits, cache = prefill(model, prompt, length, window)
    return np.asarray(program(model, logits, cache, length, key, num_tokens, *options))


def complete(
    model: LanguageModel,
    vocabulary: Vocabulary,
    prompt: str,
    num_symbols: int,
    key: PRNGKeyArray,
    **options,
) -> str:
    """The prompt followed by ``num_symbols`` sampled characters, as text (see :func:`generate`)."""
    ids = vocabulary.encode(prompt)
    return prompt + vocabulary.decode(np.asarray(generate(model, ids, num_symbols, key, **options)))


# ---------------------------------------------------------------------------------------------
# Helpers for checks and measurements


@eqx.filter_jit
def cached_logits(
    model: LanguageModel, symbols: Int[Array, " N"], prefill: int
) -> Float[Array, "N V"]:
    """The logits of every position, computed as generation computes them.

    The first ``prefill`` symbols go through in one pass, then one symbol at a time through the
    cache (the symbols are given, not sampled). Equal to ``model(symbols)``.
    """
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


def time_generation(
    model: LanguageModel,
    prompt: Int[ArrayLike, " P"],
    num_tokens: int,
    key: PRNGKeyArray,
    *,
    cache: bool,
    repeats: int = 3,
    **options,
) -> float:
    """Best-of-``repeats`` seconds to generate ``num_tokens`` tokens.

    Timed after one call that compiles.
    """
    generate(model, prompt, num_tokens, key, cache=cache, **options).block_until_ready()
    best = math.inf
    for _ in range(repeats):
        tic = time.perf_counter()
        generate(model, prompt, num_tokens, key, cache=cache, **options).block_until_ready()
        best = min(best, time.perf_counter() - tic)
    return best
