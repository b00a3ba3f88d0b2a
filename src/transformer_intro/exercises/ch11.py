"""Chapter 11 (relations): causal linear attention, Nadaraya-Watson, a Hopfield update."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..relations.hopfield import hopfield_update
from ..relations.kernel_regression import gaussian_kernel, nadaraya_watson
from ..relations.linear_attention import elu_plus_one, linear_attention
from .core import Case, Diagnosis, Exercise


def _cases(seed, shapes, names, extra=()):
    rng = np.random.default_rng(seed)
    out = []
    for name, shape in zip(names, shapes):
        args = tuple(rng.normal(size=s).astype(np.float32) for s in shape)
        out.append(Case(name, args + extra))
    return out


CAUSAL_LINEAR_ATTENTION = Exercise(
    name="causal_linear_attention",
    chapter=11,
    title="Causal linear attention with the feature map elu + 1",
    reference=linear_attention,
    cases=lambda: _cases(
        20,
        [((5, 3), (5, 3), (5, 2)), ((4, 2), (4, 2), (4, 4))],
        ["N = 5, K = 3, D_v = 2", "N = 4, K = 2, D_v = 4"],
    ),  # fmt: skip
    output="(N, D_v)",
    diagnoses=(
        Diagnosis.like(
            "not_causal",
            "output n reads later tokens: keep only n' <= n (the causal mask) in the sums",
            lambda k, q, v: linear_attention(k, q, v, causal=False),
        ),
        Diagnosis.like(
            "no_feature_map",
            "the raw dot products k_n' . q_n are used: apply the feature map elu(x) + 1 to "
            "keys and queries first, so that every similarity is positive",
            lambda k, q, v: linear_attention(k, q, v, feature_map=lambda x: x),
        ),
        Diagnosis.like(
            "not_normalised",
            "the weights are not normalised: divide each output's sum by sum_n' phi(k_n') . "
            "phi(q_n) over the same n'",
            lambda k, q, v: (
                jnp.where(
                    jnp.tril(jnp.ones((k.shape[0],) * 2, bool)),
                    elu_plus_one(q) @ elu_plus_one(k).T,
                    0.0,
                )
                @ v
            ),
        ),  # fmt: skip
    ),
)


def _nw_cases():
    rng = np.random.default_rng(21)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    return [
        Case("8 points in 1D, 3 queries, sigma = 0.5", (n(8, 1), n(8, 2), n(3, 1), 0.5)),
        Case("6 points in 2D, 4 queries, sigma = 1", (n(6, 2), n(6, 1), n(4, 2), 1.0)),
    ]


NADARAYA_WATSON_BY_HAND = Exercise(
    name="nadaraya_watson_by_hand",
    chapter=11,
    title="Nadaraya-Watson kernel regression with a Gaussian kernel",
    reference=nadaraya_watson,
    cases=_nw_cases,
    output="(N_out, D_y)",
    diagnoses=(
        Diagnosis.like(
            "not_normalised",
            "the kernel weights are not divided by their sum for each query",
            lambda x, y, q, s: gaussian_kernel(x, q, s).T @ y,
        ),
        Diagnosis.like(
            "sigma_not_squared",
            "the exponent divides by 2 sigma: the Gaussian kernel is exp(-|q - x|^2 / (2 sigma^2))",
            lambda x, y, q, s: nadaraya_watson(x, y, q, jnp.sqrt(s)),
        ),
        Diagnosis.like(
            "over_queries",
            "the weights are normalised over the queries: each query's weights sum to one "
            "over the data points",
            lambda x, y, q, s: (
                (gaussian_kernel(x, q, s) / gaussian_kernel(x, q, s).sum(1, keepdims=True)).T @ y
            ),
        ),  # fmt: skip
    ),
)


HOPFIELD_STEP = Exercise(
    name="hopfield_step",
    chapter=11,
    title="One update of a modern Hopfield network",
    reference=hopfield_update,
    cases=lambda: (
        _cases(22, [((4,), (5, 4))], ["D = 4, 5 patterns, beta = 2"], (2.0,))
        + _cases(23, [((3,), (6, 3))], ["D = 3, 6 patterns, beta = 0.5"], (0.5,))
    ),
    output="(D,)",
    diagnoses=(
        Diagnosis.like(
            "no_beta",
            "beta is missing: the softmax reads beta X^T xi",
            lambda state, patterns, beta: hopfield_update(state, patterns, 1.0),
        ),
        Diagnosis.like(
            "no_softmax",
            "there is no softmax: the new state is X softmax(beta X^T xi), a weighted average "
            "of the patterns",
            lambda state, patterns, beta: patterns.T @ (beta * patterns @ state),
        ),
        Diagnosis.like(
            "softmax_over_features",
            "the softmax runs over the features: it runs over the N patterns",
            lambda state, patterns, beta: patterns.T @ (patterns @ jax.nn.softmax(beta * state)),
        ),  # fmt: skip
    ),
)

EXERCISES = [CAUSAL_LINEAR_ATTENTION, NADARAYA_WATSON_BY_HAND, HOPFIELD_STEP]
