"""Chapter 15 (a pretrained model): grouped-query heads, Q4_1 blocks, rotary row order."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..attention import MultiHeadAttention
from ..positions import half_to_interleaved
from .core import Case, Diagnosis, Exercise


def _per_query_head(kv, num_heads):
    layer = MultiHeadAttention(4, num_heads, 2, num_kv_heads=kv.shape[0],
                               key=jax.random.PRNGKey(0))  # fmt: skip
    return layer.per_query_head(kv)


def _kv_cases():
    rng = np.random.default_rng(28)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    return [
        Case("H = 9 query heads, H_kv = 3, keys (N = 2, K = 2)", (n(3, 2, 2), 9)),
        Case("H = 4, H_kv = 2", (n(2, 3, 2), 4)),
        Case("H = 3, H_kv = 1 (multi-query)", (n(1, 2, 2), 3)),
    ]


REPEAT_KV_HEADS = Exercise(
    name="repeat_kv_heads",
    chapter=15,
    title="Key-value heads repeated for their groups of query heads",
    reference=_per_query_head,
    cases=_kv_cases,
    output="(H, ...)",
    diagnoses=(
        Diagnosis.like(
            "tiled",
            "the key-value heads are tiled (0, 1, 2, 0, 1, 2, ...): query head h reads group "
            "h // (H / H_kv), so repeat each one H / H_kv times in a row (jnp.repeat)",
            lambda kv, h: jnp.tile(kv, (h // kv.shape[0],) + (1,) * (kv.ndim - 1)),
        ),
        Diagnosis.like(
            "no_repeat",
            "the key-value heads are not repeated: return one array per query head, H of them",
            lambda kv, h: kv,
        ),
    ),
)


def _q4_1_block(d, m, codes):
    scale = np.array([d, m], np.float16).view(np.uint8)
    packed = (codes[:16] | (codes[16:] << 4)).astype(np.uint8)
    return np.concatenate([scale, packed])


def _dequantise(block):
    import gguf  # the [pretrained] extra, imported when first needed

    return gguf.quants.dequantize(np.asarray(block, np.uint8), gguf.GGMLQuantizationType.Q4_1)


def _q4_cases():
    rng = np.random.default_rng(29)
    return [
        Case("d = 0.01, m = -0.08, random codes",
             (_q4_1_block(0.01, -0.08, rng.integers(0, 16, 32)),)),
        Case("d = 0.5, m = 1, codes 0, 1, ..., 15 twice",
             (_q4_1_block(0.5, 1.0, np.tile(np.arange(16), 2)),)),
    ]  # fmt: skip


def _parts(block):
    block = np.asarray(block, np.uint8)
    d, m = block[:4].view(np.float16).astype(np.float32)
    return d, m, block[4:] & 15, block[4:] >> 4


DEQUANTISE_Q4_1 = Exercise(
    name="dequantise_q4_1",
    chapter=15,
    title="One Q4_1 block of 20 bytes to its 32 weights",
    reference=_dequantise,
    cases=_q4_cases,
    output="(32,)",
    diagnoses=(
        Diagnosis.like(
            "interleaved_codes",
            "the codes are read in byte order (low, high, low, high, ...): the low halves of "
            "the 16 bytes hold codes 1 to 16, the high halves codes 17 to 32",
            lambda block: (lambda d, m, lo, hi: d * np.stack([lo, hi], 1).ravel() + m)(
                *_parts(block)
            ),
        ),
        Diagnosis.like(
            "high_first",
            "the high halves come first: the low halves hold codes 1 to 16",
            lambda block: (lambda d, m, lo, hi: d * np.concatenate([hi, lo]) + m)(*_parts(block)),
        ),
        Diagnosis.like(
            "scale_offset_swapped",
            "d and m are swapped: the first float16 is the scale d, the second the offset m "
            "(w = d q + m)",
            lambda block: (lambda d, m, lo, hi: m * np.concatenate([lo, hi]) + d)(*_parts(block)),
        ),
    ),
)


def _unpermute(weight, num_heads):
    from ..pretrained.gguf import _unpermute_rotary_rows  # the loader, when first needed

    return _unpermute_rotary_rows(np.asarray(weight), num_heads)


def _permute_per_head(weight, num_heads, order):
    rows, d = weight.shape
    return np.asarray(weight).reshape(num_heads, rows // num_heads, d)[:, order].reshape(rows, d)


def _rows_cases():
    rng = np.random.default_rng(30)
    return [
        Case("H = 2 heads of K = 4 rows, D = 3", (rng.normal(size=(8, 3)).astype(np.float32), 2)),
        Case("H = 3 heads of K = 6 rows, D = 2",
             (rng.normal(size=(18, 2)).astype(np.float32), 3)),
    ]  # fmt: skip


HALF_SPLIT_ROWS = Exercise(
    name="half_split_rows",
    chapter=15,
    title="Rows of a GGUF U_q put back in the half-split order",
    reference=_unpermute,
    cases=_rows_cases,
    output="(H K, D)",
    diagnoses=(
        Diagnosis.like(
            "wrong_direction",
            "the permutation is applied the wrong way round: the file's row 2i + 1 of a head "
            "is the half-split row i + K/2, i.e. half[half_to_interleaved(K)] = file",
            lambda w, h: _permute_per_head(w, h, np.asarray(half_to_interleaved(w.shape[0] // h))),
        ),
        Diagnosis.like(
            "whole_matrix",
            "the rows of the whole matrix are permuted at once: permute within each head's K rows",
            lambda w, h: _permute_per_head(
                w, 1, np.argsort(np.asarray(half_to_interleaved(w.shape[0])))
            ),
        ),  # fmt: skip
    ),
)

EXERCISES = [REPEAT_KV_HEADS, DEQUANTISE_Q4_1, HALF_SPLIT_ROWS]
