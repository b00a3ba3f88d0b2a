"""Interleaved train-throughput comparison: the package's `reference` ViT (JAX) against a
TensorFlow/Keras port of the reference text's own code (benchmarks/tf/reference_vit.py), same
architecture, same batch sizes, in one process.

Each round times a fixed number of train steps (forward + backward + update, after compilation)
of every contender in turn, so that load from other processes hits all of them alike; the
medians over rounds and their ratios are printed. The same rounds also time matrix products
(benchmarks/matmul_peak.py), so that every rate can be set beside what the machine can do at all:
both implementations do the same arithmetic, which XLA counts for the JAX step. Run it with
`make bench` (TensorFlow lives in its own environment, .venv-bench, never in requirements.txt).

    python benchmarks/compare_reference.py [--batch-sizes 16 128] [--rounds 5] [--seconds 6] [--xla]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).parent / "tf"))
sys.path.insert(0, str(Path(__file__).parent))

from matmul_peak import (  # noqa: E402
    best_rate,
    peak_table,
    print_peak_table,
    train_step_flops_per_image,
)
from throughput import JaxRunner, steps_for  # noqa: E402


class TensorFlowRunner:
    """A compiled train step of the TensorFlow reference ViT on one fixed random batch."""

    def __init__(self, batch_size: int, *, jit_compile: bool = False):
        import reference_vit as ref

        self.model = ref.build_reference_model(seed=0)
        optimizer, loss_fn = ref.make_optimizer_and_loss()
        self.step = ref.make_train_step(self.model, optimizer, loss_fn, jit_compile=jit_compile)
        self.images, self.labels = ref.random_batch(batch_size)
        self.batch_size = batch_size
        self.run(3)  # trace, compile, warm up

    def run(self, steps: int) -> float:
        start = time.perf_counter()
        for _ in range(steps):
            loss = self.step(self.images, self.labels)
        float(loss)  # waits for the last step
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[16, 128])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--seconds", type=float, default=6.0, help="timed seconds per contender per round"
    )
    parser.add_argument(
        "--xla", action="store_true", help="also time TensorFlow with jit_compile=True"
    )
    parser.add_argument(
        "--jax-micro-batch",
        type=int,
        default=16,
        help="also time JAX accumulating gradients over micro-batches of this size, for batch "
        "sizes above it (the same update as the whole batch; 0 to skip)",
    )
    args = parser.parse_args()

    for batch_size in args.batch_sizes:
        contenders = {"tensorflow": TensorFlowRunner(batch_size)}
        if args.xla:
            contenders["tensorflow+xla"] = TensorFlowRunner(batch_size, jit_compile=True)
        contenders["jax (transformer_intro)"] = JaxRunner("reference", batch_size)
        if 0 < args.jax_micro_batch < batch_size:
            contenders[f"jax, micro-batches of {args.jax_micro_batch}"] = JaxRunner(
                "reference", batch_size, micro_batch_size=args.jax_micro_batch
            )
        steps = {name: steps_for(r, args.seconds) for name, r in contenders.items()}
        for name, runner in contenders.items():
            runner.run(steps[name])  # compile (JAX) or warm up at the timed length
        rates = {name: [] for name in contenders}
        products = []
        for _ in range(args.rounds):
            for name, runner in contenders.items():
                rates[name].append(steps[name] * batch_size / runner.run(steps[name]))
            products.append(peak_table(batch_size, rounds=1))
        products = {case: float(np.median([p[case] for p in products])) for case in products[0]}
        flops = train_step_flops_per_image("reference", batch_size)
        baseline = np.median(rates["tensorflow"])
        print(
            f"\nbatch size {batch_size} ({args.rounds} interleaved rounds, median images/s; "
            f"{flops / 1e9:.2f} GFLOP per image)"
        )
        for name, values in rates.items():
            median = np.median(values)
            print(
                f"  {name:26s} {median:8.1f} images/s   "
                f"ratio to tensorflow {median / baseline:5.2f}x"
                f"   (range {min(values):.1f}-{max(values):.1f})   "
                f"{median * flops / 1e9:5.0f} GFLOP/s"
            )
        print_peak_table(products, batch_size)
        peak = best_rate(products, "float32")
        needed = 2 * baseline * flops / 1e9
        print(
            f"  twice tensorflow, {2 * baseline:.0f} images/s, "
            f"needs {needed:.0f} GFLOP/s sustained: "
            f"{needed / peak:.0%} of the best float32 product rate above ({peak:.0f} GFLOP/s)"
        )


if __name__ == "__main__":
    main()
