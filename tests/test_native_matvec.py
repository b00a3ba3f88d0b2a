"""The C++ kernels of benchmarks/quantised_matvec.py multiply Q8_0 and Q4_1 blocks correctly.

The benchmark checks them itself before timing (``check_native``: against NumPy's products on the
dequantised weights, with a negative control); this runs that check where the kernels can be
built, so that a change to the kernels that breaks them fails here rather than in a benchmark.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "quantised_matvec.py"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(SCRIPT.parent))  # the script imports report.py beside it
    try:
        spec = importlib.util.spec_from_file_location("quantised_matvec", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return module


@pytest.fixture(scope="module")
def built(bench, tmp_path_factory):
    reason = bench.missing_for_native()
    if reason is not None or jax.default_backend() != "cpu":
        pytest.skip(reason or "the kernels are registered for the CPU")
    assert bench.build_native(tmp_path_factory.mktemp("native")) is not None
    return bench


def test_the_kernels_equal_numpy_on_dequantised_weights(built):
    built.check_native(np.random.default_rng(3))


def test_a_corrupted_scale_is_caught(built):
    rng = np.random.default_rng(4)
    packed, d, m = built.q4_1_blocks(rng, (64, 96))
    x = rng.standard_normal(96, dtype=np.float32)
    expected = built.dequantised_q4_1(packed, d, m) @ x
    d = d.copy()
    d[5, 1] = np.float16(0.5).view(np.uint16)  # one block's scale changed
    got = np.asarray(jax.jit(built.q4_native)(packed, d, m, x))
    assert np.allclose(np.delete(got, 5), np.delete(expected, 5), rtol=1e-4, atol=1e-5)
    assert not np.isclose(got[5], expected[5], rtol=1e-2)


def test_shapes_that_disagree_are_refused(built):
    q = np.zeros((8, 64), np.int8)
    d = np.zeros((8, 3), np.uint16)  # 64 inputs have 2 blocks, not 3
    with pytest.raises(Exception, match="shapes do not agree"):
        jax.jit(built.q8_native)(q, d, np.zeros(64, np.float32)).block_until_ready()
