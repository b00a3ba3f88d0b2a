"""Chapter 1 (tokens): token rows of a table, patches of an image, the patch tokeniser."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..tokenisers import DiscreteTokeniser, patchify
from .core import Case, Diagnosis, Exercise


def _token_rows(table, ids):
    tokeniser = DiscreteTokeniser(*table.shape, key=jax.random.PRNGKey(0))
    return eqx.tree_at(lambda t: t.table, tokeniser, table)(ids)


def _token_rows_cases():
    rng = np.random.default_rng(1)
    table = rng.normal(size=(9, 4)).astype(np.float32)
    return [
        Case('"tokens are vectors", |V| = 9, D = 4', (table, np.array([6, 7, 8]))),
        Case("ids with repeats, N = 6", (table, np.array([1, 2, 1, 0, 8, 1]))),
        Case("one token", (table, np.array([3]))),
    ]


TOKEN_ROWS = Exercise(
    name="token_rows",
    chapter=1,
    title="Tokens as rows of the tokeniser's table",
    reference=_token_rows,
    cases=_token_rows_cases,
    output="(N, D)",
    diagnoses=(
        Diagnosis.like(
            "one_based",
            "every token is the table row before its word's: ids already count from 0, so "
            "word id s is row `table[s]` (only the maths counts from 1)",
            lambda table, ids: table[ids - 1],
        ),
        Diagnosis.like(
            "columns_of_table",
            "you took columns of the table, not rows: the table has one row per word",
            lambda table, ids: table[:, ids % table.shape[1]].T,
        ),
    ),
)


def _patch_cases():
    rng = np.random.default_rng(2)
    image = lambda *shape: rng.uniform(size=shape).astype(np.float32)
    return [
        Case("RGB 8 x 8, P = 4", (image(3, 8, 8), 4)),
        Case("grey 6 x 6, P = 2", (image(1, 6, 6), 2)),
        Case("RGB 8 x 12 (not square), P = 4", (image(3, 8, 12), 4)),
        Case("one patch, P = H = W = 4", (image(2, 4, 4), 4)),
    ]


def _channels_last(image, P):
    C, H, W = image.shape
    grid = image.reshape(C, H // P, P, W // P, P).transpose(1, 3, 2, 4, 0)
    return grid.reshape((H // P) * (W // P), -1)


def _column_order(image, P):
    C, H, W = image.shape
    tokens = np.asarray(patchify(jnp.asarray(image), P))
    return tokens.reshape(H // P, W // P, -1).transpose(1, 0, 2).reshape(tokens.shape)


def _patch_transposed(image, P):
    C, H, W = image.shape
    grid = image.reshape(C, H // P, P, W // P, P).transpose(1, 3, 0, 4, 2)
    return grid.reshape((H // P) * (W // P), -1)


PATCHES_OF = Exercise(
    name="patches_of",
    chapter=1,
    title="An image cut into flattened patches",
    reference=patchify,
    cases=_patch_cases,
    output="(N, C P P)",
    diagnoses=(
        Diagnosis.like(
            "channels_last",
            "each patch is flattened pixel by pixel (the channels of a pixel together): flatten "
            "all of its red values, then its green, then its blue (channels first)",
            _channels_last,
        ),
        Diagnosis.like(
            "column_order",
            "the patches are read column by column: read them left to right along each row of "
            "patches, then top to bottom",
            _column_order,
        ),
        Diagnosis.like(
            "patch_transposed",
            "each patch is flattened column by column: flatten a patch's rows one after another",
            _patch_transposed,
        ),
    ),
)


def _patch_tokens(patches, weight, bias):
    return patches @ weight.T + bias


def _patch_token_cases():
    rng = np.random.default_rng(3)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    return [
        Case("N = 4 patches of 12 numbers, D = 12", (n(4, 12), n(12, 12), n(12))),
        Case("N = 16 patches of 48 numbers, D = 32", (n(16, 48), n(32, 48), n(32))),
    ]


PATCH_TOKENS = Exercise(
    name="patch_tokens",
    chapter=1,
    title="The patch tokeniser's affine map on every patch",
    reference=_patch_tokens,
    cases=_patch_token_cases,
    output="(N, D)",
    diagnoses=(
        Diagnosis.like(
            "no_bias",
            "the bias b is missing: add it to every token",
            lambda patches, weight, bias: patches @ weight.T,
        ),
        Diagnosis.like(
            "weight_not_transposed",
            "you multiplied by L, not by its transpose: with tokens as rows, x = patches @ L.T + b",
            lambda patches, weight, bias: patches @ weight + bias,
        ),
    ),
)

EXERCISES = [TOKEN_ROWS, PATCHES_OF, PATCH_TOKENS]
