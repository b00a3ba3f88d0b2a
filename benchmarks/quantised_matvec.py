"""One decoding step's matrix-vector products of SmolLM2-135M, with weights in 32, 16 or 8 bits.

Decoding one token multiplies every weight matrix of the model by one vector: the 7 matrices of
each of the 30 blocks and the 49,152 x 576 token table, 134.5 million weights. On a CPU that is
limited by how fast the weights stream from memory, so weights kept in fewer bits could decode
faster. This script measures whether XLA's CPU code gets that speed from JAX, timing one compiled
program per layout that runs all those products on random weights (the speed does not depend on
the values):

- ``float32``: ``W x``, the book's decoder today;
- ``bfloat16``: weights and vector in bfloat16, float32 accumulation;
- ``int8 dot``: int8 weights times an int8 vector, int32 accumulation (as in 8-bit inference with
  quantised activations);
- ``Q8_0, rows``: int8 codes and one scale per 32 weights of a row, dequantised inside a fused
  multiply-and-sum over each block, blocks along the input axis, the file's layout;
- ``Q8_0, columns``: the same codes stored input-major, as (in / 32, 32, out), the scale folded
  into the vector, and one fused multiply-and-sum over the input axis;
- ``Q8_0, native`` and ``Q4_1, native``: the file's block formats (float16 scales; Q4_1 with two
  4-bit codes per byte and a minimum per block) as the package keeps them,
  :class:`transformer_intro.quantisation.QuantisedMatrix`, whose products the package's C++
  kernel does (AVX2 and FMA, ``src/transformer_intro/native/quantised_matmul.cc``, called from
  the compiled program through ``jax.ffi``, its rows shared among XLA's own threads); ``Q8_0 x
  8-bit x, native`` and ``Q4_1 x 8-bit x, native`` are the same matrices with
  ``vector_format="Q8_0"``, which round the vector to 8 bits per block of 32 and sum each block
  in integers, as llama.cpp does. Where the kernel is not built (no g++, a processor without
  AVX2, ``TRANSFORMER_INTRO_NATIVE=0``) these four are left out. Before timing, each one's first
  product is checked against the dequantised matrix's.

Layouts run in turn, round after round; each figure is the best of its rounds. It prints the
milliseconds per step and the megabytes of weights each layout reads, and writes them to a JSON
file (in a temporary file, moved into place when complete: ``report.write_json``).

    python benchmarks/quantised_matvec.py --rounds 5 --out benchmarks/results/quantised_matvec.json
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from report import machine, write_json  # beside this script

from transformer_intro.quantisation import (
    QuantisedMatrix,
    native_kernels_missing,
    quantised_vector,
    with_vector_format,
)

BLOCK = 32
DIM, KV_DIM, HIDDEN, VOCAB, BLOCKS = 576, 192, 1536, 49152, 30
PER_BLOCK = [(DIM, DIM), (KV_DIM, DIM), (KV_DIM, DIM), (DIM, DIM), (HIDDEN, DIM), (HIDDEN, DIM)]
PER_BLOCK += [(DIM, HIDDEN)]
SHAPES = PER_BLOCK * BLOCKS + [(VOCAB, DIM)]  # (outputs, inputs)


def vector_for(x: jax.Array, n: int) -> jax.Array:
    """A length-n input from the step's vector (the MLP's down projection reads 1536)."""
    return x if n == x.shape[0] else jnp.resize(x, n)


def step_float(weights, x):
    return sum((w @ vector_for(x, w.shape[1])).sum() for w in weights)


def step_bfloat16(weights, x):
    return sum(
        jnp.dot(
            w, vector_for(x, w.shape[1]).astype(jnp.bfloat16), preferred_element_type=jnp.float32
        ).sum()
        for w in weights
    )


def step_int8(weights, x):
    scale = jnp.abs(x).max() / 127
    codes = jnp.round(x / scale).astype(jnp.int8)
    return sum(
        jnp.dot(q, vector_for(codes, q.shape[1]), preferred_element_type=jnp.int32).sum() * scale
        for q in weights
    )


def q8_rows(q, d, x):
    """y_i = sum_b d_ib sum_k q_i,bk x_bk; q (out, in) int8, d (out, in / 32)."""
    out, inp = q.shape
    x = vector_for(x, inp)
    products = q.reshape(out, inp // BLOCK, BLOCK).astype(jnp.float32) * x.reshape(-1, BLOCK)
    return (products.sum(-1) * d.astype(jnp.float32)).sum(-1)


def q8_columns(q, d, x):
    """The same sum with q stored (in / 32, 32, out) and d (in / 32, out) folded into x.

    The codes are kept in the shape the loop reads them in: stored as a 2-D (in, out) array and
    reshaped inside the program, the same sum ran about half as fast when tried.
    """
    x = vector_for(x, q.shape[0] * BLOCK)
    scaled = x.reshape(-1, BLOCK, 1) * d.astype(jnp.float32)[:, None, :]
    return (q.astype(jnp.float32) * scaled).sum((0, 1))


def step_q8(matvec):
    def step(weights, x):
        return sum(matvec(q, d, x).sum() for q, d in weights)

    return step


def step_blocks(weights, x):
    return sum(w(vector_for(x, w.shape[1])).sum() for w in weights)


def q4_1_blocks(rng: np.random.Generator, shape: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """Random Q4_1 weights: packed codes (out, in / 2) uint8, float16 scales and minima."""
    out, inp = shape
    codes = rng.integers(0, 16, (out, inp // BLOCK, BLOCK), dtype=np.uint8)
    packed = (codes[..., : BLOCK // 2] | (codes[..., BLOCK // 2 :] << 4)).reshape(out, inp // 2)
    d = ((1 + rng.random((out, inp // BLOCK))) * 1e-3).astype(np.float16)
    m = (-8 * d).astype(np.float16)
    return packed, d, m


def check_blocks(built: dict, x: jax.Array) -> None:
    """Each block layout's first product equals the dequantised matrix's (times the rounded vector).

    Where a layout rounds the vector, the product also differs from the unrounded one. The
    package's tests check the kernel in full; this checks that the benchmark times what it names.
    """
    for name, (_, weights, _) in built.items():
        if not name.startswith(("Q8_0, native", "Q8_0 x", "Q4_1")):
            continue
        w = weights[0]
        product = np.asarray(jax.jit(lambda w, x: w(x))(w, x))
        rounded = quantised_vector(x) if w.vector_format == "Q8_0" else x
        np.testing.assert_allclose(
            product, np.asarray(w.dequantised() @ rounded), rtol=1e-4, atol=1e-4
        )
        if w.vector_format == "Q8_0":
            assert not np.allclose(product, np.asarray(w.dequantised() @ x), rtol=1e-6, atol=1e-6)


def layouts(rng: np.random.Generator, native: bool = False) -> dict:
    """name -> (step function, weights, bytes of weights)."""
    floats = [rng.standard_normal(s, dtype=np.float32) * 0.05 for s in SHAPES]
    codes = [rng.integers(-127, 128, s, dtype=np.int8) for s in SHAPES]
    scales = [((1 + rng.random((s[0], s[1] // BLOCK))) * 1e-3).astype(np.float16) for s in SHAPES]

    def size(tree) -> int:
        return sum(a.nbytes for a in jax.tree.leaves(tree))

    as_rows = [(jnp.asarray(q), jnp.asarray(d)) for q, d in zip(codes, scales)]
    as_columns = [
        (jnp.asarray(q.T.reshape(-1, BLOCK, q.shape[0])), jnp.asarray(d.T))
        for q, d in zip(codes, scales)
    ]
    built = {
        "float32": (step_float, [jnp.asarray(w) for w in floats]),
        "bfloat16": (step_bfloat16, [jnp.asarray(w, jnp.bfloat16) for w in floats]),
        "int8 dot": (step_int8, [jnp.asarray(q) for q in codes]),
        "Q8_0, rows": (step_q8(q8_rows), as_rows),
        "Q8_0, columns": (step_q8(q8_columns), as_columns),
    }
    if native:
        q8 = [QuantisedMatrix(q, d, format="Q8_0") for q, d in zip(codes, scales)]
        q4 = [QuantisedMatrix(*q4_1_blocks(rng, s), format="Q4_1") for s in SHAPES]
        built["Q8_0, native"] = (step_blocks, q8)
        built["Q8_0 x 8-bit x, native"] = (step_blocks, with_vector_format(q8, "Q8_0"))
        built["Q4_1, native"] = (step_blocks, q4)
        built["Q4_1 x 8-bit x, native"] = (step_blocks, with_vector_format(q4, "Q8_0"))
    return {name: (jax.jit(step), w, size(w)) for name, (step, w) in built.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10, help="timed calls per round")
    parser.add_argument("--out", type=Path, default=None, help="JSON file for the figures")
    args = parser.parse_args()
    load_before = os.getloadavg()

    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal(DIM, dtype=np.float32))
    missing = native_kernels_missing()
    if missing is not None:
        print(f"{missing}: the native layouts are left out")
    built = layouts(rng, native=missing is None)
    check_blocks(built, x)
    compile_s, best = {}, {name: float("inf") for name in built}
    for name, (step, weights, _) in built.items():
        start = time.perf_counter()
        step(weights, x).block_until_ready()
        compile_s[name] = time.perf_counter() - start
    for _ in range(args.rounds):
        for name, (step, weights, _) in built.items():
            for _ in range(args.calls):
                start = time.perf_counter()
                step(weights, x).block_until_ready()
                best[name] = min(best[name], time.perf_counter() - start)

    base = best["float32"]
    print(f"{'layout':24s} {'weights, MB':>11s} {'ms per step':>11s} {'x float32':>9s}")
    rows = {}
    for name, (_, _, size) in built.items():
        rows[name] = {
            "weights_mb": size / 1e6,
            "ms_per_step": 1e3 * best[name],
            "relative_to_float32": best[name] / base,
            "first_call_s": compile_s[name],
        }
        print(f"{name:24s} {size / 1e6:11.1f} {1e3 * best[name]:11.1f} {best[name] / base:9.2f}")

    result = {
        "command": f"python benchmarks/quantised_matvec.py --rounds {args.rounds} "
        f"--calls {args.calls}",
        "machine": machine(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "weights": sum(a * b for a, b in SHAPES),
        "layouts": rows,
    }
    if args.out is not None:
        write_json(args.out, result)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
