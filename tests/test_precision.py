"""The precision policy of tests/conftest.py, and why it exists.

A CPU ignores JAX's matmul precision setting, so a test on the CPU cannot watch TF32 change a
result. It can check two things instead: that the setting reaches every matrix product of the
compiled program (and that without it the products carry the GPU-default request), and, with
TF32 emulated bit for bit, that TF32 rounding alone breaks the 1e-5 tolerance of the identity
tests at an attention layer's size while full float32 meets it.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_intro import MultiHeadSelfAttention
from transformer_intro.precision import round_to_tf32
from transformer_intro.xla_flags import LOOP_EMITTERS_OPTION, has_loop_emitters

IDENTITY_TOL = 1e-5  # what tests/test_attention.py and friends compare with (atol and rtol)

# The attention layer of the book's trained ViT ("default" configuration): 16 patch tokens plus
# the class token, D = 64, four heads of width 16.
TOKENS, WIDTH, HEADS, HEAD_DIM = 17, 64, 4, 16


@pytest.fixture(scope="module")
def layer():
    return MultiHeadSelfAttention(
        WIDTH, HEADS, head_dim=HEAD_DIM, value_dim=HEAD_DIM, key=jax.random.PRNGKey(0)
    )


@pytest.fixture(scope="module")
def batch():
    return jax.random.normal(jax.random.PRNGKey(1), (8, TOKENS, WIDTH))


def batched(layer, x):
    return layer.batched(x)


def vmapped_definition(layer, x):
    return jax.vmap(layer)(x)


def dot_precisions(f, *args) -> list[str]:
    """The precision attribute of every matrix product in f's lowered StableHLO program."""
    text = jax.jit(f).lower(*args).as_text()
    dots = [line for line in text.splitlines() if "stablehlo.dot_general" in line]
    assert dots, "the program has no matrix product to inspect"
    return [
        (re.search(r"precision = \[([A-Z]+), ([A-Z]+)\]", line) or [None, "unset"])[1]
        for line in dots
    ]


# ---------------------------------------------------------------------------------------------
# The policy reaches the compiled program
# ---------------------------------------------------------------------------------------------


def test_session_asks_for_full_float32_matrix_products():
    assert jax.config.jax_default_matmul_precision == "highest"


def test_on_a_cpu_the_unit_tests_compile_with_little_optimisation():
    # tests/conftest.py; a module marked optimised_programs gets XLA's full effort
    # (tests/test_pretrained.py checks its own).
    assert jax.config.values["jax_disable_most_optimizations"] == (jax.default_backend() == "cpu")


def _asks_for_loop_emitters() -> bool:
    from jax._src import compiler

    options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
    return LOOP_EMITTERS_OPTION in options.env_option_overrides


def test_on_a_cpu_the_unit_tests_compile_fusions_with_the_loop_emitters():
    # tests/conftest.py: every program this module compiles asks for XLA's quicker emitters,
    # where the installed XLA has them
    expected = jax.default_backend() == "cpu" and has_loop_emitters()
    assert _asks_for_loop_emitters() == expected


def test_the_loop_emitters_are_asked_for_only_with_little_optimisation():
    # Negative control: with XLA's full effort (a module marked optimised_programs) the programs
    # keep XLA's default emitters.
    saved = jax.config.values["jax_disable_most_optimizations"]
    jax.config.update("jax_disable_most_optimizations", False)
    try:
        assert not _asks_for_loop_emitters()
    finally:
        jax.config.update("jax_disable_most_optimizations", saved)


@pytest.mark.parametrize("f", [batched, vmapped_definition])
def test_every_matrix_product_is_compiled_at_highest_precision(layer, batch, f):
    precisions = dot_precisions(f, layer, batch)
    assert set(precisions) == {"HIGHEST"}, precisions


@pytest.mark.parametrize(
    "setting, expected",
    [("default", "DEFAULT"), ("tensorfloat32", "HIGH"), ("bfloat16", "DEFAULT")],
)
@pytest.mark.parametrize("f", [batched, vmapped_definition])
def test_without_the_policy_the_products_are_not_highest(layer, batch, f, setting, expected):
    # Negative control: the check above would see a weaker request. "DEFAULT" is what a GPU
    # runs in TF32 (or bfloat16), "HIGH" is TF32 by name.
    with jax.default_matmul_precision(setting):
        precisions = dot_precisions(f, layer, batch)
    assert set(precisions) == {expected}, precisions


# ---------------------------------------------------------------------------------------------
# The emulated TF32 rounding
# ---------------------------------------------------------------------------------------------


def test_round_to_tf32_keeps_ten_mantissa_bits_to_nearest():
    x = jax.random.normal(jax.random.PRNGKey(2), (10_000,)) * 10.0 ** jax.random.randint(
        jax.random.PRNGKey(3), (10_000,), -20, 20
    )
    rounded = round_to_tf32(x)
    low_bits = np.asarray(jax.lax.bitcast_convert_type(rounded, jnp.uint32)) & 0x1FFF
    assert np.all(low_bits == 0)  # the 13 dropped mantissa bits are zero
    relative = np.abs(np.asarray(rounded) - np.asarray(x)) / np.abs(np.asarray(x))
    assert relative.max() <= 2.0**-11  # to nearest: at most half a unit of the 10th bit
    assert relative.max() > 2.0**-12  # and the bound is reached, so bits were really dropped
    assert np.array_equal(round_to_tf32(rounded), rounded)  # TF32 values stay as they are


def test_round_to_tf32_rounds_ties_away_from_zero_and_carries_into_the_exponent():
    x = jnp.array(
        [1 + 2.0**-11, -(1 + 2.0**-11), 1 + 2.0**-12, 2 - 2.0**-23, jnp.inf, -jnp.inf], jnp.float32
    )
    expected = np.array([1 + 2.0**-10, -(1 + 2.0**-10), 1.0, 2.0, np.inf, -np.inf], np.float32)
    np.testing.assert_array_equal(np.asarray(round_to_tf32(x)), expected)
    assert np.isnan(round_to_tf32(jnp.array([jnp.nan]))[0])


@pytest.mark.parametrize("dtype", [jnp.int32, jnp.bfloat16, jnp.float16])
def test_round_to_tf32_refuses_other_dtypes(dtype):
    with pytest.raises(ValueError, match="float32"):
        round_to_tf32(jnp.ones(3, dtype))


# ---------------------------------------------------------------------------------------------
# Why the policy exists: TF32 misses the identity tests' tolerance, float32 meets it
# ---------------------------------------------------------------------------------------------


def text_form(layer, x, matmul):
    """``Y = Σ_h V_h X A_h`` for one sequence of rows, every matrix product done by ``matmul``."""
    dtype = x.dtype
    key_projections, query_projections, value_maps = (
        np.asarray(w, dtype)
        for w in (layer.key_projections, layer.query_projections, layer.value_maps())
    )
    total = np.zeros_like(x)
    for u_k, u_q, v in zip(key_projections, query_projections, value_maps):
        scores = matmul(matmul(x, u_k.T), matmul(x, u_q.T).T) / np.sqrt(u_k.shape[0])
        weights = np.exp(scores - scores.max(axis=0))
        weights = weights / weights.sum(axis=0)  # columns sum to one: A[n', n]
        total = total + matmul(weights.T, matmul(x, v.T))
    return total


def tf32_matmul(a, b):
    """A GPU's default float32 product: operands rounded to TF32, products summed in float32."""
    return np.asarray(round_to_tf32(a)) @ np.asarray(round_to_tf32(b))


def largest_miss(y, reference):
    """Largest |y - ref| beyond the allowance atol + rtol |ref| of the identity tests.

    A value > 0 means the test fails.
    """
    excess = np.abs(np.asarray(y, np.float64) - reference) - IDENTITY_TOL * (1 + np.abs(reference))
    return excess.max()


def test_tf32_misses_the_identity_tolerance_that_float32_meets(layer, batch):
    x32 = np.asarray(batch)
    exact = np.stack([text_form(layer, x.astype(np.float64), np.matmul) for x in x32])
    full = np.stack([text_form(layer, x, np.matmul) for x in x32])
    tf32 = np.stack([text_form(layer, x, tf32_matmul) for x in x32])
    package = np.asarray(layer.batched(batch))
    errors = {
        name: np.abs(y.astype(np.float64) - exact).max()
        for name, y in [("float32", full), ("package batched", package), ("emulated TF32", tf32)]
    }
    print(f"\nlargest error against float64, outputs of size {np.abs(exact).max():.2f}: {errors}")
    assert largest_miss(full, exact) < 0  # full float32 passes the identity tolerance ...
    assert largest_miss(package, exact) < 0
    assert largest_miss(tf32, exact) > 0  # ... TF32 rounding alone does not
    # and it misses by TF32's size of error (2^-11 per operand), not by a blunder
    assert 10 * IDENTITY_TOL < errors["emulated TF32"] < 1e-2
