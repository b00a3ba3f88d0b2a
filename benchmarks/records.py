"""Two records on two CPU cores that anyone can rerun: a language model of Shakespeare and the
ViT on MNIST, each trained for a fixed number of wall-clock seconds on three seeds.

- ``language_model``: held-out nats per character on chapter 9's held-out plays after 300 s. The
  model reads byte-pair tokens (chapter 13), so the loss of each predicted token is summed and
  divided by the characters the predicted tokens spell (chapter 13's bits per character, in
  nats); the clock counts learning the tokeniser's merges and encoding the text as well as
  training. The model is chapter 14's, the optimiser Muon for its matrices.
- ``vit``: MNIST test accuracy after 60 s, chapter 8's ViT and task (digits shifted at random by
  up to one pixel), the optimiser Muon for its matrices, in batches of 256.

The clock counts everything after the data is read from disk, compilation included; held-out
evaluations run with it stopped (8 over the run and one at the end). The cosine schedule is fitted
to the time as the run goes (``fixed_time.py``). Writes
``benchmarks/results/record_NAME_avx512.json`` (or ``_avx2.json`` on a processor without AVX-512:
a record is a figure and a processor): the machine, the load average before and after each run,
the model's configuration, and per seed the recipe of the last plan, the seconds, the final
figure and the held-out curve. ``benchmarks/README.md`` tabulates the committed files
(``python benchmarks/tables.py`` writes the table).

    python benchmarks/records.py language_model [--seeds 0 1 2]
    MNIST_DIR=... python benchmarks/records.py vit [--seeds 0 1 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np
from fixed_time import load_average, train_for_seconds  # beside this script
from report import machine, write_json

from transformer_intro import LanguageModel, VisionTransformer, count_parameters, get_config
from transformer_intro.bpe import BytePairEncoding
from transformer_intro.datasets import load_mnist
from transformer_intro.datasets.shakespeare import load_shakespeare
from transformer_intro.models.language_model import SHAKESPEARE_CONFIG
from transformer_intro.tasks import (
    SHAKESPEARE_RECIPE,
    VIT_RECIPE,
    ImageClassification,
    NextSymbolPrediction,
)

RESULTS = Path(__file__).resolve().parent / "results"
INSTRUCTION_SETS = {"avx512": "AVX-512", "avx2": "AVX2 only"}  # the table's order


@dataclasses.dataclass(frozen=True)
class Record:
    """What a record measures and how: its task, figure, seconds, model and training."""

    label: str  # its row in the records table
    task: str
    figure: str  # the key of the held-out figure
    higher_is_better: bool
    seconds: float
    config: object  # the model's configuration
    train: Callable[[int, float], dict]  # (seed, seconds) -> one run's row


# The language model: chapter 14's changes (RMSNorm, SwiGLU, two key-value heads, QK-norm, rotary
# base 100,000 in the half layout) on chapter 9's sizes, reading 1,024 byte-pair tokens.
LM_VOCABULARY = 1024
LM_CONFIG = SHAKESPEARE_CONFIG.replace(
    block=SHAKESPEARE_CONFIG.block.replace(
        mlp_hidden_dim=344,
        num_kv_heads=2,
        qk_norm=True,
        rotary_base=100_000.0,
        rotary_layout="half",
        norm="rms",
        mlp="gated",
        activation="silu",
        mlp_bias=False,
    ),
    vocab_size=LM_VOCABULARY,
)
LM_RECIPE = SHAKESPEARE_RECIPE.replace(matrix_optimiser="muon", muon_learning_rate=0.02)

VIT_CONFIG = get_config("default")
# Chapter 8's recipe with larger batches (more digits per second on two cores) and Muon; shifts
# of one pixel, since a minute is too few epochs to profit from chapter 8's two.
VIT_TRAINING = VIT_RECIPE.replace(
    batch_size=256,
    learning_rate=3e-3,
    warmup_steps=100,
    matrix_optimiser="muon",
    muon_learning_rate=0.02,
)
VIT_MAX_SHIFT = 1


def train_language_model(seed: int, seconds: float) -> dict:
    """One run of the language-model record: merges, encoding and training within ``seconds``."""
    train_text, validation_text = load_shakespeare("train"), load_shakespeare("validation")
    tic = time.perf_counter()
    tokeniser = BytePairEncoding.train(train_text, LM_VOCABULARY)
    train_ids = np.asarray(tokeniser.encode(train_text), np.int32)
    validation_ids = np.asarray(tokeniser.encode(validation_text), np.int32)
    task = NextSymbolPrediction(train_ids, window=LM_CONFIG.window, validation_ids=validation_ids)
    tokeniser_seconds = time.perf_counter() - tic
    characters = [len(tokeniser.token_text(i)) for i in range(len(tokeniser))]
    tokens_per_character = task.symbols_per_character(characters)

    def evaluate(model) -> dict:
        nats_per_token = task.evaluate(model)["nats_per_symbol"]
        return {"nats_per_char": float(nats_per_token * tokens_per_character)}

    recipe = LM_RECIPE.replace(seed=seed)
    model = LanguageModel(LM_CONFIG, key=jax.random.PRNGKey(seed))
    _, run = train_for_seconds(model, recipe, task, seconds - tokeniser_seconds, evaluate)
    return {
        "seed": seed,
        "parameters": count_parameters(model),
        "tokeniser_seconds": tokeniser_seconds,
        "characters_per_token": len(train_text) / len(train_ids),
        "held_out_tokens_per_character": tokens_per_character,
        **_finish(run, tokeniser_seconds),
    }


def train_vit(seed: int, seconds: float) -> dict:
    """One run of the ViT record: chapter 8's task and model trained for ``seconds``."""
    task = ImageClassification(load_mnist("train"), load_mnist("test"), max_shift=VIT_MAX_SHIFT)
    recipe = VIT_TRAINING.replace(seed=seed)
    model = VisionTransformer(VIT_CONFIG, key=jax.random.PRNGKey(seed))
    _, run = train_for_seconds(
        model, recipe, task, seconds, lambda m: {"accuracy": task.evaluate(m)["accuracy"]}
    )
    row = {"seed": seed, "parameters": count_parameters(model), "max_shift": VIT_MAX_SHIFT}
    return {**row, **_finish(run, 0.0)}


def _finish(run: dict, seconds_before: float) -> dict:
    """A run's row, with its recipe as JSON and its clock from the start of the record's work."""
    return {
        **run,
        "recipe": json.loads(run["recipe"].to_json()),
        "total_seconds": seconds_before + run["seconds"],
    }


RECORDS = {
    "language_model": Record(
        label="language model, Shakespeare: held-out nats per character",
        task="Shakespeare, chapter 9's held-out plays, nats per character",
        figure="nats_per_char",
        higher_is_better=False,
        seconds=300.0,
        config=LM_CONFIG,
        train=train_language_model,
    ),
    "vit": Record(
        label="ViT, MNIST: test accuracy",
        task="MNIST, the 10,000 test digits, accuracy",
        figure="accuracy",
        higher_is_better=True,
        seconds=60.0,
        config=VIT_CONFIG,
        train=train_vit,
    ),
}


def instruction_set(machine_row: dict) -> str:
    """The key of ``INSTRUCTION_SETS`` for a result file's machine (``report.machine()``)."""
    return "avx512" if machine_row["avx512"] else "avx2"


def result_path(name: str, instruction_set: str, results: Path = RESULTS) -> Path:
    """The result file of record ``name`` measured on a processor with ``instruction_set``."""
    return results / f"record_{name}_{instruction_set}.json"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("record", choices=list(RECORDS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--out", type=Path, help="default: benchmarks/results/record_NAME_avx512.json (or _avx2)"
    )
    parser.add_argument("--seconds", type=float, help="another time, for a quick trial")
    args = parser.parse_args()
    record = RECORDS[args.record]
    result = {
        "record": args.record,
        "task": record.task,
        "figure": record.figure,
        "higher_is_better": record.higher_is_better,
        "seconds": args.seconds or record.seconds,
        "command": "python benchmarks/records.py " + " ".join(sys.argv[1:]),
        "machine": machine(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "load_average_start": load_average(),
        "config": json.loads(record.config.to_json()),
        "runs": [],
    }
    print(json.dumps(result["machine"]), flush=True)
    out = args.out or result_path(args.record, instruction_set(result["machine"]))
    for seed in args.seeds:
        row = record.train(seed, result["seconds"])
        final = float(row["held_out"][-1][record.figure])
        result["runs"].append({**row, "final": final})
        print(
            f"seed {seed}: {final:.4f} {record.figure} after {row['steps']} steps, "
            f"{row['total_seconds']:.1f} s (load {row['load_average_before']} -> "
            f"{row['load_average_after']})",
            flush=True,
        )
        finals = [run["final"] for run in result["runs"]]
        result["summary"] = {
            "mean": float(np.mean(finals)),
            "worst": max(finals) if not record.higher_is_better else min(finals),
        }
        result["load_average_end"] = load_average()
        write_json(out, result)  # after every seed: an interrupted run keeps the seeds it ran
    print(json.dumps(result["summary"]))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
