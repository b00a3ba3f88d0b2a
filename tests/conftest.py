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
optimisation level 0, no expensive passes), as Flax's own tests do. Measured on two cores with no
compilation cache, tests/test_encoder_decoder.py alone: 78 s against 128 s. The same modules also
compile their fusions with XLA's older loop emitters (``xla_cpu_use_fusion_emitters=false``, where
the installed XLA has them: transformer_intro.xla_flags), which
compile a small program about twice as fast as the MLIR emitters and run it somewhat slower: on one
core, tests/test_relations.py spent 17.7 s in XLA's backend compile against 39.2 s (715 programs),
and took 42 s against 62. JAX has no public setting for a compile option of every program, eager
operations included, so this file wraps ``jax._src.compiler.get_compile_options``; should a later
JAX move it, tests/test_precision.py says so and the other tests run, only slower. A module marked
``optimised_programs`` (the pretrained model's, whose 135 million parameters make running, not
compiling, the cost: 264 s with the setting against 240 s without, in two runs of the unit tests)
gets XLA's full effort, as does every module on a GPU. The chapters, run by nbval in their own
kernels, keep their own settings (chapters 1 to 16 ask for quick compilation in their first cell):
what a reader runs is tested as the reader runs it.

The shape checks. The package annotates its arrays' shapes with jaxtyping (``Float[Array, "N D"]``);
the unit tests import it under jaxtyping's import hook with beartype, so that every annotated
function checks its arguments and its result against them, and a test fails where an annotation
and the code disagree (tests/test_shapes_checked.py checks that the hook is live). Under ``jax.jit``
the checks run while tracing, once per compiled program, not at every call. The hook must be
installed before anything imports the package, so it is installed here, the first file pytest
loads from tests/; this also makes it the same in each pytest-xdist process. It covers every
module of the package but ``transformer_intro.pretrained`` (the comment at the hook says why).
The notebooks, run by nbval in their own kernels, import the package without it, as a reader
does.

The command-line option of the browser test also lives here: pytest parses the command line
before it collects tests/browser/, so the option must be registered by a conftest it loads first.
"""

import importlib.util
import pkgutil
import sys

import jax
import jaxtyping
import pytest

# Before any test module, or helper module, imports transformer_intro.
if "transformer_intro" in sys.modules:
    raise RuntimeError("transformer_intro was imported before jaxtyping's import hook")
# Every module of the package but the pretrained models' readers (GGUF, Hugging Face's layouts),
# which handle NumPy arrays from files and annotate no shapes: under the hook, gguf's own
# dequantisation, called from them, took 257 s of SmolLM2's loading against about 10 s in all.
_CHECKED = [
    f"transformer_intro.{module.name}"
    for module in pkgutil.iter_modules(
        importlib.util.find_spec("transformer_intro").submodule_search_locations
    )
    if module.name != "pretrained"
]
# PEP 484's numeric tower, as static type checkers read annotations: an int is a float.
jaxtyping.install_import_hook(
    _CHECKED, "beartype.beartype(conf=beartype.BeartypeConf(is_pep484_tower=True))"
)

from transformer_intro.xla_flags import (  # noqa: E402 (after the hook)
    LOOP_EMITTERS_OPTION,
    has_loop_emitters,
)

jax.config.update("jax_default_matmul_precision", "highest")


def _with_loop_emitters(get_compile_options):
    # The loop emitters go with little optimisation: where the fixture below asks for it, and
    # where XLA still has them (transformer_intro.xla_flags).
    def get_options(*args, **kwargs):
        options = get_compile_options(*args, **kwargs)
        if jax.config.values["jax_disable_most_optimizations"] and has_loop_emitters():
            options.env_option_overrides = [*options.env_option_overrides, LOOP_EMITTERS_OPTION]
        return options

    return get_options


try:
    from jax._src import compiler as _compiler

    _compiler.get_compile_options = _with_loop_emitters(_compiler.get_compile_options)
except (ImportError, AttributeError):  # a later JAX: slower, and test_precision fails
    pass


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
