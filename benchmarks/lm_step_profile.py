"""Where one training step of chapter 14's language models spends this CPU's time.

For each run named (by default chapter 9's model and the combined recipe that chapter 14
re-trains), the configuration and recipe come from benchmarks/results/lm_ablation.json. One
training step (``training.train_step``: gradient and optimiser update) is compiled and timed on
a batch of the Shakespeare task, then traced with JAX's profiler. It prints, per step:

* wall-clock and CPU milliseconds (the CPU time of every thread of this process), and the wall
  milliseconds per step of the same step inside ``fit``'s compiled loop (``run_steps``); the
  figures below are for the step called alone;
* the FLOPs XLA counts for the step, and the rate they are done at, per wall and CPU second;
* how the CPU time divides between matrix products (XLA's dot kernels, which on a CPU run as
  dot or XNNPACK/YNNPACK fusions) and everything else (the element-wise and layout work around
  them), with the largest kinds of the rest;
* the float32 rate of this machine for one large matrix product of the step, (B N) x D by
  D x 4D, alone (``benchmarks/matmul_peak.py``'s measurement), on all cores and per core.

A step whose products run near that rate, and whose products take most of the time, is bound by
arithmetic: only fewer FLOPs or a faster machine shorten it. It asserts nothing.

    python benchmarks/lm_step_profile.py [--runs baseline combined_plus] [--steps 10]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import tempfile
import time
from pathlib import Path

import equinox as eqx
import jax
from lm_ablation import RESULTS  # benchmarks/lm_ablation.py, which writes the runs
from matmul_peak import matmul_gflops  # benchmarks/matmul_peak.py, beside this script

from transformer_intro import LanguageModel, LMConfig, Vocabulary
from transformer_intro.datasets.shakespeare import load_shakespeare
from transformer_intro.tasks import NextSymbolPrediction
from transformer_intro.training import Recipe, batch_key, run_steps, train_step
from transformer_intro.training.format2 import lift_model_config


def step_and_inputs(run: dict, text: str, vocabulary: Vocabulary):
    """One ablation run's training step, compiled once, a model, state and batch for it, and more.

    The compiled step is the program that is counted, timed and traced alike. Also returned: the
    run's configuration, recipe and task.
    """
    # the results file records each run's configuration as its checkpoint would (format 2's
    # flat fields in the runs of before format 3)
    fields = (
        run["config"]
        if "block" in run["config"]
        else lift_model_config("LanguageModel", run["config"])
    )
    config = LMConfig.from_dict(fields)
    recipe = Recipe.from_json(json.dumps(run["recipe"]))
    task = NextSymbolPrediction(vocabulary.encode(text), window=config.window)
    model = LanguageModel(config, key=jax.random.PRNGKey(recipe.seed))
    optimiser = recipe.optimiser()
    state = optimiser.init(eqx.filter(model, eqx.is_inexact_array))
    batch = task.batch(batch_key(recipe.seed, 0), recipe.batch_size)
    step = eqx.filter_jit(lambda m, s, b: train_step(m, s, b, task=task, optimiser=optimiser)[:2])
    inputs = (model, state, batch)
    return step.lower(*inputs).compile(), inputs, config, recipe, task


def loop_seconds_per_step(model, state, task, recipe: Recipe) -> float:
    """Wall seconds per step as ``fit`` runs them: ``run_steps`` over ``steps_per_call`` steps.

    Best of three calls, after one that compiles. The loop keeps the model and optimiser state
    inside one compiled program from step to step, which a step called alone cannot.
    """
    count = recipe.steps_per_call
    jax.block_until_ready(run_steps(model, state, task, 0, recipe=recipe, count=count))
    best = float("inf")
    for _ in range(3):
        tic = time.perf_counter()
        jax.block_until_ready(run_steps(model, state, task, 0, recipe=recipe, count=count))
        best = min(best, (time.perf_counter() - tic) / count)
    return best


def step_flops(step) -> float:
    """The FLOPs of one compiled step, as XLA counts them."""
    cost = step.compiled.cost_analysis()
    return (cost[0] if isinstance(cost, list) else cost)["flops"]


def time_steps(step, inputs, steps: int) -> tuple[float, float]:
    """Best of three: (wall, CPU) seconds per step."""
    jax.block_until_ready(step(*inputs))
    best = (float("inf"), float("inf"))
    for _ in range(3):
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(steps):
            out = step(*inputs)
        jax.block_until_ready(out)
        result = ((time.perf_counter() - wall) / steps, (time.process_time() - cpu) / steps)
        best = min(best, result)
    return best


def kernel_kind(name: str) -> str:
    """A profiled XLA kernel's kind: "matrix product", or its fusion's name without a number."""
    kind = name.split(".")[0]
    if kind in ("dot", "dot_general") or kind.endswith(("ynn_fusion", "xnn_fusion")):
        return "matrix product"
    return kind


def cpu_time_by_kind(step, inputs, steps: int) -> collections.Counter:
    """CPU milliseconds per step in each kind of XLA kernel, from a profiler trace."""
    with tempfile.TemporaryDirectory() as folder:
        jax.profiler.start_trace(folder)
        for _ in range(steps):
            jax.block_until_ready(step(*inputs))
        jax.profiler.stop_trace()
        trace = next(Path(folder).rglob("*.xplane.pb"))
        profile = jax.profiler.ProfileData.from_file(str(trace))
    kinds = collections.Counter()
    for plane in profile.planes:
        for line in plane.lines:
            # XLA's CPU kernels run on the client's and the intra-op pool's threads.
            if not line.name.startswith(("tf_XLAEigen", "tf_XLAPjRtCpuClient")):
                continue
            for event in line.events:
                if event.name.startswith(("ThunkExecutor", "end:")) or "Await" in event.name:
                    continue  # waiting, or the span of a whole program: not a kernel
                kinds[kernel_kind(event.name)] += event.duration_ns / 1e6 / steps
    return kinds


def profile(name: str, run: dict, text: str, vocabulary: Vocabulary, steps: int) -> None:
    step, inputs, config, recipe, task = step_and_inputs(run, text, vocabulary)
    flops = step_flops(step)
    wall, cpu = time_steps(step, inputs, steps)
    kinds = cpu_time_by_kind(step, inputs, steps)
    kernels = sum(kinds.values())
    products = kinds.pop("matrix product", 0.0)
    tokens = recipe.batch_size * config.window
    d = config.block.dim
    peak = matmul_gflops("x @ w", tokens, d, 4 * d, "float32")
    print(f"\n{run['label']} ({name}): batch {recipe.batch_size} x {config.window} tokens")
    model, state, _ = inputs
    loop = loop_seconds_per_step(model, state, task, recipe)
    print(f"  step: {wall * 1e3:.0f} ms wall, {cpu * 1e3:.0f} ms CPU")
    print(
        f"  the same step in fit's loop ({recipe.steps_per_call} steps per compiled call): "
        f"{loop * 1e3:.0f} ms wall"
    )
    print(
        f"  XLA's count: {flops / 1e9:.1f} GFLOP per step; {flops / wall / 1e9:.0f} GFLOP/s "
        f"per wall second, {flops / cpu / 1e9:.0f} per CPU second"
    )
    print(
        f"  profiled kernels, CPU ms per step: {kernels:.0f}; matrix products {products:.0f} "
        f"({products / kernels:.0%}), the rest {kernels - products:.0f}"
    )
    rest = ", ".join(f"{kind} {ms:.0f}" for kind, ms in kinds.most_common(5))
    print(f"  largest of the rest: {rest}")
    # Every FLOP XLA counts, over the products' time alone: an upper bound on their rate.
    print(
        f"  the products: at most {flops / (products / 1e3) / 1e9:.0f} GFLOP/s per CPU second; "
        f"one ({tokens} x {d}) x ({d} x {4 * d}) product alone: "
        f"{peak:.0f} GFLOP/s on {os.cpu_count()} cores, {peak / os.cpu_count():.0f} per core"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", nargs="+", default=["baseline", "combined_plus"])
    parser.add_argument("--steps", type=int, default=10, help="steps per timing and trace")
    args = parser.parse_args()
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    if jax.default_backend() != "cpu":
        parser.error(
            "this script profiles XLA's CPU kernels, and JAX runs on the "
            f"{jax.default_backend()}: run it with JAX_PLATFORMS=cpu"
        )
    runs = {run["name"]: run for run in json.loads(RESULTS.read_text())["runs"]}
    unknown = sorted(set(args.runs) - set(runs))
    if unknown:
        parser.error(f"no run named {unknown} in {RESULTS}; there are {sorted(runs)}")
    text = load_shakespeare("train")
    vocabulary = Vocabulary.from_text(text)
    print(f"{os.cpu_count()} CPU cores, JAX {jax.__version__} on the {jax.default_backend()}")
    for name in args.runs:
        profile(name, runs[name], text, vocabulary, args.steps)


if __name__ == "__main__":
    main()
