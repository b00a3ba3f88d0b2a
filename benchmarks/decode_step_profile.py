"""Where one decoding step of the quantised SmolLM2 spends this CPU's time.

Chapter 19 bounds decoding by the bytes of the weights read per token and finds the package's
quantised SmolLM2 well below that bound (``benchmarks/results/pretrained_speed_blocks.json``).
This script says where a step's time goes. For each weight format (the file's blocks, and the
blocks with Q8_0 vectors), it loads the model, fills the cache with the benchmark's chat prompt
(``pretrained_speed.py``'s) and runs the package's decoding loop (``generation.decode``, one
``lax.scan`` of model steps, compiled as ``generate_ids`` compiles it) for ``--tokens`` greedy
tokens: first timed (best of ``--repeats``), then traced with JAX's profiler. Per token it
records:

* wall and CPU milliseconds (the CPU time of every thread of this process);
* the milliseconds of each kind of event in one traced run, summed over XLA's threads (as
  ``lm_step_profile.py`` reads a trace), each without the events it holds: the products with
  blocks (the package's C++ kernel, FFI calls), float products (dots: the attention over the
  cache), the fusions around them (norms, rotary positions, softmax, the cache's writes) by
  name, and the time between kernels (the self time of the loop's and the program's events:
  dispatch and waiting). An event's time is its span on its thread, which on a loaded machine
  includes waiting for a core: there the shares, not the sums, are the figures to read;
* the bound of chapter 19: the weights' bytes per token over the rate at which the float32 model
  streams its weights (measured here, the same way, with the float32 model), and the fraction
  of it the format reaches.

Writes ``benchmarks/results/decode_step_profile.json`` with the machine and the load average
before and after. It asserts nothing: the figures are this machine's, at its load.

    python benchmarks/decode_step_profile.py [--tokens 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from lm_step_profile import kernel_kind  # beside this script
from pretrained_speed import PROMPT
from report import machine, write_json

from transformer_intro.models.generation import compiled_decode, padded_prompt, prefill
from transformer_intro.pretrained import load_smollm2

RESULT = Path(__file__).resolve().parent / "results" / "decode_step_profile.json"
FORMATS = {  # name: load_smollm2's options
    "float32": {},
    "blocks": {"quantised": True},
    "blocks, Q8_0 vectors": {"quantised": True, "vector_format": "Q8_0"},
}


# The events that hold others: a program's run, its loop and its branches. Their self time (what
# is left after the kernels inside them) is the time between kernels: dispatch and waiting.
CONTAINERS = ("ThunkExecutor::Execute", "while", "cond", "call", "conditional")


def kind_of(name: str) -> str:
    """A traced event's kind: the package's products with blocks are its FFI calls."""
    kind = kernel_kind(name)
    if kind in ("ffi_call", "custom-call", "custom_call"):
        return "products with blocks (C++ kernel)"
    if kind == "matrix product":
        return "float products (dots: attention over the cache, float32 matrices)"
    if kind in CONTAINERS:
        return "between kernels (the loop, dispatch)"
    return kind


def self_time_by_kind(program, inputs) -> collections.Counter:
    """Milliseconds of one traced run in each kind of event, each without those it contains.

    An event's time is its span on its thread (on a loaded machine, waiting for a core
    included). A loop's event spans the kernels of its body on the same thread; counted whole,
    they would be counted twice.
    """
    with tempfile.TemporaryDirectory() as folder:
        jax.profiler.start_trace(folder)
        jax.block_until_ready(program(*inputs))
        jax.profiler.stop_trace()
        trace = next(Path(folder).rglob("*.xplane.pb"))
        profile = jax.profiler.ProfileData.from_file(str(trace))
    kinds = collections.Counter()
    for plane in profile.planes:
        for line in plane.lines:
            # XLA's CPU kernels run on the client's and the intra-op pool's threads.
            if not line.name.startswith(("tf_XLAEigen", "tf_XLAPjRtCpuClient")):
                continue
            events = sorted(
                (e for e in line.events if not e.name.startswith("end:")),
                key=lambda e: (e.start_ns, -e.duration_ns),
            )
            open_events = []  # [end, kind, own ns] of the events holding the current one
            for event in events:
                start = event.start_ns
                while open_events and open_events[-1][0] <= start:
                    _, kind, own = open_events.pop()
                    kinds[kind] += own / 1e6
                if open_events:
                    open_events[-1][2] -= event.duration_ns
                open_events.append(
                    [start + event.duration_ns, kind_of(event.name), event.duration_ns]
                )
            for _, kind, own in open_events:
                kinds[kind] += own / 1e6
    return kinds


def weight_bytes(model) -> int:
    """Bytes of every array of the model: what one decoding step reads at least once."""
    return sum(a.nbytes for a in jax.tree.leaves(model) if hasattr(a, "nbytes"))


def profile_format(name: str, options: dict, num_tokens: int, repeats: int) -> dict:
    model, tokenizer = load_smollm2(**options)
    ids = tokenizer.encode(tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}]))
    prompt, window = padded_prompt(model, np.asarray(ids, np.int32), num_tokens)
    prompt, length = jnp.asarray(prompt), jnp.int32(len(ids))
    key, temperature = jax.random.PRNGKey(0), jnp.float32(0.0)
    decode = compiled_decode(model, prompt, window, length, key, num_tokens, temperature)
    logits, cache = prefill(model, prompt, length, window)
    inputs = (model, logits, cache, length, key, num_tokens, temperature)

    jax.block_until_ready(decode(*inputs))
    wall, cpu = float("inf"), float("inf")
    for _ in range(repeats):
        tic, cpu_tic = time.perf_counter(), time.process_time()
        tokens = jax.block_until_ready(decode(*inputs))
        wall = min(wall, (time.perf_counter() - tic) / num_tokens)
        cpu = min(cpu, (time.process_time() - cpu_tic) / num_tokens)

    # One run of num_tokens steps. A trace now and then comes back nearly empty (the kernels'
    # threads not recorded); one that holds less than half the run's CPU time is taken again.
    traced, attempt = self_time_by_kind(decode, inputs), 1
    while sum(traced.values()) < 0.5 * cpu * 1e3 * num_tokens and attempt < 3:
        traced, attempt = self_time_by_kind(decode, inputs), attempt + 1
    kinds = collections.Counter({kind: ms / num_tokens for kind, ms in traced.items()})
    kernels = sum(kinds.values())
    row = {
        "weight_bytes": weight_bytes(model),
        "cache_positions": window,
        "prompt_tokens": len(ids),
        "tokens": num_tokens,
        "wall_ms_per_token": wall * 1e3,
        "cpu_ms_per_token": cpu * 1e3,
        "traced_thread_ms_per_token": kernels,
        "traces_taken": attempt,
        "traced_thread_ms_per_token_by_kind": dict(kinds.most_common()),
        "greedy_tokens": np.asarray(tokens).tolist(),
        "max_resident_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    print(
        f"\n{name}: {row['weight_bytes'] / 1e6:.1f} MB of arrays, cache of {window} positions; "
        f"{wall * 1e3:.1f} ms wall, {cpu * 1e3:.1f} ms CPU per token; kernels "
        f"traced ({attempt} trace(s)): {kernels:.1f} thread ms"
    )
    for kind, ms in kinds.most_common(8):
        print(f"  {kind:66s} {ms:7.2f} ms  {ms / kernels:5.0%}")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokens", type=int, default=32, help="greedy tokens per decoding run")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs, the best kept")
    args = parser.parse_args()
    if args.tokens < 1 or args.repeats < 1:
        parser.error(
            f"--tokens and --repeats must be at least 1, got {args.tokens}, {args.repeats}"
        )
    if jax.default_backend() != "cpu":
        parser.error(
            "this script profiles XLA's CPU kernels, and JAX runs on the "
            f"{jax.default_backend()}: run it with JAX_PLATFORMS=cpu"
        )
    load_before = os.getloadavg()
    print(f"{os.cpu_count()} CPU cores, JAX {jax.__version__}; load average {load_before}")
    rows = {name: profile_format(name, o, args.tokens, args.repeats) for name, o in FORMATS.items()}
    # Chapter 19's bound: the float32 model's rate of reading its weights stands in for the
    # memory's bandwidth, and each format's bound is that rate over its own bytes.
    stream = rows["float32"]["weight_bytes"] / (rows["float32"]["wall_ms_per_token"] / 1e3)
    for name, row in rows.items():
        bound_ms = row["weight_bytes"] / stream * 1e3
        row["bound_ms_per_token"] = bound_ms
        row["fraction_of_bound"] = bound_ms / row["wall_ms_per_token"]
        print(f"{name:24s} bound {bound_ms:6.1f} ms, reached {row['fraction_of_bound']:5.0%}")
    result = {
        "what": "one decoding step of SmolLM2 per weight format: time and kernels per token",
        "script": "benchmarks/decode_step_profile.py",
        "machine": machine(),
        "threads": os.cpu_count(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "streamed_bytes_per_s": stream,
        "formats": rows,
    }
    print(f"wrote {write_json(RESULT, result)}")


if __name__ == "__main__":
    main()
