"""The 8-device checks of tests/test_parallel.py, run in their own process.

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
    shard_map_gradients,
    shard_map_step,
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


def relative_to_largest(a, b) -> float:
    """Largest |a - b| over all leaves, relative to the largest |b| of any leaf."""
    largest = max(float(np.abs(np.asarray(y)).max()) for y in jax.tree_util.tree_leaves(b))
    return max_difference(a, b) / largest


def max_relative_difference(a, b) -> float:
    """Largest |a - b| over a parameter, relative to that parameter's largest |b|."""
    return float(
        max(
            np.abs(np.asarray(x) - np.asarray(y)).max() / np.abs(np.asarray(y)).max()
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
    reference_grads = eqx.filter(grads_of(model, batches[0]), eqx.is_inexact_array)

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

    meshes = {
        "dp": make_mesh(8),
        "tp": make_mesh(4, 2),
        "fsdp": make_mesh(8),
        "one_device": make_mesh(1, devices=jax.devices()[:1]),
    }
    rules = {
        "dp": data_parallel_rules,
        "tp": TENSOR_PARALLEL_RULES,
        "fsdp": fully_sharded_rules,
        "one_device": data_parallel_rules,
    }

    sharded_batch = shard_batch(meshes["dp"], batches[0])
    results["batch_shard_shapes"] = shard_shapes(sharded_batch["images"])
    results["label_shard_shapes"] = shard_shapes(sharded_batch["labels"])

    for name in ("dp", "tp", "fsdp", "one_device"):
        mesh, rule = meshes[name], rules[name]
        start = time.perf_counter()
        placement = Placement.create(
            mesh, model, optimiser.init(eqx.filter(model, eqx.is_inexact_array)), rule
        )
        placed, placed_opt_state, placed_task = placement.put(
            model, optimiser.init(eqx.filter(model, eqx.is_inexact_array)), task
        )
        with jax.default_matmul_precision("highest"):
            trained, _ = fit(model, task, recipe, mesh=mesh, rules=rule, progress=False)
            grads = grads_of(shard_params(model, mesh, rule), shard_batch(mesh, batches[0]))
            # The compiled step of fit, lowered as fit called it (same precision, same placed
            # arguments), so that the compilation cache, when there is one, hands back fit's
            # program rather than compiling another: which collectives XLA put in.
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
        grads = eqx.filter(grads, eqx.is_inexact_array)
        results[f"{name}_grads_abs_error"] = max_difference(grads, reference_grads)
        results[f"{name}_grads_error"] = relative_to_largest(grads, reference_grads)
        results[f"{name}_grads_leaf_relative_error"] = max_relative_difference(
            grads, reference_grads
        )
        attention = trained.blocks[0].attention
        mlp = trained.blocks[0].mlp
        mu = placed_opt_state[0].mu.blocks[0]
        results[f"{name}_shards"] = {
            "key_projections": shard_shapes(attention.key_projections),
            "output_projections": shard_shapes(attention.output_projections),
            "mlp_in_weight": shard_shapes(mlp.layers[0].weight),
            "mlp_in_bias": shard_shapes(mlp.layers[0].bias),
            "mlp_out_weight": shard_shapes(mlp.layers[1].weight),
            "mlp_out_bias": shard_shapes(mlp.layers[1].bias),
            "class_token": shard_shapes(trained.class_token),
            "adam_mu_key_projections": shard_shapes(mu.attention.key_projections),
            "adam_mu_mlp_in_weight": shard_shapes(mu.mlp.layers[0].weight),
        }
        results[f"{name}_spec_key_projections"] = str(
            trained.blocks[0].attention.key_projections.sharding.spec
        )

        results[f"{name}_collectives"] = {
            op: hlo.count(op) for op in ("all-reduce", "all-gather", "reduce-scatter")
        }

    # shard_map: the explicit per-device version, and its two classic mistakes.
    mesh = meshes["dp"]
    batch = shard_batch(mesh, batches[0])
    with jax.default_matmul_precision("highest"):
        _, correct = shard_map_gradients(model, mesh, batch, loss=task.loss)
        _, trap = shard_map_gradients(model, mesh, batch, loss=task.loss, mark_varying=False)
        _, local = shard_map_gradients(model, mesh, batch, loss=task.loss, reduce=False)
    stepped, stepped_state = model, optimiser.init(eqx.filter(model, eqx.is_inexact_array))
    with jax.default_matmul_precision("highest"):
        for batch in batches:
            stepped, stepped_state, _ = shard_map_step(
                stepped,
                stepped_state,
                shard_batch(mesh, batch),
                loss=task.loss,
                optimiser=optimiser,
                mesh=mesh,
            )
    results["shard_map_params_error"] = max_difference(params_of(stepped), params_of(reference))
    results["largest_gradient"] = float(
        max(np.abs(np.asarray(g)).max() for g in jax.tree_util.tree_leaves(reference_grads))
    )
    results["shard_map_grads_abs_error"] = max_difference(correct, reference_grads)
    results["shard_map_grads_error"] = relative_to_largest(correct, reference_grads)
    # The mistaken gradient is 8 x the right one, to float32 rounding of the largest entry.
    eight_times = jax.tree_util.tree_map(lambda c: 8 * c, correct)
    results["trap_minus_8x_error"] = relative_to_largest(trap, eight_times)
    ratios = np.concatenate(
        [
            (np.asarray(t) / np.asarray(c))[
                np.abs(np.asarray(c)) > 1e-3 * results["largest_gradient"]
            ]
            for t, c in zip(jax.tree_util.tree_leaves(trap), jax.tree_util.tree_leaves(correct))
        ]
    )
    results["trap_ratio_min"] = float(ratios.min())
    results["trap_ratio_max"] = float(ratios.max())
    results["trap_relative_error"] = max_relative_difference(trap, reference_grads)
    results["forgotten_reduction_relative_error"] = max_relative_difference(
        jax.tree_util.tree_map(lambda g: g[0], local), reference_grads
    )
    results["mean_of_local_grads_error"] = relative_to_largest(
        jax.tree_util.tree_map(lambda g: g.mean(0), local), reference_grads
    )

    # Bad input: clear errors.
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


if __name__ == "__main__":
    print(json.dumps(main()))
