"""Shared pytest configuration.

The precision policy. Most unit tests check that two ways of computing something give the same
function (a batched path against its one-example definition, the package against Equinox), at
tolerances near float32's rounding (1e-5 to 1e-6). On NVIDIA GPUs since Ampere, XLA multiplies
float32 matrices in TensorFloat-32 by default: operands rounded to a 10-bit mantissa, errors about
1e-3 per product, which such tolerances cannot absorb (tests/test_precision.py measures it). So
the whole test session asks for full float32 matrix products. A CPU ignores the setting, which is
why tests/test_precision.py checks that the request reaches the compiled program. Training code
keeps JAX's fast default; chapters 1 to 7 of the book set the same policy in their first cell.

The command-line option of the browser test also lives here: pytest parses the command line
before it collects tests/browser/, so the option must be registered by a conftest it loads first.
"""

import jax

jax.config.update("jax_default_matmul_precision", "highest")


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
