"""TensorFloat-32 rounding, to see on any machine what a GPU's default matrix products do.

On NVIDIA GPUs since Ampere, XLA multiplies float32 matrices on the tensor cores in TF32 unless
told otherwise: each operand keeps float32's 8-bit exponent but only 10 of its 23 mantissa bits,
and the products are summed in float32. A CPU ignores the precision setting, so the book emulates
the rounding here to measure the error it causes (chapter 1, "A note on precision"; the tests in
tests/test_precision.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

__all__ = ["TF32_MANTISSA_BITS", "round_to_tf32"]

TF32_MANTISSA_BITS = 10
_DROPPED_BITS = 23 - TF32_MANTISSA_BITS


def round_to_tf32(x: Float[ArrayLike, ...]) -> Float[Array, ...]:
    """Round float32 values to the nearest TF32 value (ties away from zero), still as float32.

    The relative rounding error is at most 2^-11, about 4.9e-4, against 2^-24 (6e-8) for float32.
    Rounding to nearest is the gentler of the two conversions a GPU may use (the other truncates),
    so errors measured with it are a lower bound on what a GPU shows.

    Raises:
        ValueError: if the values are not float32.
    """
    x = jnp.asarray(x)
    if x.dtype != jnp.float32:
        raise ValueError(f"round_to_tf32 expects float32 values, got dtype {x.dtype}")
    bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
    # Adding half a unit of the last kept bit, then clearing the dropped bits, rounds the
    # magnitude to nearest; a carry into the exponent is the correct result (1.999.. -> 2).
    half_unit = jnp.uint32(1 << (_DROPPED_BITS - 1))
    kept = jnp.uint32((0xFFFFFFFF >> _DROPPED_BITS) << _DROPPED_BITS)
    return jax.lax.bitcast_convert_type((bits + half_unit) & kept, jnp.float32)
