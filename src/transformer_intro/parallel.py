"""Training on several devices with JAX's own sharding machinery.

A device mesh names its axes (``data``, ``model``); a :class:`~jax.sharding.PartitionSpec` says
which array axis is split over which mesh axis; ``jit`` partitions the computation to match and
inserts the collectives. This module adds only what the book's models need on top of that:

* sharding *rules*: a function ``rule(path, shape, mesh) -> PartitionSpec`` from a parameter's
  path in the model pytree (``"blocks.0.attention.key_projections"``) and its shape, applied to
  every leaf by :func:`shard_tree` (the model, its gradients, the optimiser state alike);
* three sets of rules: data parallel (:func:`data_parallel_rules`, everything replicated),
  tensor parallel (:data:`TENSOR_PARALLEL_RULES`, Megatron-style, Shoeybi et al. 2019) and fully
  sharded data parallel (:func:`fully_sharded_rules`, ZeRO-3 style, Rajbhandari et al. 2020);
* :func:`train_sharded`, the train loop of ``train.optimizer_step`` with the batch split over
  ``data`` and the parameters and optimiser state kept where the rules put them;
* :func:`shard_map_gradients`, a data-parallel gradient written per device with ``jax.shard_map``
  and an explicit ``jax.lax.pmean``, and the classic mistake beside it.

Run as ``python -m transformer_intro.parallel --num-processes 2 --process-id i --port p --out f``
it is one process of a multi-process data-parallel run on CPU devices (see :func:`_main`).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterable, Sequence

import equinox as eqx
import jax
import numpy as np
import optax
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .train import TrainConfig, apply_gradients, loss_and_accuracy, make_optimizer
from .vit import VisionTransformer, ViTConfig

Rule = Callable[[str, tuple[int, ...], Mesh], P]

DATA, MODEL = "data", "model"

# A quick model for tests and demonstrations: the book's ViT layout at half the width, 2 blocks.
SMALL_VIT = ViTConfig(
    patch_size=7, dim=32, num_heads=4, head_dim=8, value_dim=8, num_blocks=2, mlp_hidden_dim=64
)


def make_mesh(data: int, model: int = 1, *, devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A ``data`` x ``model`` mesh (a 1-D ``data`` mesh when ``model == 1``) whose axes jit
    partitions automatically. Devices are taken process by process, so that each process's
    devices hold consecutive blocks of the batch."""
    devices = sorted(
        jax.devices() if devices is None else devices, key=lambda d: (d.process_index, d.id)
    )
    if data * model != len(devices):
        raise ValueError(
            f"a {data} x {model} mesh needs {data * model} devices, there are {len(devices)}"
        )
    shape, names = ((data,), (DATA,)) if model == 1 else ((data, model), (DATA, MODEL))
    return jax.make_mesh(shape, names, axis_types=(AxisType.Auto,) * len(names), devices=devices)


def path_name(path: tuple) -> str:
    """``blocks.0.attention.key_projections`` for a pytree key path."""
    return jax.tree_util.keystr(path, simple=True, separator=".")


# ---------------------------------------------------------------------------------------------
# Sharding rules
# ---------------------------------------------------------------------------------------------


def data_parallel_rules(path: str, shape: tuple[int, ...], mesh: Mesh) -> P:
    """Data parallelism: every device holds every parameter."""
    return P()


def rules_from_table(table: Sequence[tuple[str, P]]) -> Rule:
    """A rule from ``(regular expression, PartitionSpec)`` pairs: the first pattern found in the
    path wins, anything unmatched is replicated. Patterns are searched, not anchored at the start,
    so they also match the optimiser's copies of a parameter (``0.mu.blocks.0.mlp...``)."""
    compiled = [(re.compile(pattern), spec) for pattern, spec in table]

    def rule(path: str, shape: tuple[int, ...], mesh: Mesh) -> P:
        return next((spec for pattern, spec in compiled if pattern.search(path)), P())

    return rule


# Megatron-style tensor parallelism, for the block layout of this package: head h's key, query and
# value projections (H, K, D) / (H, Dv, D) are split over heads, "by output"; so is its output
# projection (H, D, Dv), which is "by input" of the combined W_O = [O_1 ... O_H]. The MLP's first
# layer (weight (hidden, D)) is split by output features, its second (weight (D, hidden)) by
# input features. Each device then computes whole heads and a slice of the hidden layer, and one
# all-reduce after each sub-layer sums the partial outputs.
TENSOR_PARALLEL_TABLE: tuple[tuple[str, P], ...] = (
    (r"blocks\.\d+\.attention\.(key|query|value|output)_projections$", P(MODEL)),
    (r"blocks\.\d+\.mlp\.layers\.0\.(weight|bias)$", P(MODEL)),
    (r"blocks\.\d+\.mlp\.layers\.1\.weight$", P(None, MODEL)),
)
TENSOR_PARALLEL_RULES: Rule = rules_from_table(TENSOR_PARALLEL_TABLE)


def fully_sharded_rules(path: str, shape: tuple[int, ...], mesh: Mesh) -> P:
    """Fully sharded data parallelism: each parameter split over ``data`` along its first axis
    that the axis size divides (so that no device holds a ragged block); replicated when none
    does, which for the book's models is only the few smallest vectors."""
    size = mesh.shape[DATA]
    for axis, length in enumerate(shape):
        if length % size == 0:
            return P(*([None] * axis), DATA)
    return P()


def _check_spec(name: str, shape: tuple[int, ...], spec: P, mesh: Mesh) -> None:
    if len(spec) > len(shape):
        raise ValueError(
            f"{name}: spec {spec} has more entries than the {len(shape)} axes of {shape}"
        )
    for axis, entry in enumerate(spec):
        axes = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        for axis_name in axes:
            if axis_name not in mesh.shape:
                raise ValueError(
                    f"{name}: mesh axis {axis_name!r} does not exist; the mesh has axes {tuple(mesh.shape)}"
                )
        parts = int(np.prod([mesh.shape[a] for a in axes]))
        if shape[axis] % parts:
            raise ValueError(
                f"{name}: axis {axis} of length {shape[axis]} does not split into {parts} equal "
                f"blocks over mesh axes {axes}"
            )


def tree_shardings(tree, mesh: Mesh, rule: Rule):
    """A pytree like ``tree`` with a :class:`NamedSharding` at every array leaf (None elsewhere)."""

    def sharding(path, leaf):
        if not eqx.is_array(leaf):
            return None
        name = path_name(path)
        spec = rule(name, tuple(leaf.shape), mesh)
        _check_spec(name, tuple(leaf.shape), spec, mesh)
        return NamedSharding(mesh, spec)

    return jax.tree_util.tree_map_with_path(sharding, tree)


def _place(tree, shardings, inside_jit: bool):
    put = jax.lax.with_sharding_constraint if inside_jit else jax.device_put
    return jax.tree_util.tree_map(
        lambda x, s: x if s is None else put(x, s), tree, shardings, is_leaf=lambda x: x is None
    )


def shard_tree(tree, mesh: Mesh, rule: Rule):
    """Every array of ``tree`` placed on the mesh as ``rule`` says: a model, its gradients, or an
    optimiser state, whose moments sit at paths that end with the parameter's path."""
    return _place(tree, tree_shardings(tree, mesh, rule), inside_jit=False)


def shard_params(model: eqx.Module, mesh: Mesh, rule: Rule = data_parallel_rules) -> eqx.Module:
    """The model with its parameters placed on the mesh by ``rule``."""
    return shard_tree(model, mesh, rule)


def shard_batch(
    mesh: Mesh, *arrays: np.ndarray, process_local: bool = False
) -> tuple[jax.Array, ...]:
    """Split each array's leading (batch) axis over the mesh's ``data`` axis.

    With several processes each one passes ``process_local=True`` and only its own consecutive
    slice of the global batch; ``jax.make_array_from_process_local_data`` assembles the global
    array, which no single process ever holds.
    """
    if DATA not in mesh.shape:
        raise ValueError(
            f"the mesh has no {DATA!r} axis to split the batch over; its axes are {tuple(mesh.shape)}"
        )
    sharding = NamedSharding(mesh, P(DATA))
    size = mesh.shape[DATA]
    out = []
    for array in arrays:
        batch = len(array) * (jax.process_count() if process_local else 1)
        if batch % size:
            raise ValueError(
                f"a batch of {batch} examples does not split evenly over the {size} devices of "
                f"the {DATA!r} axis; use a batch size that is a multiple of {size}"
            )
        if process_local:
            out.append(jax.make_array_from_process_local_data(sharding, np.asarray(array)))
        else:
            out.append(jax.device_put(array, sharding))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# The sharded train step
# ---------------------------------------------------------------------------------------------


@eqx.filter_jit
def sharded_gradients(model, loss_fn: Callable, *batch):
    """Loss, aux and gradients of ``loss_fn(model, *batch)``; jit partitions it as the inputs are
    placed, so on sharded inputs this is the data- / tensor- / fully-sharded gradient."""
    (loss, aux), grads = eqx.filter_value_and_grad(loss_fn, has_aux=True)(model, *batch)
    return loss, aux, grads


@eqx.filter_jit
def sharded_step(model, opt_state, optimizer, loss_fn: Callable, shardings, *batch):
    """``train.optimizer_step`` that keeps the model and optimiser state where ``shardings`` (a
    pair of :func:`tree_shardings` trees) puts them. With every input on one device, or on a
    one-device mesh, it is the same computation as the single-device step."""
    loss, aux, grads = sharded_gradients(model, loss_fn, *batch)
    model, opt_state = apply_gradients(model, opt_state, grads, optimizer)
    model_shardings, opt_shardings = shardings
    return _place(model, model_shardings, True), _place(opt_state, opt_shardings, True), loss, aux


def init_sharded(
    model, optimizer: optax.GradientTransformation, mesh: Mesh, rule: Rule = data_parallel_rules
):
    """The model placed by ``rule``, its optimiser state placed by the same rule, and both trees of
    shardings (for :func:`sharded_step`)."""
    model_shardings = tree_shardings(model, mesh, rule)
    model = _place(model, model_shardings, inside_jit=False)
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    opt_shardings = tree_shardings(opt_state, mesh, rule)
    return (
        model,
        _place(opt_state, opt_shardings, inside_jit=False),
        (model_shardings, opt_shardings),
    )


def train_sharded(
    model,
    batches: Iterable[tuple[np.ndarray, ...]],
    optimizer: optax.GradientTransformation,
    mesh: Mesh,
    rule: Rule = data_parallel_rules,
    *,
    loss_fn: Callable = loss_and_accuracy,
    process_local: bool = False,
):
    """Train on ``batches`` (tuples of arrays with the batch axis first, e.g. images and labels)
    with the batch split over ``data`` and the parameters and optimiser state placed by ``rule``.

    Returns the trained model, the optimiser state and the list of losses.
    """
    model, opt_state, shardings = init_sharded(model, optimizer, mesh, rule)
    losses = []
    for batch in batches:
        batch = shard_batch(mesh, *batch, process_local=process_local)
        model, opt_state, loss, _ = sharded_step(
            model, opt_state, optimizer, loss_fn, shardings, *batch
        )
        losses.append(loss)
    return model, opt_state, losses


# ---------------------------------------------------------------------------------------------
# The same data-parallel gradient, written per device with shard_map
# ---------------------------------------------------------------------------------------------


@eqx.filter_jit
def shard_map_gradients(
    model,
    mesh: Mesh,
    *batch,
    loss_fn: Callable = loss_and_accuracy,
    mark_varying: bool = True,
    reduce: bool = True,
):
    """The data-parallel gradient as each device computes it: its own slice of the batch, its
    own gradient, then the mean over ``data`` with ``jax.lax.pmean``. Returns (loss, gradients).

    ``jax.shard_map`` tracks which values differ from device to device. The parameters come in
    replicated, the same on every device, so their gradient must be too, and JAX sums the
    per-device contributions itself when it differentiates through that fact. ``mark_varying``
    first declares the parameters device-varying (``jax.lax.pcast(..., to="varying")``) so that
    each device gets its own local gradient and the explicit ``pmean`` does the averaging.

    Two mistakes for the book to show: ``mark_varying=False`` averages gradients that are already
    summed, giving N times the gradient; ``reduce=False`` forgets the reduction and returns each
    device's local gradient, stacked along a new leading axis.
    """
    params, static = eqx.partition(model, eqx.is_inexact_array)

    def per_device(params, *local_batch):
        if mark_varying:
            params = jax.lax.pcast(params, DATA, to="varying")
        (loss, _), grads = eqx.filter_value_and_grad(loss_fn, has_aux=True)(
            eqx.combine(params, static), *local_batch
        )
        if not reduce:
            return loss[None], jax.tree_util.tree_map(lambda g: g[None], grads)
        return jax.lax.pmean(loss, DATA), jax.lax.pmean(grads, DATA)

    out_spec = P() if reduce else P(DATA)
    fn = jax.shard_map(
        per_device,
        mesh=mesh,
        in_specs=(P(),) + (P(DATA),) * len(batch),
        out_specs=(out_spec, out_spec),
    )
    return fn(params, *batch)


@eqx.filter_jit
def shard_map_step(
    model, opt_state, optimizer, mesh: Mesh, *batch, loss_fn: Callable = loss_and_accuracy
):
    """One data-parallel optimiser step with the gradient of :func:`shard_map_gradients`."""
    loss, grads = shard_map_gradients(model, mesh, *batch, loss_fn=loss_fn)
    model, opt_state = apply_gradients(model, opt_state, grads, optimizer)
    return model, opt_state, loss


# ---------------------------------------------------------------------------------------------
# One process of a multi-process run (python -m transformer_intro.parallel ...)
# ---------------------------------------------------------------------------------------------


def synthetic_batches(num_steps: int, batch_size: int, *, seed: int = 0, image_size: int = 28):
    """Random uint8 images and labels: the same global batches in every process."""
    rng = np.random.default_rng(seed)
    return [
        (
            rng.integers(0, 256, (batch_size, image_size, image_size), dtype=np.uint8),
            rng.integers(0, 10, batch_size).astype(np.int32),
        )
        for _ in range(num_steps)
    ]


def _main(argv: Sequence[str] | None = None) -> None:
    """Data-parallel training of a small ViT over every device of every process; process 0
    writes the losses and the final parameters to ``--out`` (an .npz file)."""
    parser = argparse.ArgumentParser(description=_main.__doc__)
    parser.add_argument("--num-processes", type=int, default=1)
    parser.add_argument("--process-id", type=int, default=0)
    parser.add_argument("--devices-per-process", type=int, default=2)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    jax.config.update("jax_num_cpu_devices", args.devices_per_process)
    if args.num_processes > 1:
        jax.distributed.initialize(
            coordinator_address=f"127.0.0.1:{args.port}",
            num_processes=args.num_processes,
            process_id=args.process_id,
            initialization_timeout=60,
        )
    model = VisionTransformer(SMALL_VIT, key=jax.random.PRNGKey(0))
    optimizer = make_optimizer(TrainConfig(learning_rate=1e-3, schedule="constant"), args.steps)
    mesh = make_mesh(len(jax.devices()))
    local = args.batch_size // args.num_processes
    batches = [
        tuple(a[args.process_id * local : (args.process_id + 1) * local] for a in batch)
        for batch in synthetic_batches(args.steps, args.batch_size)
    ]
    trained, _, losses = train_sharded(model, batches, optimizer, mesh, process_local=True)
    # Replicated arrays: this process's first shard is the whole value.
    leaves = jax.tree_util.tree_leaves(eqx.filter(trained, eqx.is_inexact_array))
    arrays = {f"param_{i}": np.asarray(x.addressable_data(0)) for i, x in enumerate(leaves)}
    arrays["losses"] = np.array([float(l.addressable_data(0)) for l in losses])
    if args.num_processes == 1:
        # For a negative control: what process 0 of two would reach on its half of each batch alone.
        halves = [tuple(a[: local // 2] for a in batch) for batch in batches]
        half, _, _ = train_sharded(model, halves, optimizer, mesh, process_local=True)
        leaves = jax.tree_util.tree_leaves(eqx.filter(half, eqx.is_inexact_array))
        arrays.update(
            {f"half_param_{i}": np.asarray(x.addressable_data(0)) for i, x in enumerate(leaves)}
        )
    if jax.process_index() == 0:
        np.savez(args.out, devices=len(jax.devices()), **arrays)
    if args.num_processes > 1:
        jax.distributed.shutdown()


if __name__ == "__main__":
    _main()
