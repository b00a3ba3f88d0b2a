"""Every chapter that checks floating-point results says at which matrix-product precision.

On a GPU, XLA multiplies float32 matrices in TF32 unless asked otherwise, and an identity that
holds to 1e-6 on a CPU fails there by 1e-3; so a page whose code compares floats asks for its
precision in code (``jax_default_matmul_precision``, for the whole page or around a check), where
a reader who runs it on a GPU sees it.
"""

import json
import re
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parents[1] / "book"
CHAPTERS = sorted(BOOK.glob("*.ipynb"))
COMPARES_FLOATS = re.compile(r"\ballclose\(|\bisclose\(|assert_allclose\(|\bapprox\(")
ASKS_FOR_PRECISION = re.compile(r"jax_default_matmul_precision|default_matmul_precision\(")


def code(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def states_its_precision(code: str) -> bool:
    return not COMPARES_FLOATS.search(code) or bool(ASKS_FOR_PRECISION.search(code))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_a_chapter_that_compares_floats_states_its_matrix_product_precision(path):
    assert states_its_precision(code(path)), (
        f"{path.name} compares floats but does not ask for its matrix-product precision: add "
        'jax.config.update("jax_default_matmul_precision", "highest") to its first code cell, '
        "with a comment saying why (see chapter 1)"
    )


def test_the_check_finds_a_page_that_compares_floats_without_a_precision():
    assert not states_its_precision("assert jnp.allclose(a @ b, c)")
    assert states_its_precision(
        'jax.config.update("jax_default_matmul_precision", "highest")\n'
        "assert jnp.allclose(a @ b, c)"
    )
