"""Chapter 9 (a language model): the causal mask, top-k logits, next-symbol targets."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..attention import causal_mask
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
            "an output may not read its own token: mask[n, n] must be True",
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
            "output n may not read its own token: allow n' <= n, not only n' < n",
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

EXERCISES = [CAUSAL_MASK_BY_HAND, TOP_K_LOGITS, NEXT_SYMBOL_PAIRS]
