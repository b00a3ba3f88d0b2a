"""Train-step throughput of the package's models: images per second for forward + backward + AdamW
update, after compilation. Prints figures; asserts nothing about speed.

    python benchmarks/throughput.py [--config reference] [--batch-sizes 16 128] [--rounds 5]

The steps are those of ``training.fit``, compiled as it compiles them (``training.run_steps``),
on one fixed batch already on the device, so that only the step is timed. ``--layouts batched
vmap`` also times the one-example definition under ``jax.vmap``, interleaved with the fast path,
to show what the batched layout buys.
"""

from __future__ import annotations

import argparse
import time

import equinox as eqx
import jax
import numpy as np

from transformer_intro import VisionTransformer, count_parameters
from transformer_intro.tasks import ImageClassification
from transformer_intro.training import Recipe, run_steps


class _VmapModel(eqx.Module):
    """The one-example ``__call__`` under ``jax.vmap``, in place of the fast ``batched`` path."""

    inner: VisionTransformer

    def batched(self, images):
        return jax.vmap(self.inner)(images)


class FixedBatch(eqx.Module):
    """A task that hands out the same batch at every step: the step's cost, no data pipeline."""

    task: ImageClassification
    fixed: dict

    def batch(self, key, batch_size):
        return self.fixed

    def loss(self, model, batch):
        return self.task.loss(model, batch)


def random_task(batch_size: int, seed: int = 0) -> FixedBatch:
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (batch_size, 28, 28), dtype=np.uint8)
    task = ImageClassification((images, rng.integers(0, 10, batch_size)))
    return FixedBatch(task, task.batch(jax.random.PRNGKey(seed), batch_size))


class JaxRunner:
    """``training.fit``'s compiled steps for a package model on one fixed random batch."""

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
        self.recipe = Recipe(
            steps=100_000,
            batch_size=batch_size,
            learning_rate=1e-3,
            weight_decay=1e-4,
            decay="all",
            micro_batches=batch_size // (micro_batch_size or batch_size),
        )
        self.opt_state = self.recipe.optimiser().init(eqx.filter(self.model, eqx.is_inexact_array))
        self.task = random_task(batch_size)
        self.batch_size = batch_size
        self.run(3)  # compile and warm up

    def run(self, steps: int) -> float:
        start = time.perf_counter()
        self.model, self.opt_state, losses, _ = run_steps(
            self.model, self.opt_state, self.task, np.int32(0), recipe=self.recipe, count=steps
        )
        jax.block_until_ready(losses)
        return time.perf_counter() - start


def steps_for(runner, seconds: float) -> int:
    """How many steps fill about ``seconds``, from one timed probe step."""
    runner.run(1)  # compile the one-step call
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
        for k, r in runners.items():
            r.run(steps[k])  # compile the timed call's length
        rates = {k: [] for k in runners}
        for _ in range(args.rounds):
            for k, r in runners.items():
                rates[k].append(steps[k] * batch_size / r.run(steps[k]))
        for k, values in rates.items():
            first = next(iter(rates))
            ratio = np.median(values) / np.median(rates[first])
            print(
                f"batch {batch_size:4d}  layout/micro-batch {k:12s}  "
                f"{np.median(values):8.1f} images/s  (ratio to {first}: {ratio:.2f}x)",
                flush=True,
            )


if __name__ == "__main__":
    main()
