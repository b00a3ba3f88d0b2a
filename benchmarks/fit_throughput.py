"""What the input pipeline costs: `fit`'s training images per second against the bare compiled train
step's at the same batch size, on the current machine, in one run. Prints figures; asserts nothing.

    python benchmarks/fit_throughput.py [--config default] [--batch-size 64] [--steps 300] [--rounds 3]

Three contenders, timed in turn in each round so that other load on the machine hits all alike:

* bare step: `train.train_step` over and over on one batch already on the device, the ceiling;
* fit: `train.fit` for two epochs of ``--steps`` steps, the second one timed (the first compiles);
  the training split lives on the device, shuffled and shifted there with `jax.random`;
* host pipeline: the loop `fit` ran before, NumPy shuffling and shifting on the host each step
  (`datasets.mnist.iterate_batches`) feeding the same `train_step`.

The data are random MNIST-shaped digits: the speed does not depend on what the pixels show.
"""

from __future__ import annotations

import argparse
import time

import equinox as eqx
import jax
import numpy as np

from transformer_intro import VisionTransformer, count_parameters
from transformer_intro.datasets.mnist import iterate_batches
from transformer_intro.train import DEFAULT_RECIPE, fit, make_optimizer, train_step


def bare_step(model, optimizer, images, labels, steps: int, micro_batch_size) -> float:
    """Seconds for ``steps`` compiled train steps on one batch that never leaves the device."""
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    images, labels = jax.device_put(images), jax.device_put(labels)
    model, opt_state, loss, _ = train_step(
        model, opt_state, images, labels, optimizer, micro_batch_size
    )
    jax.block_until_ready(loss)  # compiled (once per optimizer object) and warm
    start = time.perf_counter()
    for _ in range(steps):
        model, opt_state, loss, _ = train_step(
            model, opt_state, images, labels, optimizer, micro_batch_size
        )
    jax.block_until_ready(loss)
    return time.perf_counter() - start


def host_pipeline(model, optimizer, images, labels, config, micro_batch_size) -> float:
    """Seconds for one epoch of the former loop of `fit`: NumPy batches and shifts on the host."""
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    warm = next(
        iterate_batches(
            images, labels, config.batch_size, seed=0, epoch=0, max_shift=config.max_shift
        )
    )
    jax.block_until_ready(train_step(model, opt_state, *warm, optimizer, micro_batch_size)[2])
    start = time.perf_counter()
    losses = []
    for batch_images, batch_labels in iterate_batches(
        images, labels, config.batch_size, seed=config.seed, epoch=1, max_shift=config.max_shift
    ):
        model, opt_state, loss, _ = train_step(
            model, opt_state, batch_images, batch_labels, optimizer, micro_batch_size
        )
        losses.append(loss)
    float(np.mean(jax.device_get(losses)))  # as fit ends an epoch: read the mean loss
    return time.perf_counter() - start


def fit_epoch(model, images, labels, config) -> float:
    """Seconds of `fit`'s second epoch (the first one includes compilation)."""
    _, history = fit(model, (images, labels), None, config.replace(epochs=2), progress=False)
    return history.train_seconds[1] - history.train_seconds[0]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default="default")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_RECIPE.batch_size)
    parser.add_argument("--micro-batch-size", type=int, default=None)
    parser.add_argument("--steps", type=int, default=300, help="steps per timed epoch")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-host", action="store_true", help="skip the host-pipeline contender")
    args = parser.parse_args()

    config = DEFAULT_RECIPE.replace(
        batch_size=args.batch_size, micro_batch_size=args.micro_batch_size
    )
    n = args.steps * args.batch_size
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, n).astype(np.int32)
    model = VisionTransformer(args.config, key=jax.random.PRNGKey(0))
    optimizer = make_optimizer(config, 2 * args.steps)
    print(
        f"config={args.config} parameters={count_parameters(model):,} batch={args.batch_size} "
        f"steps/epoch={args.steps} max_shift={config.max_shift} devices={jax.devices()}",
        flush=True,
    )

    contenders = {
        "bare step": lambda: bare_step(
            model,
            optimizer,
            images[: args.batch_size],
            labels[: args.batch_size],
            args.steps,
            args.micro_batch_size,
        ),
        "fit (device pipeline)": lambda: fit_epoch(model, images, labels, config),
    }
    if not args.no_host:
        contenders["host pipeline (before)"] = lambda: host_pipeline(
            model, optimizer, images, labels, config, args.micro_batch_size
        )
    rates = {name: [] for name in contenders}
    for round_ in range(args.rounds):
        for name, run in contenders.items():
            rates[name].append(n / run())
        print(
            f"round {round_ + 1}: "
            + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rates.items())
            + " images/s",
            flush=True,
        )
    bare = np.median(rates["bare step"])
    for name, values in rates.items():
        print(
            f"{name:24s} {np.median(values):10,.0f} images/s (median of {args.rounds})  "
            f"ratio to the bare step: {np.median(values) / bare:.3f}"
        )
    if "host pipeline (before)" in rates:
        speedup = np.median(rates["fit (device pipeline)"]) / np.median(
            rates["host pipeline (before)"]
        )
        print(f"device pipeline / host pipeline: {speedup:.3f}")


if __name__ == "__main__":
    main()
