"""Exact match of the date-normalising encoder-decoder (chapter 10) against seconds of training.

Trains the chapter's model and recipe (`tasks.DATES_RECIPE`) for each step count given and prints,
per run, the seconds of training (compilation included), the whole-string exact match of greedy
decoding on the 2,000 held-out dates, and the teacher-forced per-character accuracy. Run it alone
on the machine (under `flock /tmp/heavy.lock` here): the seconds are only as good as the machine
is quiet.

    python benchmarks/dates_time_to_accuracy.py [--steps 400 850] [--set token_dim=48] \\
        [--train learning_rate=3e-3]
"""

from __future__ import annotations

import argparse

import jax
from overrides import parse_overrides, with_changes  # benchmarks/overrides.py, beside this script

from transformer_intro import count_parameters
from transformer_intro.block import BlockConfig
from transformer_intro.datasets import dates
from transformer_intro.models import EncoderDecoderConfig
from transformer_intro.tasks import DATES_RECIPE, SequenceToSequence
from transformer_intro.training import fit

# The chapter's model.
# Chapter 10's model: both stacks of two blocks of width 64, four heads, an MLP of 128.
MODEL = EncoderDecoderConfig(
    len(dates.SOURCE_VOCABULARY),
    len(dates.TARGET_VOCABULARY),
    dates.MAX_SOURCE_LENGTH,
    dates.TARGET_LENGTH,
    encoder=BlockConfig(dim=64, num_heads=4, mlp_hidden_dim=128),
    decoder=BlockConfig(dim=64, num_heads=4, mlp_hidden_dim=128),
    encoder_layers=2,
    decoder_layers=2,
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, nargs="+", default=[DATES_RECIPE.steps])
    parser.add_argument("--set", nargs="*", default=[], help="override model fields")
    parser.add_argument("--train", nargs="*", default=[], help="override Recipe fields")
    args = parser.parse_args()
    model_config = with_changes(MODEL, parse_overrides(args.set))
    recipe = DATES_RECIPE.replace(**parse_overrides(args.train))

    train_pairs, test_pairs = dates.load_splits(train_size=150_000, test_size=2000, seed=0)
    task = SequenceToSequence(
        (
            dates.encode_sources(t for t, _ in train_pairs),
            *dates.encode_targets(i for _, i in train_pairs),
        ),
        (
            dates.encode_sources(t for t, _ in test_pairs),
            *dates.encode_targets(i for _, i in test_pairs),
        ),
        start_id=dates.START_ID,
    )
    print(f"model {model_config}, recipe {recipe}")
    print(
        f"{'steps':>6s} {'seconds':>8s} {'exact match':>12s} "
        f"{'per character':>14s} {'parameters':>11s}"
    )
    for steps in args.steps:
        model = model_config.build(key=jax.random.PRNGKey(recipe.seed))
        model, history = fit(model, task, recipe.replace(steps=steps), progress=False)
        figures = task.evaluate(model)
        print(
            f"{steps:6d} {history.seconds[-1]:8.1f} {100 * figures['exact_match']:11.2f}% "
            f"{100 * figures['accuracy']:13.3f}% {count_parameters(model):11,d}"
        )


if __name__ == "__main__":
    main()
