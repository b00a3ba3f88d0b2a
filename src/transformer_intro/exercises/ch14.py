"""Chapter 14 (the modern transformer): RMSNorm, SwiGLU, rotary positions."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..mlp import GatedMLP
from ..normalisation import RMSNorm
from ..positions import rotate_pairs
from .core import Case, Diagnosis, Exercise


def _rms_norm(x, gamma, eps=1e-6):
    norm = eqx.tree_at(lambda m: m.weight, RMSNorm(x.shape[-1], eps=eps), jnp.asarray(gamma))
    return norm(jnp.asarray(x))


def _rms_cases():
    rng = np.random.default_rng(25)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    return [
        Case("N = 4, D = 6, tokens off centre", (n(4, 6) + 2, 1 + n(6) / 2)),
        Case("small tokens, rms about 0.001", (1e-3 * n(3, 6), np.ones(6, np.float32))),
    ]


RMS_NORM = Exercise(
    name="rms_norm",
    chapter=14,
    title="RMSNorm of every token",
    reference=_rms_norm,
    cases=_rms_cases,
    output="(N, D)",
    atol=2e-5,
    diagnoses=(
        Diagnosis.like(
            "centred",
            "the tokens are centred (this is LayerNorm without a shift): RMSNorm divides by "
            "the root mean square, sqrt(mean(x^2) + eps), without subtracting the mean",
            lambda x, gamma, eps=1e-6: (
                (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + eps) * gamma
            ),
        ),
        Diagnosis.like(
            "eps_outside_sqrt",
            "eps is added to the root mean square: it belongs inside the square root",
            lambda x, gamma, eps=1e-6: (
                x / (jnp.sqrt((x * x).mean(-1, keepdims=True)) + eps) * gamma
            ),
        ),
        Diagnosis.like(
            "sum_not_mean",
            "the squares are summed: RMSNorm takes their mean over the D features",
            lambda x, gamma, eps=1e-6: x / jnp.sqrt((x * x).sum(-1, keepdims=True) + eps) * gamma,
        ),
    ),
)


def _swiglu(x, W_gate, W_up, W_down):
    mlp = GatedMLP(W_gate.shape[1], W_gate.shape[0], key=jax.random.PRNGKey(0))
    mlp = eqx.tree_at(
        lambda m: (m.gate.weight, m.up.weight, m.down.weight),
        mlp,
        (jnp.asarray(W_gate), jnp.asarray(W_up), jnp.asarray(W_down)),
    )
    return jax.vmap(mlp)(jnp.asarray(x))  # fmt: skip


def _swiglu_cases():
    rng = np.random.default_rng(26)
    n = lambda *shape: (rng.normal(size=shape) / np.sqrt(shape[-1])).astype(np.float32)
    return [
        Case("N = 3, D = 4, F = 6", (2 * n(3, 4), n(6, 4), n(6, 4), n(4, 6))),
        Case("N = 2, D = 4, F = 4", (2 * n(2, 4), n(4, 4), n(4, 4), n(4, 4))),
    ]


SWIGLU = Exercise(
    name="swiglu",
    chapter=14,
    title="The SwiGLU MLP on every token",
    reference=_swiglu,
    cases=_swiglu_cases,
    output="(N, D)",
    diagnoses=(
        Diagnosis.like(
            "activation_on_up",
            "the SiLU is applied to the up projection: it gates, silu(x W_gate^T) * x W_up^T",
            lambda x, g, u, d: _swiglu(x, u, g, d),
        ),
        Diagnosis.like(
            "gelu",
            "the gate uses a GELU: SwiGLU's gate is the SiLU, x sigmoid(x)",
            lambda x, g, u, d: (jax.nn.gelu(x @ g.T) * (x @ u.T)) @ d.T,
        ),
        Diagnosis.like(
            "sum_not_product",
            "the gate is added: SwiGLU multiplies, feature by feature",
            lambda x, g, u, d: (jax.nn.silu(x @ g.T) + x @ u.T) @ d.T,
        ),
    ),
)


def _rotary_cases():
    rng = np.random.default_rng(27)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    return [
        Case("N = 5, K = 4, positions 0..4", (n(5, 4), np.arange(5))),
        Case("N = 3, K = 8, positions 7, 8, 9, base 100", (n(3, 8), np.arange(7, 10)),
             {"base": 100.0}),
    ]  # fmt: skip


ROTATE_PAIRS_BY_HAND = Exercise(
    name="rotate_pairs_by_hand",
    chapter=14,
    title="Rotary position embedding, pairs (2i, 2i + 1)",
    reference=lambda x, positions, base=10_000.0: rotate_pairs(x, positions, base=base),
    cases=_rotary_cases,
    output="(N, K)",
    atol=2e-5,
    diagnoses=(
        Diagnosis.like(
            "half_layout",
            "the pairs are (i, i + K/2), the half-split layout: here pair i is the "
            "neighbours (2i, 2i + 1)",
            lambda x, positions, base=10_000.0: rotate_pairs(
                x, positions, base=base, layout="half"
            ),
        ),  # fmt: skip
        Diagnosis.like(
            "backwards",
            "the pairs turn the wrong way (by -n w_i): rotate (a, b) to "
            "(a cos - b sin, a sin + b cos)",
            lambda x, positions, base=10_000.0: rotate_pairs(x, -positions, base=base),
        ),
        Diagnosis.like(
            "exponent_i_over_K",
            "the frequencies are base^(-i/K): they are w_i = base^(-2i/K)",
            lambda x, positions, base=10_000.0: rotate_pairs(x, positions, base=base**0.5),
        ),
    ),
)

EXERCISES = [RMS_NORM, SWIGLU, ROTATE_PAIRS_BY_HAND]
