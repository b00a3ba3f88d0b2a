"""Shared pytest configuration.

The precision policy. Most unit tests check that two ways of computing something give the same
function (a batched path against its one-example definition, the package against Equinox), at
tolerances near float32's rounding (1e-5 to 1e-6). On NVIDIA GPUs since Ampere, XLA multiplies
float32 matrices in TensorFloat-32 by default: operands rounded to a 10-bit mantissa, errors about
1e-3 per product, which such tolerances cannot absorb (tests/test_precision.py measures it). So
the whole test session asks for full float32 matrix products. A CPU ignores the setting, which is
why tests/test_precision.py checks that the request reaches the compiled program. Training code
keeps JAX's fast default; chapters 1 to 7 of the book set the same policy in their first cell.

The compile effort. On a CPU, most unit tests spend their time compiling small programs that then
run a few times, so XLA is asked not to optimise much (``jax_disable_most_optimizations``: LLVM's
optimisation level 0, no expensive passes), as Flax's own tests do. Measured on two cores with
no compilation cache, tests/test_encoder_decoder.py alone: 78 s against 128 s. A module marked
``optimised_programs`` (the pretrained model's, whose 135 million parameters make running, not
compiling, the cost: 264 s with the setting against 240 s without, in two runs of the unit
tests) gets XLA's full effort, as does every module on a GPU. The chapters, run by nbval in their
own kernels, keep JAX's defaults: what a reader runs is tested as the reader runs it.

The shape checks. The package annotates its arrays' shapes with jaxtyping (``Float[Array, "N D"]``);
the unit tests import it under jaxtyping's import hook with beartype, so that every annotated
function checks its arguments and its result against them, and a test fails where an annotation
and the code disagree (tests/test_shapes_checked.py checks that the hook is live). Under ``jax.jit``
the checks run while tracing, once per compiled program, not at every call. The hook must be
installed before anything imports the package, so it is installed here, the first file pytest
loads from tests/; this also makes it the same in each pytest-xdist process. The notebooks, run by
nbval in their own kernels, import the package without it, as a reader does.

The command-line option of the browser test also lives here: pytest parses the command line
before it collects tests/browser/, so the option must be registered by a conftest it loads first.
"""

import sys

import jax
import jaxtyping
import pytest

# Before any test module, or helper module, imports transformer_intro.
if "transformer_intro" in sys.modules:
    raise RuntimeError("transformer_intro was imported before jaxtyping's import hook")
# PEP 484's numeric tower, as static type checkers read annotations: an int is a float.
jaxtyping.install_import_hook(
    "transformer_intro", "beartype.beartype(conf=beartype.BeartypeConf(is_pep484_tower=True))"
)

jax.config.update("jax_default_matmul_precision", "highest")

# Tests of the package's own errors for input that its annotations already exclude (a sequence
# where one token is due, 10.5 steps) are marked ``unchecked``: with the checks on, the annotation
# would refuse the input first, with jaxtyping's message instead of the package's sentence, which
# is what a reader, who runs without the hook, sees. They run with the checks off.


@pytest.fixture(autouse=True)
def _shape_checks(request):
    if request.node.get_closest_marker("unchecked") is None:
        yield
        return
    jaxtyping.config.update("jaxtyping_disable", True)
    try:
        yield
    finally:
        jaxtyping.config.update("jaxtyping_disable", False)


@pytest.fixture(autouse=True, scope="module")
def _compile_effort(request):
    # Module scope, and autouse: set before the module's own fixtures compile anything.
    optimise = (
        request.node.get_closest_marker("optimised_programs") is not None
        or jax.default_backend() != "cpu"
    )
    jax.config.update("jax_disable_most_optimizations", not optimise)
    yield
    jax.config.update("jax_disable_most_optimizations", False)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "unchecked: run without the shape checks (a test of the package's own error for input "
        "that the annotations already exclude)",
    )
    config.addinivalue_line(
        "markers",
        "optimised_programs: compile this module's programs with XLA's full optimisation on a CPU "
        "(running them, not compiling them, is what takes its time)",
    )


def pytest_addoption(parser):
    parser.addoption(
        "--run-browser",
        action="store_true",
        default=False,
        help=(
            "run the headless-Chromium test of the built HTML book "
            "(tests/browser; needs `make book`)"
        ),
    )
