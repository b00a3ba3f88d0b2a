"""How far apart three seeds of the same run end: the spread behind every difference between runs
that chapters 13 and 14 interpret.

Each run is trained for a fixed number of steps (not a fixed time), so its losses are the same on a
quiet machine and on a shared one. Seeds 0, 1 and 2 of every run: the seed picks the model's
starting weights (``PRNGKey(seed)``, as the chapters build their models) and the batches
(``Recipe.seed``: step t's batch is drawn with ``fold_in(PRNGKey(seed), t)``), so seed 0 is the
chapters' own run. Three groups of runs:

- ``ablation``: chapter 14's variants of chapter 9's model (``lm_ablation.VARIANTS``), each with
  chapter 9's recipe and its warm-up and cosine decay shortened to ``ABLATION_STEPS`` = 200 steps;
  held-out nats per character at two evaluations. At 200 steps its ``baseline`` and ``muon`` are
  chapter 14's own runs, AdamW and Muon, which ``fit_or_replay`` replays on that page.
- ``ch13``: chapter 13's two runs, chapter 9's model reading characters and reading 512 byte-pair
  tokens, 300 steps each, in bits per character on the same held-out windows as that chapter.

Writes ``benchmarks/results/seed_spread.json``: per run its group, variant, seed, steps, recipe,
the model's configuration and its held-out losses; with the machine and the load average. It
records no times: on a shared machine they would describe the other users, not the runs. The
file is written (atomically) after every run, and a run already in it is not trained again, so
an interrupted invocation continues where it stopped.

    nice -n 5 python benchmarks/seed_spread.py [--only ablation ch13] [--variants muon baseline]
"""

from __future__ import annotations

import argparse
import datetime
import fcntl
import json
import os
import time
from pathlib import Path

import jax
import numpy as np
from lm_ablation import VARIANTS  # beside this script
from overrides import with_changes
from report import machine, write_json
from tqdm import tqdm

from transformer_intro import LanguageModel, Vocabulary
from transformer_intro.datasets.shakespeare import load_shakespeare
from transformer_intro.models.language_model import SHAKESPEARE_CONFIG
from transformer_intro.tasks import SHAKESPEARE_RECIPE, NextSymbolPrediction, bits
from transformer_intro.tokenisers import BytePairEncoding
from transformer_intro.training import fit, load_checkpoint

RESULTS = Path(__file__).resolve().parent / "results" / "seed_spread.json"
SEEDS = (0, 1, 2)
ABLATION_STEPS = 200  # chapter 9's recipe shortened to this many steps, as chapter 14's page
ABLATION_VARIANTS = ("baseline", "qk_norm", "muon", "combined", "combined_plus")
ABLATION_MORE = ("rmsnorm", "swiglu", "gqa", "rotary")  # the other single changes, if asked
BPE_VOCABULARY = 512  # chapter 13: the first 256 merges learned on the training plays
# Seed 0 of these runs is a chapter's saved run: with --seed-0-from-saved its row is read from
# the run's history (the chapter's replay checks that this code on this machine trained it).
SAVED = {
    ("ablation", "baseline"): "shakespeare_adamw_200.eqx",
    ("ablation", "muon"): "shakespeare_muon_200.eqx",
    ("ch13", "characters"): "shakespeare_characters_300.eqx",
    ("ch13", "BPE"): "shakespeare_bpe_300.eqx",
}
CHECKPOINTS = Path(__file__).resolve().parents[1] / "book" / "checkpoints"


def shortened(steps: int):
    """Chapter 9's recipe with its warm-up (a tenth) and cosine decay over ``steps`` steps."""
    return SHAKESPEARE_RECIPE.replace(steps=steps, warmup_steps=steps // 10)


def planned_runs(groups, ablation_steps: int, ablation_variants, seeds=SEEDS) -> list[dict]:
    """Every run of the chosen groups, each as (group, variant, seed, config changes, recipe)."""
    plan = []
    for group in groups:
        if group == "ablation":
            for name in [v for v in ablation_variants if v in VARIANTS]:
                _, config_changes, recipe_changes = VARIANTS[name]
                recipe = shortened(ablation_steps).replace(**recipe_changes)
                plan.append(dict(group=group, variant=name, config=config_changes, recipe=recipe))
        elif group == "ch13":
            for tokens in ("characters", "BPE"):
                if (
                    ablation_variants
                    and tokens not in ablation_variants
                    and any(v in ("characters", "BPE") for v in ablation_variants)
                ):
                    continue  # --variants names chapter 13's runs too
                plan.append(dict(group=group, variant=tokens, config={}, recipe=shortened(300)))
        else:
            raise SystemExit(f"unknown group {group!r}: choose from ablation, ch13")
    # seed by seed, so that an interrupted invocation leaves every variant with as many seeds
    return [
        {**run, "seed": seed, "recipe": run["recipe"].replace(seed=seed)}
        for seed in seeds
        for run in plan
    ]


class Tasks:
    """The character task (chapters 9 and 14) and chapter 13's two, built once when first asked."""

    def __init__(self):
        self.train_text = load_shakespeare("train")
        self.validation_text = load_shakespeare("validation")
        self._tasks = {}

    def get(self, kind: str):
        """``(task, vocabulary size, characters each id spells)`` for ``kind``."""
        if kind not in self._tasks:
            self._tasks[kind] = self._build(kind)
        return self._tasks[kind]

    def _build(self, kind: str):
        if kind == "BPE":
            tokeniser = BytePairEncoding.train(self.train_text, BPE_VOCABULARY)
            encode = lambda text: np.asarray(tokeniser.encode(text), np.int32)  # noqa: E731
            each_id = np.array([len(tokeniser.token_text(i)) for i in range(len(tokeniser))])
        else:
            tokeniser = Vocabulary.from_text(self.train_text)
            encode = tokeniser.encode
            each_id = np.ones(len(tokeniser))
        task = NextSymbolPrediction(
            encode(self.train_text),
            window=SHAKESPEARE_CONFIG.window,
            validation_ids=encode(self.validation_text),
        )
        return task, len(tokeniser), each_id


def train_one(run: dict, tasks: Tasks) -> dict:
    """Train one run and return its row of the result file."""
    kind = "BPE" if run["variant"] == "BPE" else "characters"
    task, vocab_size, each_id = tasks.get(kind)
    config = with_changes(SHAKESPEARE_CONFIG, {"vocab_size": vocab_size, **run["config"]})
    recipe = run["recipe"]
    model = LanguageModel(config, key=jax.random.PRNGKey(recipe.seed))
    _, history = fit(model, task, recipe, eval_every=recipe.steps // 2, progress=False)
    return _row(run, config, recipe, history.evaluations, task, each_id)


def saved_row(run: dict, tasks: Tasks) -> dict | None:
    """Seed 0's row from the chapter's saved run, if the run is one and the recipe is its own."""
    name = SAVED.get((run["group"], run["variant"]))
    if name is None or run["seed"] != 0:
        return None
    saved, info = load_checkpoint(CHECKPOINTS / name)
    kind = "BPE" if run["variant"] == "BPE" else "characters"
    task, vocab_size, each_id = tasks.get(kind)
    config = with_changes(SHAKESPEARE_CONFIG, {"vocab_size": vocab_size, **run["config"]})
    if info.recipe != run["recipe"] or saved.config != config:
        return None  # another run than the one planned: train it
    row = _row(run, config, run["recipe"], info.history.evaluations, task, each_id)
    row["saved_run"] = f"book/checkpoints/{name}"
    return row


def _row(run, config, recipe, evaluations, task, each_id) -> dict:
    row = {
        "group": run["group"],
        "variant": run["variant"],
        "seed": recipe.seed,
        "steps": recipe.steps,
        "recipe": json.loads(recipe.to_json()),
        "config": json.loads(config.to_json()),
        "held_out": [
            {"step": e["step"], "nats_per_symbol": e["nats_per_symbol"]} for e in evaluations
        ],
    }
    row["nats_per_symbol"] = row["held_out"][-1]["nats_per_symbol"]
    if run["group"] == "ch13":  # equation (eq-ch13-bpc): bits per token times tokens per char
        scale = task.symbols_per_character(each_id)
        row["symbols_per_character"] = scale
        row["bits_per_character"] = bits(row["nats_per_symbol"]) * scale
        for e in row["held_out"]:
            e["bits_per_character"] = bits(e["nats_per_symbol"]) * scale
    return row


def key_of(row: dict) -> tuple:
    return row["group"], row["variant"], row["seed"]


def spreads(rows: list[dict]) -> dict:
    """Per group and variant: the seeds' final losses, their mean and their spread (max - min)."""
    table = {}
    for row in rows:
        unit = "bits_per_character" if row["group"] == "ch13" else "nats_per_symbol"
        entry = table.setdefault(row["group"], {}).setdefault(
            row["variant"], {"unit": unit, "seeds": [], "finals": []}
        )
        entry["seeds"].append(row["seed"])
        entry["finals"].append(row[unit])
    for variants in table.values():
        for entry in variants.values():
            entry["mean"] = float(np.mean(entry["finals"]))
            entry["spread"] = float(max(entry["finals"]) - min(entry["finals"]))
    return table


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="*", default=["ch13", "ablation"], help="groups to run")
    parser.add_argument(
        "--variants",
        nargs="*",
        choices=[*VARIANTS, "characters", "BPE"],
        default=list(ABLATION_VARIANTS),
        help="the ablation's variants (and, naming characters or BPE, chapter 13's runs)",
    )
    parser.add_argument("--seeds", nargs="*", type=int, default=list(SEEDS), choices=SEEDS)
    parser.add_argument("--ablation-steps", type=int, default=ABLATION_STEPS)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--seed-0-from-saved",
        action="store_true",
        help="read seed 0 of the chapters' saved runs from book/checkpoints instead of training",
    )
    args = parser.parse_args()
    plan = planned_runs(args.only, args.ablation_steps, args.variants, args.seeds)
    done = {key_of(row): row for row in _read(args.out)["runs"]}
    for run in plan:  # a finished run with another recipe is not the one asked for
        row = done.get((run["group"], run["variant"], run["seed"]))
        if row is not None and row["recipe"] != json.loads(run["recipe"].to_json()):
            raise SystemExit(
                f"{args.out} holds {key_of(row)} with another recipe ({row['steps']} steps): "
                "pass --out for a new file, or delete that run from the file"
            )
    todo = [run for run in plan if (run["group"], run["variant"], run["seed"]) not in done]
    invocation = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_average_start": _load(),
        "runs": [list(key_of(run)) for run in todo],
    }
    print(f"{len(plan) - len(todo)} of {len(plan)} runs already in {args.out}", flush=True)
    tasks = Tasks()
    steps_left = sum(run["recipe"].steps for run in todo)
    seconds_per_step = []  # of this invocation's runs, for the estimate of the time left
    bar = tqdm(todo, unit="run", desc="seeds")
    for run in bar:
        if seconds_per_step:
            minutes = np.mean(seconds_per_step) * steps_left / 60
            tqdm.write(f"about {minutes:.0f} minutes left at this machine's present speed")
        if key_of(run) in {key_of(r) for r in _read(args.out)["runs"]}:
            continue  # another invocation has finished it meanwhile
        load_before = _load()
        tic = time.perf_counter()
        row = saved_row(run, tasks) if args.seed_0_from_saved else None
        row = row or train_one(run, tasks)
        seconds_per_step.append((time.perf_counter() - tic) / run["recipe"].steps)
        steps_left -= run["recipe"].steps
        row["load_average"] = [load_before, _load()]
        _add(args.out, row, invocation)
        unit = "bits_per_character" if row["group"] == "ch13" else "nats_per_symbol"
        tqdm.write(
            f"{row['group']:9s} {row['variant']:14s} seed {row['seed']}: {row['steps']} steps, "
            f"{row[unit]:.4f} {unit.replace('_', ' ')}"
        )
    bar.close()
    for group, variants in spreads(_read(args.out)["runs"]).items():
        for name, entry in variants.items():
            print(
                f"{group:9s} {name:14s} seeds {entry['seeds']}: mean {entry['mean']:.3f}, "
                f"spread {entry['spread']:.3f} {entry['unit'].replace('_', ' ')}"
            )
    print(f"wrote {args.out}")


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _read(path: Path) -> dict:
    if path.exists():
        return json.loads(path.read_text())
    return {"seeds": list(SEEDS), "runs": [], "invocations": [], "spreads": {}}


def _add(path: Path, row: dict, invocation: dict) -> dict:
    """Add ``row`` to the file at ``path``, atomically and under a lock, so that several
    invocations (one per group, say) can share one file; the file is read again each time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        results = _read(path)
        results.setdefault("machine", invocation["machine"])
        results["runs"] = [r for r in results["runs"] if key_of(r) != key_of(row)] + [row]
        results["runs"].sort(key=lambda r: (r["group"], r["variant"], r["seed"]))
        if invocation not in results["invocations"]:
            results["invocations"].append(invocation)
        results["spreads"] = spreads(results["runs"])
        write_json(path, results)
    return results


if __name__ == "__main__":
    main()
