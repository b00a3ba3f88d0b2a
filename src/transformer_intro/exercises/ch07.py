"""Chapter 7 (tokens and embeddings): a character vocabulary, sinusoidal tables, the shift map."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..positions import sinusoidal_embeddings
from ..tokenisers import Vocabulary
from .core import Case, Diagnosis, Exercise, Property


def _encode(text, symbols):
    return np.asarray(Vocabulary(symbols).encode(text))


ENCODE_TEXT = Exercise(
    name="encode_text",
    chapter=7,
    title="Text to ids with a character vocabulary",
    reference=_encode,
    cases=lambda: [
        Case('"to be", symbols of "to be or not"', ("to be", "to be or not")),
        Case('"abba", symbols "ba"', ("abba", "ba")),
        Case('"hello world", its own symbols', ("hello world", "hello world")),
    ],
    diagnoses=(
        Diagnosis.like(
            "first_seen_order",
            "the ids follow the order in which symbols first appear: number the distinct "
            "symbols in sorted order",
            lambda text, symbols: np.array([list(dict.fromkeys(symbols)).index(c) for c in text]),
        ),
        Diagnosis.like(
            "one_based",
            "the ids start at 1: they count from 0",
            lambda text, symbols: _encode(text, symbols) + 1,
        ),
        Diagnosis.like(
            "repeats_kept",
            "repeated symbols were numbered each time: drop repeats, then sort",
            lambda text, symbols: np.array([sorted(symbols).index(c) for c in text]),
        ),
    ),
)


def _table_cases():
    return [
        Case("N = 6 positions, D = 4", (6, 4)),
        Case("N = 50 positions, D = 16", (50, 16)),
        Case("N = 8, D = 6, base 100", (8, 6), {"base": 100.0}),
    ]


def _halves(num_positions, dim, base=10_000.0):
    table = np.asarray(sinusoidal_embeddings(num_positions, dim, base=base))
    return np.concatenate([table[:, 0::2], table[:, 1::2]], axis=1)


SINUSOIDAL_TABLE = Exercise(
    name="sinusoidal_table",
    chapter=7,
    title="The sinusoidal position table",
    reference=lambda num_positions, dim, base=10_000.0: sinusoidal_embeddings(
        num_positions, dim, base=base
    ),
    cases=_table_cases,
    output="(N, D)",
    atol=2e-5,
    diagnoses=(
        Diagnosis.like(
            "sines_then_cosines",
            "all sines come first, then all cosines: pair them, PE[n, 2i] = sin(n w_i), "
            "PE[n, 2i+1] = cos(n w_i)",
            _halves,
        ),
        Diagnosis.like(
            "exponent_i_over_D",
            "the frequencies are base^(-i/D): they are w_i = base^(-2i/D), i = 0, ..., D/2 - 1",
            lambda num_positions, dim, base=10_000.0: sinusoidal_embeddings(
                num_positions, dim, base=base**0.5
            ),
        ),
        Diagnosis.like(
            "positions_from_one",
            "the positions start at 1: the first row is position n = 0",
            lambda num_positions, dim, base=10_000.0: sinusoidal_embeddings(
                num_positions + 1, dim, base=base
            )[1:],
        ),
    ),
)


def _shift_map(k, dim, base=10_000.0):
    omega = base ** (-jnp.arange(0, dim, 2) / dim)
    c, s = jnp.cos(k * omega), jnp.sin(k * omega)
    blocks = [jnp.array([[ci, si], [-si, ci]]) for ci, si in zip(c, s)]
    return jax.scipy.linalg.block_diag(*blocks)


def _shifts(got, case):
    k, dim = case.args
    table = np.asarray(sinusoidal_embeddings(40, dim), np.float64)
    return np.allclose(table[:-k] @ np.asarray(got, np.float64).T, table[k:], atol=1e-4)


SHIFT_MAP = Exercise(
    name="shift_map",
    chapter=7,
    title="The linear map S_k that moves a position embedding k places on",
    reference=_shift_map,
    cases=lambda: [
        Case("k = 1, D = 4", (1, 4)),
        Case("k = 5, D = 8", (5, 8)),
        Case("k = 3, D = 16", (3, 16)),
    ],  # fmt: skip
    output="(D, D)",
    properties=(
        Property(
            "PE[n + k] = S_k PE[n]",
            _shifts,
            "PE[n] @ S_k.T is not PE[n + k]",
        ),
    ),
    diagnoses=(
        Diagnosis.like(
            "backwards",
            "this map moves a position back by k (it rotates by -k w_i): swap the signs of "
            "the sines",
            lambda k, dim, base=10_000.0: _shift_map(-k, dim, base),
        ),
        Diagnosis.like(
            "one_frequency",
            "every pair turns by the same angle: pair i turns by k w_i, its own frequency",
            lambda k, dim, base=10_000.0: jax.scipy.linalg.block_diag(
                *[_shift_map(k, 2, base)] * (dim // 2)
            ),
        ),
    ),
)

EXERCISES = [ENCODE_TEXT, SINUSOIDAL_TABLE, SHIFT_MAP]
