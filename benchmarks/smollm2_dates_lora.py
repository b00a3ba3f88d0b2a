"""Fine-tuning SmolLM2-135M-Instruct on chapter 10's dates with low-rank adapters, on the CPU.

Does a pretrained model bring the generalisation that chapter 10's model, trained from scratch,
lacks? The same task: dates written in the training formats and years
(``datasets.dates.load_splits``), normalised to ISO 8601, measured on chapter 10's three held-out
sets (``datasets.dates.load_test_sets``: seen formats, unseen formats, unseen centuries).

The model reads ``<date>\\nISO: `` and must continue with the ISO date and the end token; the
loss counts the answer's tokens only (``tasks.SupervisedPairs``). Rank-8 adapters on the four
attention projections of every block (``adapters.LoRALanguageModel``) are the only trained
numbers, through the book's ``training.fit``. Exact match is the whole answer right under
teacher forcing, which is the same as greedy decoding getting it right.

The baseline is SmolLM2 itself, few-shot: the prompt first shows ``--shots`` training pairs
(date, ``ISO: ``, ISO date, newline), then the date to rewrite; the answer is the ISO date and
the newline the examples end with, scored the same way (every answer token the likeliest, which
is what greedy decoding would write). Without examples the model never ends its answer right
after the date, so its exact match would be 0% whatever it knows; that zero-shot figure is kept
as ``before``.

It also asks chapter 15's three questions before and after (greedy, chat template): what the
adaptation changed elsewhere. It prints every figure and writes them to a JSON file (in a
temporary file, moved into place when complete). With ``--adapter-out`` it saves the trained
adapter alone (``training.save_adapter``: the factors R and Z and the base model's
fingerprint), with the run's recipe and history (and in ``extra`` the number of training
pairs and the command), so that chapter 16's ``fit_or_replay`` trains its first steps again
and loads it, or trains a reader's variant.

    python benchmarks/smollm2_dates_lora.py --steps 150 --test-size 200 \\
        --out benchmarks/results/smollm2_dates_lora.json \\
        --adapter-out book/checkpoints/smollm2_dates_lora.eqx

``--adapter-in book/checkpoints/smollm2_dates_lora.eqx`` measures the saved adapter instead of
training one (the base model first, then the adapter), which is how the committed figures were
made from the committed adapter, with ``--omit-times`` on a shared machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path

import jax
from report import machine, write_json  # beside this script

from transformer_intro import count_parameters
from transformer_intro.adapters import LoRALanguageModel, lora_parameter_count
from transformer_intro.datasets import dates
from transformer_intro.pretrained import generate_text, load_smollm2
from transformer_intro.tasks import SupervisedPairs
from transformer_intro.training import Recipe, fit, load_adapter, save_adapter
from transformer_intro.training.evaluation import wilson_interval

QUESTIONS = (
    "What is 17 times 23?",
    "Who wrote Romeo and Juliet?",
    "Translate 'good morning' into French.",
)


def prompt(text: str) -> str:
    return f"{text}\nISO: "


def encode_pairs(tokeniser, pairs) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, answer ids + end token) for each (source text, ISO date)."""
    end = [tokeniser.eos_id]
    return [(tokeniser.encode(prompt(text)), tokeniser.encode(iso) + end) for text, iso in pairs]


def encode_few_shot(tokeniser, shots, pairs) -> list[tuple[list[int], list[int]]]:
    """(examples + prompt ids, answer ids + newline) for each (source text, ISO date).

    The examples are the ``shots`` pairs, each its prompt, its ISO date and a newline, token by
    token as the answers are written, so the answer's form is the examples' form.
    """
    newline = tokeniser.encode("\n")
    examples = []
    for text, iso in shots:
        examples += tokeniser.encode(prompt(text)) + tokeniser.encode(iso) + newline
    return [
        (examples + tokeniser.encode(prompt(text)), tokeniser.encode(iso) + newline)
        for text, iso in pairs
    ]


def adapter_recipe(args, seed: int) -> Recipe:
    """The adapters' recipe from the command line: a tenth warm-up, no weight decay."""
    return Recipe(
        steps=args.steps,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        warmup_steps=max(1, args.steps // 10),
        weight_decay=0.0,
        steps_per_call=10,
        seed=seed,
    )


def window_for(*splits) -> int:
    """The least multiple of 8 that holds every pair, less the last token."""
    longest = max(len(p) + len(a) for split in splits for p, a in split)
    return -(-(longest - 1) // 8) * 8


def evaluate_in_chunks(model, pairs, window: int, vocab_size: int, chunk: int = 20) -> dict:
    """``SupervisedPairs.evaluate`` on ``pairs``, ``chunk`` pairs at a time.

    The task scores its test pairs in one batch, whose logits take pairs x window x |V| floats:
    5 GB for 200 few-shot prompts of 128 tokens. The means are put back together weighted as
    the task weighs them: the loss and accuracy by answer tokens, the exact match by pairs.
    """
    tokens = loss = accuracy = exact = 0.0
    for start in range(0, len(pairs), chunk):
        part = pairs[start : start + chunk]
        figures = SupervisedPairs(part, part, window=window, vocab_size=vocab_size).evaluate(model)
        answer_tokens = sum(len(answer) for _, answer in part)
        tokens += answer_tokens
        loss += figures["loss"] * answer_tokens
        accuracy += figures["accuracy"] * answer_tokens
        exact += round(figures["exact_match"] * len(part))
    return {"loss": loss / tokens, "accuracy": accuracy / tokens, "exact_match": exact / len(pairs)}


def with_interval(figures: dict, trials: int) -> dict:
    """``figures`` with the count of exact matches and their 95% Wilson interval added."""
    matches = round(figures["exact_match"] * trials)
    return {
        **figures,
        "exact_matches": matches,
        "exact_match_interval_95": list(wilson_interval(matches, trials)),
    }


def print_figures(when: str, figures: dict) -> None:
    for name, f in figures.items():
        low, high = f["exact_match_interval_95"]
        print(
            f"{when}, {name}: exact match {f['exact_match']:.3f} (95% interval {low:.3f} to "
            f"{high:.3f}), answer loss {f['loss']:.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--train-size", type=int, default=4000)
    parser.add_argument("--test-size", type=int, default=200, help="pairs per held-out set")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shots", type=int, default=4, help="examples in the few-shot prompt")
    parser.add_argument("--out", type=Path, default=None, help="JSON file for the figures")
    parser.add_argument(
        "--adapter-out", type=Path, default=None, help="file for the trained adapter alone"
    )
    parser.add_argument(
        "--adapter-in",
        type=Path,
        default=None,
        help="measure this saved adapter (written with --adapter-out) instead of training one",
    )
    parser.add_argument(
        "--wait-for-adapter",
        action="store_true",
        help="with --adapter-in, wait for the file to appear (another process training it)",
    )
    parser.add_argument(
        "--omit-times",
        action="store_true",
        help="leave the seconds out of the files (a run on a shared machine times nothing)",
    )
    args = parser.parse_args()
    command = "python benchmarks/smollm2_dates_lora.py " + " ".join(
        f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}")
        for k, v in vars(args).items()
        if k not in ("out", "adapter_out", "wait_for_adapter") and v is not False and v is not None
    )
    load_before = os.getloadavg()

    model, tokeniser = load_smollm2()
    train_pairs = dates.load_splits(args.train_size, 10, seed=args.seed)[0]
    tests = dates.load_test_sets(args.test_size, seed=args.seed)
    train = encode_pairs(tokeniser, train_pairs)
    encoded_tests = {name: encode_pairs(tokeniser, pairs) for name, pairs in tests.items()}
    window = window_for(train, *encoded_tests.values())
    vocab = model.config.vocab_size
    tasks = {
        name: SupervisedPairs(train, pairs, window=window, vocab_size=vocab)
        for name, pairs in encoded_tests.items()
    }
    print(f"{len(train)} training pairs, window {window}; held-out sets of {args.test_size}")
    print(f"example: {prompt(train_pairs[0][0])!r} -> {train_pairs[0][1]!r}", flush=True)

    def measure(m) -> dict:
        return {
            name: with_interval(evaluate_in_chunks(m, pairs, window, vocab), len(pairs))
            for name, pairs in encoded_tests.items()
        }

    def ask(m) -> list[str]:
        return [generate_text(m, tokeniser, q, 40) for q in QUESTIONS]

    shots = train_pairs[: args.shots]
    few_shot_tests = {
        name: encode_few_shot(tokeniser, shots, pairs) for name, pairs in tests.items()
    }
    few_shot_window = window_for(*few_shot_tests.values())
    print(f"few-shot prompts: {args.shots} examples, window {few_shot_window}", flush=True)

    def adapter_run():
        """Train the adapters (or read them with --adapter-in): (adapted, recipe, history, s)."""
        if args.adapter_in is not None:
            while args.wait_for_adapter and not args.adapter_in.exists():
                time.sleep(10)  # another process is training it
            adapted, info = load_adapter(args.adapter_in, model)
            print(f"read {args.adapter_in}, trained by: {info.extra['command']}", flush=True)
            return adapted, info.recipe, info.history, None
        adapted = LoRALanguageModel(model, args.rank, key=jax.random.PRNGKey(args.seed))
        recipe = adapter_recipe(args, args.seed)
        started = time.perf_counter()
        adapted, history = fit(adapted, tasks["seen formats"], recipe)
        seconds = time.perf_counter() - started
        print(f"fit: {seconds:.0f} s for {args.steps} steps (compilation included)")
        if args.adapter_out is not None:
            logged = dataclasses.replace(history, seconds=[]) if args.omit_times else history
            run = {"train_size": args.train_size, "command": command}
            save_adapter(
                args.adapter_out,
                adapted,
                recipe=recipe,
                history=logged,
                step=recipe.steps,
                extra=run,
            )
            print(f"wrote {args.adapter_out}", flush=True)
        return adapted, recipe, history, seconds

    if args.adapter_in is None:  # train first: the adapter file is written as early as it can be
        adapted, recipe, history, seconds_training = adapter_run()
    started = time.perf_counter()
    before = measure(model)
    answers_before = ask(model)
    seconds_measuring = time.perf_counter() - started
    print_figures("before", before)
    few_shot = {
        name: with_interval(evaluate_in_chunks(model, pairs, few_shot_window, vocab), len(pairs))
        for name, pairs in few_shot_tests.items()
    }
    print_figures(f"{args.shots}-shot", few_shot)
    if args.adapter_in is not None:  # measured the base model first, while it trains elsewhere
        adapted, recipe, history, seconds_training = adapter_run()
    print(f"training loss: {history.train_loss[0]:.3f} first, {history.train_loss[-1]:.3f} last")
    merged = adapted.merged()
    after = measure(merged)
    answers_after = ask(merged)
    print_figures("after", after)
    for question, old, new in zip(QUESTIONS, answers_before, answers_after, strict=True):
        print(f"Q: {question}\n  before: {old!r}\n  after:  {new!r}")

    result = {
        "command": command,
        "machine": machine(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "recipe": json.loads(recipe.to_json()),
        "rank": args.rank,
        "trained_parameters": lora_parameter_count(model.config, args.rank),
        "model_parameters": count_parameters(model),
        "window": window,
        "train_pairs": len(train),
        "test_pairs_per_set": args.test_size,
        "train_loss": {"first": history.train_loss[0], "last": history.train_loss[-1]},
        **(
            {}
            if args.omit_times or seconds_training is None
            else {
                "seconds_training": seconds_training,
                "seconds_measuring_before": seconds_measuring,
            }
        ),
        "before": before,
        "shots": [{"text": text, "iso": iso} for text, iso in shots],
        "few_shot": few_shot,
        "after": after,
        "questions": [
            {"question": q, "before": old, "after": new}
            for q, old, new in zip(QUESTIONS, answers_before, answers_after, strict=True)
        ],
    }
    if args.out is not None:
        write_json(args.out, result)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
