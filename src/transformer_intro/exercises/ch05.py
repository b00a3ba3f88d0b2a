"""Chapter 5 (residuals and LayerNorm): LayerNorm on rows and on columns, a residual stack."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ..normalisation import LayerNorm
from .core import Case, Diagnosis, Exercise, Property


def _layer_norm(x, gamma, beta, eps=1e-5):
    norm = eqx.tree_at(lambda m: (m.weight, m.bias), LayerNorm(x.shape[-1], eps=eps),
                       (jnp.asarray(gamma), jnp.asarray(beta)))  # fmt: skip
    return norm(jnp.asarray(x))


def _layer_norm_cases():
    rng = np.random.default_rng(12)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    ones, zeros = np.ones(8, np.float32), np.zeros(8, np.float32)
    return [
        Case("N = 6, D = 8, gamma = 1, beta = 0", (3 * n(6, 8) + 1.5, ones, zeros)),
        Case("N = 4, D = 8, random gamma, beta", (3 * n(4, 8) + 1.5, 1 + n(8) / 2, n(8) / 2)),
        Case("small tokens, sigma about 0.001", (1e-3 * n(5, 8), ones, zeros)),
    ]


def _unit_statistics(got, case):
    x, gamma, beta = case.args
    if not (np.all(np.asarray(gamma) == 1) and np.all(np.asarray(beta) == 0)):
        return True
    return np.allclose(np.asarray(got).mean(-1), 0, atol=1e-4)


LAYER_NORM = Exercise(
    name="layer_norm",
    chapter=5,
    title="LayerNorm of every token",
    reference=_layer_norm,
    cases=_layer_norm_cases,
    output="(N, D)",
    atol=2e-5,
    properties=(
        Property(
            "each token has mean 0 (gamma = 1, beta = 0)",
            _unit_statistics,
            "a token's features do not have mean 0 with gamma = 1, beta = 0",
        ),
    ),
    diagnoses=(
        Diagnosis.like(
            "over_tokens",
            "each feature is normalised over the tokens (axis 0): LayerNorm normalises each "
            "token over its own D features (the last axis)",
            lambda x, gamma, beta, eps=1e-5: (
                (x - x.mean(0)) / jnp.sqrt(x.var(0) + eps) * gamma + beta
            ),
        ),
        Diagnosis.like(
            "unbiased_variance",
            "the variance divides by D - 1: LayerNorm uses the mean square deviation, "
            "dividing by D",
            lambda x, gamma, beta, eps=1e-5: (
                (x - x.mean(-1, keepdims=True))
                / jnp.sqrt(x.var(-1, ddof=1, keepdims=True) + eps)
                * gamma
                + beta
            ),
        ),
        Diagnosis.like(
            "eps_outside_sqrt",
            "eps is added to sigma: it belongs inside the square root, sqrt(variance + eps), "
            "which matters for tokens with small features",
            lambda x, gamma, beta, eps=1e-5: (
                (x - x.mean(-1, keepdims=True)) / (x.std(-1, keepdims=True) + eps) * gamma + beta
            ),
        ),
        Diagnosis.like(
            "gamma_beta_swapped",
            "gamma and beta are swapped: gamma multiplies, beta is added",
            lambda x, gamma, beta, eps=1e-5: _layer_norm(x, beta, gamma, eps),
        ),
    ),
)


def _columns_cases():
    rng = np.random.default_rng(13)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    return [
        Case("D = N = 5", (3 * n(5, 5) - 1, 1 + n(5) / 2, n(5) / 2)),
        Case("D = 6, N = 4", (3 * n(6, 4) + 1, 1 + n(6) / 2, n(6) / 2)),
    ]


LAYER_NORM_COLUMNS = Exercise(
    name="layer_norm_columns",
    chapter=5,
    title="LayerNorm in the maths' layout, one token per column",
    reference=lambda X, gamma, beta, eps=1e-5: _layer_norm(X.T, gamma, beta, eps).T,
    cases=_columns_cases,
    output="(D, N)",
    atol=2e-5,
    diagnoses=(
        Diagnosis.like(
            "over_tokens",
            "each feature is normalised over the tokens (along a row of X): in the maths a "
            "token is a column, so take the mean and variance over axis 0",
            lambda X, gamma, beta, eps=1e-5: (
                _layer_norm(
                    X, np.ones(X.shape[1], np.float32), np.zeros(X.shape[1], np.float32), eps
                )
                * gamma[:, None]
                + beta[:, None]
            ),
        ),  # fmt: skip
        Diagnosis.like(
            "gamma_on_tokens",
            "gamma and beta scale the tokens, not the features: with tokens as columns, "
            "multiply by gamma[:, None] and add beta[:, None]",
            lambda X, gamma, beta, eps=1e-5: (
                _layer_norm(
                    X.T, np.ones(X.shape[0], np.float32), np.zeros(X.shape[0], np.float32), eps
                ).T
                * gamma
                + beta
            ),
        ),
    ),
)


def _residual_stack(x, branches):
    for f in branches:
        x = x + f(x)
    return x


def _residual_cases():
    rng = np.random.default_rng(14)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    W = [n(4, 4) / 2 for _ in range(3)]
    branches = [lambda x, w=w: jnp.tanh(x @ w) for w in W]
    return [
        Case("one branch, N = 3, D = 4", (n(3, 4), branches[:1])),
        Case("three branches, N = 5, D = 4", (n(5, 4), branches)),
        Case("no branches", (n(2, 4), [])),
    ]


RESIDUAL_STACK = Exercise(
    name="residual_stack",
    chapter=5,
    title="A stack of residual branches, x <- x + f(x)",
    reference=_residual_stack,
    cases=_residual_cases,
    output="(N, D)",
    diagnoses=(
        Diagnosis.like(
            "no_skip",
            "the branches are applied one after another without the skip: each step is "
            "x <- x + f(x), not x <- f(x)",
            lambda x, branches: _compose(x, branches),
        ),
        Diagnosis.like(
            "all_read_input",
            "every branch reads the first input x^(0): branch m reads the current stream, "
            "the output of the previous step",
            lambda x, branches: x + sum((f(x) for f in branches), jnp.zeros_like(x)),
        ),
        Diagnosis.like(
            "skip_once",
            "the input is added once at the end: every step adds its own input, x <- x + f(x)",
            lambda x, branches: x + _compose(x, branches) if branches else 2 * x,
        ),
    ),
)


def _compose(x, branches):
    for f in branches:
        x = f(x)
    return x


EXERCISES = [LAYER_NORM, LAYER_NORM_COLUMNS, RESIDUAL_STACK]
