"""SmolLM2-135M's bits per character on chapter 9's held-out plays, in three formats of its weights.

The text is ``transformer_intro.training.evaluation.held_out_passages()``: the middle 25,000
characters of each of the four held-out plays (Hamlet, Macbeth, The Tempest, Twelfth Night),
100,000 characters in all, read as plain text with SmolLM2's own tokeniser and no chat template.
Each passage is cut into disjoint windows of 1,024 tokens (the last one shorter); every token but
a passage's first is predicted once, from the tokens before it in its window, and its loss
counts against the characters it spells (``text_loss``). Chapter 15 computes the same figure for
the book's own models on the page and prints these rows from the file.

The formats:

- ``float32``: the file's weights turned into float32 numbers (``load_smollm2()``). The file
  holds only its Q4_1 blocks (and a Q8_0 token table), so these are also the weights of the
  model kept in those blocks (``load_smollm2(quantised=True)``), which computes the same numbers
  up to the order of additions;
- ``Q8_0``: every matrix and the token table of ``float32`` quantised again, to Q8_0 (chapter 16,
  ``quantise_model(model, "Q8_0")``), and multiplied as the float32 numbers those blocks hold
  (``dequantise_model``): the same products as the blocks' own, up to the order of additions, in
  XLA's matrix products, which read a window of 1,024 tokens faster than the blocks' kernel;
- ``Q4_1 shifted``: chapter 16's estimate of what the file's own 4-bit rounding cost: every
  matrix the file keeps in Q4_1 rounded to Q4_1 a second time, its blocks moved 16 columns so
  that the new rounding is independent of the first, and multiplied as float32 numbers (the
  token table stays as stored);
- ``Q4_1``: the file's blocks multiplied by the blocks' kernel itself, without unpacking them
  (``load_smollm2(quantised=True)``). Not run by default: on two shared cores it takes hours,
  and it measures the order of additions only.

Each format takes minutes on two cores. The result file is written after each play's passage
(``plays_done``, gathered into ``formats`` once all four are in), keeping what another process
wrote to it meanwhile, so formats and plays may run in parallel (``--plays``); a rerun skips
what the file already holds for the same text and windows, so an interrupted run resumes. No
time is recorded: a shared machine times nothing, and bits per character do not depend on the
load.

    python benchmarks/evaluate_language_models.py [--formats float32 Q8_0 'Q4_1 shifted' Q4_1]

The default is the first three.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
from report import machine, write_json  # beside this script

from transformer_intro.datasets.shakespeare import VALIDATION_PLAYS
from transformer_intro.models.quantised import dequantise_model, quantise_model
from transformer_intro.pretrained import find_smollm2, load_smollm2
from transformer_intro.pretrained.gguf import (
    GGUFFile,
    config_from_gguf,
    hf_tensors_from_gguf,
    read_gguf,
    tokeniser_from_gguf,
)
from transformer_intro.pretrained.llama import model_from_hf_tensors
from transformer_intro.pretrained.state_dict import LazyTensors
from transformer_intro.quantisation import quantise
from transformer_intro.training.evaluation import TextLoss, held_out_passages, text_loss

RESULT = Path(__file__).resolve().parent / "results" / "language_model_evaluation.json"
CONTEXT = 1024  # tokens per window, about 3,200 characters of these plays
FORMATS = {
    "float32": "the file's weights (its Q4_1 blocks and Q8_0 token table) as float32 numbers",
    "Q8_0": "every matrix and the token table re-quantised to Q8_0, multiplied as the float32 "
    "numbers the blocks hold",
    "Q4_1 shifted": "every Q4_1 matrix of the file rounded to Q4_1 again, its blocks moved 16 "
    "columns, multiplied as float32 numbers",
    "Q4_1": "the file's own blocks, multiplied by the blocks' kernel without unpacking them",
}
DEFAULT_FORMATS = ["float32", "Q8_0", "Q4_1 shifted"]
SHIFT = 16  # half a block: every new block straddles two of the file's


def shifted_q4_1(weight: np.ndarray) -> np.ndarray:
    """``weight`` rounded to Q4_1 with its blocks of 32 columns moved by :data:`SHIFT`."""
    rolled = np.roll(weight, -SHIFT, axis=-1)
    return np.roll(np.asarray(quantise(rolled, "Q4_1").dequantised()), SHIFT, axis=-1)


def load_shifted_q4_1():
    """SmolLM2 with every matrix its file keeps in Q4_1 rounded again, shifted."""
    path = find_smollm2()
    tensors, metadata = read_gguf(path)
    in_q4_1 = {t.name for t in GGUFFile(path).tensors if t.tensor_type.name == "Q4_1"}
    changed = LazyTensors({
        name: (lambda name=name: shifted_q4_1(tensors[name]) if name in in_q4_1 else tensors[name])
        for name in tensors
    })  # fmt: skip
    config = config_from_gguf(metadata)
    model = model_from_hf_tensors(hf_tensors_from_gguf(changed, config), config)
    return model, tokeniser_from_gguf(metadata)


def load(fmt: str):
    """SmolLM2 and its tokeniser with its weights in format ``fmt``."""
    if fmt == "Q4_1":
        return load_smollm2(quantised=True)
    if fmt == "Q4_1 shifted":
        return load_shifted_q4_1()
    model, tokeniser = load_smollm2()
    if fmt == "Q8_0":
        model = dequantise_model(quantise_model(model, "Q8_0"))
    return model, tokeniser


def play_figures(model, tokeniser, fmt: str, name: str, passage: str) -> dict:
    """One format's figures on one play's passage."""
    loss = text_loss(
        model, tokeniser, passage, context=CONTEXT, progress=True, description=f"{fmt} {name}"
    )
    return {
        "nats": loss.nats,
        "tokens": loss.tokens,
        "characters": loss.characters,
        "windows": loss.windows,
        "bits_per_character": loss.bits_per_character,
        "machine": machine(),
    }


def format_figures(fmt: str, per_play: dict) -> dict:
    """A format's figures over the four passages, from each play's."""
    total = TextLoss(0.0, 0, 0, 0)
    for name in VALIDATION_PLAYS:
        f = per_play[name]
        total = total + TextLoss(f["nats"], f["tokens"], f["characters"], f["windows"])
    return {
        "weights": FORMATS[fmt],
        "nats": total.nats,
        "tokens": total.tokens,
        "characters": total.characters,
        "windows": total.windows,
        "bits_per_character": total.bits_per_character,
        "bits_per_token": total.bits_per_token,
        "per_play": {name: per_play[name] for name in VALIDATION_PLAYS},
    }


def recorded(path: Path, text: dict) -> dict:
    """What the file holds for this text and these windows (nothing for another)."""
    written = json.loads(path.read_text()) if path.exists() else {}
    if written.get("text") != text:
        written = {}
    written.setdefault("formats", {})
    written.setdefault("plays_done", {})
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--formats", nargs="+", choices=list(FORMATS), default=DEFAULT_FORMATS)
    parser.add_argument(
        "--plays", nargs="+", choices=list(VALIDATION_PLAYS), default=list(VALIDATION_PLAYS),
        help="evaluate only these plays' passages (another process may do the others)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args()

    passages = dict(zip(VALIDATION_PLAYS, held_out_passages(), strict=True))
    text = {
        "plays": list(VALIDATION_PLAYS),
        "characters_per_play": len(passages[VALIDATION_PLAYS[0]]),
        "characters": sum(len(p) for p in passages.values()),
        "sha256": hashlib.sha256("\0".join(passages.values()).encode()).hexdigest(),
        "context_tokens": CONTEXT,
        "windows": "disjoint",
    }
    for fmt in args.formats:
        model = tokeniser = None
        for name in args.plays:
            done = recorded(args.out, text)
            if fmt in done["formats"] or name in done["plays_done"].get(fmt, {}):
                print(f"{fmt} {name}: in {args.out.name} already, skipped")
                continue
            if model is None:
                model, tokeniser = load(fmt)
            figures = play_figures(model, tokeniser, fmt, name, passages[name])
            # Other processes may have written the file meanwhile: read it again, add this play.
            result = recorded(args.out, text)
            result.update(command="python benchmarks/evaluate_language_models.py", text=text)
            result["plays_done"].setdefault(fmt, {})[name] = figures
            if set(result["plays_done"][fmt]) == set(VALIDATION_PLAYS):
                result["formats"][fmt] = format_figures(fmt, result["plays_done"].pop(fmt))
                print(f"{fmt:8s} {result['formats'][fmt]['bits_per_character']:.4f} bits per "
                      "character over the four passages", flush=True)  # fmt: skip
            write_json(args.out, result)
            print(f"{fmt} {name}: {figures['bits_per_character']:.4f} bits per character "
                  f"({figures['tokens']:,} tokens, {figures['windows']} windows)",
                  flush=True)  # fmt: skip
        del model
        gc.collect()


if __name__ == "__main__":
    sys.exit(main())
