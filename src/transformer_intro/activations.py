"""The nonlinearities a configuration may name: one table for the MLPs and for keys and queries.

A configuration stores an activation by its name (a string saves as JSON and compares by value);
the layers take the function. :func:`activation` turns a name into the function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import jax
import jax.numpy as jnp
from jaxtyping import Array

__all__ = ["ACTIVATIONS", "ActivationName", "activation", "gelu_exact", "relu_squared"]


def gelu_exact(x: Array) -> Array:
    """The GELU ``x Φ(x)`` with the Gaussian distribution function Φ computed exactly (erf)."""
    return jax.nn.gelu(x, approximate=False)


def relu_squared(x: Array) -> Array:
    """``max(x, 0)²`` (So et al. 2021, "Primer")."""
    return jnp.square(jax.nn.relu(x))


ActivationName = Literal["gelu_tanh", "gelu_exact", "relu", "relu2", "silu"]

# "gelu_tanh" is jax.nn.gelu's default, the GELU in its tanh approximation
# ``0.5 x (1 + tanh(sqrt(2/π) (x + 0.044715 x³)))``: chapter 9's, GPT-2's and the reference ViT's.
ACTIVATIONS: dict[str, Callable[[Array], Array]] = {
    "gelu_tanh": jax.nn.gelu,
    "gelu_exact": gelu_exact,
    "relu": jax.nn.relu,
    "relu2": relu_squared,
    "silu": jax.nn.silu,
}


def activation(name: str) -> Callable[[Array], Array]:
    """The function :data:`ACTIVATIONS` holds under ``name``.

    Raises:
        ValueError: if no activation has that name (the message lists those that do).
    """
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]
