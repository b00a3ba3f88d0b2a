"""Counting a model's parameters, for any Equinox module: a layer, a block or a whole model."""

from __future__ import annotations

import equinox as eqx
import jax

__all__ = ["count_parameters"]


def count_parameters(model: eqx.Module) -> int:
    """The number of trainable numbers in a model: the sizes of its floating-point arrays."""
    return sum(x.size for x in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array)))
