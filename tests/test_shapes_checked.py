"""The unit tests run with the package's shape annotations checked.

tests/conftest.py imports the package under jaxtyping's import hook with beartype, so every
annotated function checks its arguments and its result. The inputs here are ones the code itself
would take without complaint (a mask that broadcasts): only a live check refuses them, so these
tests fail if the hook is not installed.
"""

import jax
import jax.numpy as jnp
import jaxtyping
import pytest

from transformer_intro.attention import SelfAttention, attend, causal_mask

N, D, K = 5, 8, 4


@pytest.fixture(scope="module")
def layer():
    return SelfAttention(D, K, key=jax.random.PRNGKey(0))


@pytest.fixture(scope="module")
def x():
    return jax.random.normal(jax.random.PRNGKey(1), (N, D))


def test_a_wrongly_shaped_argument_is_refused_naming_it(layer, x):
    layer(x, causal_mask(N))  # the right shapes pass
    # An (N, 1) mask broadcasts in jnp.where, so the code alone would run; "N N" refuses it.
    with pytest.raises(jaxtyping.TypeCheckError, match=r"(?s)SelfAttention\.__call__.*'mask'"):
        layer(x, jnp.ones((N, 1), bool))


def test_the_checks_run_while_jit_traces(layer, x):
    with pytest.raises(jaxtyping.TypeCheckError, match="'mask'"):
        jax.jit(lambda x, mask: layer(x, mask))(x, jnp.ones((N, 1), bool))


def test_a_batch_where_one_sequence_is_due_is_refused():
    # attend takes one sequence, "M D"; a batch of them, (B, M, D), would multiply without
    # complaint (a batched product), so only the annotation refuses it.
    weights = jnp.full((3, 2), 1 / 3)
    with pytest.raises(jaxtyping.TypeCheckError, match="'x'"):
        attend(jnp.ones((4, 3, D)), weights)
