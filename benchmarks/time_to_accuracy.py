"""Seconds of training until the test accuracy first reaches 95.7% (the reference's figure), 98% and
98.5%, for a model configuration trained on full MNIST.

The clock counts training only (compilation included); the whole test set is evaluated every
``--eval-every`` steps with the clock stopped. Prints a line per evaluation and a summary.

    MNIST_DIR=../shared/data/mnist python benchmarks/time_to_accuracy.py [--config default] [--eval-every 100]
    ... --set dim=96 num_blocks=4   # override ViTConfig fields
    ... --train learning_rate=3e-3 batch_size=128   # override TrainConfig fields
"""

from __future__ import annotations

import argparse
import ast
import time

import equinox as eqx
import jax
import numpy as np

from transformer_intro import VisionTransformer, count_parameters, get_config
from transformer_intro.data import iterate_batches, load_mnist
from transformer_intro.train import TrainConfig, evaluate, make_optimizer, train_step

TARGETS = (0.957, 0.98, 0.985)


def parse_overrides(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        try:
            out[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[name] = value
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="default")
    parser.add_argument("--set", nargs="*", default=[], help="ViTConfig overrides, name=value")
    parser.add_argument("--train", nargs="*", default=[], help="TrainConfig overrides, name=value")
    parser.add_argument("--eval-every", type=int, default=100, help="steps between evaluations")
    args = parser.parse_args()

    model_config = get_config(args.config).replace(**parse_overrides(args.set))
    train_config = TrainConfig(**{**vars(DEFAULT_TRAIN), **parse_overrides(args.train)})
    train_images, train_labels = load_mnist("train")
    test_images, test_labels = load_mnist("test")

    model = VisionTransformer(model_config, key=jax.random.PRNGKey(train_config.seed))
    steps_per_epoch = len(train_images) // train_config.batch_size
    optimizer = make_optimizer(train_config, steps_per_epoch * train_config.epochs)
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    print(f"model: {model_config}\ntrain: {train_config}\nparameters: {count_parameters(model):,}")

    clock, step, reached = 0.0, 0, {}
    for epoch in range(train_config.epochs):
        start = time.perf_counter()
        for images, labels in iterate_batches(train_images, train_labels, train_config.batch_size,
                                              seed=train_config.seed, epoch=epoch,
                                              max_shift=train_config.max_shift):
            model, opt_state, loss, _ = train_step(
                model, opt_state, images, labels, optimizer, train_config.micro_batch_size)
            step += 1
            if step % args.eval_every == 0 or step == steps_per_epoch * train_config.epochs:
                jax.block_until_ready(loss)
                clock += time.perf_counter() - start
                accuracy = evaluate(model, test_images, test_labels)["accuracy"]
                print(f"step {step:6d}  epoch {step / steps_per_epoch:5.2f}  train {clock:7.1f} s  "
                      f"loss {float(loss):.4f}  test accuracy {accuracy:.4f}", flush=True)
                for target in TARGETS:
                    if accuracy >= target and target not in reached:
                        reached[target] = clock
                start = time.perf_counter()
        clock += time.perf_counter() - start
    print(f"images/s (training): {step * train_config.batch_size / clock:.0f}")
    for target in TARGETS:
        when = f"{reached[target]:.1f} s" if target in reached else "not reached"
        print(f"time to {100 * target:.1f}% test accuracy: {when}")
    print(f"final test accuracy: {accuracy:.4f} after {clock:.1f} s of training")


# The recipe the book's last chapter trains with.
DEFAULT_TRAIN = TrainConfig(epochs=10, batch_size=64, learning_rate=2e-3, weight_decay=0.05, warmup_steps=300, max_shift=2)

if __name__ == "__main__":
    main()
