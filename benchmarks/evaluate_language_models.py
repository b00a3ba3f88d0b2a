"""SmolLM2-135M's bits per character on chapter 9's held-out plays, in three formats of its weights.

The text is ``transformer_intro.training.evaluation.held_out_passages()``: the middle 25,000
characters of each of the four held-out plays (Hamlet, Macbeth, The Tempest, Twelfth Night),
100,000 characters in all, read as plain text with SmolLM2's own tokeniser and no chat template.
Each passage is cut into disjoint windows of 1,024 tokens (the last one shorter); every token but
a passage's first is predicted once, from the tokens before it in its window, and its loss
counts against the characters it spells (``text_loss``). Chapter 15 computes the same figure for
the book's own models on the page and prints these rows from the file.

The formats:

- ``float32``: the file's weights turned into float32 numbers (``load_smollm2()``);
- ``Q4_1``: the file's own blocks, Q4_1 matrices and a Q8_0 token table, kept as blocks
  (``load_smollm2(quantised=True)``); the same numbers as ``float32`` up to the order of
  additions;
- ``Q8_0``: every matrix and the token table of ``float32`` quantised again, to Q8_0
  (``model.quantised("Q8_0")``, chapter 16).

Each format takes minutes on two cores. The result file is written after each format, and a
rerun skips the formats the file already holds for the same text and windows, so an interrupted
run resumes. No time is recorded: a shared machine times nothing, and bits per character do not
depend on the load.

    python benchmarks/evaluate_language_models.py [--formats float32 Q8_0 Q4_1]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import sys
from pathlib import Path

from report import machine, write_json  # beside this script

from transformer_intro.datasets.shakespeare import VALIDATION_PLAYS
from transformer_intro.pretrained import load_smollm2
from transformer_intro.training.evaluation import held_out_passages, text_loss

RESULT = Path(__file__).resolve().parent / "results" / "language_model_evaluation.json"
CONTEXT = 1024  # tokens per window, about 3,200 characters of these plays
FORMATS = {
    "float32": "the file's weights as float32 numbers",
    "Q4_1": "the file's own blocks (Q4_1 matrices, Q8_0 token table), kept as blocks",
    "Q8_0": "every matrix and the token table re-quantised to Q8_0",
}


def load(fmt: str):
    """SmolLM2 and its tokeniser with its weights in format ``fmt``."""
    if fmt == "Q4_1":
        return load_smollm2(quantised=True)
    model, tokeniser = load_smollm2()
    if fmt == "Q8_0":
        model = model.quantised("Q8_0")
    return model, tokeniser


def evaluate(fmt: str, passages: list[str]) -> dict:
    """One format's figures: over all passages and per play."""
    model, tokeniser = load(fmt)
    per_play, total = {}, None
    for name, passage in zip(VALIDATION_PLAYS, passages, strict=True):
        loss = text_loss(
            model, tokeniser, passage, context=CONTEXT, progress=True, description=f"{fmt} {name}"
        )
        per_play[name] = {
            "nats": loss.nats,
            "tokens": loss.tokens,
            "characters": loss.characters,
            "windows": loss.windows,
            "bits_per_character": loss.bits_per_character,
        }
        total = loss if total is None else total + loss
    del model
    gc.collect()
    return {
        "weights": FORMATS[fmt],
        "nats": total.nats,
        "tokens": total.tokens,
        "characters": total.characters,
        "windows": total.windows,
        "bits_per_character": total.bits_per_character,
        "bits_per_token": total.bits_per_token,
        "per_play": per_play,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--formats", nargs="+", choices=list(FORMATS), default=list(FORMATS))
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args()

    passages = held_out_passages()
    text = {
        "plays": list(VALIDATION_PLAYS),
        "characters_per_play": len(passages[0]),
        "characters": sum(len(p) for p in passages),
        "sha256": hashlib.sha256("\0".join(passages).encode()).hexdigest(),
        "context_tokens": CONTEXT,
        "windows": "disjoint",
    }
    result = json.loads(args.out.read_text()) if args.out.exists() else {}
    if result.get("text") != text:
        result = {}  # another text or other windows: nothing in the file carries over
    result.update(
        command="python benchmarks/evaluate_language_models.py", machine=machine(), text=text
    )
    result.setdefault("formats", {})
    for fmt in args.formats:
        if fmt in result["formats"]:
            print(f"{fmt}: in {args.out.name} already, skipped")
            continue
        result["formats"][fmt] = {**evaluate(fmt, passages), "machine": machine()}
        write_json(args.out, result)
        figures = result["formats"][fmt]
        print(
            f"{fmt:8s} {figures['bits_per_character']:.4f} bits per character "
            f"({figures['characters']:,} characters, {figures['tokens']:,} tokens, "
            f"{figures['windows']} windows)",
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
