"""Data-, tensor- and fully-sharded-parallel training on forced host devices.

Forced host devices must be configured before JAX's backend starts, and this test session has
already started it with one device. So the 8-device checks run in a subprocess
(tests/parallel_checks.py, JSON on its last line) and the multi-process checks in three more
(python -m transformer_intro.demos.multi_process); the tests below assert on what they report.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P
from script_report import json_report

from transformer_intro import VisionTransformer
from transformer_intro.datasets.synthetic import synthetic_digits
from transformer_intro.models import SMALL_VIT
from transformer_intro.parallel import (
    TENSOR_PARALLEL_RULES,
    data_parallel_rules,
    fully_sharded_rules,
    make_mesh,
    shard_batch,
)
from transformer_intro.tasks import ImageClassification
from transformer_intro.training import Recipe, fit

ROOT = Path(__file__).resolve().parents[1]
# Parameters after 5 AdamW steps: absolute. Gradients: relative to the largest gradient entry (the
# class token's, about 20 for these random images, where float32 rounding alone is ~2e-6).
PARAMS_ATOL, GRADS_RTOL = 1e-4, 1e-6


def _env(devices: int | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env.pop("XLA_FLAGS", None)
    env["JAX_PLATFORMS"] = "cpu"  # the forced devices are the CPU's, also where there is a GPU
    if devices is not None:
        env["JAX_NUM_CPU_DEVICES"] = str(devices)
    return env


@pytest.fixture(scope="module")
def checks() -> dict:
    return json_report(ROOT / "tests" / "parallel_checks.py", _env(8))


def test_the_subprocess_has_eight_devices_and_this_one_keeps_one(checks):
    assert checks["devices"] == 8
    assert len(jax.devices()) == 1


def test_the_batch_is_split_over_the_data_axis(checks):
    assert checks["batch_shard_shapes"] == [[checks["batch_size"] // 8, 1, 28, 28]]
    assert checks["label_shard_shapes"] == [[checks["batch_size"] // 8]]


def test_data_parallel_replicates_every_parameter(checks):
    shards = checks["dp_shards"]
    assert shards["key_projections"] == [[4, 8, 32]]
    assert shards["mlp_in_weight"] == [[64, 32]]
    assert shards["adam_mu_key_projections"] == [[4, 8, 32]]
    assert checks["dp_spec_key_projections"] == str(P())


def test_tensor_parallel_splits_heads_and_the_hidden_layer(checks):
    shards = checks["tp_shards"]  # mesh data=4 x model=2; 4 heads, hidden width 64, D = 32
    assert shards["key_projections"] == [[2, 8, 32]]
    assert shards["output_projections"] == [[2, 32, 8]]
    assert shards["mlp_in_weight"] == [[32, 32]]  # by output features
    assert shards["mlp_in_bias"] == [[32]]
    assert shards["mlp_out_weight"] == [[32, 32]]  # by input features
    assert shards["mlp_out_bias"] == [[32]]  # replicated
    assert shards["class_token"] == [[32]]
    assert shards["adam_mu_key_projections"] == [[2, 8, 32]]  # the optimiser state follows


def test_fully_sharded_splits_the_first_divisible_axis_over_data(checks):
    shards = checks["fsdp_shards"]  # mesh data=8
    assert shards["key_projections"] == [[4, 1, 32]]  # H = 4 does not split in 8; K = 8 does
    assert shards["output_projections"] == [[4, 4, 8]]
    assert shards["mlp_in_weight"] == [[8, 32]]
    assert shards["mlp_out_weight"] == [[4, 64]]
    assert shards["class_token"] == [[4]]
    assert shards["adam_mu_key_projections"] == [[4, 1, 32]]
    assert shards["adam_mu_mlp_in_weight"] == [[8, 32]]


def test_the_compiled_steps_communicate(checks):
    assert checks["dp_collectives"]["all-reduce"] > 0  # the gradients' sum over devices
    assert checks["tp_collectives"]["all-reduce"] > 0
    fsdp = checks["fsdp_collectives"]
    assert fsdp["all-gather"] + fsdp["reduce-scatter"] > 0  # gather weights, scatter gradients
    assert sum(checks["one_device_collectives"].values()) == 0  # one device: nothing to send


@pytest.mark.parametrize("name", ["dp", "tp", "fsdp", "one_device"])
def test_sharded_training_equals_single_device_training(checks, name):
    assert checks[f"{name}_grads_error"] < GRADS_RTOL
    assert checks[f"{name}_params_error"] < PARAMS_ATOL


def test_the_comparison_can_fail(checks):
    # Training on one device's slice only (no gradient reduction) lands far away.
    assert checks["no_reduction_params_error"] > 10 * PARAMS_ATOL


def test_shard_map_data_parallel_gradient_and_its_traps(checks):
    assert checks["shard_map_grads_error"] < GRADS_RTOL
    assert checks["shard_map_params_error"] < PARAMS_ATOL
    assert checks["mean_of_local_grads_error"] < GRADS_RTOL
    # Averaging gradients that JAX has already summed: 8 devices, 8 times the gradient.
    assert checks["trap_minus_8x_error"] < GRADS_RTOL
    assert checks["trap_ratio_min"] == pytest.approx(8, rel=1e-3)
    assert checks["trap_ratio_max"] == pytest.approx(8, rel=1e-3)
    assert checks["trap_relative_error"] > 1
    assert checks["forgotten_reduction_relative_error"] > 0.01


def test_bad_meshes_and_batches_raise_clear_errors(checks):
    errors = checks["errors"]
    assert (
        "30 examples" in errors["indivisible_batch"] and "8 devices" in errors["indivisible_batch"]
    )
    assert "'tensor'" in errors["unknown_axis"] and "class_token" in errors["unknown_axis"]
    assert "head.layers.0.bias" in errors["indivisible_parameter"]
    assert "key_projections" in errors["heads_over_eight"]


def test_one_device_errors_in_this_process():
    mesh = make_mesh(1)
    with pytest.raises(ValueError, match="needs 2 devices"):
        make_mesh(2)
    with pytest.raises(ValueError, match="no 'data' axis"):
        shard_batch(jax.make_mesh((1,), ("model",)), np.zeros((4, 28, 28)))
    model = VisionTransformer(SMALL_VIT, key=jax.random.PRNGKey(0))
    recipe = Recipe(steps=1, batch_size=4, learning_rate=1e-3)
    task = ImageClassification(synthetic_digits(8))
    with pytest.raises(ValueError, match="'model' does not exist"):
        fit(model, task, recipe, mesh=mesh, rules=TENSOR_PARALLEL_RULES, progress=False)
    assert fully_sharded_rules("x", (3, 5), mesh) == P("data")  # a 1-device axis divides anything
    assert data_parallel_rules("x", (3, 5), mesh) == P()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_train_as_one(tmp_path):
    """2 processes x 2 CPU devices on the loopback address equal 1 process x 4 devices."""
    entry = [sys.executable, "-m", "transformer_intro.demos.multi_process", "--steps", "3"]
    one = subprocess.run(
        entry + ["--devices-per-process", "4", "--out", str(tmp_path / "one.npz")],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert one.returncode == 0, one.stderr[-3000:]
    port = _free_port()
    workers = [
        subprocess.Popen(
            entry
            + [
                "--num-processes",
                "2",
                "--process-id",
                str(i),
                "--port",
                str(port),
                "--devices-per-process",
                "2",
                "--out",
                str(tmp_path / "two.npz"),
            ],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    try:
        outputs = [w.communicate(timeout=300) for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
    for w, (_, err) in zip(workers, outputs):
        assert w.returncode == 0, err[-3000:]
    a, b = np.load(tmp_path / "one.npz"), np.load(tmp_path / "two.npz")
    assert int(a["devices"]) == int(b["devices"]) == 4
    errors = [np.abs(a[k] - b[k]).max() for k in a.files if k.startswith("param_")]
    assert max(errors) < PARAMS_ATOL
    np.testing.assert_allclose(a["losses"], b["losses"], atol=1e-5)
    assert np.abs(a["losses"] - a["losses"][0]).max() > 1e-3  # it did train: the loss moved
    # Negative control: process 0's half of each batch alone trains to somewhere else.
    assert (
        max(np.abs(a[k] - a["half_" + k]).max() for k in a.files if k.startswith("param_"))
        > 10 * PARAMS_ATOL
    )
