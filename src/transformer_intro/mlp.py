"""The token-wise multi-layer perceptron: the same small network applied to every token alone."""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
from jaxtyping import Array, Float, PRNGKeyArray


class MLP(eqx.Module):
    """``x_n ↦ W_L σ(... σ(W_1 x_n + b_1) ...) + b_L`` for a single token ``x_n``.

    ``num_layers`` hidden layers of width ``hidden_dim`` with ``activation`` between them (none after
    the last). Apply it to a whole (N, D) sequence with ``jax.vmap(mlp)``: sharing one MLP across
    all tokens is what makes it token-wise, and permutation equivariant.
    """

    layers: tuple[eqx.nn.Linear, ...]
    activation: Callable = eqx.field(static=True)

    def __init__(
        self,
        in_dim: int,
        hidden_dim: int,
        num_layers: int = 1,
        out_dim: int | None = None,
        *,
        activation: Callable = jax.nn.gelu,
        key: PRNGKeyArray,
    ):
        if num_layers < 0:
            raise ValueError(f"num_layers must be non-negative, got {num_layers}")
        out_dim = in_dim if out_dim is None else out_dim
        widths = [in_dim] + [hidden_dim] * num_layers + [out_dim]
        keys = jax.random.split(key, len(widths) - 1)
        self.layers = tuple(
            eqx.nn.Linear(a, b, key=k) for a, b, k in zip(widths[:-1], widths[1:], keys)
        )
        self.activation = activation

    def __call__(self, x: Float[Array, " D"]) -> Float[Array, " Dout"]:
        if x.ndim != 1:
            raise ValueError(
                f"the MLP acts on one token of shape (D,), got {x.shape}; use jax.vmap for sequences"
            )
        for layer in self.layers[:-1]:
            x = self.activation(layer(x))
        return self.layers[-1](x)

    def batched(self, x: Float[Array, "... D"]) -> Float[Array, "... Dout"]:
        """The same MLP on any leading batch shape, as plain matrix products."""
        for layer in self.layers[:-1]:
            x = self.activation(x @ layer.weight.T + layer.bias)
        last = self.layers[-1]
        return x @ last.weight.T + last.bias
