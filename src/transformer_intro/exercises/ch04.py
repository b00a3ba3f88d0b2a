"""Chapter 4 (the token-wise MLP): the GELU, the MLP on all tokens at once, its parameters."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..mlp import MLP
from ..parameters import count_parameters
from .core import Case, Diagnosis, Exercise, Property


def _gelu_cases():
    grid = np.linspace(-5, 5, 41, dtype=np.float32)
    rng = np.random.default_rng(10)
    return [
        Case("41 points in [-5, 5]", (grid,)),
        Case("a (3, 4) array", (rng.normal(size=(3, 4)).astype(np.float32),)),
    ]


GELU_TANH = Exercise(
    name="gelu_tanh",
    chapter=4,
    title="The GELU, tanh form",
    reference=jax.nn.gelu,
    cases=_gelu_cases,
    diagnoses=(
        Diagnosis.like(
            "exact_gelu",
            "this is the exact GELU, x Phi(x) with the error function; the package's MLP uses "
            "the tanh form, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))",
            lambda x: jax.nn.gelu(x, approximate=False),
        ),
        Diagnosis.like(
            "relu",
            "this is the ReLU, max(0, x): the GELU is smooth and slightly negative for x < 0",
            jax.nn.relu,
        ),
        Diagnosis.like(
            "no_half",
            "the factor 1/2 is missing: gelu(x) = 0.5 x (1 + tanh(...))",
            lambda x: 2 * jax.nn.gelu(x),
        ),
    ),
)


def _mlp(x, W_1, b_1, W_2, b_2):
    mlp = MLP(W_1.shape[1], W_1.shape[0], key=jax.random.PRNGKey(0))
    mlp = eqx.tree_at(
        lambda m: (m.layers[0].weight, m.layers[0].bias, m.layers[1].weight, m.layers[1].bias),
        mlp, tuple(jnp.asarray(a) for a in (W_1, b_1, W_2, b_2)),
    )  # fmt: skip
    return jax.vmap(mlp)(jnp.asarray(x))


def _mlp_cases():
    rng = np.random.default_rng(11)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    return [
        Case("N = 5, D = 4, F = 16", (n(5, 4), n(16, 4) / 2, n(16), n(4, 16) / 4, n(4))),
        Case("N = 3, D = 4, F = 4", (n(3, 4), n(4, 4) / 2, n(4), n(4, 4) / 2, n(4))),
        Case("one token, D = 2, F = 8", (n(1, 2), n(8, 2), n(8), n(2, 8) / 3, n(2))),
    ]


MLP_ON_TOKENS = Exercise(
    name="mlp_on_tokens",
    chapter=4,
    title="The same two-layer MLP on every token, as matrix products",
    reference=_mlp,
    cases=_mlp_cases,
    output="(N, D)",
    diagnoses=(
        Diagnosis.like(
            "relu",
            "the activation is a ReLU: the chapter's MLP uses jax.nn.gelu",
            lambda x, W_1, b_1, W_2, b_2: jax.nn.relu(x @ W_1.T + b_1) @ W_2.T + b_2,
        ),
        Diagnosis.like(
            "activation_at_end",
            "the activation is also applied after the last layer: the MLP ends with the "
            "linear map W_2 h + b_2",
            lambda x, W_1, b_1, W_2, b_2: jax.nn.gelu(jax.nn.gelu(x @ W_1.T + b_1) @ W_2.T + b_2),
        ),
        Diagnosis.like(
            "weights_not_transposed",
            "the weights are not transposed: with tokens as rows, W_1 x_n for every n is x @ W_1.T",
            lambda x, W_1, b_1, W_2, b_2: jax.nn.gelu(x @ W_1 + b_1) @ W_2 + b_2,
        ),
        Diagnosis.like(
            "no_biases",
            "the biases b_1 and b_2 are missing",
            lambda x, W_1, b_1, W_2, b_2: jax.nn.gelu(x @ W_1.T) @ W_2.T,
        ),
    ),
)


def _mlp_parameters(D, F, L):
    return count_parameters(MLP(D, F, L, key=jax.random.PRNGKey(0)))


MLP_PARAMETERS = Exercise(
    name="mlp_parameters",
    chapter=4,
    title="The number of parameters of an MLP",
    reference=_mlp_parameters,
    cases=lambda: [
        Case("D = 4, F = 16, one hidden layer", (4, 16, 1)),
        Case("D = 64, F = 256, one hidden layer", (64, 256, 1)),
        Case("D = 8, F = 32, three hidden layers", (8, 32, 3)),
    ],
    properties=(
        Property("a whole number", lambda got, case: float(got) == int(got), "not a whole number"),
    ),
    diagnoses=(
        Diagnosis.like(
            "no_biases",
            "the biases are not counted: every linear map has one bias per output",
            lambda D, F, L: D * F + (L - 1) * F * F + F * D,
        ),
        Diagnosis.like(
            "L_maps",
            "L counts the hidden layers: there are L + 1 linear maps, L - 1 of them F x F",
            lambda D, F, L: (D * F + F) + (L - 2) * (F * F + F) + (F * D + D),
        ),
        Diagnosis.like(
            "input_biases",
            "each bias is as wide as the layer's input: it is as wide as its output (F for "
            "W_1, D for W_2)",
            lambda D, F, L: (D * F + D) + (L - 1) * (F * F + F) + (F * D + F),
        ),
    ),
)

EXERCISES = [GELU_TANH, MLP_ON_TOKENS, MLP_PARAMETERS]
