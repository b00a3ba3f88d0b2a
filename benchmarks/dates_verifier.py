"""Chapter 17's runs: chapter 10's dates model trained from a verifier's rewards, from answers, from
preference pairs, and from a partial reward; held-out exact match with 95% intervals.

Every run starts from ``book/checkpoints/dates_model.eqx`` and trains through ``training.fit``:

* ``grpo``: GRPO on prompts in the four formats the model never saw, reward = exact match given
  by the generator (``verifier_tasks.GroupRelativeRewards``, ``DATES_GRPO_RECIPE``);
* ``supervised``: the same prompts with their answers (``tasks.SequenceToSequence``,
  ``DATES_SFT_RECIPE``: 128 answers a step, as many as GRPO samples and trains on);
* ``right year beta=0`` / ``right year beta=0.04``: GRPO with the partial reward "the right
  year" (``verifier_tasks.year_reward``), with β = 0 and β = 0.04
  (``DATES_PARTIAL_REWARD_RECIPE``, logged every 10 steps): reward hacking and the KL penalty;
* ``dpo``: DPO on pairs of a right and a wrong answer the verifier picks from the starting
  model's own samples (``verifier_tasks.PreferencePairs``, ``DATES_DPO_RECIPE``); the pairs are
  built once and saved beside the checkpoints (``dates_dpo_pairs.npz``, which the chapter reads).

Every run is trained with ``--seeds`` seeds (the seed draws the prompts, the samples and the
pairs' order; the pairs themselves are the same for every seed). Seed 0 of each run is the
chapter's: it is written to ``--checkpoints``, or, when that checkpoint exists with the same
recipe, read from it rather than trained again (``--retrain`` trains it anyway). The results
(greedy exact match and the right year alone on the 2,000-pair held-out sets, with Wilson
intervals; the training metrics of every logged span) go to
``benchmarks/results/dates_verifier.json``, merged run by run into what the file holds (a run
and seed trained again replace their row), so that ``--only`` and ``--first-seed`` can split
the work between processes.

    python benchmarks/dates_verifier.py [--seeds 3] [--first-seed 1] [--only "grpo,dpo"] [--retrain]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import sys
from pathlib import Path

import jax
import numpy as np

from transformer_intro.datasets import dates
from transformer_intro.files import write_atomically
from transformer_intro.tasks import SequenceToSequence
from transformer_intro.training import fit, load_checkpoint, save_checkpoint
from transformer_intro.training.evaluation import wilson_interval
from transformer_intro.verifier_tasks import (
    DATES_DPO_RECIPE,
    DATES_GRPO_RECIPE,
    DATES_PARTIAL_REWARD_RECIPE,
    DATES_SFT_RECIPE,
    GROUP_SIZE,
    GroupRelativeRewards,
    PreferencePairs,
    encoded,
    greedy_rewards,
    preference_pairs,
    unseen_format_prompts,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = 20_000
DPO_PROMPTS = 4000


RUNS = ("grpo", "supervised", "right year beta=0", "right year beta=0.04", "dpo")


def held_out(model, tests) -> dict:
    """Greedy exact match (and the right year alone) on each held-out set, with 95% intervals."""
    out = {}
    for name, (sources, targets) in tests.items():
        scores = greedy_rewards(model, sources, targets, dates.START_ID)
        exact, year = scores["exact match"], scores["right year"]
        k, n = int(exact.sum()), len(exact)
        out[name] = {"right": k, "of": n, "rate": k / n, "interval": wilson_interval(k, n),
                     "year right": int(year.sum())}  # fmt: skip
    return out


def dpo_pairs(start, folder: Path):
    """The verifier's pairs from the starting model's samples, built once and saved."""
    path = folder / "dates_dpo_pairs.npz"
    if path.exists():
        with np.load(path) as saved:
            return saved["sources"], saved["chosen"], saved["rejected"]
    pairs = preference_pairs(start, *encoded(unseen_format_prompts(DPO_PROMPTS, seed=23)),
                             key=jax.random.PRNGKey(23), start_id=dates.START_ID,
                             group_size=GROUP_SIZE)  # fmt: skip
    arrays = dict(zip(("sources", "chosen", "rejected"), pairs))
    write_atomically(path, lambda f: np.savez_compressed(f, **arrays))
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=3, help="train seeds first-seed .. seeds-1")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--checkpoints", default=str(ROOT / "book" / "checkpoints"))
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "dates_verifier.json")
    )
    parser.add_argument("--only", default="", help=f"comma-separated runs of {', '.join(RUNS)}")
    parser.add_argument("--retrain", action="store_true",
                        help="train seed 0 even where its checkpoint exists")  # fmt: skip
    args = parser.parse_args()
    only = set(filter(None, (name.strip() for name in args.only.split(","))))
    if only - set(RUNS):
        parser.error(f"unknown runs {sorted(only - set(RUNS))}: the runs are {list(RUNS)}")
    start, _ = load_checkpoint(ROOT / "book" / "checkpoints" / "dates_model.eqx")
    tests = {name: encoded(pairs) for name, pairs in dates.load_test_sets(2000, seed=0).items()}
    prompts = encoded(unseen_format_prompts(PROMPTS))
    inputs = dates.encode_targets(iso for _, iso in unseen_format_prompts(PROMPTS))[0]
    checkpoints = Path(args.checkpoints)
    results = {"machine": machine(), "prompts": PROMPTS, "group_size": GROUP_SIZE,
               "before": held_out(start, tests), "runs": []}  # fmt: skip
    print("before:", {k: round(v["rate"], 3) for k, v in results["before"].items()})

    def grpo(**settings):
        return GroupRelativeRewards(prompts, start, start_id=dates.START_ID, end_id=dates.END_ID,
                                    group_size=GROUP_SIZE, **settings)  # fmt: skip

    def build(name):
        """(task, recipe, checkpoint file, extra) of a run."""
        if name == "grpo":
            extra = {"reward": "exact match", "kl_weight": 0.04}
            return grpo(**extra), DATES_GRPO_RECIPE, "dates_grpo.eqx", extra
        if name == "supervised":
            task = SequenceToSequence((prompts[0], inputs, prompts[1]), start_id=dates.START_ID)
            return task, DATES_SFT_RECIPE, "dates_sft_unseen.eqx", {}
        if name.startswith("right year"):
            kl_weight = float(name.split("=")[1])
            extra = {"reward": "right year", "kl_weight": kl_weight}
            file = f"dates_grpo_year_{'kl' if kl_weight else 'no_kl'}.eqx"
            return grpo(**extra), DATES_PARTIAL_REWARD_RECIPE, file, extra
        pairs = dpo_pairs(start, checkpoints)
        results["dpo_pairs"] = len(pairs[0])
        task = PreferencePairs(pairs, start, start_id=dates.START_ID, end_id=dates.END_ID)
        return task, DATES_DPO_RECIPE, "dates_dpo.eqx", {"pairs": len(pairs[0]), "beta": 0.1}

    for seed in range(args.first_seed, args.seeds):
        for name in RUNS:
            if only and name not in only:
                continue
            task, recipe, file, extra = build(name)
            recipe = recipe.replace(seed=seed)
            path = checkpoints / file if seed == 0 else None
            saved = None
            if path is not None and path.exists() and not args.retrain:
                model, info = load_checkpoint(path)
                if info.recipe == recipe and all(info.extra.get(k) == v for k, v in extra.items()):
                    saved = model, info.history
            if saved is None:
                model, history = fit(start, task, recipe, progress=False)
                if path is not None:
                    save_checkpoint(path, model, recipe=recipe, history=history,
                                    step=recipe.steps, extra=extra)  # fmt: skip
            else:
                model, history = saved
            row = {
                "run": name,
                "seed": seed,
                "from_checkpoint": saved is not None,
                "recipe": json.loads(recipe.to_json()),
                "extra": extra,
                "seconds": history.seconds[-1],
                "steps": history.step,
                "train_loss": history.train_loss,
                "train_metrics": history.train_metrics,
                "held_out": held_out(model, tests),
            }
            results["runs"].append(row)
            rates = {k: round(v["rate"], 3) for k, v in row["held_out"].items()}
            how = "read from its checkpoint" if saved else f"{row['seconds']:.0f} s"
            print(f"{name}, seed {seed}: {how}; {rates}", flush=True)
            merge_into(Path(args.out), results)
    print(f"wrote {args.out}")


def merge_into(out: Path, results: dict) -> None:
    """Write ``results`` into ``out``, keeping the rows of other runs and seeds already there."""
    with open(out.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        merged = json.loads(out.read_text()) if out.exists() else {"runs": []}
        new = {(row["run"], row["seed"]) for row in results["runs"]}
        kept = [row for row in merged["runs"] if (row["run"], row["seed"]) not in new]
        merged.update({k: v for k, v in results.items() if k != "runs"})
        merged["runs"] = kept + results["runs"]
        write_atomically(out, json.dumps(merged, indent=1) + "\n")


if __name__ == "__main__":
    main()
