"""What each change since 2017 buys the character language model, on one time budget.

Chapter 9's task (Shakespeare, held-out plays, nats per character on the fixed evaluation windows
of ``NextSymbolPrediction.evaluate``) and model, trained by ``fit`` once per variant: the chapter's
model and recipe, each modern change alone (RMSNorm, SwiGLU, grouped-query attention, QK-norm,
rotary base 100,000 with the half layout, Muon), all of them together, and the combination with
a few more changes. Every run fills the same wall-clock budget of training, compilation included
(evaluation is off the clock, as in ``fit``).

How a run fills the budget: the cosine schedule must know its number of steps T in advance, so
each variant is first *calibrated*: a short run of 4 compiled calls measures its compilation time
and seconds per step; T is then the number of steps that fits the rest of the budget (times 0.97,
a margin, rounded down to whole compiled calls), and a fresh run with that schedule is trained
and timed, compilation included. Should it still overrun, a callback stops it at the budget (the
results say so). The calibration's own time is not part of the budget.

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
import platform
import time
from pathlib import Path

import jax

from transformer_intro import LanguageModel, Vocabulary, count_parameters
from transformer_intro.datasets.shakespeare import load_shakespeare
from transformer_intro.models.language_model import SHAKESPEARE_CONFIG, LMConfig
from transformer_intro.tasks import SHAKESPEARE_RECIPE, NextSymbolPrediction, bits
from transformer_intro.training import Recipe, fit

RESULTS = Path(__file__).resolve().parent / "results" / "lm_ablation.json"
CALIBRATION_CALLS = 4
MARGIN = 0.97
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
    # Measured hints: Muon with a ReLU-squared MLP and QK-norm did better than either alone,
    # and 6 blocks a little better again.
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


def machine() -> dict:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
    }


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def calibrate(config: LMConfig, task, recipe: Recipe) -> tuple[float, float]:
    """(compilation seconds, seconds per step) of this variant, from a short run."""
    calls = recipe.replace(steps=CALIBRATION_CALLS * recipe.steps_per_call)
    model = LanguageModel(config, key=jax.random.PRNGKey(recipe.seed))
    _, history = fit(model, task, calls, progress=False)
    per_step = (history.seconds[-1] - history.seconds[0]) / (history.step[-1] - history.step[0])
    compile_seconds = max(history.seconds[0] - history.step[0] * per_step, 0.0)
    return compile_seconds, per_step


def run(name: str, config: LMConfig, recipe: Recipe, task, budget: float) -> dict:
    compile_seconds, per_step = calibrate(config, task, recipe)
    calls = int(MARGIN * (budget - compile_seconds) / per_step) // recipe.steps_per_call
    steps = max(calls, 1) * recipe.steps_per_call
    recipe = recipe.replace(steps=steps)
    eval_every = max(round(steps / EVALUATIONS / recipe.steps_per_call), 1) * recipe.steps_per_call
    model = LanguageModel(config, key=jax.random.PRNGKey(recipe.seed))
    load_before = load_average()
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")

    def out_of_time(step, model, history):
        return history.seconds[-1] >= budget

    tic = time.perf_counter()
    model, history = fit(
        model, task, recipe, eval_every=eval_every, callbacks=[out_of_time], progress=False
    )
    wall = time.perf_counter() - tic
    load_after = load_average()
    if not history.evaluations or history.evaluations[-1]["step"] != history.step[-1]:
        history.evaluations.append(
            {"step": history.step[-1], "seconds": history.seconds[-1], **task.evaluate(model)}
        )
    final = history.evaluations[-1]["nats_per_symbol"]
    return {
        "name": name,
        "label": VARIANTS[name][0],
        "config": json.loads(config.to_json()),
        "recipe": json.loads(recipe.to_json()),
        "parameters": count_parameters(model),
        "calibration": {"compile_seconds": compile_seconds, "seconds_per_step": per_step},
        "steps": history.step[-1],
        "seconds": history.seconds[-1],
        "wall_seconds_with_evaluations": wall,
        "stopped_by_clock": history.step[-1] < recipe.steps,
        "nats_per_char": final,
        "bits_per_char": bits(final),
        "held_out": [
            {"step": e["step"], "seconds": e["seconds"], "nats_per_char": e["nats_per_symbol"]}
            for e in history.evaluations
        ],
        "train": {
            "step": history.step,
            "seconds": history.seconds,
            "loss": history.train_loss,
        },
        "started": started,
        "load_average_before": load_before,
        "load_average_after": load_after,
    }


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
