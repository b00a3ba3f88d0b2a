"""What each change since 2017 buys the character language model, on one time budget.

Chapter 9's task (Shakespeare, held-out plays, nats per character on the fixed evaluation windows
of ``NextSymbolPrediction.evaluate``) and model, trained by ``fit`` once per variant: the chapter's
model and recipe, each modern change alone (RMSNorm, SwiGLU, grouped-query attention, QK-norm,
rotary base 100,000 with the half layout, Muon), all of them together, the combination with a
few more changes, and that with every block starting as the identity. Every run fills the same
wall-clock budget of training, compilation included (evaluation is off the clock, as in ``fit``).

How a run fills the budget (a time-based schedule): the cosine schedule must know its number of
steps T, and how many steps fit the budget depends on the variant and, on a shared machine, on
the load, which changes during a run. So T is re-planned as the run goes: training proceeds in
compiled calls of ``steps_per_call`` steps; after each, the seconds per step of the recent calls
give the steps that still fit the budget, and when that projection moves T by more than 5% the
schedule is rebuilt with the new T (a recompilation, two to six seconds, counted in the budget;
the 5% keeps the load's small swings from triggering one after another).
The run stops when the schedule is done or the next call would overrun the budget. Each run
records its re-plans. The learning rate then follows the cosine of the fraction of the budget
spent, whatever the load.

Writes ``benchmarks/results/lm_ablation.json`` (per run: the model's configuration, the recipe,
steps, seconds, final held-out nats/char, held-out and training loss against seconds, the load
average before and after) with the machine it ran on. Run it at normal priority; the load average
tells the reader whether the machine was shared.

    python benchmarks/lm_ablation.py [--seconds 300] [--only baseline muon] [--out PATH]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import time
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
from report import machine  # beside this script

from transformer_intro import LanguageModel, Vocabulary, count_parameters
from transformer_intro.datasets.shakespeare import load_shakespeare
from transformer_intro.models.language_model import SHAKESPEARE_CONFIG, LMConfig
from transformer_intro.tasks import SHAKESPEARE_RECIPE, NextSymbolPrediction, bits
from transformer_intro.training import Recipe, run_steps

RESULTS = Path(__file__).resolve().parent / "results" / "lm_ablation.json"
REPLAN_THRESHOLD = 0.05  # a recompilation costs seconds: only for a change of T above 5%
EVALUATIONS = 8  # held-out evaluations per run (off the clock), for the loss-vs-seconds curve

# Each variant: a label, the changes to chapter 9's model configuration, the changes to its recipe.
SWIGLU = {"mlp": "gated", "activation": "silu", "mlp_bias": False, "mlp_hidden_dim": 344}
# 344 is 2/3 of 512 (rounded up to a multiple of 8): three matrices then hold as many numbers
# as the plain MLP's two.
MODERN = {
    "norm": "rms",
    **SWIGLU,
    "num_kv_heads": 2,
    "qk_norm": True,
    "rotary_base": 100_000.0,
    "rotary_layout": "half",
}
MUON = {"matrix_optimiser": "muon", "muon_learning_rate": 0.02}
VARIANTS = {
    "baseline": ("chapter 9's model", {}, {}),
    "rmsnorm": ("RMSNorm", {"norm": "rms"}, {}),
    "swiglu": ("SwiGLU", SWIGLU, {}),
    "gqa": ("grouped-query attention, 2 key-value heads", {"num_kv_heads": 2}, {}),
    "qk_norm": ("QK-norm", {"qk_norm": True}, {}),
    "rotary": (
        "rotary base 100,000, half layout",
        {"rotary_base": 100_000.0, "rotary_layout": "half"},
        {},
    ),
    "muon": ("Muon", {}, MUON),
    "combined": ("all together", MODERN, MUON),
    # A step further: the squared ReLU of So et al. (2021) instead of SwiGLU, and six blocks.
    "combined_plus": (
        "all together, ReLU² MLP instead of SwiGLU, 6 blocks",
        {
            **MODERN,
            "mlp": "mlp",
            "activation": "relu2",
            "mlp_bias": True,
            "mlp_hidden_dim": 512,
            "num_blocks": 6,
        },
        MUON,
    ),
}
# The last recipe with every block starting as the identity (the last linear map of each branch
# at zero) and the cosine decaying to zero: the same program per step, other initial values.
VARIANTS["combined_identity"] = (
    "the last, identity start, cosine to zero",
    {**VARIANTS["combined_plus"][1], "zero_init_residual": True},
    {**MUON, "final_learning_rate": 0.0},
)


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _rebuild(recipe: Recipe, steps: int) -> Recipe:
    return recipe.replace(steps=max(steps, recipe.warmup_steps + recipe.steps_per_call))


def run(name: str, config: LMConfig, recipe: Recipe, task, budget: float) -> dict:
    """Train one variant for ``budget`` seconds (compilation included), re-planning T."""
    model = LanguageModel(config, key=jax.random.PRNGKey(recipe.seed))
    per_call = recipe.steps_per_call
    # A first guess of T (chapter 9's recipe on an unloaded machine); re-planned after 4 calls.
    plan = _rebuild(recipe, 3000)
    opt_state = plan.optimiser().init(eqx.filter(model, eqx.is_inexact_array))
    replans = [{"step": 0, "seconds": 0.0, "steps": plan.steps}]
    train = {"step": [], "seconds": [], "loss": []}
    held_out = []
    call_seconds = []  # of calls that did not compile
    step, seconds, compiled = 0, 0.0, True
    next_evaluation = budget / EVALUATIONS
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
        seconds += elapsed
        step += per_call
        if not compiled:
            call_seconds.append(elapsed)
        compiled = False
        train["step"].append(step)
        train["seconds"].append(seconds)
        train["loss"].append(float(np.mean(losses)))
        if seconds >= next_evaluation:  # off the clock
            held_out.append({"step": step, "seconds": seconds, **_evaluate(task, model)})
            next_evaluation += budget / EVALUATIONS
        recent = float(np.median(call_seconds[-8:])) if call_seconds else elapsed
        calls_left = int((budget - seconds) / recent)
        if calls_left < 1:
            break  # the next call would overrun the budget
        if len(call_seconds) < 3:
            continue
        projected = step + calls_left * per_call
        if abs(projected - plan.steps) > REPLAN_THRESHOLD * plan.steps and projected > step:
            plan = _rebuild(recipe, projected)
            replans.append({"step": step, "seconds": seconds, "steps": plan.steps})
            compiled = True
    wall = time.perf_counter() - tic_wall
    load_after = load_average()
    if not held_out or held_out[-1]["step"] != step:
        held_out.append({"step": step, "seconds": seconds, **_evaluate(task, model)})
    final = held_out[-1]["nats_per_char"]
    return {
        "name": name,
        "label": VARIANTS[name][0],
        "config": json.loads(config.to_json()),
        "recipe": json.loads(plan.replace(steps=step).to_json()),
        "parameters": count_parameters(model),
        "steps": step,
        "seconds": seconds,
        "seconds_per_step": seconds / step,
        "wall_seconds_with_evaluations": wall,
        "schedule_replans": replans,
        "schedule_finished": step >= plan.steps,
        "final_schedule_steps": plan.steps,
        "nats_per_char": final,
        "bits_per_char": bits(final),
        "held_out": held_out,
        "train": train,
        "started": started,
        "load_average_before": load_before,
        "load_average_after": load_after,
    }


def _evaluate(task, model) -> dict:
    return {"nats_per_char": task.evaluate(model)["nats_per_symbol"]}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=300.0, help="the budget of every run")
    parser.add_argument("--only", nargs="*", choices=list(VARIANTS), help="run only these")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--append", action="store_true", help="add the runs to those already in --out"
    )
    args = parser.parse_args()
    names = args.only or list(VARIANTS)
    train_text, validation_text = load_shakespeare("train"), load_shakespeare("validation")
    vocabulary = Vocabulary.from_text(train_text)
    task = NextSymbolPrediction(
        vocabulary.encode(train_text),
        window=SHAKESPEARE_CONFIG.window,
        validation_ids=vocabulary.encode(validation_text),
    )
    results = {
        "budget_seconds": args.seconds,
        "machine": machine(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "load_average_start": load_average(),
        "task": "chapter 9: Shakespeare, held-out plays, nats per character",
        "runs": [],
    }
    if args.append and args.out.exists():
        earlier = json.loads(args.out.read_text())
        if earlier["budget_seconds"] != args.seconds:
            raise SystemExit(f"{args.out} holds runs of {earlier['budget_seconds']} s, not these")
        results["runs"] = [r for r in earlier["runs"] if r["name"] not in names]
        results["earlier_invocations"] = earlier.get("earlier_invocations", []) + [
            {k: earlier[k] for k in ("date", "machine", "load_average_start") if k in earlier}
        ]
    print(json.dumps(results["machine"]), flush=True)
    for name in names:
        _, config_changes, recipe_changes = VARIANTS[name]
        config = SHAKESPEARE_CONFIG.replace(vocab_size=len(vocabulary), **config_changes)
        recipe = SHAKESPEARE_RECIPE.replace(**recipe_changes)
        try:
            row = run(name, config, recipe, task, args.seconds)
        except Exception as error:  # report it and go on with the other variants
            print(f"{name}: failed: {error!r}", flush=True)
            continue
        results["runs"].append(row)
        results["load_average_end"] = load_average()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")  # after every run
        print(
            f"{name:14s} {row['steps']:5d} steps {row['seconds']:6.1f} s "
            f"{row['nats_per_char']:.3f} nats/char ({row['bits_per_char']:.3f} bits/char)  "
            f"load {row['load_average_before']} -> {row['load_average_after']}",
            flush=True,
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
