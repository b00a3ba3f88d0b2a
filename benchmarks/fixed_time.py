"""Training for a fixed number of seconds, with a cosine schedule that fits them.

The cosine schedule must know its number of steps T, and how many steps fit the time depends on
the model and, on a shared machine, on the load, which changes during a run. So T is re-planned
as the run goes: training proceeds in compiled calls of ``steps_per_call`` steps; after each, the
seconds per call of the recent calls that did not compile give the steps that still fit. A new T
is a new program to compile, and compiling takes seconds (on a 2-core CPU, 5 to 20): a new plan
pays for its compilation out of the time left, and T moves only when the change is worth more
steps than the compilation costs, and more than 5%. The run stops when the schedule is done or
the next call could overrun the time, were it as slow as the slowest of the last eight. The
learning rate then follows the cosine of the fraction of the time spent, whatever the load.

Used by ``lm_ablation.py`` and ``records.py``, beside this file.
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Callable

import equinox as eqx
import jax
import numpy as np

from transformer_intro.training import Recipe, run_steps

REPLAN_THRESHOLD = 0.05  # the least change of T worth a new plan


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _rebuild(recipe: Recipe, steps: int) -> Recipe:
    return recipe.replace(steps=max(steps, recipe.warmup_steps + recipe.steps_per_call))


def planned_steps(
    step: int, seconds_left: float, call_seconds: float, compile_seconds: float, per_call: int
) -> int:
    """T, the steps that fit: those taken, and whole calls in the time left once a compilation
    of ``compile_seconds`` is paid (a new plan is a new program). At least one call more.

    Planning for the time after the compilation makes the next projection, which no longer
    pays it, agree with this one, instead of starting another re-plan.
    """
    calls = int((seconds_left - compile_seconds) / call_seconds)
    return step + max(calls, 1) * per_call


def worth_replanning(
    step: int, planned: int, projected: int, step_seconds: float, compile_seconds: float
) -> bool:
    """Whether T should move from ``planned`` to about ``projected``, the steps that fit if the
    plan stays, at step ``step``. Re-planning compiles a new program, so:

    - more steps fit than planned: only if the steps the run would leave unused take longer than
      the compilation, and are more than 5% of T;
    - fewer fit: only if the cosine would be cut before 90% of it (its rate still above 2.5% of
      the peak there), and the time left holds three compilations.
    """
    if projected > planned:
        unused = projected - planned
        return unused > REPLAN_THRESHOLD * planned and unused * step_seconds > compile_seconds
    seconds_left = (projected - step) * step_seconds
    return projected < 0.9 * planned and seconds_left > 3 * compile_seconds


def train_for_seconds(
    model,
    recipe: Recipe,
    task,
    seconds: float,
    evaluate: Callable[[object], dict],
    *,
    evaluations: int = 8,
    first_guess: int = 3000,
) -> tuple[object, dict]:
    """``model`` trained on ``task`` for ``seconds`` of training, compilation included.

    ``evaluate(model)`` gives a dict of held-out figures; it runs ``evaluations`` times, evenly
    over the time, and once at the end, with the clock stopped. ``first_guess`` is T until the
    first three calls that did not compile have been timed.

    Returns:
        The trained model and a dict: the steps, the seconds, the seconds per step, the wall-clock
        seconds with the evaluations, the re-plans of T, the recipe of the last plan, the
        held-out figures and the training loss against seconds, the load averages.
    """
    per_call = recipe.steps_per_call
    plan = _rebuild(recipe, first_guess)
    opt_state = plan.optimiser().init(eqx.filter(model, eqx.is_inexact_array))
    replans = [{"step": 0, "seconds": 0.0, "steps": plan.steps}]
    train = {"step": [], "seconds": [], "loss": []}
    held_out = []
    call_seconds = []  # of calls that did not compile
    step, spent, compiled = 0, 0.0, True
    next_evaluation = seconds / evaluations
    load_before = load_average()
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    tic_wall = time.perf_counter()
    while step < plan.steps:
        tic = time.perf_counter()
        model, opt_state, losses, _ = run_steps(
            model, opt_state, task, np.int32(step), recipe=plan, count=per_call
        )
        losses = jax.device_get(losses)
        elapsed = time.perf_counter() - tic
        spent += elapsed
        step += per_call
        if compiled:
            compiling_call_seconds, compiled = elapsed, False
        else:
            call_seconds.append(elapsed)
        train["step"].append(step)
        train["seconds"].append(spent)
        train["loss"].append(float(np.mean(losses)))
        if spent >= next_evaluation:  # off the clock
            held_out.append({"step": step, "seconds": spent, **evaluate(model)})
            next_evaluation += seconds / evaluations
        recent = float(np.median(call_seconds[-8:])) if call_seconds else elapsed
        if seconds - spent < max(call_seconds[-8:], default=elapsed):
            break  # the next call could overrun the time: as slow as the slowest recent one
        if len(call_seconds) < 3:
            continue
        compile_seconds = max(compiling_call_seconds - recent, 0.0)
        projected = planned_steps(step, seconds - spent, recent, 0.0, per_call)
        if worth_replanning(step, plan.steps, projected, recent / per_call, compile_seconds):
            steps = planned_steps(step, seconds - spent, recent, compile_seconds, per_call)
            plan = _rebuild(recipe, steps)
            replans.append({"step": step, "seconds": spent, "steps": plan.steps})
            compiled = True
    wall = time.perf_counter() - tic_wall
    load_after = load_average()
    if not held_out or held_out[-1]["step"] != step:
        held_out.append({"step": step, "seconds": spent, **evaluate(model)})
    return model, {
        "recipe": plan,  # the last plan: T, and the steps taken below, fewer if cut short
        "steps": step,
        "seconds": spent,
        "seconds_per_step": spent / step,
        "wall_seconds_with_evaluations": wall,
        "schedule_replans": replans,
        "schedule_finished": step >= plan.steps,
        "final_schedule_steps": plan.steps,
        "held_out": held_out,
        "train": train,
        "started": started,
        "load_average_before": load_before,
        "load_average_after": load_after,
    }
