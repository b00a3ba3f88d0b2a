"""Chapter 15 (a pretrained model): grouped-query heads, rotary row order, bits per character."""

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


def _bits_per_character(log_probs, targets, characters):
    """The package's figure for one window: its summed loss over the characters spelled."""
    from ..training.evaluation import TextLoss  # training's layer, imported when first needed

    log_probs, targets = np.asarray(log_probs, np.float64), np.asarray(targets)
    nats = -log_probs[np.arange(targets.size), targets].sum()
    spelled = int(np.asarray(characters)[targets].sum())
    return TextLoss(float(nats), int(targets.size), spelled, 1).bits_per_character


def _window(rng, n, v, most):
    logits = rng.normal(size=(n, v)) * 2
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return (log_probs.astype(np.float32), rng.integers(0, v, n), rng.integers(1, most + 1, v))


def _bpc_cases():
    rng = np.random.default_rng(31)
    return [
        Case("N = 6 tokens of |V| = 5, each spelling 1 to 4 characters", _window(rng, 6, 5, 4)),
        Case("N = 9 tokens of |V| = 12, each spelling 1 to 6 characters", _window(rng, 9, 12, 6)),
    ]


def _parts_of(log_probs, targets, characters):
    log_probs, targets = np.asarray(log_probs, np.float64), np.asarray(targets)
    nats = -log_probs[np.arange(targets.size), targets]
    return nats, np.asarray(characters)[targets]


BITS_PER_CHARACTER = Exercise(
    name="bits_per_character",
    chapter=15,
    title="Bits per character of one window of predictions",
    reference=_bits_per_character,
    cases=_bpc_cases,
    output="a number",
    diagnoses=(
        Diagnosis.like(
            "nats",
            "this is nats per character: divide the summed -log p by ln 2 to count bits",
            lambda lp, t, c: (lambda nats, chars: nats.sum() / chars.sum())(*_parts_of(lp, t, c)),
        ),
        Diagnosis.like(
            "per_token",
            "this is bits per token: divide by the characters the targets spell, not by their "
            "number",
            lambda lp, t, c: (lambda nats, chars: nats.sum() / np.log(2) / nats.size)(
                *_parts_of(lp, t, c)
            ),
        ),
        Diagnosis.like(
            "mean_of_ratios",
            "this averages each token's bits per character: sum the bits of all tokens, then "
            "divide by all their characters (a long token counts for more)",
            lambda lp, t, c: (lambda nats, chars: np.mean(nats / chars) / np.log(2))(
                *_parts_of(lp, t, c)
            ),
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

EXERCISES = [REPEAT_KV_HEADS, HALF_SPLIT_ROWS, BITS_PER_CHARACTER]
