"""Compile and run times of a language model's blocks run by a Python loop and by ``lax.scan``.

``LMConfig(scan_blocks=True)`` stores the M blocks stacked and runs them with one ``lax.scan``,
so XLA compiles one block instead of M. This measures what that changes, each variant in a fresh
process (nothing compiled is shared), loop and scan alternating, ``--repeats`` times:

* chapter 9's model (M = 4), one AdamW training step on 32 windows of 64 characters: the first
  call (tracing, compiling, running) and the best of 20 later calls;
* SmolLM2-135M (M = 30, when its file is present): the forward pass of a 32-token chat prompt,
  and ``generate_ids`` of 30 greedy tokens, first call and best of 3 later calls.

    python benchmarks/scan_blocks.py [--repeats 3] [--out benchmarks/results/scan_blocks.json]

Prints the medians and the ratios scan / loop, and writes every run with the machine's
processor, its instruction set as XLA sees it, and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _best(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        tic = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - tic)
    return best


def measure_training(scan: bool) -> dict:
    import equinox as eqx
    import jax
    import optax

    from transformer_intro.models import SHAKESPEARE_CONFIG, LanguageModel

    model = LanguageModel(SHAKESPEARE_CONFIG.replace(scan_blocks=scan), key=jax.random.PRNGKey(0))
    optimiser = optax.adamw(1e-3)
    state = optimiser.init(eqx.filter(model, eqx.is_array))
    windows = jax.random.randint(jax.random.PRNGKey(1), (32, 65), 0, SHAKESPEARE_CONFIG.vocab_size)

    @eqx.filter_jit
    def step(model, state, windows):
        def loss(model):
            log_p = jax.nn.log_softmax(model.batched(windows[:, :-1]))
            return -jax.numpy.take_along_axis(log_p, windows[:, 1:, None], -1).mean()

        value, grads = eqx.filter_value_and_grad(loss)(model)
        updates, state = optimiser.update(grads, state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, updates), state, value

    first = _best(lambda: jax.block_until_ready(step(model, state, windows)), 1)
    later = _best(lambda: jax.block_until_ready(step(model, state, windows)), 20)
    return {"train_step_first_s": first, "train_step_s": later}


def measure_smollm2(scan: bool) -> dict:
    import equinox as eqx
    import jax.numpy as jnp

    from transformer_intro.models.generation import generate_ids
    from transformer_intro.pretrained import find_smollm2, load_smollm2

    try:
        model, tokenizer = load_smollm2(find_smollm2())
    except FileNotFoundError:
        return {}
    if scan:
        model = model.stacked()
    messages = [{"role": "user", "content": "Give me three tips for learning to cook."}]
    ids = tokenizer.encode(tokenizer.apply_chat_template(messages))
    forward = eqx.filter_jit(lambda m, x: m(x))
    x = jnp.asarray(ids)
    return {
        "prompt_tokens": len(ids),
        "forward_first_s": _best(lambda: forward(model, x).block_until_ready(), 1),
        "forward_s": _best(lambda: forward(model, x).block_until_ready(), 3),
        "generate_first_s": _best(lambda: generate_ids(model, ids, 30), 1),
        "generate_s": _best(lambda: generate_ids(model, ids, 30), 3),
    }


def one_run(scan: bool) -> dict:
    """Both measurements in a fresh process without a compilation cache."""
    code = (
        "import json, sys; sys.path.insert(0, 'benchmarks'); import scan_blocks as b; "
        f"print(json.dumps({{**b.measure_training({scan}), **b.measure_smollm2({scan})}}))"
    )
    env = {**os.environ, "JAX_ENABLE_COMPILATION_CACHE": "false"}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/scan_blocks.json"))
    args = parser.parse_args()
    from report import machine, write_json  # beside this script

    load_before = os.getloadavg()
    runs = {"loop": [], "scan": []}
    for _ in range(args.repeats):
        for variant in ("loop", "scan"):
            runs[variant].append(one_run(variant == "scan"))
            print(variant, runs[variant][-1], flush=True)
    medians = {
        variant: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        for variant, rs in runs.items()
    }
    print(f"{'':22s} {'loop':>9s} {'scan':>9s} {'scan/loop':>9s}")
    for k in medians["loop"]:
        loop, scan = medians["loop"][k], medians["scan"][k]
        print(f"{k:22s} {loop:9.3f} {scan:9.3f} {scan / loop:9.2f}")
    result = {
        "command": "python benchmarks/scan_blocks.py --repeats " + str(args.repeats),
        "machine": machine(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "runs": runs,
        "medians": medians,
    }
    out = Path(args.out)
    write_json(out, result)
    print("written", out.relative_to(REPO) if out.is_relative_to(REPO) else out)


if __name__ == "__main__":
    main()
