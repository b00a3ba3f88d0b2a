"""Train-step throughput of the package's models: images per second for forward + backward + AdamW
update, after compilation, at several batch sizes. Prints figures; asserts nothing about speed.

    python benchmarks/throughput.py [--config reference] [--batch-sizes 16 128] [--seconds 20]
"""

from __future__ import annotations

import argparse
import time

import equinox as eqx
import jax
import numpy as np

from transformer_intro import VisionTransformer, count_parameters
from transformer_intro.train import TrainConfig, make_optimizer, train_step


def measure(config_name: str, batch_size: int, seconds: float, *, layout: str = "batched") -> float:
    """Median images/s over repeats of a timed window of train steps on random MNIST-shaped data."""
    model = VisionTransformer(config_name, key=jax.random.PRNGKey(0))
    if layout == "vmap":  # the one-example definition under jax.vmap, for comparison
        model = _VmapModel(model)
    optimizer = make_optimizer(TrainConfig(), total_steps=10_000)
    opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (batch_size, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, batch_size).astype(np.int32)
    for _ in range(3):  # compile and warm up
        model, opt_state, loss, _ = train_step(model, opt_state, images, labels, optimizer)
    jax.block_until_ready(loss)
    rates = []
    for _ in range(3):
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds / 3:
            model, opt_state, loss, _ = train_step(model, opt_state, images, labels, optimizer)
            steps += 1
        jax.block_until_ready(loss)
        rates.append(steps * batch_size / (time.perf_counter() - start))
    return float(np.median(rates))


class _VmapModel(eqx.Module):
    inner: VisionTransformer

    @property
    def config(self):
        return self.inner.config

    def batched(self, images):
        return jax.vmap(self.inner)(images)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="reference")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[16, 128])
    parser.add_argument("--seconds", type=float, default=15.0, help="timed seconds per measurement")
    parser.add_argument("--layouts", nargs="+", default=["batched"], choices=["batched", "vmap"])
    args = parser.parse_args()
    model = VisionTransformer(args.config, key=jax.random.PRNGKey(0))
    print(f"config={args.config} parameters={count_parameters(model):,} devices={jax.devices()}")
    for batch_size in args.batch_sizes:
        for layout in args.layouts:
            rate = measure(args.config, batch_size, args.seconds, layout=layout)
            print(f"batch {batch_size:4d}  layout {layout:8s}  {rate:8.1f} images/s")


if __name__ == "__main__":
    main()
