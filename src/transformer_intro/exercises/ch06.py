"""Chapter 6 (the transformer block): the pre-norm block, the post-norm block, its size."""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np

from ..attention import MultiHeadAttention
from ..block import BlockConfig, TransformerBlock
from ..mlp import MLP
from ..normalisation import LayerNorm
from ..parameters import count_parameters
from .core import Case, Diagnosis, Exercise, Property


def _norm(key, dim):
    k1, k2 = jax.random.split(key)
    return eqx.tree_at(lambda m: (m.weight, m.bias), LayerNorm(dim),
                       (1 + 0.3 * jax.random.normal(k1, (dim,)),
                        0.3 * jax.random.normal(k2, (dim,))))  # fmt: skip


def _pieces(seed, D=8, H=2, F=16):
    k = jax.random.split(jax.random.PRNGKey(seed), 4)
    return (_norm(k[0], D), MultiHeadAttention(D, H, key=k[1]), _norm(k[2], D),
            MLP(D, F, key=k[3]))  # fmt: skip


def _block(norm_1, attention, norm_2, mlp, residual="input"):
    D = norm_1.weight.shape[0]
    config = BlockConfig(dim=D, num_heads=2, mlp_hidden_dim=16, residual=residual)
    block = TransformerBlock(config, key=jax.random.PRNGKey(0))
    return eqx.tree_at(lambda b: (b.attention_norm, b.attention, b.mlp_norm, b.mlp), block,
                       (norm_1, attention, norm_2, mlp))  # fmt: skip


def _block_cases():
    rng = np.random.default_rng(15)
    return [
        Case("N = 5, D = 8, H = 2", (rng.normal(size=(5, 8)).astype(np.float32), *_pieces(1))),
        Case("N = 3, D = 8, H = 2", (rng.normal(size=(3, 8)).astype(np.float32), *_pieces(2))),
    ]


def _post_norm(x, norm_1, attention, norm_2, mlp):
    y = norm_1(x + attention(x))
    return norm_2(y + jax.vmap(mlp)(y))


PRE_NORM_BLOCK = Exercise(
    name="pre_norm_block",
    chapter=6,
    title="The pre-norm transformer block",
    reference=lambda x, norm_1, attention, norm_2, mlp: _block(norm_1, attention, norm_2, mlp)(x),
    cases=_block_cases,
    output="(N, D)",
    diagnoses=(
        Diagnosis.like(
            "residual_from_normalised",
            "the first skip carries the normalised tokens: add the attention's output to the "
            "block's input x, not to LayerNorm(x)",
            lambda x, n1, a, n2, m: _block(n1, a, n2, m, residual="normalised")(x),
        ),
        Diagnosis.like(
            "post_norm",
            "this is the post-norm block (normalise after each addition): pre-norm normalises "
            "each branch's input, y = x + MHSA(LayerNorm(x))",
            _post_norm,
        ),
        Diagnosis.like(
            "no_second_skip",
            "the MLP's output replaces the stream: add it, y + MLP(LayerNorm(y))",
            lambda x, n1, a, n2, m: jax.vmap(m)(n2(x + a(n1(x)))),
        ),
        Diagnosis.like(
            "mlp_not_normalised",
            "the MLP reads y itself: it reads LayerNorm(y)",
            lambda x, n1, a, n2, m: x + a(n1(x)) + jax.vmap(m)(x + a(n1(x))),
        ),
    ),
)


def _post_cases():
    rng = np.random.default_rng(16)
    out = []
    for seed, n in ((3, 5), (4, 2)):
        _, attention, _, mlp = _pieces(seed)
        out.append(Case(f"N = {n}, D = 8, gamma = 1, beta = 0",
                        (rng.normal(size=(n, 8)).astype(np.float32), LayerNorm(8), attention,
                         LayerNorm(8), mlp)))  # fmt: skip
    return out


POST_NORM_BLOCK = Exercise(
    name="post_norm_block_by_hand",
    chapter=6,
    title="The post-norm block of the original transformer",
    reference=_post_norm,
    cases=_post_cases,
    output="(N, D)",
    atol=2e-5,
    properties=(
        Property(
            "every output token has mean 0",
            lambda got, case: np.allclose(np.asarray(got).mean(-1), 0, atol=1e-4),
            "an output token does not have mean 0: post-norm ends with a LayerNorm",
        ),
    ),
    diagnoses=(
        Diagnosis.like(
            "pre_norm",
            "this is the pre-norm block: post-norm adds first and normalises the sum, "
            "y = LayerNorm(x + MHSA(x))",
            lambda x, n1, a, n2, m: _block(n1, a, n2, m)(x),
        ),
        Diagnosis.like(
            "no_skip_inside_norm",
            "the skip is added after the normalisation: the sum is normalised, "
            "LayerNorm(x + MHSA(x))",
            lambda x, n1, a, n2, m: (y := x + n1(a(x))) + n2(jax.vmap(m)(y)),
        ),
    ),
)


def _block_parameters(D, H, K, F, value_dim=None):
    config = BlockConfig(dim=D, num_heads=H, mlp_hidden_dim=F, head_dim=K, value_dim=value_dim)
    block = TransformerBlock(config, key=jax.random.PRNGKey(0))
    return count_parameters(block)


BLOCK_PARAMETERS = Exercise(
    name="block_parameters",
    chapter=6,
    title="The number of parameters of a block",
    reference=_block_parameters,
    cases=lambda: [
        Case("D = 8, H = 2, K = 4, F = 32", (8, 2, 4, 32)),
        Case("D = 64, H = 4, K = 16, F = 256", (64, 4, 16, 256)),
        Case("D = 64, H = 4, K = 16, F = 256, D_v = 16", (64, 4, 16, 256), {"value_dim": 16}),
    ],
    diagnoses=(
        Diagnosis.like(
            "no_layer_norms",
            "the two LayerNorms are not counted: each has a gain and a shift per feature, 4D",
            lambda D, H, K, F, value_dim=None: _block_parameters(D, H, K, F, value_dim) - 4 * D,
        ),
        Diagnosis.like(
            "one_value_map",
            "the value map is counted once: every head has its own V_h",
            lambda D, H, K, F, value_dim=None: (
                _block_parameters(D, H, K, F, value_dim)
                - (H - 1) * (D * D if value_dim is None else 2 * value_dim * D)
            ),
        ),
        Diagnosis.like(
            "no_mlp_biases",
            "the MLP's biases are not counted: F + D of them",
            lambda D, H, K, F, value_dim=None: _block_parameters(D, H, K, F, value_dim) - F - D,
        ),
    ),
)

EXERCISES = [PRE_NORM_BLOCK, POST_NORM_BLOCK, BLOCK_PARAMETERS]
