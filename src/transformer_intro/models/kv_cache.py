"""The key-value cache beyond one prompt: its size, kept across a conversation, cut to a window.

:mod:`.generation` fills a cache from a prompt and decodes after it. A conversation is a prompt
that keeps growing, turn after turn; :class:`Conversation` keeps its cache between the turns and
runs the model only on each turn's new tokens, where filling a cache again from the whole
conversation would run it on every earlier token once more at every turn. The cache holds
``2 M H_kv K`` numbers per token (:func:`cache_bytes`), so it grows with the context; a
*sliding window* keeps only the keys and values of the last few positions, at every block
(:func:`sliding_window_mask`, :func:`windowed_logits`), and its memory stays fixed.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from ..xla_flags import optimised_jit
from .generation import PROMPT_MULTIPLE, check_sampling, sample_token
from .language_model import LanguageModel, LMConfig

__all__ = [
    "Conversation",
    "cache_bytes",
    "sliding_window_mask",
    "windowed_logits",
]

# A conversation's cache grows in steps of this many positions: each size compiles its programs
# once, and every decoding step reads the whole cache (masked), so a cache far larger than the
# conversation would cost time at every token.
CACHE_STEP = 256


def cache_bytes(config: LMConfig, context: int, bytes_per_number: float = 4) -> float:
    """Bytes of the key-value cache for ``context`` tokens: ``2 M H_kv K`` numbers per token.

    Every block keeps one key and one value of width K per key-value head and token.
    """
    block = config.block
    heads = block.num_heads if block.num_kv_heads is None else block.num_kv_heads
    return 2 * config.num_blocks * heads * config.block.keys_dim * bytes_per_number * context


# ---------------------------------------------------------------------------------------------
# A conversation whose cache is kept between turns


@optimised_jit
def _extend(model: LanguageModel, ids: Int[Array, " T"], cache: tuple, start, length):
    """The (padded) new tokens at ``start, ...``: the logits after the last real one, the cache.

    Padding tokens' keys land after the real ones and are overwritten before any query reads
    them (each new token writes its slot before attending), as in :func:`.generation.prefill`.
    """
    tokens, cache = model.extend_tokens(ids, cache, start)
    return model.readout(tokens[length - 1]), cache


@optimised_jit
def _reply(
    model: LanguageModel,
    logits: Float[Array, " V"],
    cache: tuple,
    start: Int[Array, ""],
    keys: Array,  # one PRNG key per step, as jax.random.split makes them
    stop: Int[Array, " S"],
    temperature: Float[Array, ""],
    top_k: int | None,
    top_p: Float[Array, ""] | None,
):
    """Up to ``len(keys)`` tokens after position ``start - 1``, ending after a token in ``stop``.

    Step i draws token i from the current logits (with ``keys[i]``, as :func:`.generation.decode`
    does) and runs the model on it, so the cache ends holding every drawn token. Returns the
    number of tokens drawn, the tokens, the logits each was drawn from, the logits after the
    last one, and the cache.
    """
    num_tokens = keys.shape[0]
    tokens = jnp.zeros(num_tokens, jnp.int32)
    drawn_from = jnp.zeros((num_tokens, logits.shape[-1]), logits.dtype)

    def going(carry):
        i, stopped = carry[0], carry[-1]
        return (i < num_tokens) & ~stopped

    def step(carry):
        i, logits, cache, tokens, drawn_from, _ = carry
        token = sample_token(logits, keys[i], temperature, top_k, top_p)
        new_logits, cache = model.extend(token[None], cache, start + i)
        stopped = jnp.any(token == stop)
        return (
            i + 1,
            new_logits[-1],
            cache,
            tokens.at[i].set(token),
            drawn_from.at[i].set(logits),
            stopped,
        )

    carry = (jnp.int32(0), logits, cache, tokens, drawn_from, jnp.bool_(False))
    count, logits, cache, tokens, drawn_from, _ = jax.lax.while_loop(going, step, carry)
    return count, tokens, drawn_from, logits, cache


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


class Conversation:
    """A growing token sequence whose key-value cache is kept from one turn to the next.

    :meth:`add` runs the model on new tokens only (a user's turn, a template's markers), writing
    their keys and values after the ones already cached; :meth:`reply` draws tokens one at a
    time after them, each written into the cache as it is drawn. Every logit equals what the
    model gives on the whole sequence at once (``tests/test_kv_cache.py`` checks it), but each
    token goes through the model once, however many turns follow.

    A conversation is state that changes with each turn, so this is a plain Python object; the
    programs it runs are pure functions of the model, the cache and the new tokens. The cache
    starts at :data:`CACHE_STEP` positions and grows by that step when a turn needs more, up to
    the model's context.

    Attributes:
        ids: every token of the conversation so far, in order (a list of ints).
        tokens_processed: how many tokens the model has been run on (padding not counted).
    """

    def __init__(self, model: LanguageModel, *, cache_step: int = CACHE_STEP):
        """An empty conversation with ``model``, its cache growing ``cache_step`` at a time."""
        if cache_step < 1:
            raise ValueError(f"cache_step must be at least 1, got {cache_step}")
        self.model = model
        self.cache_step = cache_step
        self.ids: list[int] = []
        self.tokens_processed = 0
        self.cache = model.empty_cache(min(cache_step, model.config.window))
        self._logits: Array | None = None  # after the last token, once there is one

    @property
    def cache_length(self) -> int:
        """The positions the cache has room for now (it grows as needed)."""
        return jax.tree.leaves(self.cache)[0].shape[-2]

    def _make_room(self, needed: int) -> None:
        context = self.model.config.window
        if needed > context:
            raise ValueError(
                f"the conversation would reach {needed} tokens, past the model's context of "
                f"{context}: start a new Conversation"
            )
        if needed <= self.cache_length:
            return
        size = min(_round_up(needed, self.cache_step), context)
        # every block's keys and values gain room at the end of the position axis (-2)
        self.cache = jax.tree.map(
            lambda a: jnp.pad(a, [(0, 0)] * (a.ndim - 2) + [(0, size - a.shape[-2]), (0, 0)]),
            self.cache,
        )

    def add(self, ids) -> Float[Array, " V"]:
        """Run the model on ``ids`` after the conversation so far; the logits after the last.

        Raises:
            ValueError: on no tokens, or when the conversation would outgrow the model's context.
        """
        ids = np.asarray(ids, np.int32).reshape(-1)
        if ids.size == 0:
            raise ValueError("add needs at least one token id")
        start = len(self.ids)
        self._make_room(start + ids.size)
        # padded so that turns of similar lengths share one compilation, never past the cache
        padded = np.zeros(
            min(_round_up(ids.size, PROMPT_MULTIPLE), self.cache_length - start), np.int32
        )
        padded[: ids.size] = ids
        self._logits, self.cache = _extend(
            self.model, jnp.asarray(padded), self.cache, jnp.int32(start), jnp.int32(ids.size)
        )
        self.ids += ids.tolist()
        self.tokens_processed += int(ids.size)
        return self._logits

    def reply(
        self,
        num_tokens: int,
        *,
        stop: tuple[int, ...] = (),
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        key: PRNGKeyArray | None = None,
    ) -> tuple[np.ndarray, Float[Array, "T V"]]:
        """Up to ``num_tokens`` new tokens (greedy at temperature 0), ending after one in ``stop``.

        The tokens join the conversation, a stop token included. Returns them and, for each,
        the logits it was drawn from. The sampling keys are :func:`.generation.decode`'s, so a
        reply equals :func:`.generation.generate_ids` on the whole conversation.

        Raises:
            ValueError: before any token was added, on options out of range, or when the reply
                could outgrow the model's context.
        """
        if self._logits is None:
            raise ValueError("the conversation is empty: add the first turn's tokens first")
        if num_tokens < 1:
            raise ValueError(f"num_tokens must be at least 1, got {num_tokens}")
        check_sampling(self.model.config.vocab_size, temperature, top_k, top_p)
        if temperature > 0 and key is None:
            raise ValueError("sampling at a temperature above 0 needs a PRNG key")
        start = len(self.ids)
        self._make_room(start + num_tokens)
        key = jax.random.PRNGKey(0) if key is None else key
        count, tokens, drawn_from, self._logits, self.cache = _reply(
            self.model,
            self._logits,
            self.cache,
            jnp.int32(start),
            jax.random.split(key, num_tokens),
            jnp.asarray(stop, jnp.int32).reshape(-1),
            jnp.float32(temperature),
            top_k,
            None if top_p is None else jnp.float32(top_p),
        )
        count = int(count)
        tokens = np.asarray(tokens[:count])
        self.ids += tokens.tolist()
        self.tokens_processed += count
        return tokens, drawn_from[:count]


# ---------------------------------------------------------------------------------------------
# A sliding window of keys and values


def sliding_window_mask(num_tokens: int, window: int | Int[Array, ""]) -> Bool[Array, "N N"]:
    """``mask[n', n]`` True where ``n - window < n' <= n``: each output reads its last inputs.

    Output n attends to itself and the ``window - 1`` inputs before it. With ``window >= N``
    this is the causal mask. ``window`` may be a traced integer, so that one compiled program
    serves every width.
    """
    if isinstance(window, int) and window < 1:
        raise ValueError(f"the window must hold at least one position, got {window}")
    inputs = jnp.arange(num_tokens)[:, None]
    outputs = jnp.arange(num_tokens)[None, :]
    return (inputs <= outputs) & (inputs > outputs - window)


def windowed_logits(
    model: LanguageModel, symbols: Int[Array, " N"], window: int | Int[Array, ""]
) -> Float[Array, "N V"]:
    """Next-symbol logits when every block keeps the keys and values of ``window`` positions.

    Each block's attention at position n reads positions ``n - window + 1, ..., n`` only
    (:func:`sliding_window_mask`), which is what a cache of ``window`` slots, the oldest
    overwritten by the newest, computes at every block: the memory of the cache stays at
    ``window`` positions however long the text. Information from further back still reaches
    position n through earlier positions of the blocks below (the receptive field grows by
    ``window - 1`` per block). With ``window >= N`` this is ``model(symbols)``. ``window`` may be
    traced (:func:`sliding_window_mask`).
    """
    model._check(symbols)
    mask = sliding_window_mask(symbols.shape[0], window)
    x = model.embed(symbols)
    x, _ = model._through_blocks(lambda block, x, _: (block(x, mask), None), x)
    return model.readout(x)
