"""Seconds of training until the character language model's validation loss first falls below
1.88 nats/char (nanoGPT's CPU recipe) and 1.75, on Shakespeare, with the chapter's recipe.

The clock counts training only, compilation included; the fixed validation windows are evaluated
every ``--eval-every`` steps with the clock stopped. Run it alone on the machine (flock).

    python benchmarks/lm_time_to_loss.py [--eval-every 100] [--set dim=192] [--train steps=1200]
"""

from __future__ import annotations

import argparse

import jax
from overrides import parse_overrides, with_changes  # benchmarks/overrides.py, beside this script

from transformer_intro import LanguageModel, Vocabulary, count_parameters
from transformer_intro.datasets.shakespeare import load_shakespeare
from transformer_intro.models.language_model import SHAKESPEARE_CONFIG
from transformer_intro.tasks import SHAKESPEARE_RECIPE, NextSymbolPrediction, bits
from transformer_intro.training import fit

TARGETS = (1.88, 1.75)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--set", nargs="*", default=[], help="LMConfig overrides, name=value")
    parser.add_argument("--train", nargs="*", default=[], help="Recipe overrides, name=value")
    args = parser.parse_args()
    train_text, validation_text = load_shakespeare("train"), load_shakespeare("validation")
    vocabulary = Vocabulary.from_text(train_text)
    changes = {"vocab_size": len(vocabulary), **parse_overrides(args.set)}
    config = with_changes(SHAKESPEARE_CONFIG, changes)
    recipe = SHAKESPEARE_RECIPE.replace(**parse_overrides(args.train))
    model = LanguageModel(config, key=jax.random.PRNGKey(recipe.seed))
    print(config, f"{count_parameters(model):,} parameters", sep="\n")
    print(recipe)
    task = NextSymbolPrediction(
        vocabulary.encode(train_text),
        window=config.window,
        validation_ids=vocabulary.encode(validation_text),
    )
    model, history = fit(model, task, recipe, eval_every=args.eval_every)
    for row in history.evaluations:
        index = history.step.index(row["step"])
        validation = row["nats_per_symbol"]
        print(
            f"step {row['step']:5d}  {row['seconds']:6.1f} s  train {history.train_loss[index]:.3f}"
            f"  validation {validation:.3f} nats/char ({bits(validation):.2f} bits/char)"
        )
    for target in TARGETS:
        hit = history.first_reached("nats_per_symbol", target, higher_is_better=False)
        print(
            f"validation <= {target}: "
            + (f"step {hit[0]}, {hit[1]:.1f} s" if hit else "not reached")
        )


if __name__ == "__main__":
    main()
