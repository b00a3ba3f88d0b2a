"""The 8-device checks of tests/test_parallel.py, run in their own process.

Where each placement puts every parameter, that tensor- and fully-sharded training equal training
on one device, and the errors for bad meshes. Chapter 12 runs the rest under nbval (data
parallelism and a one-device mesh trained, gradients compared, shard_map by hand with its two
classic mistakes, two processes); this file does not repeat it.

Forced host devices must be set before JAX's backend starts, so this script is started by the
test with JAX_NUM_CPU_DEVICES=8 and prints one JSON object of measurements on its last line; the
test asserts on them. Run it alone to see the numbers:

    JAX_NUM_CPU_DEVICES=8 PYTHONPATH=src .venv/bin/python tests/parallel_checks.py
"""

from __future__ import annotations

import json
import time

import equinox as eqx
import jax
import numpy as np
from jax.sharding import PartitionSpec as P

from transformer_intro import VisionTransformer
from transformer_intro.datasets.synthetic import synthetic_digits
from transformer_intro.models import SMALL_VIT
from transformer_intro.parallel import (
    TENSOR_PARALLEL_RULES,
    Placement,
    data_parallel_rules,
    fully_sharded_rules,
    make_mesh,
    rules_from_table,
    shard_batch,
    shard_params,
)
from transformer_intro.tasks import ImageClassification
from transformer_intro.training import Recipe, batch_key, fit, gradients, run_steps

STEPS, BATCH = 5, 32


def params_of(model):
    return [
        np.asarray(x) for x in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))
    ]


def max_difference(a, b) -> float:
    return float(
        max(
            np.abs(np.asarray(x) - np.asarray(y)).max()
            for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b))
        )
    )


def shard_shapes(array) -> list[list[int]]:
    return sorted({tuple(s.data.shape) for s in array.addressable_shards})


def main() -> dict:
    results: dict = {"devices": len(jax.devices())}
    model = VisionTransformer(SMALL_VIT, key=jax.random.PRNGKey(0))
    task = ImageClassification(synthetic_digits(256))
    recipe = Recipe(
        steps=STEPS, batch_size=BATCH, learning_rate=1e-3, schedule="constant", steps_per_call=1
    )
    optimiser = recipe.optimiser()
    batches = [task.batch(batch_key(recipe.seed, t), BATCH) for t in range(STEPS)]
    results["batch_size"] = BATCH
    grads_of = eqx.filter_jit(lambda m, b: gradients(m, b, task.loss)[1])

    # The reference: the one training loop on one device.
    reference, _ = fit(model, task, recipe, progress=False)

    # Negative control for the comparisons: the training one device would do on its own slice of
    # each batch, if its gradients were never reduced across devices.
    alone, opt_state = model, optimiser.init(eqx.filter(model, eqx.is_inexact_array))
    for batch in batches:
        grads = grads_of(alone, {k: v[: BATCH // 8] for k, v in batch.items()})
        updates, opt_state = optimiser.update(
            grads, opt_state, eqx.filter(alone, eqx.is_inexact_array)
        )
        alone = eqx.apply_updates(alone, updates)
    results["no_reduction_params_error"] = max_difference(params_of(alone), params_of(reference))

    meshes = {"dp": make_mesh(8), "tp": make_mesh(4, 2), "fsdp": make_mesh(8)}
    rules = {"dp": data_parallel_rules, "tp": TENSOR_PARALLEL_RULES, "fsdp": fully_sharded_rules}

    sharded_batch = shard_batch(meshes["dp"], batches[0])
    results["batch_shard_shapes"] = shard_shapes(sharded_batch["images"])
    results["label_shard_shapes"] = shard_shapes(sharded_batch["labels"])

    initial_state = optimiser.init(eqx.filter(model, eqx.is_inexact_array))
    for name in ("dp", "tp", "fsdp"):
        mesh, rule = meshes[name], rules[name]
        placement = Placement.create(mesh, model, initial_state, rule)
        placed, placed_opt_state, placed_task = placement.put(model, initial_state, task)
        results[f"{name}_shards"] = placed_shards(placed, placed_opt_state)
        if name == "dp":
            # Data parallelism splits only the batch; chapter 12 trains it (and every
            # placement, with shard_map by hand, and in two processes) under nbval.
            continue
        start = time.perf_counter()
        with jax.default_matmul_precision("highest"):
            trained, _ = fit(model, task, recipe, mesh=mesh, rules=rule, progress=False)
            # The compiled step of fit, lowered as fit called it (same precision, same placed
            # arguments), so that the compilation cache hands back fit's program rather than
            # compiling another: which collectives XLA put in.
            hlo = (
                run_steps.lower(
                    placed,
                    placed_opt_state,
                    placed_task,
                    np.int32(0),
                    recipe=recipe,
                    count=1,
                    placement=placement,
                )
                .lowered.compile()
                .as_text()
            )
        results[f"{name}_seconds"] = time.perf_counter() - start
        results[f"{name}_params_error"] = max_difference(params_of(trained), params_of(reference))
        results[f"{name}_trained_shards"] = placed_shards(trained)
        results[f"{name}_collectives"] = {
            op: hlo.count(op) for op in ("all-reduce", "all-gather", "reduce-scatter")
        }

    # Bad input: clear errors.
    mesh = meshes["dp"]
    errors = {}
    try:
        shard_batch(mesh, batches[0]["images"][:30])
    except ValueError as error:
        errors["indivisible_batch"] = str(error)
    try:
        shard_params(model, mesh, rules_from_table([(r"class_token$", P("tensor"))]))
    except ValueError as error:
        errors["unknown_axis"] = str(error)
    try:
        shard_params(
            model, make_mesh(2, 4), rules_from_table([(r"head\.layers\.0\.bias$", P("model"))])
        )
    except ValueError as error:
        errors["indivisible_parameter"] = str(error)
    try:
        fit(model, task, recipe, mesh=make_mesh(1, 8), rules=TENSOR_PARALLEL_RULES, progress=False)
    except ValueError as error:
        errors["heads_over_eight"] = str(error)
    results["errors"] = errors
    return results


def placed_shards(model, opt_state=None) -> dict:
    """The shapes of the blocks each device holds, for the parts the tests name."""
    attention, mlp = model.blocks[0].attention, model.blocks[0].mlp
    shards = {
        "key_projections": shard_shapes(attention.key_projections),
        "output_projections": shard_shapes(attention.output_projections),
        "mlp_in_weight": shard_shapes(mlp.layers[0].weight),
        "mlp_in_bias": shard_shapes(mlp.layers[0].bias),
        "mlp_out_weight": shard_shapes(mlp.layers[1].weight),
        "mlp_out_bias": shard_shapes(mlp.layers[1].bias),
        "class_token": shard_shapes(model.class_token),
        "spec_key_projections": str(attention.key_projections.sharding.spec),
    }
    if opt_state is not None:  # Adam's first moments, placed like their parameters
        mu = opt_state[0].mu.blocks[0]
        shards["adam_mu_key_projections"] = shard_shapes(mu.attention.key_projections)
        shards["adam_mu_mlp_in_weight"] = shard_shapes(mu.mlp.layers[0].weight)
    return shards


if __name__ == "__main__":
    print(json.dumps(main()))
