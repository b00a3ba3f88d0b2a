"""Chapter 17's runs: chapter 10's dates model trained from a verifier's rewards, from answers, from
preference pairs, and from a partial reward; held-out exact match with 95% intervals.

Every run starts from ``book/checkpoints/dates_model.eqx`` and trains through ``training.fit``:

* ``grpo``: GRPO on prompts in the four formats the model never saw, reward = exact match given
  by the generator (``verifier_tasks.GroupRelativeRewards``, ``DATES_GRPO_RECIPE``);
* ``supervised``: the same prompts with their answers (``tasks.SequenceToSequence``,
  ``DATES_SFT_RECIPE``: 128 answers a step, as many as GRPO samples and trains on);
* ``right year, no KL`` / ``right year, KL``: GRPO with the partial reward "the right year",
  with β = 0 and β = 0.04 (reward hacking and the KL penalty);
* ``dpo``: DPO on pairs of a right and a wrong answer the verifier picks from the starting
  model's own samples (``verifier_tasks.PreferencePairs``, ``DATES_DPO_RECIPE``).

GRPO and supervised training run with ``--seeds`` seeds (the seed draws the prompts and the
samples); seed 0 of each, the year-reward runs and DPO write ``--checkpoints`` (the chapter
replays them). The results (exact match on the 2,000-pair held-out sets, with Wilson intervals;
the training metrics of every logged span) go to ``benchmarks/results/dates_verifier.json``,
merged run by run into what the file holds (a run and seed trained again replace their row), so
that ``--only`` can train some runs in one process and the rest in another.

    python benchmarks/dates_verifier.py [--seeds 3] [--only "grpo,dpo"] [--checkpoints DIR]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import sys
from pathlib import Path

import jax

from transformer_intro.datasets import dates
from transformer_intro.tasks import SequenceToSequence
from transformer_intro.training import fit, load_checkpoint, save_checkpoint
from transformer_intro.training.evaluation import wilson_interval
from transformer_intro.verifier_tasks import (
    DATES_DPO_RECIPE,
    DATES_GRPO_RECIPE,
    DATES_SFT_RECIPE,
    GROUP_SIZE,
    GroupRelativeRewards,
    PreferencePairs,
    encoded,
    greedy_exact_matches,
    preference_pairs,
    unseen_format_prompts,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = 20_000
DPO_PROMPTS = 4000


def held_out(model, tests) -> dict:
    """Greedy exact match on each held-out set: right, of, rate and the 95% Wilson interval."""
    out = {}
    for name, (sources, targets) in tests.items():
        right = greedy_exact_matches(model, sources, targets, dates.START_ID)
        k, n = int(right.sum()), len(right)
        out[name] = {"right": k, "of": n, "rate": k / n, "interval": wilson_interval(k, n)}
    return out


def run(name, model, task, recipe, path, extra):
    trained, history = fit(model, task, recipe, progress=False)
    if path is not None:
        save_checkpoint(path, trained, recipe=recipe, history=history, step=recipe.steps,
                        extra=extra)  # fmt: skip
    return trained, {
        "run": name,
        "seed": recipe.seed,
        "recipe": json.loads(recipe.to_json()),
        "extra": extra,
        "seconds": history.seconds[-1],
        "steps": history.step,
        "train_loss": history.train_loss,
        "train_metrics": history.train_metrics,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--checkpoints", default=str(ROOT / "book" / "checkpoints"))
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "dates_verifier.json")
    )
    parser.add_argument("--only", default="", help="comma-separated run names (default: all)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument(
        "--no-checkpoint-seeds",
        default="",
        help="comma-separated seeds whose checkpoints are not written again",
    )
    args = parser.parse_args()
    only = set(filter(None, args.only.split(",")))
    skip_checkpoint_seeds = {int(x) for x in args.no_checkpoint_seeds.split(",") if x}
    start, _ = load_checkpoint(ROOT / "book" / "checkpoints" / "dates_model.eqx")
    tests = {name: encoded(pairs) for name, pairs in dates.load_test_sets(2000, seed=0).items()}
    prompts = encoded(unseen_format_prompts(PROMPTS))
    checkpoints = Path(args.checkpoints)
    results = {"machine": machine(), "prompts": PROMPTS, "group_size": GROUP_SIZE,
               "before": held_out(start, tests), "runs": []}  # fmt: skip
    print("before:", {k: round(v["rate"], 3) for k, v in results["before"].items()})

    def record(name, model, task, recipe, file, extra):
        if only and name not in only:
            return
        if file and recipe.seed in skip_checkpoint_seeds:
            file = None
        path = checkpoints / file if file else None
        trained, row = run(name, model, task, recipe, path, extra)
        row["held_out"] = held_out(trained, tests)
        results["runs"].append(row)
        rates = {k: round(v["rate"], 3) for k, v in row["held_out"].items()}
        print(f"{name}, seed {recipe.seed}: {row['seconds']:.0f} s; {rates}", flush=True)
        merge_into(Path(args.out), results)

    for seed in range(args.first_seed, args.seeds):
        file = "dates_grpo.eqx" if seed == 0 else None
        task = GroupRelativeRewards(prompts, start, start_id=dates.START_ID, end_id=dates.END_ID,
                                    group_size=GROUP_SIZE)  # fmt: skip
        record("grpo", start, task, DATES_GRPO_RECIPE.replace(seed=seed), file,
               {"reward": "exact match", "kl_weight": 0.04})  # fmt: skip
        inputs = dates.encode_targets(iso for _, iso in unseen_format_prompts(PROMPTS))[0]
        sft = SequenceToSequence((prompts[0], inputs, prompts[1]), start_id=dates.START_ID)
        file = "dates_sft_unseen.eqx" if seed == 0 else None
        record("supervised", start, sft, DATES_SFT_RECIPE.replace(seed=seed), file, {})
    for kl_weight, label in ((0.0, "no KL"), (0.04, "KL")):
        task = GroupRelativeRewards(prompts, start, start_id=dates.START_ID, end_id=dates.END_ID,
                                    group_size=GROUP_SIZE, reward="right year",
                                    kl_weight=kl_weight)  # fmt: skip
        file = f"dates_grpo_year_{'kl' if kl_weight else 'no_kl'}.eqx"
        record(f"right year, {label}", start, task, DATES_GRPO_RECIPE, file,
               {"reward": "right year", "kl_weight": kl_weight})  # fmt: skip
    if only and "dpo" not in only:
        return
    pairs = preference_pairs(start, *encoded(unseen_format_prompts(DPO_PROMPTS, seed=23)),
                             key=jax.random.PRNGKey(23), start_id=dates.START_ID,
                             group_size=GROUP_SIZE)  # fmt: skip
    results["dpo_pairs"] = len(pairs[0])
    dpo = PreferencePairs(pairs, start, start_id=dates.START_ID, end_id=dates.END_ID)
    record("dpo", start, dpo, DATES_DPO_RECIPE, "dates_dpo.eqx", {"pairs": len(pairs[0])})
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
        temporary = out.with_suffix(".tmp")
        temporary.write_text(json.dumps(merged, indent=1) + "\n")
        json.loads(temporary.read_text())
        temporary.replace(out)


if __name__ == "__main__":
    main()
