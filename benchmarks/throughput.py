"""Train-step throughput of the package's models: images per second for forward + backward + AdamW
update, after compilation. Prints figures; asserts nothing about speed.

    python benchmarks/throughput.py [--config reference] [--batch-sizes 16 128] [--rounds 5]

``--layouts batched vmap`` also times the one-example definition under ``jax.vmap``, interleaved
with the fast path, to show what the batched layout buys.
"""

from __future__ import annotations

import argparse
import time

import equinox as eqx
import jax
import numpy as np

from transformer_intro import VisionTransformer, count_parameters
from transformer_intro.train import TrainConfig, make_optimizer, train_step


class _VmapModel(eqx.Module):
    """The one-example ``__call__`` under ``jax.vmap``, in place of the fast ``batched`` path."""

    inner: VisionTransformer

    def batched(self, images):
        return jax.vmap(self.inner)(images)


class JaxRunner:
    """A compiled train step of a package model on one fixed random batch of MNIST-shaped data."""

    def __init__(
        self,
        config: str,
        batch_size: int,
        *,
        layout: str = "batched",
        micro_batch_size: int | None = None,
    ):
        model = VisionTransformer(config, key=jax.random.PRNGKey(0))
        self.model = _VmapModel(model) if layout == "vmap" else model
        self.optimizer = make_optimizer(TrainConfig(), total_steps=100_000)
        self.opt_state = self.optimizer.init(eqx.filter(self.model, eqx.is_inexact_array))
        rng = np.random.default_rng(0)
        self.images = rng.integers(0, 256, (batch_size, 28, 28), dtype=np.uint8)
        self.labels = rng.integers(0, 10, batch_size).astype(np.int32)
        self.batch_size = batch_size
        self.micro_batch_size = micro_batch_size
        self.run(3)  # compile and warm up

    def run(self, steps: int) -> float:
        start = time.perf_counter()
        for _ in range(steps):
            self.model, self.opt_state, loss, _ = train_step(
                self.model,
                self.opt_state,
                self.images,
                self.labels,
                self.optimizer,
                self.micro_batch_size,
            )
        jax.block_until_ready(loss)
        return time.perf_counter() - start


def steps_for(runner, seconds: float) -> int:
    """How many steps fill about ``seconds``, from one timed probe step."""
    return max(2, int(seconds / max(runner.run(1), 1e-3)))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default="reference")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[16, 128])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--seconds", type=float, default=4.0, help="timed seconds per layout per round"
    )
    parser.add_argument("--layouts", nargs="+", default=["batched"], choices=["batched", "vmap"])
    parser.add_argument(
        "--micro-batch-sizes",
        type=int,
        nargs="+",
        default=[0],
        help="gradient-accumulation chunk sizes to compare (0: none)",
    )
    args = parser.parse_args()
    model = VisionTransformer(args.config, key=jax.random.PRNGKey(0))
    print(f"config={args.config} parameters={count_parameters(model):,} devices={jax.devices()}")
    for batch_size in args.batch_sizes:
        runners = {
            f"{layout}/{micro or batch_size}": JaxRunner(
                args.config, batch_size, layout=layout, micro_batch_size=micro or None
            )
            for layout in args.layouts
            for micro in args.micro_batch_sizes
            if not micro or micro <= batch_size
        }
        steps = {k: steps_for(r, args.seconds) for k, r in runners.items()}
        rates = {k: [] for k in runners}
        for _ in range(args.rounds):
            for k, r in runners.items():
                rates[k].append(steps[k] * batch_size / r.run(steps[k]))
        for k, values in rates.items():
            first = next(iter(rates))
            ratio = np.median(values) / np.median(rates[first])
            print(
                f"batch {batch_size:4d}  layout/micro-batch {k:12s}  {np.median(values):8.1f} images/s  "
                f"(ratio to {first}: {ratio:.2f}x)",
                flush=True,
            )


if __name__ == "__main__":
    main()
