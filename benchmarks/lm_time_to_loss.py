"""Seconds of training until the character language model's validation loss first falls below
1.88 nats/char (nanoGPT's CPU recipe) and 1.75, on Shakespeare, with the chapter's recipe.

The clock counts training only, compilation included; the fixed validation windows are evaluated
every ``--eval-every`` steps with the clock stopped. Run it alone on the machine (flock).

    python benchmarks/lm_time_to_loss.py [--eval-every 100] [--set dim=192] [--train steps=1200]
"""

from __future__ import annotations

import argparse

import jax
from overrides import parse_overrides  # benchmarks/overrides.py, beside this script

from transformer_intro import Vocabulary, count_parameters
from transformer_intro.datasets.shakespeare import load_shakespeare
from transformer_intro.language_model import (
    SHAKESPEARE_CONFIG,
    SHAKESPEARE_RECIPE,
    VALIDATION_WINDOWS,
    LanguageModel,
    bits,
    evaluation_windows,
    train_language_model,
)

TARGETS = (1.88, 1.75)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--set", nargs="*", default=[], help="LMConfig overrides, name=value")
    parser.add_argument("--train", nargs="*", default=[], help="LMRecipe overrides, name=value")
    args = parser.parse_args()
    train_text, validation_text = load_shakespeare("train"), load_shakespeare("validation")
    vocabulary = Vocabulary.from_text(train_text)
    config = SHAKESPEARE_CONFIG.replace(vocab_size=len(vocabulary), **parse_overrides(args.set))
    recipe = SHAKESPEARE_RECIPE.__class__(
        **{**SHAKESPEARE_RECIPE.__dict__, **parse_overrides(args.train)}
    )
    model = LanguageModel(config, key=jax.random.PRNGKey(recipe.seed))
    print(config, f"{count_parameters(model):,} parameters", sep="\n")
    print(recipe)
    windows = evaluation_windows(
        vocabulary.encode(validation_text), VALIDATION_WINDOWS, config.window + 1
    )
    model, history = train_language_model(
        model, vocabulary.encode(train_text), windows, recipe, eval_every=args.eval_every
    )
    for step, seconds, train, validation in zip(
        history.step, history.seconds, history.train_loss, history.validation_loss
    ):
        print(
            f"step {step:5d}  {seconds:6.1f} s  train {train:.3f}  validation {validation:.3f} nats/char "
            f"({bits(validation):.2f} bits/char)"
        )
    for target in TARGETS:
        hit = next(
            (
                (s, t)
                for s, t, v in zip(history.step, history.seconds, history.validation_loss)
                if v <= target
            ),
            None,
        )
        print(
            f"validation <= {target}: "
            + (f"step {hit[0]}, {hit[1]:.1f} s" if hit else "not reached")
        )


if __name__ == "__main__":
    main()
