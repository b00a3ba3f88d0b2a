"""Weights kept in GGUF's block formats, Q8_0 and Q4_1, and multiplied without unpacking them.

Each row of a weight matrix is cut into blocks of 32 weights along its input axis. A block keeps
small integer codes and one or two float16 numbers:

* **Q8_0**: 32 codes ``q`` in -127..127 and a scale ``d = max |w| / 127``: ``w ≈ d q``
  (34 bytes per block, 8.5 bits per weight);
* **Q4_1**: 32 codes ``q`` in 0..15, two to a byte, a scale ``d = (max w - min w) / 15`` and a
  minimum ``m = min w``: ``w ≈ d q + m`` (20 bytes per block, 5 bits per weight).

:func:`quantise` makes them from float weights (scale and minimum rounded to float16 first, the
codes rounded to the nearest step of the rounded scale, as llama.cpp's reference quantisers do);
:func:`from_gguf_blocks` takes them straight from a GGUF file's bytes. A
:class:`QuantisedMatrix` holds them and acts on a vector like the matrix it stands for.

Its product has two implementations, equal up to the order of float32 additions (a test checks
it, and that the check rejects swapped scales and minima):

* the readable one, in XLA: dequantise every weight to float32, then multiply. It runs on any
  device, and holds the float32 matrix while it runs;
* on an x86-64 CPU with AVX2, FMA and F16C, a C++ kernel (``native/quantised_matmul.cc``) called
  from the compiled program through ``jax.ffi``: it turns one block at a time back into floats
  and multiplies it by every vector at once, so the weights stream from memory once, in 4 to 7
  times fewer bytes than float32. g++ builds it on first use into the package's cache folder
  (``$TRANSFORMER_INTRO_CACHE``, by default ``~/.cache/transformer_intro``); set
  ``TRANSFORMER_INTRO_NATIVE=0`` to use XLA's product instead. :func:`native_kernels_missing`
  says why the kernel is not used, when it is not.

A matrix may also round each vector it multiplies to Q8_0 blocks first (``vector_format="Q8_0"``,
as llama.cpp does, :func:`with_vector_format`): per block of 32 inputs a scale ``e = max |x| /
127`` and codes ``r = round(x / e)``. The kernel then sums ``q r`` in integers, about twice as
fast; the product is that of the dequantised matrix with the dequantised vector, no longer with
the vector itself.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int

__all__ = [
    "BLOCK",
    "FORMATS",
    "QuantisedMatrix",
    "from_gguf_blocks",
    "gguf_block_arrays",
    "holds_blocks",
    "native_kernels_missing",
    "quantise",
    "quantised_vector",
    "with_vector_format",
]

#: Weights per block, along a row's input axis.
BLOCK = 32
#: The block formats, with the bytes one block takes in a GGUF file.
FORMATS = {"Q8_0": 34, "Q4_1": 20}


def _check_format(format: str) -> None:
    if format not in FORMATS:
        raise ValueError(f"unknown block format {format!r}; choose from {list(FORMATS)}")


def _check_vector_format(vector_format: str | None) -> None:
    if vector_format not in (None, "Q8_0"):
        raise ValueError(f"vector_format must be None or 'Q8_0', got {vector_format!r}")


class QuantisedMatrix(eqx.Module):
    """A float array of shape (..., D_in), kept as blocks of 32 along its last axis.

    It acts like the matrix (rows = every index but the last) on one vector:
    ``W(x)`` is ``W x``, of shape ``W.shape[:-1]``; ``jax.vmap`` over ``x`` multiplies many
    vectors in one pass over the weights. ``W[ids]`` dequantises rows of a 2-D array (a token
    table). :meth:`dequantised` is the float32 array itself.

    Attributes:
        codes: Q8_0: int8 (..., D_in); Q4_1: uint8 (..., D_in / 2), block k's codes 0-15 in the
            low four bits of its 16 bytes and codes 16-31 in the high four, as GGUF packs them.
        scales: d, float16 (..., D_in / 32).
        minima: m, float16 (..., D_in / 32) for Q4_1; None for Q8_0.
        format: ``"Q8_0"`` or ``"Q4_1"``.
        vector_format: None to multiply vectors as they are; ``"Q8_0"`` to round each one to
            Q8_0 blocks first (:func:`quantised_vector`), as llama.cpp does.
        layer: None, or (:meth:`of_layer`) the index m along the arrays' leading axis, which
            then stacks M matrices: this one is matrix m, read where it lies in the stack.
    """

    codes: Int[Array, "*rows packed"]
    scales: Float[Array, "*rows blocks"]
    minima: Float[Array, "*rows blocks"] | None
    layer: Int[Array, ""] | None
    format: str = eqx.field(static=True)
    vector_format: str | None = eqx.field(static=True)

    def __init__(self, codes, scales, minima=None, *, format: str, vector_format=None, layer=None):
        """Hold blocks already quantised; :func:`quantise` makes them from float weights.

        Raises:
            ValueError: if the format is unknown, or the arrays' types or shapes do not make
                blocks of that format, or a layer is given for arrays without a leading axis.
        """
        _check_format(format)
        _check_vector_format(vector_format)
        codes, scales = jnp.asarray(codes), jnp.asarray(scales, jnp.float16)
        want = jnp.int8 if format == "Q8_0" else jnp.uint8
        if codes.dtype != want:
            raise ValueError(f"{format} codes are {jnp.dtype(want).name}, got {codes.dtype}")
        weights_per_row = codes.shape[-1] * (1 if format == "Q8_0" else 2) if codes.ndim else 0
        want = (*codes.shape[:-1], weights_per_row // BLOCK)
        if weights_per_row == 0 or weights_per_row % BLOCK or scales.shape != want:
            raise ValueError(
                f"{format} codes of shape {codes.shape} need scales of shape {want} (one per "
                f"{BLOCK} weights, in rows of whole blocks), got {scales.shape}"
            )
        if (minima is None) != (format == "Q8_0"):
            raise ValueError("Q4_1 blocks need minima; Q8_0 blocks have none")
        if minima is not None:
            minima = jnp.asarray(minima, jnp.float16)
            if minima.shape != scales.shape:
                raise ValueError(f"minima {minima.shape} and scales {scales.shape} differ")
        if layer is not None:
            if codes.ndim < 2:
                raise ValueError(
                    f"a layer is an index along a leading axis of stacked matrices; codes of "
                    f"shape {codes.shape} have none"
                )
            layer = jnp.asarray(layer, jnp.int32)
        self.codes, self.scales, self.minima, self.format = codes, scales, minima, format
        self.vector_format, self.layer = vector_format, layer

    def of_layer(self, m: Int[ArrayLike, ""]) -> QuantisedMatrix:
        """Matrix m of the M stacked along the leading axis, without copying its blocks out.

        A scanned model's step takes its block's matrices so: the kernel reads matrix m in the
        stack, where a slice (``codes[m]``) would be copied before every product.
        """
        return dataclasses.replace(self, layer=m)

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the float array it stands for: (..., D_in) (of matrix m, for a layer)."""
        rows = self.scales.shape[:-1] if self.layer is None else self.scales.shape[1:-1]
        return (*rows, self.scales.shape[-1] * BLOCK)

    def _own(self) -> tuple:
        """Codes, scales and minima of this matrix (of matrix m alone, for a layer)."""
        arrays = (self.codes, self.scales, self.minima)
        if self.layer is None:
            return arrays
        return tuple(None if a is None else a[self.layer] for a in arrays)

    @property
    def nbytes(self) -> int:
        """The bytes it holds: codes, scales and minima."""
        return sum(a.nbytes for a in (self.codes, self.scales, self.minima) if a is not None)

    def _weights(self, codes, scales, minima) -> Float[Array, "... D_in"]:
        """Blocks -> float32 weights, ``d q`` or ``d q + m``, for any leading shape."""
        if self.format == "Q4_1":  # two codes to a byte: per block, 16 low halves then 16 high
            packed = codes.reshape(*codes.shape[:-1], -1, BLOCK // 2)
            codes = jnp.concatenate([packed & 15, packed >> 4], axis=-1)
        q = codes.reshape(*scales.shape, BLOCK).astype(jnp.float32)
        w = scales.astype(jnp.float32)[..., None] * q
        if minima is not None:
            w = w + minima.astype(jnp.float32)[..., None]
        return w.reshape(*scales.shape[:-1], -1)

    def dequantised(self) -> Float[Array, "... D_in"]:
        """The float32 array the blocks stand for."""
        return self._weights(*self._own())

    def __getitem__(self, rows) -> Float[Array, "... D_in"]:
        """Rows of the array, dequantised (only those rows are)."""
        codes, scales, minima = self._own()
        minima = None if minima is None else minima[rows]
        return self._weights(codes[rows], scales[rows], minima)

    def __matmul__(self, x: Float[Array, " D_in"]) -> Float[Array, ...]:
        """``W @ x`` is ``W(x)``, so that a layer computing ``weight @ x`` takes either."""
        return self(x)

    @property
    def T(self) -> _Transposed:
        """``Wᵀ``, for ``x @ W.T`` with tokens in rows (a read-out by the token table)."""
        return _Transposed(self)

    def __call__(self, x: Float[Array, " D_in"]) -> Float[Array, ...]:
        """``W x``: the product with one vector, of shape ``self.shape[:-1]``.

        Raises:
            ValueError: if x is not one vector of length D_in.
        """
        if x.shape != self.shape[-1:]:
            raise ValueError(f"expected a vector of shape {self.shape[-1:]}, got {x.shape}")
        x = x.astype(jnp.float32)
        if jax.default_backend() == "cpu" and native_kernels_missing() is None:
            return _native_product(self, x)
        if self.vector_format == "Q8_0":
            x = quantised_vector(x)
        return self.dequantised() @ x


class _Transposed:
    """``Wᵀ`` of one (D_out, D_in) matrix in blocks: ``x @ Wᵀ`` is ``W x`` for each row x."""

    def __init__(self, matrix: QuantisedMatrix):
        self.matrix = matrix

    def __rmatmul__(self, x: Float[Array, "... D_in"]) -> Float[Array, "... D_out"]:
        return jnp.vectorize(self.matrix, signature="(d)->(v)")(x)


def _is_matrix(x) -> bool:
    return isinstance(x, QuantisedMatrix)


def holds_blocks(tree) -> bool:
    """Whether any leaf of ``tree`` (a model, say) is a :class:`QuantisedMatrix`."""
    return any(_is_matrix(x) for x in jax.tree.leaves(tree, is_leaf=_is_matrix))


def quantised_vector(x: Float[Array, " D_in"]) -> Float[Array, " D_in"]:
    """The vector rounded to Q8_0 blocks, as the numbers the blocks stand for.

    Per block of 32 inputs, ``e r`` with ``e = max |x| / 127`` and ``r = round(x / e)`` (halves
    to even; a block of zeros stays zeros).
    """
    blocks = x.reshape(-1, BLOCK)
    e = jnp.abs(blocks).max(-1, keepdims=True) / jnp.float32(127)
    inverse = jnp.where(e == 0, jnp.float32(0), jnp.float32(1) / jnp.where(e == 0, 1, e))
    return (e * jnp.round(blocks * inverse)).reshape(x.shape)


def with_vector_format(tree, vector_format: str | None):
    """``tree`` (a model, say) with every :class:`QuantisedMatrix` in it given ``vector_format``.

    Raises:
        ValueError: if ``vector_format`` is neither None nor ``"Q8_0"``.
    """
    _check_vector_format(vector_format)

    def convert(leaf):
        if not isinstance(leaf, QuantisedMatrix):
            return leaf
        return dataclasses.replace(leaf, vector_format=vector_format)

    return jax.tree.map(convert, tree, is_leaf=_is_matrix)


# -- making blocks ---------------------------------------------------------------------------------


def quantise(weight: Float[ArrayLike, "... D_in"], format: str) -> QuantisedMatrix:
    """Float weights as blocks of 32 along the last axis, in ``format``, as llama.cpp makes them.

    Q8_0: ``d = max |w| / 127``, ``q = round(w / d)`` (halves away from zero). Q4_1:
    ``d = (max w - min w) / 15``, ``m = min w``, ``q = round((w - m) / d)`` clipped to 0..15.
    The codes are computed with the float32 scale, which is then stored as float16 (the bytes
    equal those of llama.cpp's reference quantisers, ``gguf.quants.quantize``: a test checks
    it). A block of zeros gets ``d = 0`` and codes 0.

    Raises:
        ValueError: if the format is unknown or the last axis is not whole blocks.
    """
    _check_format(format)
    weight = np.asarray(weight, np.float32)
    if weight.ndim == 0 or weight.shape[-1] % BLOCK:
        raise ValueError(
            f"the last axis must be a multiple of {BLOCK} weights, got shape {weight.shape}"
        )
    blocks = weight.reshape(*weight.shape[:-1], -1, BLOCK)
    if format == "Q8_0":
        d = np.abs(blocks).max(-1, keepdims=True) / np.float32(127)
    else:
        low = blocks.min(-1, keepdims=True)
        d = (blocks.max(-1, keepdims=True) - low) / np.float32(15)
    with np.errstate(divide="ignore"):
        inverse = np.where(d == 0, np.float32(0), np.float32(1) / d)
    if format == "Q8_0":
        scaled = blocks * inverse
        magnitude = np.abs(scaled)  # rounded halves away from zero, as C's roundf
        q = np.sign(scaled) * (
            np.floor(magnitude) + np.floor(2 * (magnitude - np.floor(magnitude)))
        )
        codes = q.astype(np.int8).reshape(weight.shape)
        return QuantisedMatrix(codes, d[..., 0].astype(np.float16), format=format)
    q = np.trunc((blocks - low) * inverse + np.float32(0.5)).astype(np.uint8).clip(0, 15)
    packed = q[..., : BLOCK // 2] | (q[..., BLOCK // 2 :] << 4)
    codes = packed.reshape(*weight.shape[:-1], -1)
    return QuantisedMatrix(codes, d[..., 0].astype(np.float16), low[..., 0], format=format)


def from_gguf_blocks(raw: np.ndarray, format: str, shape: tuple[int, ...]) -> QuantisedMatrix:
    """A tensor's bytes as a GGUF file stores them (blocks one after another) as a matrix.

    Args:
        raw: the tensor's bytes (``gguf.GGUFReader``'s ``tensor.data``), uint8.
        format: the tensor's type, ``"Q8_0"`` or ``"Q4_1"``.
        shape: the float array's shape, (..., D_in), rows = outputs.

    Raises:
        ValueError: if the format is unknown or the bytes are not whole blocks of ``shape``.
    """
    return QuantisedMatrix(*gguf_block_arrays(raw, format, shape), format=format)


def gguf_block_arrays(raw: np.ndarray, format: str, shape: tuple[int, ...]) -> tuple:
    """:func:`from_gguf_blocks`'s codes, scales (and Q4_1's minima), as NumPy arrays.

    Raises:
        ValueError: as :func:`from_gguf_blocks`.
    """
    _check_format(format)
    raw = np.asarray(raw, np.uint8)
    size = FORMATS[format]
    if shape[-1] % BLOCK or raw.size != int(np.prod(shape)) // BLOCK * size:
        raise ValueError(
            f"{raw.size} bytes are not {format} blocks of an array of shape {tuple(shape)}"
        )
    blocks = raw.reshape(*shape[:-1], shape[-1] // BLOCK, size)
    d = np.ascontiguousarray(blocks[..., 0:2]).view(np.float16)[..., 0]
    if format == "Q8_0":
        codes = np.ascontiguousarray(blocks[..., 2:]).view(np.int8)
        return codes.reshape(shape), d
    m = np.ascontiguousarray(blocks[..., 2:4]).view(np.float16)[..., 0]
    codes = np.ascontiguousarray(blocks[..., 4:]).reshape(*shape[:-1], shape[-1] // 2)
    return codes, d, m


# -- the native kernel -----------------------------------------------------------------------------

_SOURCE = Path(__file__).resolve().parent / "native" / "quantised_matmul.cc"
# What the kernel is written with, and how g++ builds it: the same instructions on every
# processor that has them, so the same sums (not -march=native).
_NEEDS = ("avx2", "fma", "f16c")
_COMPILE = ["g++", "-O3", "-mavx2", "-mfma", "-mf16c", "-pthread", "-shared", "-fPIC"]
_COMPILE += ["-std=c++17", "-w"]
# Where the processor has AVX-512's VNNI, the integer sums of the Q8_0-vector products take one
# instruction instead of two. Integer sums are exact, so the answers are the same bits as the
# AVX2 build's (tests/test_quantisation.py compares the two); TRANSFORMER_INTRO_VNNI=0 asks for
# the AVX2 build.
_VNNI_NEEDS = ("avx512_vnni", "avx512vl")
_VNNI_COMPILE = ["-mavx512vnni", "-mavx512vl"]
# (matrix format, vector format) -> (the kernel's symbol, its name for XLA)
_TARGETS = {
    ("Q8_0", None): ("Q8_0MatMul", "transformer_intro_q8_0_matmul"),
    ("Q4_1", None): ("Q4_1MatMul", "transformer_intro_q4_1_matmul"),
    ("Q8_0", "Q8_0"): ("Q8_0MatMulQ8_0Vectors", "transformer_intro_q8_0_matmul_q8_0_vectors"),
    ("Q4_1", "Q8_0"): ("Q4_1MatMulQ8_0Vectors", "transformer_intro_q4_1_matmul_q8_0_vectors"),
}


def _cache_folder() -> Path:
    default = Path.home() / ".cache" / "transformer_intro"
    return Path(os.environ.get("TRANSFORMER_INTRO_CACHE", default)) / "native"


def _processor_lacks(needs: tuple[str, ...] = _NEEDS) -> list[str] | None:
    """The instructions of ``needs`` that this processor lacks; None if it cannot tell."""
    try:
        words = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return None
    return [flag for flag in needs if flag not in words]


def _compile_command() -> list[str]:
    """g++'s command for this processor: the VNNI build where it has VNNI and it is not refused."""
    if os.environ.get("TRANSFORMER_INTRO_VNNI", "1") != "0" and _processor_lacks(_VNNI_NEEDS) == []:
        return [*_COMPILE, *_VNNI_COMPILE]
    return list(_COMPILE)


def _build(folder: Path) -> Path:
    """The kernel's shared library, compiled once per source, JAX version and command.

    It is compiled into a temporary file in ``folder`` and renamed into place when complete, so
    two processes building at once, or one interrupted, never leave a partial library.
    """
    command = [*_compile_command(), "-I", jax.ffi.include_dir()]
    digest = hashlib.sha256(_SOURCE.read_bytes())
    digest.update(f"{jax.__version__} {' '.join(command)}".encode())
    library = folder / f"quantised_matmul-{digest.hexdigest()[:16]}.so"
    if library.exists():
        return library
    folder.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(suffix=".so", dir=folder)
    os.close(handle)
    try:
        subprocess.run(
            [*command, str(_SOURCE), "-o", partial], check=True, capture_output=True, text=True
        )
        os.replace(partial, library)
    finally:
        Path(partial).unlink(missing_ok=True)
    return library


@functools.cache
def native_kernels_missing() -> str | None:
    """Why the C++ kernel is not used here (a sentence), or None when it is.

    The first call builds it (g++, about 4 s) and registers it with XLA.
    """
    if os.environ.get("TRANSFORMER_INTRO_NATIVE", "1") == "0":
        return "TRANSFORMER_INTRO_NATIVE=0 asks for XLA's product"
    lacking = _processor_lacks()
    if lacking is None:
        return "cannot read /proc/cpuinfo to check the processor's instructions"
    if lacking:
        return f"the processor lacks {', '.join(lacking)}"
    if shutil.which("g++") is None:
        return "g++ is not installed, so the kernel cannot be built"
    try:
        library = ctypes.cdll.LoadLibrary(str(_build(_cache_folder())))
    except (OSError, subprocess.CalledProcessError) as error:
        details = getattr(error, "stderr", "") or str(error)
        return f"the kernel did not build or load: {details.strip()[-500:]}"
    for symbol, target in _TARGETS.values():
        handler = jax.ffi.pycapsule(getattr(library, symbol))
        jax.ffi.register_ffi_target(target, handler, platform="cpu")
    return None


def _native_product(matrix: QuantisedMatrix, x: Float[Array, " D_in"]) -> Float[Array, ...]:
    """``W x`` by the C++ kernel; under ``jax.vmap`` over x, one call for all the vectors."""
    result = jax.ShapeDtypeStruct(matrix.shape[:-1], jnp.float32)
    per_block = [a for a in (matrix.scales, matrix.minima) if a is not None]
    target = _TARGETS[matrix.format, matrix.vector_format][1]
    call = jax.ffi.ffi_call(target, result, vmap_method="expand_dims")
    layer = jnp.int32(0) if matrix.layer is None else matrix.layer
    return call(x, layer, matrix.codes, *per_block)
