"""Data-, tensor- and fully-sharded-parallel training on forced host devices.

Forced host devices must be configured before JAX's backend starts, and this test session has
already started it with one device. So the 8-device checks run in a subprocess
(tests/parallel_checks.py, JSON on its last line); the tests below assert on what it reports.
Chapter 12, under nbval, trains every placement and checks gradients, shard_map by hand and the
run in two processes (whose launcher's errors tests/test_two_processes_script.py checks); what
the chapter asserts is not run a second time here.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P
from script_report import json_report, quick_compile

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
# Parameters after 5 AdamW steps, absolute.
PARAMS_ATOL = 1e-4


def _env(devices: int) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env.pop("XLA_FLAGS", None)
    env["JAX_PLATFORMS"] = "cpu"  # the forced devices are the CPU's, also where there is a GPU
    env["JAX_NUM_CPU_DEVICES"] = str(devices)
    return quick_compile(env)  # compiling, not running, is the subprocess's cost


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
    assert shards["spec_key_projections"] == str(P())


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
    assert checks["tp_collectives"]["all-reduce"] > 0  # the partial products' sum over "model"
    fsdp = checks["fsdp_collectives"]
    assert fsdp["all-gather"] + fsdp["reduce-scatter"] > 0  # gather weights, scatter gradients


@pytest.mark.parametrize("name", ["tp", "fsdp"])
def test_sharded_training_equals_single_device_training(checks, name):
    assert checks[f"{name}_params_error"] < PARAMS_ATOL
    # fit keeps each parameter where the placement put it
    trained, placed = checks[f"{name}_trained_shards"], checks[f"{name}_shards"]
    assert trained == {k: v for k, v in placed.items() if not k.startswith("adam_")}


def test_the_comparison_can_fail(checks):
    # Training on one device's slice only (no gradient reduction) lands far away.
    assert checks["no_reduction_params_error"] > 10 * PARAMS_ATOL


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
