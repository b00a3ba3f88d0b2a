"""Exact match of chapter 10's date-normalising encoder-decoder on its three held-out sets.

Trains the chapter's model with the chapter's recipe (``tasks.DATES_RECIPE``) through
``training.fit`` and prints the seconds of training (compilation included) and the whole-string
exact match of greedy decoding on the seen formats, the unseen formats (per format too) and the
unseen centuries (``datasets.dates.load_test_sets``). It asserts nothing. Run it alone on the
machine: the seconds are only as good as the machine is quiet.

    python benchmarks/dates_generalisation.py [--steps 850] [--seed 0]
"""

from __future__ import annotations

import argparse
import datetime

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

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


def format_of(text: str, iso: str) -> str:
    day = datetime.date.fromisoformat(iso)
    return next(name for name, write in dates.FORMATS.items() if write(day) == text)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=DATES_RECIPE.steps)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    recipe = DATES_RECIPE.replace(steps=args.steps, seed=args.seed)

    train_pairs, _ = dates.load_splits(train_size=150_000, test_size=2000, seed=0)
    test_sets = dates.load_test_sets(2000, seed=0)
    sources = dates.encode_sources(t for t, _ in train_pairs)
    target_inputs, targets = dates.encode_targets(i for _, i in train_pairs)
    task = SequenceToSequence((sources, target_inputs, targets), start_id=dates.START_ID)
    model = MODEL.build(key=jax.random.PRNGKey(0))
    print(f"model {MODEL}, {count_parameters(model):,} parameters; {recipe}")
    model, history = fit(model, task, recipe, progress=False)
    print(f"{recipe.steps} steps in {history.seconds[-1]:.1f} s of training")
    decode = eqx.filter_jit(lambda m, s: m.greedy_decode(s, dates.START_ID))
    for name, pairs in test_sets.items():
        generated = np.asarray(
            decode(model, jnp.asarray(dates.encode_sources(t for t, _ in pairs)))
        )
        correct = np.array([dates.decode_target(g) == iso for g, (_, iso) in zip(generated, pairs)])
        print(f"exact match, {name:17s}: {100 * correct.mean():5.1f}% of {len(pairs)}")
        if name == "unseen formats":
            names = np.array([format_of(t, i) for t, i in pairs])
            for held_out in dates.HELD_OUT_FORMATS:
                chosen = names == held_out
                print(f"    {held_out:26s} {100 * correct[chosen].mean():5.1f}% of {chosen.sum()}")


if __name__ == "__main__":
    main()
