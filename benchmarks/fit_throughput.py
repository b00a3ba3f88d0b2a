"""What the input pipeline and the loop's bookkeeping cost: `training.fit`'s training images per
second against the bare compiled steps' at the same batch size, on the current machine, in one
run. Prints figures; asserts nothing.

    python benchmarks/fit_throughput.py [--config default] [--batch-size 64] [--steps 300] \\
        [--rounds 3]

Two contenders, timed in turn in each round so that other load on the machine hits both alike:

* bare steps: `training.run_steps` (the steps `fit` compiles) on one batch already on the device,
  the ceiling;
* fit: `training.fit` for ``2 * --steps`` steps, the second half timed (the first compiles): the
  training split lives on the device, each batch gathered and shifted there with `jax.random`,
  and the host logs between compiled calls of ``steps_per_call`` steps.

The data are random MNIST-shaped digits: the speed does not depend on what the pixels show.
"""

from __future__ import annotations

import argparse

import jax
import numpy as np
from throughput import JaxRunner  # benchmarks/throughput.py, beside this script

from transformer_intro import VisionTransformer, count_parameters
from transformer_intro.tasks import VIT_RECIPE, ImageClassification
from transformer_intro.training import fit


def fit_seconds(model, task, recipe, steps: int) -> float:
    """Seconds of `fit`'s second ``steps`` steps (the first ones include compilation)."""
    _, history = fit(model, task, recipe.replace(steps=2 * steps), progress=False)
    return history.seconds[-1] - history.seconds[history.step.index(steps)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default="default")
    parser.add_argument("--batch-size", type=int, default=VIT_RECIPE.batch_size)
    parser.add_argument("--micro-batch-size", type=int, default=None)
    parser.add_argument("--steps", type=int, default=300, help="timed steps (a multiple of 25)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    recipe = VIT_RECIPE.replace(
        batch_size=args.batch_size,
        micro_batches=args.batch_size // (args.micro_batch_size or args.batch_size),
    )
    n = args.steps * args.batch_size
    rng = np.random.default_rng(0)
    task = ImageClassification(
        (rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), rng.integers(0, 10, n)), max_shift=2
    )
    model = VisionTransformer(args.config, key=jax.random.PRNGKey(0))
    print(
        f"config={args.config} parameters={count_parameters(model):,} batch={args.batch_size} "
        f"timed steps={args.steps} steps per call={recipe.steps_per_call} max_shift=2 "
        f"devices={jax.devices()}",
        flush=True,
    )
    bare = JaxRunner(args.config, args.batch_size, micro_batch_size=args.micro_batch_size)
    bare.run(args.steps)  # compile the timed length
    contenders = {
        "bare steps": lambda: bare.run(args.steps),
        "fit": lambda: fit_seconds(model, task, recipe, args.steps),
    }
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
    ceiling = np.median(rates["bare steps"])
    for name, values in rates.items():
        print(
            f"{name:12s} {np.median(values):10,.0f} images/s (median of {args.rounds})  "
            f"ratio to the bare steps: {np.median(values) / ceiling:.3f}"
        )


if __name__ == "__main__":
    main()
