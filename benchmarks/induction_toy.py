"""Chapter 18's toy induction-head run, seeds 0, 1 and 2: when does the induction head form?

Each seed trains ``INDUCTION_TOY_CONFIG`` (two blocks of two heads) with
``INDUCTION_TOY_RECIPE`` on ``RepeatedSequences`` (random sequences of L = 24 symbols of 32,
each repeated), evaluating every 5 steps the loss on each half of 256 fixed sequences and every
head's prefix-matching score. The seed picks the starting weights and the batches, so seed 0 is
the chapter's run; its checkpoint, with recipe and history, is written to
``book/checkpoints/induction_toy.eqx`` (which the chapter replays with ``fit_or_replay``).

Writes ``benchmarks/results/induction_toy.json``: per seed the evaluations, the first step at
which the second half's loss is below half of ln 32, and the largest prefix-matching score of a
second-block head at that step; with the machine. No times: on a shared machine they describe
the other users.

    nice -n 5 python benchmarks/induction_toy.py
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import jax
from report import machine, write_json  # beside this script
from tqdm import tqdm

from transformer_intro.interpretability import (
    INDUCTION_TOY_CONFIG,
    INDUCTION_TOY_LENGTH,
    INDUCTION_TOY_RECIPE,
    RepeatedSequences,
)
from transformer_intro.models import LanguageModel
from transformer_intro.training import fit, save_checkpoint

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=ROOT / "benchmarks/results/induction_toy.json")
    parser.add_argument("--checkpoint", default=ROOT / "book/checkpoints/induction_toy.eqx")
    args = parser.parse_args()
    config, length = INDUCTION_TOY_CONFIG, INDUCTION_TOY_LENGTH
    task = RepeatedSequences(config.vocab_size, length)
    threshold = math.log(config.vocab_size) / 2
    runs = []
    for seed in tqdm(range(3), desc="seeds"):
        recipe = INDUCTION_TOY_RECIPE.replace(seed=seed)
        model = LanguageModel(config, key=jax.random.PRNGKey(seed))
        model, history = fit(model, task, recipe, eval_every=5, progress=False)
        rows = history.evaluations
        formed = next((r for r in rows if r["second_half"] < threshold), None)
        second_block = [f"prefix_1_{h}" for h in range(config.block.num_heads)]
        run = {
            "seed": seed,
            "formed_at_step": None if formed is None else formed["step"],
            "prefix_score_then": None if formed is None else max(formed[k] for k in second_block),
            "final": {k: v for k, v in rows[-1].items() if k != "seconds"},
            "evaluations": [{k: v for k, v in r.items() if k != "seconds"} for r in rows],
        }
        runs.append(run)
        end = rows[-1]["second_half"]
        print(f"seed {seed}: second half below {threshold:.2f} nats at step "
              f"{run['formed_at_step']}, largest block-2 prefix score then "
              f"{run['prefix_score_then']:.2f}; at the end {end:.3f} nats")  # fmt: skip
        if seed == 0:
            save_checkpoint(args.checkpoint, model, recipe=recipe, history=history,
                            step=recipe.steps)  # fmt: skip
    write_json(args.out, {
        "config": config.to_json(), "recipe": INDUCTION_TOY_RECIPE.to_json(),
        "length": length, "threshold_nats": threshold, "runs": runs, "machine": machine(),
    })  # fmt: skip


if __name__ == "__main__":
    main()
