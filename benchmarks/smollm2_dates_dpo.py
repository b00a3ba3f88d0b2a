"""Chapter 17's DPO applied to SmolLM2 with chapter 16's adapters, on the dates' unseen formats.

Chapter 16 trained rank-8 adapters on SmolLM2-135M-Instruct with the dates' training formats and
their answers (``book/checkpoints/smollm2_dates_lora.eqx``); they write the ISO form of 38% of the
held-out dates in formats they never saw. This asks what chapter 17 asks of its small model:
what do the model's own samples, judged by the verifier, teach it about those formats?

The prompts are dates written in the held-out formats (``unseen_format_prompts``: never a test
date). For each, ``--group-size`` answers are sampled from the adapted model at temperature 1
(``verifier_tasks.sample_continuations``: generation's prefill and decoding loop, batched); where
one is right and one wrong, the verifier makes a pair of the right answer and the wrong sample
(``continuation_preference_pairs``). DPO (``PreferenceContinuations``, β = ``--beta``) then
trains the same adapters further through the book's one loop, ``training.fit``, with the adapted
model as its reference. No answer is shown except through the verifier's choice between the
model's own samples.

Measured for each seed (the sampling and the batches differ): exact match on chapter 10's three
held-out sets (200 pairs each, as chapter 16 measures them, 95% Wilson intervals), before (the
supervised adapters) and after DPO; the pairs' DPO figures before and after (the chosen and the
rejected answers' log-probabilities, their margin); and chapter 15's three questions before and
after, greedy (what the training changed elsewhere).

    python benchmarks/smollm2_dates_dpo.py --seeds 0 1 2 \\
        --out benchmarks/results/smollm2_dates_dpo.json

It prints every figure and writes them, with the machine and the load, to the JSON file (in a
temporary file, moved into place when complete), after each seed; run again with the same
settings, it keeps the seeds the file holds and trains the others. ``--omit-times`` leaves the
seconds out (a shared machine times nothing).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import sys
import time
from pathlib import Path

import jax
from report import machine, write_json  # beside this script
from smollm2_dates_lora import (  # chapter 16's script: the same prompts and measurements
    QUESTIONS,
    adapter_recipe,
    encode_pairs,
    evaluate_in_chunks,
    print_figures,
    window_for,
    with_interval,
)

from transformer_intro.datasets import dates
from transformer_intro.pretrained import generate_text, load_smollm2
from transformer_intro.training import fit, load_adapter
from transformer_intro.verifier_tasks import (
    PreferenceContinuations,
    continuation_preference_pairs,
    unseen_format_prompts,
)

REPO = Path(__file__).resolve().parents[1]
ADAPTER = REPO / "book" / "checkpoints" / "smollm2_dates_lora.eqx"


def checked_prompts(count: int, tests: dict) -> list[tuple[str, str]]:
    """``count`` unseen-format prompts, none of whose dates is in a held-out set."""
    prompts = unseen_format_prompts(count)
    held_out = {iso for pairs in tests.values() for _, iso in pairs}
    shared = {iso for _, iso in prompts} & held_out
    if shared:
        raise SystemExit(f"{len(shared)} prompt dates are test dates, e.g. {sorted(shared)[0]}")
    return prompts


def _settings(args, adapter_sha: str) -> dict:
    return {
        "adapter_sha256": adapter_sha, "prompts": args.prompts, "group_size": args.group_size,
        "beta": args.beta, "test_pairs_per_set": args.test_size, "steps": args.steps,
        "batch_size": args.batch_size, "learning_rate": args.learning_rate,
    }  # fmt: skip


def _earlier_seeds(path: Path | None, args) -> dict:
    """The seeds a run with the same settings already wrote to ``path`` (a resumed run)."""
    if path is None or not path.exists():
        return {}
    written = json.loads(path.read_text())
    seeds = written.get("seeds", {})
    if not seeds:
        return {}
    recipe = next(iter(seeds.values()))["recipe"]
    theirs = {
        "adapter_sha256": written["adapter"]["sha256"], "prompts": written["prompts"],
        "group_size": written["group_size"], "beta": written["beta"],
        "test_pairs_per_set": written["test_pairs_per_set"], "steps": recipe["steps"],
        "batch_size": recipe["batch_size"], "learning_rate": recipe["learning_rate"],
    }  # fmt: skip
    ours = _settings(args, hashlib.sha256(args.adapter.read_bytes()).hexdigest())
    if theirs != ours:
        raise SystemExit(
            f"{path} holds runs with other settings ({theirs}); give another --out or remove it"
        )
    return seeds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--adapter", type=Path, default=ADAPTER)
    parser.add_argument("--prompts", type=int, default=256, help="unseen-format prompts sampled")
    parser.add_argument("--group-size", type=int, default=4, help="answers sampled per prompt")
    parser.add_argument("--beta", type=float, default=0.1)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=8, help="pairs a step")
    parser.add_argument("--learning-rate", type=float, default=5e-4)
    parser.add_argument("--test-size", type=int, default=200, help="pairs per held-out set")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--omit-times", action="store_true")
    parser.add_argument("--out", type=Path, default=None, help="JSON file for the figures")
    args = parser.parse_args()
    command = "python benchmarks/smollm2_dates_dpo.py " + shlex.join(sys.argv[1:])
    load_before = os.getloadavg()

    model, tokeniser = load_smollm2()
    supervised, info = load_adapter(args.adapter, model)
    reference = supervised.merged()
    vocab = model.config.vocab_size
    tests = dates.load_test_sets(args.test_size, seed=0)  # chapter 16's held-out sets
    encoded_tests = {name: encode_pairs(tokeniser, pairs) for name, pairs in tests.items()}
    prompts = checked_prompts(args.prompts, tests)
    encoded_prompts = encode_pairs(tokeniser, prompts)
    print(f"read {args.adapter.name}, trained by: {info.extra['command']}")
    print(f"{len(prompts)} unseen-format prompts, e.g. {prompts[0][0]!r} -> {prompts[0][1]!r}")

    def measure(m, window: int) -> dict:
        return {
            name: with_interval(evaluate_in_chunks(m, pairs, window, vocab), len(pairs))
            for name, pairs in encoded_tests.items()
        }

    def ask(m) -> list[str]:
        return [generate_text(m, tokeniser, q, 40) for q in QUESTIONS]

    test_window = window_for(*encoded_tests.values())
    before = measure(reference, test_window)
    print_figures("supervised adapters (before)", before)
    answers_before = ask(reference)
    earlier = _earlier_seeds(args.out, args)
    result = {
        "command": command,
        "machine": machine(),
        "load_average_before": load_before,
        "adapter": {
            "file": str(args.adapter.relative_to(REPO)),
            "sha256": hashlib.sha256(args.adapter.read_bytes()).hexdigest(),
            "trained_by": info.extra["command"],
        },
        "prompts": len(prompts),
        "group_size": args.group_size,
        "beta": args.beta,
        "test_pairs_per_set": args.test_size,
        "before": before,
        "questions_before": answers_before,
        "seeds": earlier,
    }
    for seed in args.seeds:
        if str(seed) in earlier:
            print(f"seed {seed}: in {args.out} already, kept")
            continue
        started = time.perf_counter()
        pairs, right = continuation_preference_pairs(
            reference,
            [p for p, _ in encoded_prompts],
            [a for _, a in encoded_prompts],
            key=jax.random.PRNGKey(seed),
            end_id=tokeniser.eos_id,
            group_size=args.group_size,
        )
        seconds_sampling = time.perf_counter() - started
        mixed = int((right.any(1) & ~right.all(1)).sum())
        print(
            f"seed {seed}: {right.mean():.1%} of {right.size} samples right; prompts all right "
            f"{int(right.all(1).sum())}, all wrong {int((~right.any(1)).sum())}, mixed {mixed} "
            f"-> {len(pairs)} pairs ({seconds_sampling:.0f} s)",
            flush=True,
        )
        window = window_for([(p, c) for p, c, _ in pairs], [(p, r) for p, _, r in pairs])
        task = PreferenceContinuations(pairs, reference, window=window, vocab_size=vocab,
                                       beta=args.beta)  # fmt: skip
        pairs_before = task.evaluate(reference)
        recipe = adapter_recipe(args, seed)
        started = time.perf_counter()
        trained, history = fit(supervised, task, recipe)
        seconds_training = time.perf_counter() - started
        pairs_after = task.evaluate(trained)
        merged = trained.merged()
        after = measure(merged, test_window)
        print(
            f"seed {seed}: {args.steps} steps in {seconds_training:.0f} s; "
            f"DPO loss {pairs_before['loss']:.3f} -> {pairs_after['loss']:.3f}; "
            f"chosen log p {pairs_before['chosen log p']:.2f} -> "
            f"{pairs_after['chosen log p']:.2f}, rejected {pairs_before['rejected log p']:.2f} "
            f"-> {pairs_after['rejected log p']:.2f}"
        )
        print_figures(f"seed {seed}, after DPO", after)
        answers_after = ask(merged)
        for question, old, new in zip(QUESTIONS, answers_before, answers_after, strict=True):
            print(f"Q: {question}\n  before: {old!r}\n  after:  {new!r}")
        result["seeds"][str(seed)] = {
            "recipe": json.loads(recipe.to_json()),
            "samples": int(right.size),
            "samples_right": int(right.sum()),
            "prompts_all_right": int(right.all(1).sum()),
            "prompts_all_wrong": int((~right.any(1)).sum()),
            "pairs": len(pairs),
            "pairs_before": pairs_before,
            "pairs_after": pairs_after,
            "train_loss": history.train_loss,
            "train_metrics": history.train_metrics,
            "after": after,
            "questions_after": answers_after,
            **(
                {}
                if args.omit_times
                else {"seconds_sampling": seconds_sampling, "seconds_training": seconds_training}
            ),
        }
        result["load_average_after"] = os.getloadavg()
        if args.out is not None:
            write_json(args.out, result)
            print(f"wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
