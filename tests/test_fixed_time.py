"""benchmarks/fixed_time.py plans the cosine schedule's steps so that the schedule fits the time.

A new plan is a new compiled program. A plan that ignored the compilation's seconds would not fit
the time left, and a re-plan for a change smaller than the compilation costs would start another
on a machine where compiling takes a large share of the time.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "fixed_time.py"


@pytest.fixture(scope="module")
def fixed_time():
    spec = importlib.util.spec_from_file_location("fixed_time", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def plans_of_a_run(fixed_time, compile_seconds_counted: float) -> tuple[list[int], int]:
    """T after each re-plan of a run, and the steps it takes: 25-step calls of 10 s, compiling
    for 20 s, 300 s in all, re-planning by the script's rules (counting
    ``compile_seconds_counted`` for a compilation in a new plan)."""
    per_call, call, compiling, seconds = 25, 10.0, 20.0, 300.0
    step, spent = 100, 4 * call + compiling  # four calls, the first compiled, T not yet fitted
    plan, plans = 3000, []
    while step < plan and seconds - spent >= call:
        projected = fixed_time.planned_steps(step, seconds - spent, call, 0.0, per_call)
        if fixed_time.worth_replanning(step, plan, projected, call / per_call, compiling):
            plan = fixed_time.planned_steps(
                step, seconds - spent, call, compile_seconds_counted, per_call
            )
            plans.append(plan)
            spent += compiling  # the next call compiles the new plan
        step, spent = step + per_call, spent + call
    return plans, step


def test_one_replan_fits_the_time(fixed_time):
    # 240 s left, 20 s of them compiling: 22 calls of 25 steps after the first 100
    assert plans_of_a_run(fixed_time, compile_seconds_counted=20.0) == ([650], 650)


def test_a_plan_that_forgets_the_compilation_is_cut_short(fixed_time):
    plans, steps = plans_of_a_run(fixed_time, compile_seconds_counted=0.0)
    assert plans == [700] and steps == 650  # the control: the cosine never reaches its end


def test_a_new_plan_must_be_worth_its_compilation(fixed_time):
    worth = fixed_time.worth_replanning
    # at step 1,000 of 2,000 planned, 20 ms a step, compiling for 9 s
    assert not worth(1000, 2000, 2100, 0.02, 9.0)  # 100 steps unused: 2 s
    assert worth(1000, 2000, 2500, 0.02, 9.0)  # 500 unused: 10 s
    assert not worth(1000, 2000, 1850, 0.02, 9.0)  # the cosine cut at 92.5%
    assert worth(1000, 2000, 1700, 0.02, 4.0)  # cut at 85%, 14 s left
    assert not worth(1000, 2000, 1700, 0.02, 9.0)  # cut at 85%, 14 s left: not three compiles
    assert not worth(0, 20000, 20500, 0.02, 0.0)  # within 5%


def test_at_least_one_call_is_planned(fixed_time):
    assert fixed_time.planned_steps(200, 5.0, 10.0, 20.0, 25) == 225
