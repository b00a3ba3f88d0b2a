"""The roofline: what a machine's arithmetic and its memory allow a program (Williams et al., 2009).

A program that does ``F`` floating-point operations and moves ``Q`` bytes between memory and the
processor takes at least ``F / peak`` seconds for the arithmetic and ``Q / bandwidth`` for the
bytes, so its rate of arithmetic is at most

    min(peak, I x bandwidth),    I = F / Q  (its arithmetic intensity, FLOPs per byte).

Below the *ridge point* ``I = peak / bandwidth`` a program is bound by memory, above it by
arithmetic. This module measures the two roofs of the machine it runs on (a large matrix product,
a streaming read) and counts the FLOPs and bytes of each part of a transformer block, as the
compute appendix counts them: 2 FLOPs per weight per token for a matrix product, every operand
read once and every result written once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp

__all__ = [
    "Work",
    "attainable",
    "attention_work",
    "block_work",
    "matrix_product_work",
    "measure_bandwidth",
    "measure_matmul_peak",
    "ridge_point",
]


@dataclass(frozen=True)
class Work:
    """The FLOPs a program does and the bytes it moves; ``intensity`` is FLOPs per byte."""

    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOPs per byte moved."""
        return self.flops / self.bytes

    def __add__(self, other: Work) -> Work:
        return Work(self.flops + other.flops, self.bytes + other.bytes)


def attainable(intensity: float, peak: float, bandwidth: float) -> float:
    """The roofline's bound on FLOP/s at an arithmetic intensity: ``min(peak, I x bandwidth)``."""
    if intensity <= 0 or peak <= 0 or bandwidth <= 0:
        raise ValueError(
            "intensity, peak and bandwidth must be positive (FLOPs per byte, FLOP/s, bytes/s); "
            f"got {intensity}, {peak}, {bandwidth}"
        )
    return min(peak, intensity * bandwidth)


def ridge_point(peak: float, bandwidth: float) -> float:
    """The intensity (FLOPs per byte) above which the arithmetic, not the memory, binds."""
    return peak / bandwidth


def matrix_product_work(
    tokens: int, d_in: int, d_out: int, *, weight_bytes: float = 4.0, activation_bytes: float = 4.0
) -> Work:
    """One matrix W (d_out x d_in) applied to ``tokens`` tokens: ``2 T d_in d_out`` FLOPs.

    Bytes: the weights once (``weight_bytes`` each: 4 for float32, 34/32 for Q8_0, 20/32 for
    Q4_1), the inputs read and the outputs written once (``activation_bytes`` each).
    """
    flops = 2.0 * tokens * d_in * d_out
    moved = weight_bytes * d_in * d_out + activation_bytes * tokens * (d_in + d_out)
    return Work(flops, moved)


def attention_work(queries: int, keys: int, key_width: int, heads: int, *, plain: bool) -> Work:
    """The scores ``k_n'ᵀ q_n`` and the weighted values of ``heads`` heads, float32.

    ``4 N_q N_k K`` FLOPs per head (scores and values, value width K). The queries, keys, values
    and outputs are read or written once; the plain form also writes and reads back its
    ``N_q x N_k`` weights, twice each (scores, then softmax weights), which the tiled form keeps
    in fast memory.
    """
    flops = 4.0 * queries * keys * key_width * heads
    moved = 4.0 * heads * key_width * (2 * queries + 2 * keys)
    if plain:
        moved += 4.0 * heads * 4 * queries * keys
    return Work(flops, moved)


def block_work(config, tokens: int, *, weight_bytes: float = 4.0) -> dict[str, Work]:
    """Each matrix product of one block of ``config`` applied to ``tokens`` tokens at once.

    ``tokens`` is B N in training (every token of the batch in one product), the prompt's
    length in prefill, and 1 (or the batch) in decoding. Keys: the query, key, value and output
    projections and the MLP's matrices (three when gated).
    """
    block = config.block  # every model's blocks are described alike
    d, f, k = block.dim, block.mlp_hidden_dim, block.keys_dim
    heads = block.num_heads
    kv_heads = block.num_kv_heads or heads
    product = lambda d_in, d_out: matrix_product_work(  # noqa: E731
        tokens, d_in, d_out, weight_bytes=weight_bytes
    )
    parts = {
        "queries": product(d, heads * k),
        "keys": product(d, kv_heads * k),
        "values": product(d, kv_heads * k),
        "output": product(heads * k, d),
    }
    if block.mlp == "gated":
        parts |= {"MLP gate": product(d, f), "MLP up": product(d, f), "MLP down": product(f, d)}
    else:
        parts |= {"MLP up": product(d, f), "MLP down": product(f, d)}
    return parts


def _rate(fn, args, seconds: float) -> tuple[int, float]:
    """(calls, elapsed seconds) of repeated calls of a compiled ``fn`` for about ``seconds``."""
    fn(*args).block_until_ready()  # compile and warm up
    calls, start = 0, time.perf_counter()
    while True:
        fn(*args).block_until_ready()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return calls, elapsed


def measure_matmul_peak(size: int = 1024, seconds: float = 0.5) -> float:
    """FLOP/s of a float32 (size x size) by (size x size) product, repeated for ``seconds``."""
    a = jax.random.normal(jax.random.PRNGKey(0), (size, size))
    b = jax.random.normal(jax.random.PRNGKey(1), (size, size))
    calls, elapsed = _rate(jax.jit(jnp.matmul), (a, b), seconds)
    return 2.0 * size**3 * calls / elapsed


def measure_bandwidth(mebibytes: int = 256, seconds: float = 0.5) -> float:
    """Bytes per second of a streaming read: the sum of a float32 array far larger than the caches.

    One addition per 4 bytes read is far below any processor's arithmetic rate, so the time is
    the memory's.
    """
    x = jnp.ones((mebibytes * 2**20 // 4,), jnp.float32)
    calls, elapsed = _rate(jax.jit(jnp.sum), (x,), seconds)
    return x.nbytes * calls / elapsed
