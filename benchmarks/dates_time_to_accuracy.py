"""Exact match of the date-normalising encoder-decoder (chapter 10) against seconds of training.

Trains the chapter's model and recipe for each step count given and prints, per run, the seconds
of training (compilation included), the whole-string exact match of greedy decoding on the 2,000
held-out dates, and the teacher-forced per-character accuracy. Run it alone on the machine (under
`flock /tmp/heavy.lock` here): the seconds are only as good as the machine is quiet.

    python benchmarks/dates_time_to_accuracy.py [--steps 400 850] [--set token_dim=48 mlp_hidden_dim=96]
"""

from __future__ import annotations

import argparse
import ast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from transformer_intro import count_parameters
from transformer_intro.datasets import dates
from transformer_intro.encoder_decoder import EncoderDecoder, sequence_loss, train

# The chapter's model and recipe.
MODEL = dict(token_dim=64, num_heads=4, mlp_hidden_dim=128, encoder_layers=2, decoder_layers=2)
RECIPE = dict(batch_size=128, learning_rate=4e-3, seed=0)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, nargs="+", default=[850])
    parser.add_argument(
        "--set", nargs="*", default=[], help="override model fields, e.g. token_dim=48"
    )
    parser.add_argument(
        "--train", nargs="*", default=[], help="override recipe fields, e.g. learning_rate=3e-3"
    )
    args = parser.parse_args()
    model_options = {
        **MODEL,
        **{k: ast.literal_eval(v) for k, v in (p.split("=", 1) for p in args.set)},
    }
    recipe = {
        **RECIPE,
        **{k: ast.literal_eval(v) for k, v in (p.split("=", 1) for p in args.train)},
    }

    train_pairs, test_pairs = dates.load_splits(train_size=150_000, test_size=2000, seed=0)
    sources = dates.encode_sources(t for t, _ in train_pairs)
    target_inputs, targets = dates.encode_targets(i for _, i in train_pairs)
    test_sources = jnp.asarray(dates.encode_sources(t for t, _ in test_pairs))
    test_inputs, test_targets = (
        jnp.asarray(a) for a in dates.encode_targets(i for _, i in test_pairs)
    )
    decode = eqx.filter_jit(lambda m, s: m.greedy_decode(s, dates.START_ID))
    print(f"model {model_options}, recipe {recipe}")
    print(
        f"{'steps':>6s} {'seconds':>8s} {'exact match':>12s} {'per character':>14s} {'parameters':>11s}"
    )
    for steps in args.steps:
        model = EncoderDecoder(
            len(dates.SOURCE_VOCABULARY),
            len(dates.TARGET_VOCABULARY),
            max_source_length=dates.MAX_SOURCE_LENGTH,
            max_target_length=dates.TARGET_LENGTH,
            key=jax.random.PRNGKey(recipe["seed"]),
            **model_options,
        )
        model, history = train(
            model, sources, target_inputs, targets, steps=steps, progress=False, **recipe
        )
        generated = np.asarray(decode(model, test_sources))
        exact = np.mean(
            [dates.decode_target(g) == iso for g, (_, iso) in zip(generated, test_pairs)]
        )
        _, per_character = eqx.filter_jit(sequence_loss)(
            model, test_sources, test_inputs, test_targets
        )
        print(
            f"{steps:6d} {history['seconds'][-1]:8.1f} {100 * exact:11.2f}% {100 * float(per_character):13.3f}%"
            f" {count_parameters(model):11,d}"
        )


if __name__ == "__main__":
    main()
