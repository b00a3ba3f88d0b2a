"""The roofline's counts (transformer_intro.roofline) against XLA's own and the model's arrays."""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

from transformer_intro.models.language_model import SHAKESPEARE_CONFIG, LanguageModel
from transformer_intro.pretrained import SMOLLM2_135M
from transformer_intro.roofline import (
    Work,
    attainable,
    attention_work,
    block_work,
    matrix_product_work,
    measure_bandwidth,
    measure_matmul_peak,
    ridge_point,
)


def _xla_cost(fn, *shapes):
    specs = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]
    with jax.default_device(jax.devices("cpu")[0]):
        return jax.jit(fn).lower(*specs).compile().cost_analysis()


@pytest.mark.parametrize(
    ("tokens", "d_in", "d_out"), [(1, 576, 1536), (41, 576, 192), (256, 64, 128)]
)
def test_a_products_flops_and_bytes_are_xlas(tokens, d_in, d_out):
    cost = _xla_cost(lambda x, w: x @ w.T, (tokens, d_in), (d_out, d_in))
    work = matrix_product_work(tokens, d_in, d_out)
    assert work.flops == cost["flops"]
    assert work.bytes == cost["bytes accessed"]


def test_a_blocks_products_cover_its_matrices():
    """Summed over the blocks, 2 T |θ_W| less the read-out: the model's arrays, counted apart."""
    for config in (SHAKESPEARE_CONFIG, SMOLLM2_135M):
        shapes = eqx.filter_eval_shape(LanguageModel, config, key=jax.random.PRNGKey(0))
        in_blocks = sum(a.size for a in jax.tree.leaves(shapes.blocks) if len(a.shape) >= 2)
        flops = config.num_blocks * sum(w.flops for w in block_work(config, 7).values())
        assert flops == 2 * 7 * in_blocks


def test_intensity_at_decoding_training_and_by_format():
    config = SMOLLM2_135M
    decoding = sum(block_work(config, 1).values(), Work(0, 0))
    assert 0.49 < decoding.intensity < 0.5  # 2 FLOPs per 4-byte weight, and the vectors
    q8 = sum(block_work(config, 1, weight_bytes=34 / 32).values(), Work(0, 0))
    assert q8.intensity == pytest.approx(decoding.intensity * 4 / (34 / 32), rel=0.01)
    training = sum(block_work(SHAKESPEARE_CONFIG, 64 * 64).values(), Work(0, 0))
    assert training.intensity > 50 * decoding.intensity
    # the plain form's N x N weights cost bytes the tiled form does not move
    plain, tiled = (attention_work(64, 64, 32, 4, plain=p) for p in (True, False))
    assert plain.flops == tiled.flops and plain.bytes > 2 * tiled.bytes


def test_the_bound_is_the_lower_roof():
    peak, bandwidth = 100e9, 10e9
    assert ridge_point(peak, bandwidth) == 10
    assert attainable(0.5, peak, bandwidth) == 5e9  # memory-bound
    assert attainable(50, peak, bandwidth) == peak  # compute-bound
    assert math.isclose(attainable(10, peak, bandwidth), peak)
    with pytest.raises(ValueError, match="must be positive"):
        attainable(0, peak, bandwidth)


def test_the_measurements_return_rates():
    """Small sizes, briefly: each function runs and gives a positive rate (no speed asserted)."""
    for rate in (measure_matmul_peak(64, seconds=0.01), measure_bandwidth(4, seconds=0.01)):
        assert math.isfinite(rate) and rate > 0
