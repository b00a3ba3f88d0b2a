"""Chapter 9 (a language model): the causal mask, top-k logits, next-symbol targets.

And one head's attention through a key-value cache.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..attention import attention_weights, causal_mask
from .core import Case, Diagnosis, Exercise, Property

CAUSAL_MASK_BY_HAND = Exercise(
    name="causal_mask_by_hand",
    chapter=9,
    title="The causal mask",
    reference=causal_mask,
    cases=lambda: [Case("N = 4", (4,)), Case("N = 7", (7,)), Case("N = 1", (1,))],
    output="(N, N)",
    properties=(
        Property(
            "each output reads itself",
            lambda got, case: bool(np.all(np.diag(np.asarray(got)))),
            "your mask stops an output from reading its own token: mask[n, n] must be True",
        ),
    ),
    diagnoses=(
        Diagnosis.like(
            "transposed",
            "mask[n', n] is True for n' >= n, so output n reads the later tokens: rows are the "
            "inputs n', columns the outputs n; allow n' <= n",
            lambda n: causal_mask(n).T,
        ),
        Diagnosis.like(
            "excludes_itself",
            "your mask stops output n from reading its own token: allow n' <= n, not only n' < n",
            lambda n: causal_mask(n) & ~jnp.eye(n, dtype=bool),
        ),
        Diagnosis.like(
            "sees_next",
            "position n sees n + 1: allow n' <= n only",
            lambda n: jnp.triu(jnp.ones((n, n), bool), -1),
        ),
        Diagnosis.when(
            "not_boolean",
            "the mask holds numbers: return booleans (True where output n may read input n'), "
            "e.g. with `.astype(bool)` or a comparison",
            lambda got, expected, case: (
                np.asarray(got).dtype != bool
                and np.array_equal(np.asarray(got) != 0, np.asarray(expected))
            ),
        ),
    ),
)


def _top_k(logits, k):
    kth = jax.lax.top_k(logits, k)[0][-1]  # as sample_token restricts them
    return jnp.where(logits >= kth, logits, -jnp.inf)


TOP_K_LOGITS = Exercise(
    name="top_k_logits",
    chapter=9,
    title="Only the k likeliest symbols kept",
    reference=_top_k,
    cases=lambda: [
        Case("|V| = 6, k = 2", (np.array([0.1, 2.0, -1.0, 3.0, 0.5, 1.0], np.float32), 2)),
        Case("|V| = 5, k = 1", (np.array([1.0, -2.0, 4.0, 0.0, 3.0], np.float32), 1)),
        Case("|V| = 4, k = 4", (np.array([1.0, 2.0, 3.0, 4.0], np.float32), 4)),
    ],
    diagnoses=(
        Diagnosis.like(
            "zero_not_minus_inf",
            "the dropped logits are set to 0, which still has probability: set them to -inf",
            lambda logits, k: jnp.where(logits >= jax.lax.top_k(logits, k)[0][-1], logits, 0.0),
        ),
        Diagnosis.like(
            "smallest_k",
            "the k smallest logits are kept: keep the k largest",
            lambda logits, k: -_top_k(-logits, k),
        ),
        Diagnosis.like(
            "k_plus_one",
            "k + 1 logits are kept: keep exactly k",
            lambda logits, k: _top_k(logits, min(k + 1, logits.shape[0])),
        ),
        Diagnosis.like(
            "k_minus_one",
            "k - 1 logits are kept: keep exactly k",
            lambda logits, k: _top_k(logits, k - 1) if k > 1 else jnp.full_like(logits, -jnp.inf),
        ),
    ),
)


def _pairs(windows):
    from ..tasks import inputs_and_targets  # the task layer, imported when first needed

    return inputs_and_targets(windows)


NEXT_SYMBOL_PAIRS = Exercise(
    name="next_symbol_pairs",
    chapter=9,
    title="Inputs and next-symbol targets from windows of N + 1 symbols",
    reference=_pairs,
    cases=lambda: [
        Case("B = 2 windows of 5", (np.array([[1, 2, 3, 4, 5], [9, 8, 7, 6, 5]]),)),
        Case("B = 1 window of 2", (np.array([[4, 7]]),)),
    ],
    diagnoses=(
        Diagnosis.like(
            "targets_before",
            "the targets are the previous symbols: the target at position n is the symbol "
            "after it, windows[:, n + 1]",
            lambda w: (w[:, 1:], w[:, :-1]),
        ),
        Diagnosis.like(
            "not_shifted",
            "the targets equal the inputs: shift them by one, targets = windows[:, 1:]",
            lambda w: (w[:, :-1], w[:, :-1]),
        ),
        Diagnosis.like(
            "whole_windows",
            "the inputs are the whole windows: the last symbol has no target, inputs = "
            "windows[:, :-1]",
            lambda w: (w, jnp.concatenate([w[:, 1:], w[:, -1:]], 1)),
        ),
    ),
)


def _cached(cache_keys, cache_values, key, value, query, t):
    """The package's causal attention over the cache with row t written: output t, the cache."""
    keys = jnp.asarray(cache_keys).at[t].set(key)
    values = jnp.asarray(cache_values).at[t].set(value)
    window = keys.shape[0]
    column = causal_mask(window)[:, t : t + 1]  # column t of the full causal mask
    weights = attention_weights(keys, query[None], scaled=True, mask=column)
    return weights[:, 0] @ values, keys, values


def _cached_variant(
    cache_keys, cache_values, key, value, query, t, *, scaled=True, last=None, row=None,
    written=True,
):  # fmt: skip
    """One head's cached step, with one switch per typical mistake."""
    row = t if row is None else row
    keys = jnp.asarray(cache_keys).at[row].set(key)
    values = jnp.asarray(cache_values).at[row].set(value)
    end = t + 1 if last is None else last
    scores = keys[:end] @ query
    if scaled:
        scores = scores / np.sqrt(keys.shape[1])
    output = jax.nn.softmax(scores) @ values[:end]
    if not written:
        return output, jnp.asarray(cache_keys), jnp.asarray(cache_values)
    return output, keys, values


def _cache_cases():
    rng = np.random.default_rng(91)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)

    def case(name, window, k, dv, t):
        # rows from t on hold leftovers of another sequence, larger than the real keys
        keys, values = n(window, k), n(window, dv)
        keys[t:], values[t:] = 5 * n(window - t, k), 5 * n(window - t, dv)
        return Case(name, (keys, values, n(k), n(dv), 2 * n(k), t))

    return [
        case("window W = 8, K = 4, D_v = 3, position t = 4", 8, 4, 3, 4),
        case("the first position, t = 0, W = 6", 6, 4, 2, 0),
        case("the last position, t = W - 1 = 4", 5, 8, 3, 4),
    ]


def _cache_mistake(**switch):
    return lambda *args: _cached_variant(*args, **switch)


CACHED_ATTENTION = Exercise(
    name="cached_attention",
    chapter=9,
    title="One head's step through a key-value cache: write row t, attend over rows 0 to t",
    reference=_cached,
    cases=_cache_cases,
    output="(D_v,), (W, K), (W, D_v)",
    diagnoses=(
        Diagnosis.like(
            "no_scale",
            "no 1/sqrt(K) scale: divide the scores k_n' . q by sqrt(K), as the model does",
            _cache_mistake(scaled=False),
        ),
        Diagnosis.like(
            "reads_unfilled_rows",
            "the query reads every row of the cache: rows after t are not this sequence's "
            "(not written yet); attend over rows 0 to t only",
            lambda ck, cv, k, v, q, t: _cached_variant(ck, cv, k, v, q, t, last=ck.shape[0]),
        ),
        Diagnosis.like(
            "misses_itself",
            "the token does not read its own key: write row t first, then attend over rows "
            "0 to t, t included",
            lambda ck, cv, k, v, q, t: _cached_variant(ck, cv, k, v, q, t, last=max(t, 1)),
        ),
        Diagnosis.like(
            "written_one_late",
            "the key and value are written at row t + 1: position t's row is t (counting from 0)",
            lambda ck, cv, k, v, q, t: _cached_variant(
                ck, cv, k, v, q, t, row=min(t + 1, ck.shape[0] - 1)
            ),
        ),
        Diagnosis.like(
            "cache_not_written",
            "the cache comes back without this token's key and value: return the cache with "
            "row t written, for the next step to read",
            _cache_mistake(written=False),
        ),
    ),
)

EXERCISES = [CAUSAL_MASK_BY_HAND, TOP_K_LOGITS, NEXT_SYMBOL_PAIRS, CACHED_ATTENTION]
