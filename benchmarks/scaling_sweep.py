"""An IsoFLOP sweep on two cores: chapter 20's character language models at fixed compute budgets.

For every budget C (training FLOPs, counted by hand: ``transformer_intro.training.scaling``'s
``6 |θ_W| + 12 M n D`` per token), five model sizes from the ladder ``scaling.LADDER``, every other
rung, so that they span a factor of about 16 in parameters around the budget's expected optimum;
each model is trained for the steps that spend C (1,024 characters a step) with chapter 9's recipe,
its warm-up (a tenth) and cosine decay stretched over the run. Budgets in FLOPs, not seconds: the
losses are then the same on a quiet machine and on a loaded one. Each run's held-out loss per
character (the 512 windows of chapter 9's held-out plays) is recorded at six points, and its
training loss every 20 steps.

Before the runs, a short timing (40 steps of the sweep's middle model after its compilation) gives
the machine's rate in training FLOPs per second, with the load average: the rate that turns a
budget into seconds (``rate``), measured once per invocation and kept.

``--verify`` trains, instead, the run that ``benchmarks/results/scaling_prediction.json`` (the
chapter's prediction, committed before) names, for the seeds given; those runs are added to the
same file under ``verification``. ``--compare`` trains chapter 9's model (its width and depth,
at the sweep's window, batch and recipe) at the prediction's compute, under ``comparison``: the
hand-chosen model beside the one the law chose. ``--compare-modern`` does the same for chapter
14's model (chapter 9's sizes with all of chapter 14's changes to the block, trained with Muon:
``lm_ablation.VARIANTS["combined"]``), under ``comparison_modern``: a model outside the family
the law was fitted to, at the same compute. ``--size-check`` trains :data:`SIZE_CHECK`'s
sizes at the same compute, under ``size_check``: with those two, an IsoFLOP curve at the
prediction's compute, whose vertex checks the predicted size.

Writes ``benchmarks/results/scaling_sweep.json`` (atomically, after every run); a run already in
it is not trained again, so an interrupted invocation continues where it stopped.

    nice -n 5 python benchmarks/scaling_sweep.py [--budgets 5e11 1e12 2e12 4e12]
    nice -n 5 python benchmarks/scaling_sweep.py --verify --seeds 0 1 2
    nice -n 5 python benchmarks/scaling_sweep.py --compare --seeds 0 1 2
    nice -n 5 python benchmarks/scaling_sweep.py --compare-modern --seeds 0 1 2
    nice -n 5 python benchmarks/scaling_sweep.py --size-check --seeds 0
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import time
from pathlib import Path

import numpy as np
from lm_ablation import VARIANTS  # beside this script
from overrides import with_changes
from report import machine, write_json
from tqdm import tqdm

from transformer_intro import Vocabulary
from transformer_intro.datasets.shakespeare import load_shakespeare
from transformer_intro.models.language_model import SHAKESPEARE_CONFIG
from transformer_intro.tasks import SHAKESPEARE_RECIPE, NextSymbolPrediction
from transformer_intro.training import fit, scaling

RESULTS = Path(__file__).resolve().parent / "results" / "scaling_sweep.json"
PREDICTION = Path(__file__).resolve().parent / "results" / "scaling_prediction.json"
BUDGETS = (2.5e11, 5e11, 1e12, 2e12)
SIZES_PER_BUDGET = 5
STEPS_PER_CALL = 20  # the training loss is logged every 20 steps
EVALUATIONS = 5  # held-out evaluations in a run, and one more at its end
MAX_PASSES = 4.0  # no run reads the training text more than four times
TIMING_SIZE = (72, 2)  # the ladder's middle rung, timed for the machine's rate
TIMING_STEPS = 200  # about 4 s of steps: 40 (0.7 s) proved too few on a shared machine
FIVE_MINUTES = 300.0  # the prediction's budget: what this many seconds of the machine deliver
# Fixed before the verification run is trained, and committed with the prediction.
TOLERANCE = {"loss_nats_per_character": 0.02, "size_factor": 1.5}
# Sizes about a factor 2 apart around the prediction's (104, 3), besides it and chapter 9's
# (128, 4): with them, five sizes at the prediction's compute, whose parabola checks its size.
SIZE_CHECK = ((72, 2), (88, 3), (160, 5))
BOOTSTRAP_SAMPLES = 1000  # Approach 2's resamples
SURFACE_SAMPLES = 100  # Approach 3's (each a refit)


def recipe_for(steps: int, seed: int = 0):
    """Chapter 9's recipe over ``steps`` steps of ``scaling.BATCH_SIZE`` windows: a tenth
    warm-up, cosine decay to 1e-4."""
    return SHAKESPEARE_RECIPE.replace(
        steps=steps,
        batch_size=scaling.BATCH_SIZE,
        warmup_steps=steps // 10,
        steps_per_call=STEPS_PER_CALL,
        seed=seed,
    )


def planned_runs(budgets, seeds=(0,)) -> list[dict]:
    """Every run: budget k (smallest first) takes rungs k, k + 2, ..., k + 8 of the ladder."""
    plan = []
    for k, budget in enumerate(sorted(budgets)):
        rungs = [k + 2 * i for i in range(SIZES_PER_BUDGET)]
        if rungs[-1] >= len(scaling.LADDER):
            raise SystemExit(
                f"budget {budget:.0e} needs rung {rungs[-1]} of a ladder of "
                f"{len(scaling.LADDER)}: give fewer budgets or extend scaling.LADDER"
            )
        for seed in seeds:
            for r in rungs:
                dim, blocks = scaling.LADDER[r]
                plan.append(dict(budget=budget, dim=dim, blocks=blocks, seed=seed))
    return plan


def key_of(row: dict) -> tuple:
    return float(row["budget"]), row["dim"], row["blocks"], row["seed"], row.get("variant", "")


class Task:
    def __init__(self):
        train, validation = load_shakespeare("train"), load_shakespeare("validation")
        self.vocabulary = Vocabulary.from_text(train)
        self.train_characters = len(train)
        self.task = NextSymbolPrediction(
            self.vocabulary.encode(train),
            window=scaling.WINDOW,
            validation_ids=self.vocabulary.encode(validation),
        )


def run_plan(run: dict, data: Task) -> tuple:
    config = scaling.scaling_config(run["dim"], run["blocks"], len(data.vocabulary))
    if "variant" in run:  # one of chapter 14's variants of that model
        config = with_changes(config, VARIANTS[run["variant"]][1])
    tokens_per_step = scaling.BATCH_SIZE * scaling.WINDOW
    steps = scaling.steps_for_budget(
        config, run["budget"], tokens_per_step, multiple=STEPS_PER_CALL
    )
    return config, steps, tokens_per_step


def train_one(run: dict, data: Task) -> dict:
    """Train one run and return its row of the result file."""
    config, steps, tokens_per_step = run_plan(run, data)
    tokens = steps * tokens_per_step
    passes = tokens / data.train_characters
    if passes > MAX_PASSES:
        raise SystemExit(
            f"{run}: {tokens:,} characters read {passes:.1f} times the training text (at most "
            f"{MAX_PASSES}): drop this size from the budget or the budget from the sweep"
        )
    recipe = recipe_for(steps, run["seed"])
    if "variant" in run:
        recipe = recipe.replace(**VARIANTS[run["variant"]][2])
    # the steps were counted for this many characters a step: the recipe must train them
    assert recipe.batch_size * config.window == tokens_per_step, (recipe, tokens_per_step)
    model = scaling.build_model(config, seed=run["seed"])
    counts = scaling.parameter_counts(model)
    eval_every = max(STEPS_PER_CALL, steps // EVALUATIONS // STEPS_PER_CALL * STEPS_PER_CALL)
    load_before = _load()
    tic = time.perf_counter()
    _, history = fit(model, data.task, recipe, eval_every=eval_every, progress=False)
    seconds = time.perf_counter() - tic
    per_token = scaling.training_flops_per_token(config)
    return {
        **run,
        "config": json.loads(config.to_json()),
        "recipe": json.loads(recipe.to_json()),
        "N": counts,
        "matrix_parameters": scaling.matrix_parameters(config),
        "flops_per_token": per_token,
        "steps": steps,
        "D": tokens,
        "C": per_token * tokens,
        "passes": passes,
        "train_curve": {"step": history.step, "loss": history.train_loss},
        "held_out": [
            {"step": e["step"], "nats_per_character": e["nats_per_symbol"]}
            for e in history.evaluations
        ],
        "loss": history.evaluations[-1]["nats_per_symbol"],
        "seconds": seconds,  # training and compiling, on a shared machine: not compared
        "load_average": [load_before, _load()],
    }


def measure_rate(data: Task) -> dict:
    """Training FLOPs per second of the ladder's middle model, after its compilation."""
    config = scaling.scaling_config(*TIMING_SIZE, len(data.vocabulary))
    model = scaling.build_model(config, seed=0)
    recipe = recipe_for(TIMING_STEPS + STEPS_PER_CALL)
    load_before = _load()
    _, history = fit(model, data.task, recipe, progress=False)
    # history.seconds[0] includes the compilation: the rate is over the spans after it
    seconds = history.seconds[-1] - history.seconds[0]
    steps = history.step[-1] - history.step[0]
    flops = steps * scaling.BATCH_SIZE * scaling.WINDOW * scaling.training_flops_per_token(config)
    return {
        "model": list(TIMING_SIZE),
        "steps": steps,
        "seconds": seconds,
        "flops_per_second": flops / seconds,
        "load_average": [load_before, _load()],
        "date": _now(),
    }


def predict(results: dict, vocab_size: int) -> dict:
    """The law's answer for the compute of ``FIVE_MINUTES`` of this machine, from the runs alone.

    Approach 2 (parabolas per budget, a power law of the optima, N counted with every
    parameter) gives the optimal size and its bootstrap interval; the sweep-shaped model nearest
    that size is the one to train. Approach 3 (the surface fitted to every run) gives the loss
    that model should reach, with an interval from refits on resampled runs.
    """
    runs = results["runs"]
    budget_of = np.array([r["budget"] for r in runs])
    n = np.array([r["N"]["all"] for r in runs], float)
    d = np.array([r["D"] for r in runs], float)
    loss = np.array([r["loss"] for r in runs])
    rate = results["rate"][-1]
    target = FIVE_MINUTES * rate["flops_per_second"]
    budgets = np.unique(budget_of)
    optima = [scaling.isoflop_optimum(n[budget_of == c], loss[budget_of == c])[0] for c in budgets]
    exponent, coefficient = scaling.fit_power_law(budgets, optima)
    n_star = coefficient * target**exponent
    _, n_samples, _ = scaling.resampled_optima(
        budget_of, n, loss, samples=BOOTSTRAP_SAMPLES, seed=0
    )
    n_star_samples = []
    for row in n_samples:
        u, c = scaling.fit_power_law(budgets, row)
        n_star_samples.append(c * target**u)
    config = scaling.config_near(n_star, vocab_size)
    tokens_per_step = scaling.BATCH_SIZE * scaling.WINDOW
    steps = scaling.steps_for_budget(config, target, tokens_per_step, multiple=STEPS_PER_CALL)
    tokens = steps * tokens_per_step
    size = scaling.total_parameters(config)
    surface = scaling.fit_loss_surface(n, d, loss)
    rng = np.random.default_rng(1)
    loss_samples = []
    for _ in range(SURFACE_SAMPLES):
        pick = rng.choice(len(runs), size=len(runs), replace=True)
        refit = scaling.fit_loss_surface(n[pick], d[pick], loss[pick], start=surface)
        loss_samples.append(float(refit(size, tokens)))
    return {
        "date": _now(),
        "budget": target,
        "seconds": FIVE_MINUTES,
        "rate": rate,
        "approach_2": {
            "budgets": budgets.tolist(),
            "optima": optima,
            "exponent": exponent,
            "coefficient": coefficient,
            "n_opt": n_star,
            "n_opt_interval": np.percentile(n_star_samples, [2.5, 97.5]).tolist(),
        },
        "approach_3": {
            "surface": dataclasses.asdict(surface),
            "loss": float(surface(size, tokens)),
            "loss_interval": np.percentile(loss_samples, [2.5, 97.5]).tolist(),
        },
        "model": [config.block.dim, config.num_blocks],
        "N": size,
        "steps": steps,
        "D": tokens,
        "C": steps * tokens_per_step * scaling.training_flops_per_token(config),
        "tolerance": TOLERANCE,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--budgets", nargs="*", type=float, default=list(BUDGETS))
    parser.add_argument("--seeds", nargs="*", type=int, default=[0])
    parser.add_argument("--verify", action="store_true", help="train the committed prediction")
    parser.add_argument(
        "--compare",
        action="store_true",
        help="train chapter 9's model at the prediction's compute, for the seeds given",
    )
    parser.add_argument(
        "--compare-modern",
        action="store_true",
        help="train chapter 14's model (chapter 9's sizes, every change, Muon) at the same compute",
    )
    parser.add_argument(
        "--size-check",
        action="store_true",
        help="train SIZE_CHECK's sizes at the prediction's compute: its IsoFLOP curve",
    )
    parser.add_argument(
        "--predict", action="store_true", help="fit the runs and write the prediction's file"
    )
    parser.add_argument("--time", action="store_true", help="measure the machine's rate only")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    results = _read(args.out)
    data = Task()
    if args.predict:
        if PREDICTION.exists():
            raise SystemExit(f"{PREDICTION} exists: a prediction is made once, before its run")
        prediction = predict(results, len(data.vocabulary))
        write_json(PREDICTION, prediction)
        print(json.dumps(prediction, indent=1))
        return
    at_prediction = args.verify or args.compare or args.compare_modern or args.size_check
    section = (
        "verification"
        if args.verify
        else "comparison"
        if args.compare
        else "comparison_modern"
        if args.compare_modern
        else "size_check"
        if args.size_check
        else "runs"
    )
    if at_prediction:
        prediction = json.loads(PREDICTION.read_text())
        sizes = [prediction["model"]]
        if args.compare or args.compare_modern:  # chapter 9's sizes, the sweep's window, batch
            sizes = [[SHAKESPEARE_CONFIG.block.dim, SHAKESPEARE_CONFIG.num_blocks]]
        variant = {"variant": "combined"} if args.compare_modern else {}
        if args.size_check:
            sizes = SIZE_CHECK
        plan = [
            dict(budget=prediction["budget"], dim=dim, blocks=blocks, seed=s, **variant)
            for dim, blocks in sizes
            for s in args.seeds
        ]
    else:
        plan = planned_runs(args.budgets, args.seeds)
    done = {key_of(r) for r in results[section]}
    todo = [run for run in plan if key_of(run) not in done]
    print(f"{len(plan) - len(todo)} of {len(plan)} runs already in {args.out}", flush=True)
    results.setdefault("machine", machine())
    results["invocations"].append({"date": _now(), "load_average_start": _load(), "todo": todo})
    if args.time or (not at_prediction and todo):
        rate = measure_rate(data)
        results["rate"].append(rate)
        write_json(args.out, results)
        print(
            f"the machine trains at {rate['flops_per_second'] / 1e9:.1f} GFLOP/s "
            f"(load average {rate['load_average'][1]})",
            flush=True,
        )
    if args.time:
        return
    rate = results["rate"][-1]["flops_per_second"] if results["rate"] else 3e10
    flops_left = 0.0
    for run in todo:
        config, steps, tokens_per_step = run_plan(run, data)
        flops_left += steps * tokens_per_step * scaling.training_flops_per_token(config)
    print(
        f"{flops_left:.3g} FLOPs to train: about {flops_left / rate / 60:.0f} minutes", flush=True
    )
    bar = tqdm(todo, unit="run", desc="scaling sweep")
    for run in bar:
        row = train_one(run, data)
        results[section] = [r for r in results[section] if key_of(r) != key_of(row)] + [row]
        results[section].sort(key=key_of)
        write_json(args.out, results)
        tqdm.write(
            f"C {row['C']:.2e}  D={row['dim']:3d} M={row['blocks']}  N {row['N']['all']:>7,}  "
            f"{row['steps']:5d} steps  {row['passes']:.2f} passes  "
            f"{row['loss']:.4f} nats/char  {row['seconds']:.0f} s"
        )
    bar.close()
    print(f"wrote {args.out}")


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _read(path: Path) -> dict:
    if path.exists():
        results = json.loads(path.read_text())
        results.setdefault("verification", [])
        results.setdefault("comparison", [])
        results.setdefault("comparison_modern", [])
        results.setdefault("size_check", [])
        return results
    return {
        "window": scaling.WINDOW,
        "batch_size": scaling.BATCH_SIZE,
        "max_passes": MAX_PASSES,
        "rate": [],
        "invocations": [],
        "runs": [],
        "verification": [],
        "comparison": [],
        "comparison_modern": [],
        "size_check": [],
    }


if __name__ == "__main__":
    main()
