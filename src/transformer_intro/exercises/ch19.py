"""Chapter 19 (speed and memory): a product's intensity, one tile of the online softmax, ℓ."""

from __future__ import annotations

import numpy as np

from .core import Case, Diagnosis, Exercise


def _intensity(d_out, d_in, bytes_per_weight):
    flops = 2.0 * d_out * d_in
    return flops / (bytes_per_weight * d_out * d_in + 4.0 * (d_in + d_out))


MATVEC_INTENSITY = Exercise(
    name="matvec_intensity",
    chapter=19,
    title="The arithmetic intensity of a matrix-vector product",
    reference=_intensity,
    cases=lambda: [
        Case("D_out = 1536, D_in = 576, float32 weights (b = 4)", (1536, 576, 4.0)),
        Case("D_out = 64, D_in = 32, Q8_0 weights (b = 34/32)", (64, 32, 34 / 32)),
        Case("D_out = 8, D_in = 8, Q4_1 weights (b = 20/32)", (8, 8, 20 / 32)),
    ],
    output="a number, FLOPs per byte",
    diagnoses=(
        Diagnosis.like(
            "one_flop_per_weight",
            "one FLOP per weight is counted: each weight is multiplied and the product added, "
            "2 D_out D_in FLOPs",
            lambda d_out, d_in, b: _intensity(d_out, d_in, b) / 2,
        ),
        Diagnosis.like(
            "weights_only",
            "only the weights' bytes are counted: the vector read (D_in) and the result "
            "written (D_out) are float32 too, 4 (D_in + D_out) bytes",
            lambda d_out, d_in, b: 2.0 / b,
        ),
        Diagnosis.like(
            "weights_as_float32",
            "every weight is counted as 4 bytes: a weight takes b bytes in its format",
            lambda d_out, d_in, b: _intensity(d_out, d_in, 4.0),
        ),
    ),
)


def _tile(s_hat, zeta, y_tilde, scores, values, rescale=True):
    s_hat, zeta, y_tilde, scores, values = (
        np.asarray(a, np.float64) for a in (s_hat, zeta, y_tilde, scores, values)
    )
    new = np.maximum(s_hat, scores.max(axis=0))
    factor = np.exp(s_hat - new) if rescale else np.ones_like(new)
    weights = np.exp(scores - new)  # (keys of the tile, queries)
    out = (new, zeta * factor + weights.sum(axis=0), y_tilde * factor[:, None] + weights.T @ values)
    return tuple(a.astype(np.float32) for a in out)


def _tile_cases():
    rng = np.random.default_rng(33)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    cases = []
    for name, (keys, queries, width, spread) in {
        "a tile of 4 keys, 3 queries, D_v = 2": (4, 3, 2, 1.0),
        "a tile of 6 keys, 2 queries, D_v = 3, larger scores": (6, 2, 3, 4.0),
    }.items():
        s_hat = n(queries) * spread
        zeta = np.abs(n(queries)) + 1
        cases.append(
            Case(name, (s_hat, zeta, n(queries, width), spread * n(keys, queries), n(keys, width)))
        )
    return cases


ONLINE_SOFTMAX_TILE = Exercise(
    name="online_softmax_tile",
    chapter=19,
    title="One tile of keys through the online softmax",
    reference=_tile,
    cases=_tile_cases,
    output="(ŝ (N_q,), ζ (N_q,), ỹ (N_q, D_v))",
    diagnoses=(
        Diagnosis.like(
            "no_rescale",
            "the old sums are not rescaled: multiply ζ and ỹ by e^(ŝ_old - ŝ_new) when the "
            "maximum changes",
            lambda *args: _tile(*args, rescale=False),
        ),
        Diagnosis.like(
            "old_maximum",
            "the old maximum is kept: the new ŝ is the larger of ŝ and the tile's largest "
            "score for each query",
            lambda s_hat, zeta, y, scores, values: (
                (s_hat,) + _tile(s_hat, zeta, y, scores, values)[1:]
            ),
        ),
    ),
)


def _log_sum_exp(keys, queries):
    keys, queries = np.asarray(keys, np.float64), np.asarray(queries, np.float64)
    scores = keys @ queries.T / np.sqrt(keys.shape[1])  # (N_in, N_out)
    top = scores.max(axis=0)
    return (top + np.log(np.exp(scores - top).sum(axis=0))).astype(np.float32)


def _lse_cases():
    rng = np.random.default_rng(34)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    return [
        Case("N_in = 6, N_out = 4, K = 3", (n(6, 3), n(4, 3))),
        Case("N_in = 5, N_out = 5, K = 8", (n(5, 8), n(5, 8))),
        Case(
            "scores near 1000, N_in = 4, N_out = 3, K = 4", (30 * n(4, 4), 30 * n(3, 4)), large=True
        ),
    ]


SAVED_LOG_SUM_EXP = Exercise(
    name="saved_log_sum_exp",
    chapter=19,
    title="The log-sum-exp of each query's scores, which the forward pass saves",
    reference=_log_sum_exp,
    cases=_lse_cases,
    output="(N_out,)",
    overflow="overflows for large scores: subtract each query's largest score before "
    "exponentiating, and add it back after the log",
    diagnoses=(
        Diagnosis.like(
            "no_scale",
            "the scores are not scaled: divide k_n'ᵀ q_n by sqrt(K)",
            lambda k, q: _log_sum_exp(np.asarray(k) * np.sqrt(np.shape(k)[1]), q),
        ),
        Diagnosis.like(
            "over_the_queries",
            "the sum runs over the queries: ℓ_n sums e^(s_n',n) over the keys n', one number "
            "per query",
            lambda k, q: _log_sum_exp(q, k),
        ),
        Diagnosis.like(
            "maximum_only",
            "only the largest score is returned: ℓ_n = ŝ + log ζ, the log of the normaliser added",
            lambda k, q: (
                (np.asarray(k, np.float64) @ np.asarray(q, np.float64).T / np.sqrt(np.shape(k)[1]))
                .max(axis=0)
                .astype(np.float32)
            ),
        ),  # fmt: skip
    ),
)

EXERCISES = [MATVEC_INTENSITY, ONLINE_SOFTMAX_TILE, SAVED_LOG_SUM_EXP]
