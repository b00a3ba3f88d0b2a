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
* :class:`Placement`, where a model, its optimiser state and each batch live on a mesh, which
  ``training.fit(..., mesh=mesh, rules=...)`` applies at every step (placement is a mode of the one
  training loop, not a loop of its own);
* :func:`shard_map_gradients`, a data-parallel gradient written per device with ``jax.shard_map``
  and an explicit ``jax.lax.pmean``, the classic mistake beside it, and :func:`shard_map_step`.

This module knows no model: a loss is any ``loss(model, batch) -> (scalar, metrics)``, such as a
task's ``loss``. ``python -m transformer_intro.demos.multi_process`` runs one process of a
multi-process data-parallel run.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import numpy as np
import optax
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

__all__ = [
    "DATA",
    "MODEL",
    "Placement",
    "Rule",
    "TENSOR_PARALLEL_RULES",
    "TENSOR_PARALLEL_TABLE",
    "data_parallel_rules",
    "fully_sharded_rules",
    "make_mesh",
    "path_name",
    "rules_from_table",
    "shard_batch",
    "shard_map_gradients",
    "shard_map_step",
    "shard_params",
    "shard_tree",
    "tree_shardings",
]

Rule = Callable[[str, tuple[int, ...], Mesh], P]

DATA, MODEL = "data", "model"


def make_mesh(data: int, model: int = 1, *, devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A ``data`` x ``model`` mesh (a 1-D ``data`` mesh when ``model == 1``).

    jit partitions over its axes automatically. Devices are taken process by process, so that
    each process's devices hold consecutive blocks of the batch.
    """
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
    """A rule from ``(regular expression, PartitionSpec)`` pairs.

    The first pattern found in the path wins; anything unmatched is replicated. Patterns are
    searched, not anchored at the start, so they also match the optimiser's copies of a parameter
    (``0.mu.blocks.0.mlp...``).
    """
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
    """Fully sharded data parallelism: each parameter split over ``data``.

    A parameter is split along its first axis that the axis size divides (so that no device
    holds a ragged block), and replicated when none does, which for the book's models is only
    the few smallest vectors.
    """
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
                    f"{name}: mesh axis {axis_name!r} does not exist; "
                    f"the mesh has axes {tuple(mesh.shape)}"
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
    """Every array of ``tree`` placed on the mesh as ``rule`` says.

    ``tree`` is a model, its gradients, or an optimiser state, whose moments sit at paths that
    end with the parameter's path.
    """
    return _place(tree, tree_shardings(tree, mesh, rule), inside_jit=False)


def shard_params(model: eqx.Module, mesh: Mesh, rule: Rule = data_parallel_rules) -> eqx.Module:
    """The model with its parameters placed on the mesh by ``rule``."""
    return shard_tree(model, mesh, rule)


def shard_batch(mesh: Mesh, batch, *, process_local: bool = False):
    """Split every array of ``batch`` (any pytree) over the mesh's ``data`` axis.

    The split is along each array's leading (batch) axis.

    With several processes each one passes ``process_local=True`` and only its own consecutive
    slice of the global batch; ``jax.make_array_from_process_local_data`` assembles the global
    array, which no single process ever holds.
    """
    if DATA not in mesh.shape:
        raise ValueError(
            f"the mesh has no {DATA!r} axis to split the batch over; "
            f"its axes are {tuple(mesh.shape)}"
        )
    sharding = NamedSharding(mesh, P(DATA))

    def split(array):
        _check_batch_size(len(array) * (jax.process_count() if process_local else 1), mesh)
        if process_local:
            return jax.make_array_from_process_local_data(sharding, np.asarray(array))
        return jax.device_put(array, sharding)

    return jax.tree_util.tree_map(split, batch)


def _check_batch_size(batch_size: int, mesh: Mesh) -> None:
    size = mesh.shape[DATA]
    if batch_size % size:
        raise ValueError(
            f"a batch of {batch_size} examples does not split evenly over the {size} devices of "
            f"the {DATA!r} axis; use a batch size that is a multiple of {size}"
        )


# ---------------------------------------------------------------------------------------------
# Placement: where the model, the optimiser state and each batch live
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Placement:
    """Shardings for a training run on ``mesh``.

    The model's and the optimiser state's come from one rule; each batch is split along its
    first axis over ``data``.

    ``training.fit`` places the model and optimiser state once (:meth:`put`) and constrains them
    and every batch inside the compiled step (:meth:`constrain`); ``jit`` partitions the step to
    match and inserts the collectives. On a one-device mesh it is the single-device computation.
    """

    mesh: Mesh
    model: object
    opt_state: object

    @classmethod
    def create(cls, mesh: Mesh, model, opt_state, rule: Rule = data_parallel_rules) -> Placement:
        """The placement of ``model`` and ``opt_state`` on ``mesh`` under ``rule``.

        Raises:
            ValueError: the mesh has no ``data`` axis.
        """
        if DATA not in mesh.shape:
            raise ValueError(
                f"the mesh has no {DATA!r} axis to split the batch over; its axes are "
                f"{tuple(mesh.shape)}"
            )
        return cls(mesh, tree_shardings(model, mesh, rule), tree_shardings(opt_state, mesh, rule))

    def put(self, model, opt_state, data=None):
        """The model and optimiser state placed by the rule; ``data`` (a task, say) replicated."""
        replicated = NamedSharding(self.mesh, P())
        data = jax.tree_util.tree_map(
            lambda x: jax.device_put(x, replicated) if eqx.is_array(x) else x, data
        )
        return (
            _place(model, self.model, inside_jit=False),
            _place(opt_state, self.opt_state, inside_jit=False),
            data,
        )

    def check_batch_size(self, batch_size: int) -> None:
        """Raise ``ValueError`` unless ``batch_size`` splits evenly over the ``data`` axis."""
        _check_batch_size(batch_size, self.mesh)

    def constrain(self, model=None, opt_state=None, batch=None):
        """Inside a compiled step: keep each given tree where this placement puts it."""
        split = NamedSharding(self.mesh, P(DATA))
        batch = jax.tree_util.tree_map(lambda x: jax.lax.with_sharding_constraint(x, split), batch)
        return (
            None if model is None else _place(model, self.model, inside_jit=True),
            None if opt_state is None else _place(opt_state, self.opt_state, inside_jit=True),
            batch,
        )


# ---------------------------------------------------------------------------------------------
# The same data-parallel gradient, written per device with shard_map
# ---------------------------------------------------------------------------------------------


@eqx.filter_jit
def shard_map_gradients(
    model, mesh: Mesh, batch, *, loss: Callable, mark_varying: bool = True, reduce: bool = True
):
    """The data-parallel gradient as each device computes it.

    Each device takes its own slice of the batch and its own gradient, then the mean over
    ``data`` with ``jax.lax.pmean``. Returns (loss, gradients).

    ``batch`` is any pytree of arrays whose first axis is the batch; ``loss(model, batch)``
    returns ``(scalar, metrics)``, as a task's ``loss`` does.

    ``jax.shard_map`` tracks which values differ from device to device. The parameters come in
    replicated, the same on every device, so their gradient must be too, and JAX sums the
    per-device contributions itself when it differentiates through that fact. ``mark_varying``
    first declares the parameters device-varying (``jax.lax.pcast(..., to="varying")``) so that
    each device gets its own local gradient and the explicit ``pmean`` does the averaging.

    Two mistakes for the book to show: ``mark_varying=False`` averages gradients that are already
    summed, giving G times the gradient; ``reduce=False`` forgets the reduction and returns each
    device's local gradient, stacked along a new leading axis.
    """
    params, static = eqx.partition(model, eqx.is_inexact_array)

    def per_device(params, local_batch):
        if mark_varying:
            params = jax.lax.pcast(params, DATA, to="varying")
        (value, _), grads = eqx.filter_value_and_grad(loss, has_aux=True)(
            eqx.combine(params, static), local_batch
        )
        if not reduce:
            return value[None], jax.tree_util.tree_map(lambda g: g[None], grads)
        return jax.lax.pmean(value, DATA), jax.lax.pmean(grads, DATA)

    out_spec = P() if reduce else P(DATA)
    fn = jax.shard_map(
        per_device, mesh=mesh, in_specs=(P(), P(DATA)), out_specs=(out_spec, out_spec)
    )
    return fn(params, batch)


@eqx.filter_jit
def shard_map_step(
    model, opt_state, batch, *, loss: Callable, optimiser: optax.GradientTransformation, mesh: Mesh
):
    """One data-parallel optimiser step with the gradient of :func:`shard_map_gradients`.

    Returns:
        ``(model, opt_state, loss)``.
    """
    value, grads = shard_map_gradients(model, mesh, batch, loss=loss)
    updates, opt_state = optimiser.update(grads, opt_state, eqx.filter(model, eqx.is_inexact_array))
    return eqx.apply_updates(model, updates), opt_state, value
