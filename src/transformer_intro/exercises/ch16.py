"""Chapter 16 (fewer bits, cheap adapters): Q8_0 blocks, the LoRA forward pass, merging."""

from __future__ import annotations

import numpy as np

from .core import Case, Diagnosis, Exercise


def _q8_0_block(d, codes):
    scale = np.array([d], np.float16).view(np.uint8)
    return np.concatenate([scale, np.asarray(codes, np.int8).view(np.uint8)])


def _dequantise(block):
    import gguf  # the [pretrained] extra, imported when first needed

    return gguf.quants.dequantize(np.asarray(block, np.uint8), gguf.GGMLQuantizationType.Q8_0)


def _q8_cases():
    rng = np.random.default_rng(31)
    return [
        Case("d = 0.003, random codes in -127..127",
             (_q8_0_block(0.003, rng.integers(-127, 128, 32)),)),
        Case("d = 0.25, codes -16, -15, ..., 15",
             (_q8_0_block(0.25, np.arange(-16, 16)),)),
    ]  # fmt: skip


def _q8_parts(block):
    block = np.asarray(block, np.uint8)
    return block[:2].view(np.float16).astype(np.float32)[0], block[2:]


DEQUANTISE_Q8_0 = Exercise(
    name="dequantise_q8_0",
    chapter=16,
    title="One Q8_0 block of 34 bytes to its 32 weights",
    reference=_dequantise,
    cases=_q8_cases,
    output="(32,)",
    diagnoses=(
        Diagnosis.like(
            "unsigned_codes",
            "the codes are read as unsigned bytes (0..255): Q8_0 stores signed codes, "
            "-127..127 (view the 32 bytes as int8)",
            lambda block: (lambda d, q: d * q.astype(np.float32))(*_q8_parts(block)),
        ),
        Diagnosis.like(
            "no_scale",
            "the codes are returned without the scale: the weight is d q, with d the float16 "
            "in the first two bytes",
            lambda block: _q8_parts(block)[1].view(np.int8).astype(np.float32),
        ),
    ),
)


# The chapter's letters: R (r x D_in) is applied first, Z (D_out x r) second; Hu et al.'s A, B.
def _lora_forward(weight, r_factor, z_factor, x, alpha):
    weight, r_factor, z_factor, x = (
        np.asarray(v, np.float64) for v in (weight, r_factor, z_factor, x)
    )
    rank = r_factor.shape[0]
    return (weight @ x + alpha / rank * (z_factor @ (r_factor @ x))).astype(np.float32)


def _merge(weight, r_factor, z_factor, alpha):
    weight, r_factor, z_factor = (np.asarray(v, np.float64) for v in (weight, r_factor, z_factor))
    return (weight + alpha / r_factor.shape[0] * (z_factor @ r_factor)).astype(np.float32)


def _lora_cases(with_x):
    rng = np.random.default_rng(32)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    cases = []
    for name, (d_out, d_in, r, alpha) in {
        "D_out = 5, D_in = 4, r = 2, alpha = 4": (5, 4, 2, 4.0),
        "D_out = 3, D_in = 6, r = 3, alpha = 1": (3, 6, 3, 1.0),
    }.items():
        args = (n(d_out, d_in), n(r, d_in), n(d_out, r))
        args = args + ((n(d_in), alpha) if with_x else (alpha,))
        cases.append(Case(name, args))
    return cases


LORA_FORWARD = Exercise(
    name="lora_forward",
    chapter=16,
    title="A low-rank adapter's output on one vector",
    reference=_lora_forward,
    cases=lambda: _lora_cases(True),
    output="(D_out,)",
    diagnoses=(
        Diagnosis.like(
            "alpha_not_over_r",
            "the update is scaled by alpha, not alpha / r: divide by the rank r = R.shape[0]",
            lambda w, r, z, x, alpha: _lora_forward(w, r, z, x, alpha * r.shape[0]),
        ),
        Diagnosis.like(
            "no_scale",
            "the update Z R x has no scale: multiply it by alpha / r",
            lambda w, r, z, x, alpha: _lora_forward(w, r, z, x, r.shape[0]),
        ),
        Diagnosis.like(
            "no_base",
            "only the update is returned: the adapter adds (alpha / r) Z R x to W x",
            lambda w, r, z, x, alpha: _lora_forward(0 * w, r, z, x, alpha),
        ),
    ),
)

MERGE_LORA = Exercise(
    name="merge_lora",
    chapter=16,
    title="An adapter merged into its matrix",
    reference=_merge,
    cases=lambda: _lora_cases(False),
    output="(D_out, D_in)",
    diagnoses=(
        Diagnosis.like(
            "alpha_not_over_r",
            "the update is scaled by alpha, not alpha / r: divide by the rank r = R.shape[0]",
            lambda w, r, z, alpha: _merge(w, r, z, alpha * r.shape[0]),
        ),
        Diagnosis.like(
            "no_base",
            "only the update is returned: the merged matrix is W + (alpha / r) Z R",
            lambda w, r, z, alpha: _merge(0 * w, r, z, alpha),
        ),
        Diagnosis.like(
            "no_scale",
            "the update Z R has no scale: multiply it by alpha / r",
            lambda w, r, z, alpha: _merge(w, r, z, r.shape[0]),
        ),
    ),
)

EXERCISES = [DEQUANTISE_Q8_0, LORA_FORWARD, MERGE_LORA]
