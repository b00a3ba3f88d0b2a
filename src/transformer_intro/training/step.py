"""One training step: the loss's gradient, then the optimiser's update."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

__all__ = ["gradients", "train_step"]


def gradients(model, batch, loss, micro_batches: int = 1):
    """``((mean loss, metrics), gradient)`` of ``loss(model, batch)`` with respect to the model.

    With ``micro_batches=k`` every array of the batch is cut along its first axis into k equal
    parts whose gradients are averaged in a ``lax.scan``: the gradient of the whole batch (up to
    float rounding), while each pass through the network touches 1/k of the activations.
    """
    value_and_grad = eqx.filter_value_and_grad(loss, has_aux=True)
    if micro_batches == 1:
        return value_and_grad(model, batch)
    chunks = jax.tree_util.tree_map(
        lambda x: x.reshape(micro_batches, x.shape[0] // micro_batches, *x.shape[1:]), batch
    )

    def accumulate(total, chunk):
        (value, metrics), grads = value_and_grad(model, chunk)
        grads = eqx.filter(grads, eqx.is_inexact_array)
        return jax.tree_util.tree_map(jnp.add, total, grads), (value, metrics)

    zeros = jax.tree_util.tree_map(jnp.zeros_like, eqx.filter(model, eqx.is_inexact_array))
    total, (values, metrics) = jax.lax.scan(accumulate, zeros, chunks)
    grads = jax.tree_util.tree_map(lambda g: g / micro_batches, total)
    return (values.mean(), jax.tree_util.tree_map(jnp.mean, metrics)), grads


def train_step(
    model,
    opt_state,
    batch,
    *,
    task,
    optimiser: optax.GradientTransformation,
    micro_batches: int = 1,
):
    """One step of training: returns ``(model, opt_state, loss, metrics)``.

    The gradient of the task's loss on this batch, ``g = ∇_θ L(θ; batch)``, becomes an update
    through the optimiser (AdamW: moment estimates, learning rate η_t, weight decay), and the
    update is added to the parameters. A plain function: ``fit`` compiles it inside a ``lax.scan``.
    """
    (loss, metrics), grads = gradients(model, batch, task.loss, micro_batches)
    params = eqx.filter(model, eqx.is_inexact_array)
    updates, opt_state = optimiser.update(grads, opt_state, params)
    return eqx.apply_updates(model, updates), opt_state, loss, metrics
