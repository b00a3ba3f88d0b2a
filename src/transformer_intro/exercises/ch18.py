"""Chapter 18 (inside a trained model): the prefix-matching score, mean ablation, patching."""

from __future__ import annotations

import numpy as np

from .core import Case, Diagnosis, Exercise


def _prefix_matching(weights, length):
    weights = np.asarray(weights, np.float64)
    n = np.arange(length, 2 * length)
    return np.float32(weights[n - length + 1, n].mean())


def _causal_weights(rng, n):
    scores = rng.normal(size=(n, n)) * 2.0
    scores = np.where(np.tril(np.ones((n, n), bool)).T, scores, -np.inf)  # [n', n], n' <= n
    e = np.exp(scores - scores.max(0, keepdims=True))
    return (e / e.sum(0, keepdims=True)).astype(np.float32)


def _prefix_cases():
    rng = np.random.default_rng(181)
    return [
        Case("L = 4, random causal weights", (_causal_weights(rng, 8), 4)),
        Case("L = 6, random causal weights", (_causal_weights(rng, 12), 6)),
    ]


PREFIX_MATCHING_SCORE = Exercise(
    name="prefix_matching_score",
    chapter=18,
    title="A head's prefix-matching score on a repeated sequence",
    reference=_prefix_matching,
    cases=_prefix_cases,
    output="()",
    diagnoses=(
        Diagnosis.like(
            "the_copy_itself",
            "the weight on the earlier copy of the current symbol, A[n - L, n], is averaged: "
            "an induction head looks one further, at the symbol that followed it, A[n - L + 1, n]",
            lambda w, length: np.float32(
                np.asarray(w)[np.arange(length), np.arange(length, 2 * length)].mean()
            ),
        ),
        Diagnosis.like(
            "rows_and_columns",
            "the indices are swapped: A[n', n] has the input n' first, so the entry is "
            "A[n - L + 1, n], down column n",
            lambda w, length: _prefix_matching(np.asarray(w).T, length),
        ),
        Diagnosis.like(
            "whole_window",
            "positions of the first half are averaged too: only n = L, ..., 2L - 1 follow an "
            "earlier copy",
            lambda w, length: np.float32(
                np.asarray(w)[np.arange(1, length + 1), np.arange(length, 2 * length)].sum()
                / (2 * length)
            ),
        ),
    ),
)


def _mean_ablate(outputs, reference, head):
    outputs = np.array(outputs, np.float32)
    outputs[head] = np.asarray(reference, np.float32)[:, head].mean(0)
    return outputs


def _ablation_cases():
    rng = np.random.default_rng(182)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    return [
        Case("H = 3, N = 4, D = 5, B = 6, head 1", (n(3, 4, 5), n(6, 3, 4, 5), 1)),
        Case("H = 2, N = 3, D = 2, B = 4, head 0", (n(2, 3, 2), n(4, 2, 3, 2) + 1.0, 0)),
    ]


MEAN_ABLATE = Exercise(
    name="mean_ablate",
    chapter=18,
    title="One head's output replaced by its mean over held-out windows",
    reference=_mean_ablate,
    cases=_ablation_cases,
    output="(H, N, D)",
    diagnoses=(
        Diagnosis.like(
            "zero_ablation",
            "the head's output is set to zero: mean ablation puts in its average over the "
            "reference windows, reference[:, head].mean(0)",
            lambda y, r, head: _mean_ablate(y, 0 * np.asarray(r), head),
        ),
        Diagnosis.like(
            "positions_averaged",
            "the mean is over positions too: it is taken over the windows only, position by "
            "position, so that what the head writes at each position stays",
            lambda y, r, head: _mean_ablate(
                y, np.broadcast_to(np.asarray(r).mean((0, 2), keepdims=True), np.shape(r)), head
            ),
        ),
        Diagnosis.like(
            "every_head",
            "every head is replaced by its mean: only head `head` is, the others keep this "
            "input's outputs",
            lambda y, r, head: np.asarray(r, np.float32).mean(0),
        ),
    ),
)


def _restored(clean, corrupted, patched):
    clean, corrupted, patched = (np.asarray(v, np.float64) for v in (clean, corrupted, patched))
    return ((corrupted - patched) / (corrupted - clean)).astype(np.float32)


def _patching_cases():
    rng = np.random.default_rng(183)
    clean = rng.uniform(0.1, 0.5, 6)
    corrupted = clean + rng.uniform(1.0, 3.0, 6)
    patched = clean + rng.uniform(0.0, 1.0, 6) * (corrupted - clean)
    return [
        Case("six examples", tuple(v.astype(np.float32) for v in (clean, corrupted, patched))),
        Case("patching that restores all, none and half",
             (np.array([1.0, 1.0, 1.0], np.float32), np.array([3.0, 3.0, 3.0], np.float32),
              np.array([1.0, 3.0, 2.0], np.float32))),
    ]  # fmt: skip


PATCHING_EFFECT = Exercise(
    name="patching_effect",
    chapter=18,
    title="The share of the clean run's loss that patching restores",
    reference=_restored,
    cases=_patching_cases,
    output="(B,)",
    diagnoses=(
        Diagnosis.like(
            "share_left",
            "this is the share of the damage that remains: the share restored is "
            "(corrupted - patched) / (corrupted - clean), 1 when patching gives the clean loss",
            lambda clean, corrupted, patched: 1 - _restored(clean, corrupted, patched),
        ),
        Diagnosis.like(
            "not_normalised",
            "the loss regained is not divided by what the corruption cost, corrupted - clean: "
            "the share is 0 for no effect and 1 for the whole clean loss back",
            lambda clean, corrupted, patched: (np.asarray(corrupted) - np.asarray(patched)).astype(
                np.float32
            ),
        ),
    ),
)

EXERCISES = [PREFIX_MATCHING_SCORE, MEAN_ABLATE, PATCHING_EFFECT]
