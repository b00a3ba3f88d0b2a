"""The roofline of this machine, and FlashAttention's time against plain attention's.

Measures the two roofs (``transformer_intro.roofline``): the float32 matrix-product rate for
square products of several sizes (the largest rate is the peak) and the bandwidth of a streaming
read of arrays from 64 MiB to 1 GiB (the largest array's rate: past every cache). Then times one
forward and backward pass of causal attention, plain (the N x N matrix) and tiled
(``transformer_intro.flash_attention``), at several sequence lengths, with the scratch memory of
each compiled program. Run it on a quiet machine (load average under 0.5 on the cores it uses):
the cores are shared, and every figure here is a time.

    python benchmarks/roofline.py [--seconds 1.0] [--out benchmarks/results/roofline.json]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import machine, write_json  # beside this script  # noqa: E402

from transformer_intro.flash_attention import flash_attention, plain_attention  # noqa: E402
from transformer_intro.roofline import measure_bandwidth, measure_matmul_peak  # noqa: E402


def attention_step(attention, num_tokens: int, width: int, seconds: float) -> dict:
    """Seconds per forward and backward pass, and the compiled program's scratch bytes."""
    keys = jax.random.split(jax.random.PRNGKey(num_tokens), 3)
    k, q, v = (jax.random.normal(key, (num_tokens, width)) for key in keys)
    loss = lambda k, q, v: jnp.sum(attention(k, q, v) ** 2)  # noqa: E731
    step = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
    compiled = step.lower(k, q, v).compile()
    jax.block_until_ready(step(k, q, v))
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        jax.block_until_ready(step(k, q, v))
        calls += 1
    return {
        "seconds_per_step": (time.perf_counter() - start) / calls,
        "scratch_bytes": compiled.memory_analysis().temp_size_in_bytes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=1.0, help="per measurement")
    parser.add_argument("--out", default="benchmarks/results/roofline.json")
    args = parser.parse_args()
    load_before = os.getloadavg()
    products = {n: measure_matmul_peak(n, args.seconds) for n in (256, 512, 1024, 2048)}
    reads = {m: measure_bandwidth(m, args.seconds) for m in (64, 256, 1024)}
    for n, rate in products.items():
        print(f"{n} x {n} products: {rate / 1e9:.1f} GFLOP/s")
    for m, rate in reads.items():
        print(f"streaming read of {m} MiB: {rate / 1e9:.1f} GB/s")
    attention = {}
    forms = {
        "plain": lambda k, q, v: plain_attention(k, q, v, causal=True),
        "tiled": lambda k, q, v: flash_attention(k, q, v, causal=True),
    }
    for num_tokens in (512, 1024, 2048, 4096):
        attention[num_tokens] = {
            name: attention_step(form, num_tokens, 64, args.seconds) for name, form in forms.items()
        }
        row = attention[num_tokens]
        print(
            f"N = {num_tokens}: plain {1e3 * row['plain']['seconds_per_step']:.1f} ms, "
            f"tiled {1e3 * row['tiled']['seconds_per_step']:.1f} ms per forward and backward"
        )
    result = {
        "command": "python benchmarks/roofline.py " + " ".join(sys.argv[1:]),
        "machine": machine(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "seconds_per_measurement": args.seconds,
        "matmul_flops_per_s": {str(n): r for n, r in products.items()},
        "peak_flops_per_s": max(products.values()),
        "read_bytes_per_s": {str(m): r for m, r in reads.items()},
        "bandwidth_bytes_per_s": reads[max(reads)],
        "attention_width": 64,
        "causal_attention_forward_and_backward": {str(n): r for n, r in attention.items()},
    }
    write_json(args.out, result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
