"""``fit``: the one training loop. Every chapter, benchmark and the multi-device chapter use it.

Its core is short: step t draws its batch from the task with the key ``fold_in(PRNGKey(seed), t)``
and takes one :func:`~transformer_intro.training.step.train_step`; ``recipe.steps_per_call``
such steps run in one compiled ``lax.scan`` on the device, and between calls the host only logs,
evaluates, checkpoints and calls back. Because a batch depends on nothing but the seed and the
step, a run resumed from a checkpoint replays exactly the batches of an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm  # plain text bar: no widget JavaScript, the same in a terminal and a notebook

from .. import parallel
from ..xla_flags import optimised_jit
from .checkpoints import CheckpointError, check_resumable, load_checkpoint, save_checkpoint
from .history import History
from .recipe import Recipe
from .step import train_step

__all__ = [
    "Every",
    "NonFiniteLoss",
    "RunDiverged",
    "batch_key",
    "fit",
    "loss_differences",
    "retrace",
    "run_steps",
]


class NonFiniteLoss(ValueError):
    """Training stopped because the loss became NaN or infinite."""


class RunDiverged(ValueError):
    """A run's first steps, trained again, did not retrace the saved run's training losses."""


def batch_key(seed: int, step) -> jax.Array:
    """The key of step t's batch: from the seed and the step alone."""
    return jax.random.fold_in(jax.random.PRNGKey(seed), step)


@optimised_jit
def run_steps(model, opt_state, task, first_step, *, recipe: Recipe, count: int, placement=None):
    """``count`` training steps from step ``first_step``, compiled into one ``lax.scan``.

    Returns the model, the optimiser state, and each step's loss and metrics. The optimiser is
    built from the recipe inside, so equal recipes share one compilation.
    """
    optimiser = recipe.optimiser()
    params, static = eqx.partition(model, eqx.is_array)

    def step(carry, t):
        params, opt_state = carry
        batch = task.batch(batch_key(recipe.seed, t), recipe.batch_size)
        if placement is not None:
            _, _, batch = placement.constrain(batch=batch)
        model, opt_state, loss, metrics = train_step(
            eqx.combine(params, static),
            opt_state,
            batch,
            task=task,
            optimiser=optimiser,
            micro_batches=recipe.micro_batches,
        )
        if placement is not None:
            model, opt_state, _ = placement.constrain(model, opt_state)
        return (eqx.filter(model, eqx.is_array), opt_state), (loss, metrics)

    steps = first_step + jnp.arange(count)
    (params, opt_state), (losses, metrics) = jax.lax.scan(step, (params, opt_state), steps)
    return eqx.combine(params, static), opt_state, losses, metrics


@dataclasses.dataclass(frozen=True)
class Every:
    """A callback called every ``steps`` steps (``fit`` stops there): ``Every(100, fn)``."""

    steps: int
    callback: Callable

    def __call__(self, step: int, model, history: History):
        """Call the callback when ``step`` is a multiple of ``steps``; return what it returns."""
        if step % self.steps == 0:
            return self.callback(step, model, history)
        return None


def fit(
    model,
    task,
    recipe: Recipe,
    *,
    mesh: jax.sharding.Mesh | None = None,
    rules: parallel.Rule | None = None,
    eval_every: int | None = None,
    checkpoint_path: str | os.PathLike | None = None,
    resume: bool = False,
    callbacks: Sequence[Callable] = (),
    progress: bool = True,
):
    """Train ``model`` on ``task`` for ``recipe.steps`` steps; returns ``(model, history)``.

    Args:
        model: any model the task's ``loss`` accepts.
        task: provides ``batch(key, batch_size)``, ``loss(model, batch)`` and ``evaluate(model)``.
        recipe: the optimiser, schedule, batch size, steps and seed.
        mesh: train on the devices of this mesh: the batch split over its ``data`` axis, the
            parameters and the optimiser state placed by ``rules`` (``parallel``'s data-parallel
            rules by default; its tensor-parallel or fully sharded rules, or your own).
        rules: a sharding rule, ``rule(path, shape, mesh) -> PartitionSpec``; needs ``mesh``.
        eval_every: evaluate with ``task.evaluate`` every this many steps and at the end, with the
            training clock stopped, into ``history.evaluations``.
        checkpoint_path: save the model, optimiser state, recipe, history and step there at each
            evaluation and at the end.
        resume: continue from ``checkpoint_path`` if it exists (to exactly the parameters an
            uninterrupted run reaches).
        callbacks: each ``callback(step, model, history)`` is called after every compiled call of
            ``recipe.steps_per_call`` steps (wrap one in :class:`Every` for every k steps); a
            callback that returns True ends training there (the checkpoint is still written).
        progress: show a progress bar.

    Raises:
        NonFiniteLoss: when a step's loss is NaN or infinite; the checkpoint keeps the last state
            saved before it.
        CheckpointError: when resuming from a file written for another model class,
            configuration or recipe (the message names the fields that differ).
    """
    if eval_every is not None and eval_every < 1:
        raise ValueError(f"eval_every must be a positive number of steps, got {eval_every}")
    if rules is not None and mesh is None:
        raise ValueError("sharding rules need a mesh: fit(..., mesh=make_mesh(...), rules=...)")
    optimiser = recipe.optimiser()
    opt_state = optimiser.init(eqx.filter(model, eqx.is_inexact_array))
    history, step = History(), 0
    if resume and checkpoint_path is not None and Path(checkpoint_path).exists():
        # Compared from the header before any array is read: a changed model or recipe would
        # otherwise surface as a pytree error from deep inside the deserialisation.
        check_resumable(checkpoint_path, model, recipe)
        model, info = load_checkpoint(checkpoint_path, opt_state_like=opt_state)
        opt_state, history, step = info.opt_state, info.history, info.step
    saved_step = step if step else None  # the step the checkpoint on disk holds, for this run
    last_finite = None  # (step, loss) of the last step whose loss was finite
    placement = None
    if mesh is not None:
        placement = parallel.Placement.create(
            mesh, model, opt_state, rules or parallel.data_parallel_rules
        )
        placement.check_batch_size(recipe.batch_size)
        model, opt_state, task = placement.put(model, opt_state, task)
    stops = (
        [recipe.steps_per_call] + [eval_every or 0] + [getattr(c, "steps", 0) for c in callbacks]
    )

    def save():
        nonlocal saved_step
        save_checkpoint(
            checkpoint_path, model, opt_state=opt_state, recipe=recipe, history=history, step=step
        )
        saved_step = step

    seconds = history.seconds[-1] if history.seconds else 0.0
    bar = tqdm(
        total=recipe.steps,
        initial=step,
        disable=not progress,
        unit="step",
        desc="training",
        mininterval=1.0,
    )
    while step < recipe.steps:
        # Run up to the next multiple of steps_per_call, eval_every or a callback's period.
        count = min([recipe.steps - step] + [s - step % s for s in stops if s])
        tic = time.perf_counter()
        model, opt_state, losses, metrics = run_steps(
            model,
            opt_state,
            task,
            np.int32(step),
            recipe=recipe,
            count=count,
            placement=placement,
        )
        losses, metrics = jax.device_get((losses, metrics))  # waits for the steps to finish
        # The losses are on the host already, so checking them costs no extra device sync. A
        # non-finite loss stops before anything is saved: the checkpoint keeps the last good state.
        bad = np.flatnonzero(~np.isfinite(losses))
        if bad.size:
            bar.close()
            raise _non_finite_loss(
                losses, step, int(bad[0]), last_finite, checkpoint_path, saved_step
            )
        last_finite = (step + count, float(losses[-1]))
        seconds += time.perf_counter() - tic
        step += count
        history.step.append(step)
        history.seconds.append(seconds)
        history.train_loss.append(float(np.mean(losses)))
        history.train_metrics.append({k: float(np.mean(v)) for k, v in metrics.items()})
        bar.update(count)
        bar.set_postfix(loss=f"{history.train_loss[-1]:.3f}")
        if eval_every is not None and (step % eval_every == 0 or step == recipe.steps):
            history.evaluations.append({"step": step, "seconds": seconds, **task.evaluate(model)})
            if checkpoint_path is not None:
                save()
        stop = [callback(step, model, history) for callback in callbacks]
        if any(stop):
            # the bar ends as a finished run of the steps trained, not one stopped part-way
            bar.total = step
            bar.refresh()
            break
    bar.close()
    if checkpoint_path is not None:
        save()
    return model, history


def retrace(
    model,
    task,
    checkpoint_path: str | os.PathLike,
    *,
    steps: int,
    rtol: float = 1e-3,
    callbacks: Sequence[Callable] = (),
    progress: bool = True,
):
    """Train the first ``steps`` steps of the run saved at ``checkpoint_path`` again; check them.

    The saved run's own recipe is used (its seed, batches and whole learning-rate schedule), so
    step t here is step t there. Every training loss logged over the same steps in both runs must
    agree to ``rtol``: a run from another seed, another starting model or other data differs by
    percents, while the same run on another processor differs in the last bits only. The steps
    run with float32 matrix products (``default_matmul_precision("highest")``), also on a GPU.

    Args:
        model: the starting model of the saved run (built from the same configuration and key).
        task: the saved run's task.
        checkpoint_path: a checkpoint written with the run's recipe and history.
        steps: how many of its first steps to train; at most the saved run's steps.
        rtol: the largest relative difference allowed between two logged losses.
        callbacks: as :func:`fit`'s, called during the steps trained here.
        progress: show a progress bar.

    Returns:
        ``(saved_model, info, retraced)``: the saved run's final model and checkpoint info, and the
        history of the steps trained here (:func:`loss_differences` compares it with the saved one).

    Raises:
        CheckpointError: if the checkpoint holds no recipe or no history.
        ValueError: if ``steps`` is not between 1 and the saved run's steps.
        RunDiverged: if a logged loss differs by more than ``rtol``, or no logged span is shared.
    """
    saved_model, info = load_checkpoint(checkpoint_path)
    if info.recipe is None or info.history is None:
        raise CheckpointError(
            f"{checkpoint_path} holds no recipe or no history: save_checkpoint(..., recipe=, "
            "history=) writes both, and a run can only be retraced from them"
        )
    if not 1 <= steps <= info.recipe.steps:
        raise ValueError(
            f"steps must be between 1 and the saved run's {info.recipe.steps}, got {steps}"
        )
    stop = Every(steps, lambda step, model, history: True)
    # Full float32 products: on a GPU the default (TF32) rounds each product far more coarsely
    # than the float32 run being compared with; on a CPU the two are the same arithmetic.
    with jax.default_matmul_precision("highest"):
        _, retraced = fit(model, task, info.recipe, callbacks=[*callbacks, stop], progress=progress)
    differences = loss_differences(retraced, info.history)
    if not differences:
        raise RunDiverged(
            f"no logged span of the first {steps} steps matches one of {checkpoint_path}'s history"
        )
    worst = max(differences, key=differences.get)
    if differences[worst] > rtol:
        raise RunDiverged(
            f"steps {worst[0] + 1} to {worst[1]} logged a training loss {differences[worst]:.2e} "
            f"(relative) away from {checkpoint_path}'s, more than rtol={rtol:g}: this is not the "
            "saved run (another starting model, seed, recipe or data?)"
        )
    return saved_model, info, retraced


def loss_differences(history: History, other: History) -> dict[tuple[int, int], float]:
    """The relative difference of the training loss over each span of steps both histories logged.

    A span ``(a, b)`` is steps a+1 to b; a logged loss is the mean over its span, so only spans
    with the same ends are compared.
    """

    def spans(h: History) -> dict[tuple[int, int], float]:
        starts = [0] + h.step[:-1]
        return dict(zip(zip(starts, h.step), h.train_loss))

    mine, theirs = spans(history), spans(other)
    return {
        span: abs(mine[span] - theirs[span]) / abs(theirs[span])
        for span in mine.keys() & theirs.keys()
    }


def _non_finite_loss(losses, step, bad, last_finite, checkpoint_path, saved_step) -> NonFiniteLoss:
    """The error for ``losses[bad]``, the loss of step ``step + bad + 1``, not being finite."""
    if bad > 0:
        last_finite = (step + bad, float(losses[bad - 1]))
    before = (
        "no step of this fit call had a finite loss"
        if last_finite is None
        else f"the last finite loss was {last_finite[1]:.4g}, at step {last_finite[0]}"
    )
    kept = (
        ""
        if checkpoint_path is None or saved_step is None
        else f" {checkpoint_path} still holds step {saved_step}."
    )
    return NonFiniteLoss(
        f"training stopped: the loss became {float(losses[bad])} at step {step + bad + 1} "
        f"({before}).{kept} Lower the learning rate, set clip_norm, or lengthen the warm-up."
    )
