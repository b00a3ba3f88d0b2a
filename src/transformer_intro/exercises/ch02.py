"""Chapter 2 (attention): the column softmax, scaled and masked weights, the weighted average."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..attention import attend, attention_weights, causal_mask
from .core import Case, Diagnosis, Exercise, Property, columns_sum_to_one


def _softmax_cases():
    rng = np.random.default_rng(4)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    return [
        Case("random scores, 4 x 5", (2 * n(4, 5),)),
        Case("a constant column", (np.array([[1.0, 0.0], [1.0, 2.0], [1.0, -1.0]], np.float32),)),
        Case("one input", (n(1, 3),)),
        Case("scores near 100", (100 + n(5, 4),), large=True),
    ]


COLUMN_SOFTMAX = Exercise(
    name="column_softmax",
    chapter=2,
    title="The softmax down every column",
    reference=lambda scores: jax.nn.softmax(scores, axis=0),
    cases=_softmax_cases,
    properties=(columns_sum_to_one(),),
    diagnoses=(
        Diagnosis.like(
            "over_rows",
            "the weights are normalised along the rows (axis 1): output n's weights are "
            "column n, A[:, n], and sum to one over the inputs n' (axis 0)",
            lambda scores: jax.nn.softmax(scores, axis=1),
        ),
        Diagnosis.like(
            "over_matrix",
            "the whole matrix sums to one: normalise each column on its own",
            lambda scores: jnp.exp(scores) / jnp.exp(scores).sum(),
        ),
    ),
)


def _masked_zero(got, case):
    mask = case.kwargs.get("mask")
    return mask is None or np.allclose(np.asarray(got)[~np.asarray(mask)], 0.0, atol=1e-6)


def _weights_cases():
    rng = np.random.default_rng(5)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    cross_mask = rng.uniform(size=(6, 3)) < 0.6
    cross_mask[0] = True  # every column may read at least one input
    return [
        Case("self-attention, N = 5, K = 4", (n(5, 4), n(5, 4))),
        Case("causal mask, N = 5, K = 16", (n(5, 16), n(5, 16)), {"mask": causal_mask(5)}),
        Case("6 keys, 3 queries, K = 8, a random mask", (n(6, 8), n(3, 8)), {"mask": cross_mask}),
    ]


def _softmax_over_queries(keys, queries, mask=None):
    scores = keys @ queries.T / jnp.sqrt(keys.shape[1])
    if mask is not None:
        scores = jnp.where(mask, scores, -jnp.inf)
    return jax.nn.softmax(scores, axis=1)


SCALED_ATTENTION_WEIGHTS = Exercise(
    name="scaled_attention_weights",
    chapter=2,
    title="Scaled, masked attention weights",
    reference=lambda keys, queries, mask=None: attention_weights(
        keys, queries, scaled=True, mask=mask
    ),
    cases=_weights_cases,
    output="(N_in, N_out)",
    properties=(
        columns_sum_to_one(),
        Property(
            "masked weights are zero",
            _masked_zero,
            "a forbidden input has a weight above zero: set its score to -inf before the softmax",
        ),
    ),
    diagnoses=(
        Diagnosis.like(
            "unscaled",
            "no 1/sqrt(K) scale: divide the scores k_n' . q_n by sqrt(K)",
            lambda keys, queries, mask=None: attention_weights(keys, queries, mask=mask),
        ),
        Diagnosis.like(
            "scaled_by_K",
            "the scores are divided by K: divide them by sqrt(K)",
            lambda keys, queries, mask=None: attention_weights(
                keys / jnp.sqrt(keys.shape[1]), queries, scaled=True, mask=mask
            ),
        ),
        Diagnosis.like(
            "over_queries",
            "the weights sum over queries, not keys: take the softmax down each column "
            "(axis 0, over the inputs n')",
            _softmax_over_queries,
        ),
        Diagnosis.like(
            "mask_ignored",
            "the mask is ignored: set the scores of forbidden pairs to -inf before the softmax",
            lambda keys, queries, mask=None: attention_weights(keys, queries, scaled=True),
        ),
        Diagnosis.like(
            "mask_after_softmax",
            "the mask is applied after the softmax: the forbidden weights are zero but the "
            "columns no longer sum to one; mask the scores (to -inf) before the softmax",
            lambda keys, queries, mask=None: (
                attention_weights(keys, queries, scaled=True) * (1.0 if mask is None else mask)
            ),
        ),
    ),
)


def _average_cases():
    rng = np.random.default_rng(6)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    return [
        Case("N = 4 tokens, D = 3", (n(4, 3), jax.nn.softmax(n(4, 4), axis=0))),
        Case("N = 5 inputs, 2 outputs, D = 6", (n(5, 6), jax.nn.softmax(n(5, 2), axis=0))),
        Case("causal weights, N = 3, D = 3",
             (n(3, 3), attention_weights(jnp.asarray(n(3, 3)), jnp.asarray(n(3, 3)),
                                         mask=causal_mask(3)))),
    ]  # fmt: skip


def _inside_inputs(got, case):
    x = np.asarray(case.args[0])
    got = np.asarray(got)
    return np.all(got >= x.min(0) - 1e-5) and np.all(got <= x.max(0) + 1e-5)


WEIGHTED_AVERAGE = Exercise(
    name="weighted_average",
    chapter=2,
    title="Outputs as weighted averages of the inputs",
    reference=attend,
    cases=_average_cases,
    output="(N_out, D)",
    properties=(
        Property(
            "each output lies between the inputs",
            _inside_inputs,
            "an output leaves the range of the inputs: y_n is an average of the x_n'",
        ),
    ),
    diagnoses=(
        Diagnosis.like(
            "A_not_transposed",
            "you multiplied by A, not by its transpose: y_n = sum_n' x_n' A[n', n] runs down "
            "column n of A, so with tokens as rows y = A.T @ x",
            lambda x, weights: weights @ x,
        ),
    ),
)

EXERCISES = [COLUMN_SOFTMAX, SCALED_ATTENTION_WEIGHTS, WEIGHTED_AVERAGE]
