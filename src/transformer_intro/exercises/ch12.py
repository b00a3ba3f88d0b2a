"""Chapter 12 (parallel training): the mean over devices, the batch split, accumulation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .core import Case, Diagnosis, Exercise


def _on_devices(fn, grads):
    """Run ``fn`` as every device runs it: one slice each, collectives over ``"devices"``."""
    return jax.vmap(fn, axis_name="devices")(grads)


def _mean(grads):
    return jnp.broadcast_to(grads.mean(0), grads.shape)


MEAN_OVER_DEVICES = Exercise(
    name="mean_over_devices",
    chapter=12,
    title="Every device's gradient replaced by the mean over the devices",
    reference=_mean,
    run=_on_devices,
    cases=lambda: [
        Case(
            "G = 4 devices, a gradient of 3 numbers",
            (np.arange(12, dtype=np.float32).reshape(4, 3),),
        ),
        Case(
            "G = 2 devices, a (2, 2) gradient",
            (np.array([[[1.0, 2], [3, 4]], [[5, 6], [7, 9]]], np.float32),),
        ),
    ],  # fmt: skip
    diagnoses=(
        Diagnosis.like(
            "psum_not_mean",
            "the gradients are summed over the devices, G times too large: use "
            "jax.lax.pmean, or divide the psum by the number of devices G",
            lambda grads: grads.shape[0] * _mean(grads),
        ),
        Diagnosis.like(
            "local_only",
            "each device keeps its own gradient: average it over the axis 'devices' "
            "(jax.lax.pmean(g, 'devices'))",
            lambda grads: grads,
        ),
    ),
)


def _split(batch, num_devices):
    return batch.reshape(num_devices, batch.shape[0] // num_devices, *batch.shape[1:])


SPLIT_FOR_DEVICES = Exercise(
    name="split_for_devices",
    chapter=12,
    title="A batch cut into one contiguous slice per device",
    reference=_split,
    cases=lambda: [
        Case("B = 8 examples of 2 numbers, G = 4", (np.arange(16).reshape(8, 2), 4)),
        Case("B = 6 labels, G = 2", (np.arange(6), 2)),
    ],
    output="(G, B / G, ...)",
    diagnoses=(
        Diagnosis.like(
            "interleaved",
            "device g got every G-th example: give each device a contiguous slice of B / G",
            lambda batch, g: jnp.swapaxes(
                batch.reshape(batch.shape[0] // g, g, *batch.shape[1:]), 0, 1
            ),
        ),
        Diagnosis.like(
            "axes_swapped",
            "the device axis is second: return (G, B / G, ...), one slice per device first",
            lambda batch, g: batch.reshape(batch.shape[0] // g, g, *batch.shape[1:]),
        ),
    ),
)


def _loss(params, batch):
    return jnp.mean((batch["x"] @ params["w"] + params["b"] - batch["y"]) ** 2)


def _accumulated(loss, params, batch, micro_batches):
    from ..training.step import gradients  # the training layer, imported when first needed

    (_, _), grads = gradients(params, batch, lambda p, b: (loss(p, b), {}), micro_batches)
    return grads


def _accumulation_cases():
    rng = np.random.default_rng(24)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    params = {"w": n(3), "b": np.float32(0.5)}
    return [
        Case("B = 8, 4 micro-batches", (_loss, params, {"x": n(8, 3), "y": n(8)}, 4)),
        Case("B = 6, 2 micro-batches", (_loss, params, {"x": n(6, 3), "y": n(6)}, 2)),
    ]


def _scaled_first(loss, params, batch, k, scale=1.0, first_only=False):
    chunks = [{name: np.split(np.asarray(a), k)[i] for name, a in batch.items()}
              for i in range(k)]  # fmt: skip
    grads = [jax.grad(loss)(params, c) for c in chunks[: 1 if first_only else k]]
    total = jax.tree.map(lambda *g: sum(g), *grads)
    return jax.tree.map(lambda g: g * scale, total)


ACCUMULATED_GRADIENT = Exercise(
    name="accumulated_gradient",
    chapter=12,
    title="The gradient of a batch from its micro-batches",
    reference=_accumulated,
    cases=_accumulation_cases,
    diagnoses=(
        Diagnosis.like(
            "summed",
            "the micro-batches' gradients are added: average them (divide the sum by the "
            "number of micro-batches)",
            lambda loss, params, batch, k: _scaled_first(loss, params, batch, k),
        ),
        Diagnosis.like(
            "first_only",
            "only the first micro-batch's gradient is returned: accumulate all of them",
            lambda loss, params, batch, k: _scaled_first(loss, params, batch, k, first_only=True),
        ),
    ),
)

EXERCISES = [MEAN_OVER_DEVICES, SPLIT_FOR_DEVICES, ACCUMULATED_GRADIENT]
