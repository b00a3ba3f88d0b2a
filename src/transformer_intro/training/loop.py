"""``fit``: the one training loop. Every chapter, benchmark and the multi-device chapter use it.

A chapter's training cell calls :func:`fit_or_replay`: it replays the saved run when the reader
changed nothing, and trains the reader's variant with ``fit`` when anything differs.

Its core is short: step t draws its batch from the task with the key ``fold_in(PRNGKey(seed), t)``
and takes one :func:`~transformer_intro.training.step.train_step`; ``recipe.steps_per_call``
such steps run in one compiled ``lax.scan`` on the device, and between calls the host only logs,
evaluates, checkpoints and calls back. Because a batch depends on nothing but the seed and the
step, a run resumed from a checkpoint replays exactly the batches of an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm  # plain text bar: no widget JavaScript, the same in a terminal and a notebook

from .. import parallel
from ..adapters import LoRALanguageModel
from ..xla_flags import optimised_jit
from .checkpoints import (
    CheckpointError,
    CheckpointInfo,
    check_resumable,
    checkpoint_header,
    load_adapter,
    load_checkpoint,
    save_adapter,
    save_checkpoint,
    weights_fingerprint,
)
from .history import History
from .recipe import Recipe
from .step import train_step

__all__ = [
    "Every",
    "NonFiniteLoss",
    "Run",
    "RunDiverged",
    "batch_key",
    "fit",
    "fit_or_replay",
    "loss_differences",
    "retrace",
    "run_steps",
]


class NonFiniteLoss(ValueError):
    """Training stopped because the loss became NaN or infinite."""


class RunDiverged(ValueError):
    """A run's first steps, trained again, did not retrace the saved run's training losses."""


# What RunDiverged tells the reader to do: a changed run is trained, not replayed.
_DIVERGED_FIX = (
    "to train a changed model, recipe or data as a run of its own, call "
    "fit_or_replay (it trains any variant of the saved run) or fit; to replay the saved run, "
    "build the starting model, task and recipe exactly as the saved run did"
)


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
    """A callback called every ``steps`` steps (``fit`` stops there): ``Every(100, fn)``.

    Raises:
        ValueError: if ``steps`` is not a whole number >= 1.
    """

    steps: int
    callback: Callable

    def __post_init__(self):
        # A period of 0 would divide by zero at the first call; a negative one would put the
        # next stop fit chooses behind the current step.
        steps = self.steps
        if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 1:
            raise ValueError(
                f"Every's steps must be a whole number >= 1, got {steps!r}: pass the period in "
                "steps, as Every(100, callback)"
            )

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
        ValueError: for ``resume=True`` without a ``checkpoint_path``, an ``eval_every`` below
            1, or ``rules`` without a ``mesh``.
    """
    if eval_every is not None and eval_every < 1:
        raise ValueError(f"eval_every must be a positive number of steps, got {eval_every}")
    if resume and checkpoint_path is None:
        # Without the path there is nothing to resume from, and training would start afresh.
        raise ValueError(
            "resume=True has no checkpoint to resume from: pass checkpoint_path too, "
            "fit(..., checkpoint_path=path, resume=True)"
        )
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

    A saved low-rank adapter (:func:`~transformer_intro.training.save_adapter`) is retraced the
    same way: ``model`` is then the starting :class:`~transformer_intro.adapters.LoRALanguageModel`
    (the frozen base with fresh adapters), and the saved adapters are put back onto its base.

    Args:
        model: the starting model of the saved run (built from the same configuration and key).
        task: the saved run's task.
        checkpoint_path: a checkpoint, or an adapter file, written with the run's recipe and
            history.
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
        RunDiverged: if a logged loss differs by more than ``rtol`` (the replay stops at the first
            logged span that does), or no logged span is shared.
    """
    saved_model, info = _load_saved_run(checkpoint_path, model)
    if info.recipe is None or info.history is None:
        raise CheckpointError(
            f"{checkpoint_path} holds no recipe or no history: save_checkpoint(..., recipe=, "
            "history=) (or save_adapter) writes both, and a run can only be retraced from them"
        )
    if not 1 <= steps <= info.recipe.steps:
        raise ValueError(
            f"steps must be between 1 and the saved run's {info.recipe.steps}, got {steps}"
        )
    stop = Every(steps, lambda step, model, history: True)

    def stop_at_divergence(step, model, history):
        # A logged span that already differs ends the replay there, after at most
        # recipe.steps_per_call steps, rather than after all of them.
        differences = loss_differences(history, info.history)
        return bool(differences) and max(differences.values()) > rtol

    # Full float32 products: on a GPU the default (TF32) rounds each product far more coarsely
    # than the float32 run being compared with; on a CPU the two are the same arithmetic.
    with jax.default_matmul_precision("highest"):
        _, retraced = fit(
            model,
            task,
            info.recipe,
            callbacks=[*callbacks, stop, stop_at_divergence],
            progress=progress,
        )
    differences = loss_differences(retraced, info.history)
    if not differences:
        raise RunDiverged(
            f"no logged span of the first {steps} steps matches one of {checkpoint_path}'s "
            f"history: {_DIVERGED_FIX}"
        )
    worst = max(differences, key=differences.get)
    if differences[worst] > rtol:
        raise RunDiverged(
            f"steps {worst[0] + 1} to {worst[1]} logged a training loss {differences[worst]:.2e} "
            f"(relative) away from {checkpoint_path}'s, more than rtol={rtol:g}: this is not the "
            f"saved run (another starting model, seed, recipe or data); {_DIVERGED_FIX}"
        )
    if retraced.step[-1] != steps:
        raise RunDiverged(f"the replay of {checkpoint_path} stopped at step {retraced.step[-1]}")
    return saved_model, info, retraced


def _load_saved_run(path, model) -> tuple[Any, CheckpointInfo]:
    """The saved run's model and info: a checkpoint, or an adapter put onto ``model``'s base."""
    if checkpoint_header(path).header.get("adapter") is None:
        return load_checkpoint(path)
    if not isinstance(model, LoRALanguageModel):
        raise CheckpointError(
            f"{path} holds a low-rank adapter, and the run's model is a {type(model).__name__}: "
            "start from LoRALanguageModel(base, rank, key=...) on the base it was trained on"
        )
    return load_adapter(path, model.base)


@dataclasses.dataclass(frozen=True)
class Run:
    """A training run as :func:`fit_or_replay` returns it: the saved run, or the reader's own.

    ``model, history = run`` unpacks it as :func:`fit`'s result.

    Attributes:
        model: the trained model (the saved run's, or the one trained here).
        history: its whole history; a chapter's later cells draw and print this.
        recipe: the recipe it was trained with.
        variant: True when this is not the saved run (its model, recipe, data or extra differ),
            and the run was trained here.
        message: the one sentence :func:`fit_or_replay` printed: what was replayed, or what
            differs from the saved run and what is trained instead.
        changes: each difference from the saved run, as ``"name old -> new"`` (empty when none).
        replayed: the history of the first steps trained again and checked; None when trained.
        info: the saved run's checkpoint info when it was loaded (its ``extra``, ``step``), else
            None.
    """

    model: Any
    history: History
    recipe: Recipe
    variant: bool
    message: str
    changes: tuple[str, ...] = ()
    replayed: History | None = None
    info: CheckpointInfo | None = None

    def __iter__(self):
        return iter((self.model, self.history))

    def claim(self, holds, statement: str) -> None:
        """Check one of the chapter's statements about its run.

        On the saved run the statement must hold (an ``AssertionError`` naming it otherwise):
        it is what the prose says. On a reader's variant it need not, so it is printed with
        whether it holds for this run, and nothing is raised.
        """
        if not self.variant:
            assert bool(holds), f"the saved run should show this, and does not: {statement}"
        else:
            print(f"your run: {statement}: {'yes' if holds else 'no'}")


def fit_or_replay(
    model,
    task,
    recipe: Recipe,
    checkpoint_path: str | os.PathLike,
    *,
    replay_steps: int,
    train_all: bool = False,
    eval_every: int | None = None,
    callbacks: Sequence[Callable] = (),
    extra: dict | None = None,
    save_path: str | os.PathLike | None = None,
    rtol: float = 1e-3,
    progress: bool = True,
    verbose: bool = True,
) -> Run:
    """Replay the saved run when nothing differs from it; otherwise train the reader's variant.

    A chapter's training cell calls this. The saved run at ``checkpoint_path`` is compared with
    what the cell built, from the checkpoint's header alone (no array is read): the model's
    class and configuration, every field of the recipe (the seed is one), and each key of
    ``extra`` given (a tokeniser, say). The starting weights and the data cannot be compared
    from a header; the replay compares them: its first logged span of
    ``recipe.steps_per_call`` steps already differs when either does.

    * Nothing differs: the first ``replay_steps`` steps are trained again with :func:`retrace`
      and every logged training loss checked against the saved history to ``rtol``; the saved
      model and history are returned. This path costs what ``retrace`` costs, and no more.
    * Something differs, or the replay's losses do: one sentence says what ("learning_rate
      0.002 -> 0.01: training your variant here, about 4 minutes at the saved run's speed"; the
      estimate is the saved run's seconds per step scaled by the steps and the batch size), and
      :func:`fit` trains the run, with a progress bar. The saved checkpoint is left as it is.
    * ``train_all=True``: :func:`fit` trains the run whether or not it differs.

    The saved run may be a low-rank adapter (:func:`~transformer_intro.training.save_adapter`,
    with its recipe and history): ``model`` is then the starting
    :class:`~transformer_intro.adapters.LoRALanguageModel`, and its rank, scale alpha / r and
    adapted projections are compared too, with the base model's configuration and weights
    (:func:`~transformer_intro.training.weights_fingerprint`). A variant is saved as an adapter.

    Args:
        model: the starting model (built from its configuration and key, untrained).
        task: the task to train on.
        recipe: the recipe to train with.
        checkpoint_path: the saved run, written by ``save_checkpoint`` with its recipe and
            history.
        replay_steps: K, how many of the saved run's first steps to train again and check; a
            multiple of ``recipe.steps_per_call``, so that each is a logged span.
        train_all: train all of ``recipe.steps`` here even when nothing differs.
        eval_every: as :func:`fit`'s, for a run trained here (a replayed run's history holds
            the saved run's evaluations).
        callbacks: as :func:`fit`'s; called during the steps trained here, replayed or not.
        extra: what else defines the run, compared key by key with the saved checkpoint's
            ``extra`` (the keys not given are not compared), and saved with a variant.
        save_path: where to save a run trained here (with its recipe, history and ``extra``);
            None saves nothing. A variant is never saved at ``checkpoint_path``.
        rtol: the largest relative difference allowed between a replayed logged loss and the
            saved one.
        progress: show a progress bar while training a run (a replay shows none).
        verbose: print the message.

    Returns:
        A :class:`Run`; ``model, history = run`` unpacks it.

    Raises:
        FileNotFoundError: if there is no checkpoint at ``checkpoint_path``.
        CheckpointError: if the checkpoint holds no recipe or no history.
        ValueError: if ``replay_steps`` is not a positive multiple of ``recipe.steps_per_call``
            within the saved run, or a variant would be saved over ``checkpoint_path``.
    """
    path = Path(checkpoint_path)
    saved = checkpoint_header(path)  # no array is read
    if saved.recipe is None or saved.history is None:
        raise CheckpointError(
            f"{path} holds no recipe or no history: save_checkpoint(..., recipe=, history=) "
            "(or save_adapter) writes both, and a run can only be replayed from them"
        )
    header, saved_recipe, saved_history = saved.header, saved.recipe, saved.history
    steps = recipe.steps_per_call
    if replay_steps < 1 or replay_steps % steps or replay_steps > saved_recipe.steps:
        raise ValueError(
            f"replay_steps must be a positive multiple of recipe.steps_per_call={steps} and at "
            f"most the saved run's {saved_recipe.steps} steps, got {replay_steps}"
        )
    changes = tuple(_differences(header, saved_recipe, model, recipe, extra))
    replay_rtol = f"{rtol:.0e}".replace("e-0", "e-")
    if not changes and not train_all:
        try:
            saved_model, info, replayed = retrace(
                model,
                task,
                path,
                steps=replay_steps,
                rtol=rtol,
                callbacks=callbacks,
                progress=False,
            )
        except RunDiverged as diverged:
            why = str(diverged).split(": this is not the saved run")[0]
            reason = (
                f"{why}, with the saved run's configuration and recipe: your starting weights "
                "or data differ from the saved run's (or the code does)"
            )
        else:
            message = (
                f"steps 1-{replay_steps} retrace the saved run (every logged loss within "
                f"{replay_rtol}); loaded its {saved_recipe.steps} steps"
            )
            if verbose:
                print(message)
            return Run(saved_model, info.history, info.recipe, False, message, (), replayed, info)
    elif changes:
        reason = ", ".join(changes)
    else:
        reason = f"train_all=True: the saved run's {saved_recipe.steps} steps trained again"
    variant = bool(changes) or not train_all
    if variant and save_path is not None and Path(save_path).resolve() == path.resolve():
        raise ValueError(
            f"save_path is the saved run's own file, {path}: a variant is saved elsewhere"
        )
    what = "training your variant here" if variant else "training it here"
    message = f"{reason}: {what}, {_estimate(saved_history, saved_recipe, recipe)}"
    if verbose:
        print(message)
    trained, history = fit(
        model, task, recipe, eval_every=eval_every, callbacks=callbacks, progress=progress
    )
    if save_path is not None:
        save = save_adapter if isinstance(trained, LoRALanguageModel) else save_checkpoint
        save(save_path, trained, recipe=recipe, history=history, step=history.step[-1], extra=extra)
    return Run(trained, history, recipe, variant, message, changes)


def _dotted(config: dict, prefix: str = "") -> dict:
    """A nested configuration's values by dotted name (``block.dim``), to name a change."""
    flat = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat |= _dotted(value, f"{prefix}{key}.")
        else:
            flat[prefix + key] = value
    return flat


def _differences(header, saved_recipe: Recipe, model, recipe: Recipe, extra) -> list[str]:
    """``"name old -> new"`` for each difference between a saved run's header and this run."""
    changes = []
    if header.get("adapter") is not None:
        adapter_changes, model = _adapter_differences(header, model)
        changes += adapter_changes
    name = type(model).__name__
    config = getattr(model, "config", None)
    if name != header["model_class"] or not dataclasses.is_dataclass(config):
        changes.append(f"model {header['model_class']} -> {name}")
    else:
        saved = _dotted(header["model_config"])
        given = _dotted(json.loads(config.to_json()))
        changes += [
            f"model {key} {saved.get(key)!r} -> {given.get(key)!r}"
            for key in given
            if saved.get(key) != given.get(key)
        ]
    changes += [
        f"{f.name} {getattr(saved_recipe, f.name)!r} -> {getattr(recipe, f.name)!r}"
        for f in dataclasses.fields(recipe)
        if getattr(saved_recipe, f.name) != getattr(recipe, f.name)
    ]
    saved_extra = header["extra"] or {}
    for key, value in (extra or {}).items():
        if json.loads(json.dumps(value)) != saved_extra.get(key):
            changes.append(f"{key} (another one than the saved run's)")
    return changes


def _adapter_differences(header, model) -> tuple[list[str], Any]:
    """The differences of a saved adapter's own settings and base weights; and the base to compare.

    The base's configuration is compared by :func:`_differences`, as a whole model's is.
    """
    saved = header["adapter"]
    if not isinstance(model, LoRALanguageModel):
        return [f"model LoRALanguageModel -> {type(model).__name__}"], model
    first = next(iter(model.adapters[0].values()))
    # Tree operations (fit's among them) rebuild a dict with its keys sorted: the projections
    # are compared as a set.
    given = {"rank": first.rank, "scale": first.scale, "parts": sorted(model.adapters[0])}
    names = {"rank": "adapter rank r", "scale": "adapter scale alpha / r", "parts": "adapted"}
    changes = [
        f"{names[key]} {value!r} -> {given[key]!r}"
        for key, value in {**saved, "parts": sorted(saved["parts"])}.items()
        if key in names and value != given[key]
    ]
    same_base = type(model.base).__name__ == header["model_class"]
    if same_base and weights_fingerprint(model.base) != saved["base_sha256"]:
        changes.append("the base model's weights (other ones than the saved run's)")
    return changes, model.base


def _estimate(saved_history: History, saved_recipe: Recipe, recipe: Recipe) -> str:
    """How long ``recipe`` will train, from the saved run's own seconds per step, as words."""
    if not saved_history.step or not saved_history.seconds:
        return "for an unknown time (the saved run logged none)"
    per_step = saved_history.seconds[-1] / saved_history.step[-1]
    seconds = per_step * recipe.steps * recipe.batch_size / saved_recipe.batch_size
    if seconds < 90:
        when = f"{max(round(seconds), 1)} second" + ("s" if round(seconds) > 1 else "")
    else:
        when = f"{round(seconds / 60)} minutes"
    return f"about {when} at the saved run's speed (an estimate, evaluations not counted)"


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
