"""The transformer block: multi-head self-attention, then a token-wise MLP.

Each is wrapped in a residual connection and preceded by a normalisation (the pre-norm
arrangement, Xiong et al. 2020). The normalisation is LayerNorm or RMSNorm, the MLP plain or
gated: the same block expresses the 2017-2020 transformer and the Llama-family block (RMSNorm,
SwiGLU).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from .attention import MultiHeadSelfAttention
from .mlp import MLP, GatedMLP
from .normalisation import LayerNorm, RMSNorm

__all__ = ["Norm", "Residual", "TransformerBlock"]

Residual = Literal["input", "normalised"]
Norm = Literal["layer", "rms"]


class TransformerBlock(eqx.Module):
    r"""One block, ``X ↦ X'``, on one sequence of tokens (rows).

    With ``residual="input"`` (the default, and common practice)::

        Y  = X + MHSA(LayerNorm(X))
        X' = Y + MLP(LayerNorm(Y))

    With ``residual="normalised"``, the text's equations, the first residual starts from the
    *normalised* input: ``Y = X̄ + MHSA(X̄)``, ``X̄ = LayerNorm(X)``. Then the block never passes
    X through unchanged, even when both branches output zero.

    ``norm="rms"`` puts :class:`RMSNorm` where LayerNorm is, and ``mlp_gated=True`` a
    :class:`GatedMLP` (SwiGLU with ``mlp_activation=jax.nn.silu``) where the MLP is; the
    attention's options (grouped-query heads, QK-norm, rotary base and layout, biases) pass
    through ``attention_options``.

    ``zero_init_residual=True`` starts the last linear map of each branch at zero (the
    attention's output projections, or its value maps where it has none, and the MLP's last
    matrix, with their biases), so that each branch outputs zero and, with
    ``residual="input"``, the block starts as the identity. Gradients still reach those maps,
    since their inputs are not zero; the other matrices of a branch get theirs from the first
    update on (the zero-γ residual initialisation of Goyal et al. 2017, for a transformer).
    """

    attention_norm: LayerNorm | RMSNorm
    attention: MultiHeadSelfAttention
    mlp_norm: LayerNorm | RMSNorm
    mlp: MLP | GatedMLP
    residual: Residual = eqx.field(static=True)

    def __init__(
        self,
        token_dim: int,
        num_heads: int,
        mlp_hidden_dim: int,
        *,
        head_dim: int | None = None,
        value_dim: int | None = None,
        mlp_num_layers: int = 1,
        mlp_activation: Callable = jax.nn.gelu,
        mlp_gated: bool = False,
        mlp_bias: bool = True,
        norm: Norm = "layer",
        norm_eps: float = 1e-5,
        residual: Residual = "input",
        zero_init_residual: bool = False,
        key: PRNGKeyArray,
        **attention_options,
    ):
        """Build the two normalisations (unit gain, zero shift), the attention and the MLP.

        Args:
            token_dim: D, the width of a token.
            num_heads: H.
            mlp_hidden_dim: the width of the MLP's hidden layers.
            head_dim: K, the width of keys and queries; defaults to D / H.
            value_dim: None for full D x D value maps ``V_h``, Dv for ``V_h = O_h W_h``.
            mlp_num_layers: the number of hidden layers of the MLP.
            mlp_activation: σ, the MLP's nonlinearity.
            mlp_gated: a gated MLP ``W_down (σ(W_gate x) ⊙ W_up x)`` (SwiGLU with SiLU)
                instead of the plain one.
            mlp_bias: biases in a gated MLP (the plain MLP always has them).
            norm: "layer" (LayerNorm) or "rms" (RMSNorm) before each branch.
            norm_eps: the normalisations' epsilon.
            residual: where the first residual starts, "input" (X) or "normalised" (X̄).
            zero_init_residual: start each branch's last linear map (and its bias) at zero.
            key: a PRNG key.
            **attention_options: passed on to :class:`MultiHeadSelfAttention` (``scaled``,
                ``rotary``, ``num_kv_heads``, ...).

        Raises:
            ValueError: if ``residual`` or ``norm`` is not one of its choices, or the MLP
                options contradict each other.
        """
        if residual not in ("input", "normalised"):
            raise ValueError(f"residual must be 'input' or 'normalised', got {residual!r}")
        if norm not in ("layer", "rms"):
            raise ValueError(f"norm must be 'layer' or 'rms', got {norm!r}")
        if mlp_gated and mlp_num_layers != 1:
            raise ValueError(
                f"a gated MLP has one hidden layer, got mlp_num_layers={mlp_num_layers}"
            )
        if not (mlp_gated or mlp_bias):
            raise ValueError("the plain MLP always has biases: mlp_bias=False needs mlp_gated=True")
        attention_key, mlp_key = jax.random.split(key)
        make_norm = LayerNorm if norm == "layer" else RMSNorm
        self.attention_norm = make_norm(token_dim, eps=norm_eps)
        self.attention = MultiHeadSelfAttention(
            token_dim, num_heads, head_dim, value_dim, key=attention_key, **attention_options
        )
        self.mlp_norm = make_norm(token_dim, eps=norm_eps)
        if mlp_gated:
            self.mlp = GatedMLP(
                token_dim, mlp_hidden_dim, activation=mlp_activation, use_bias=mlp_bias, key=mlp_key
            )
        else:
            self.mlp = MLP(
                token_dim, mlp_hidden_dim, mlp_num_layers, activation=mlp_activation, key=mlp_key
            )
        if zero_init_residual:
            self.attention, self.mlp = _zero_last_maps(self.attention, self.mlp)
        self.residual = residual

    def attention_residual(
        self, x: Float[Array, "N D"], mask: Bool[Array, "N N"] | None = None
    ) -> Float[Array, "N D"]:
        """The first sub-layer, ``Y = X + MHSA(LayerNorm(X))``, on one sequence."""
        x_bar = jax.vmap(self.attention_norm)(x)
        return (x if self.residual == "input" else x_bar) + self.attention(x_bar, mask)

    def mlp_residual(self, y: Float[Array, "N D"]) -> Float[Array, "N D"]:
        """The second sub-layer, ``X' = Y + MLP(LayerNorm(Y))``, token by token."""
        return y + jax.vmap(self.mlp)(jax.vmap(self.mlp_norm)(y))

    def __call__(
        self, x: Float[Array, "N D"], mask: Bool[Array, "N N"] | None = None
    ) -> Float[Array, "N D"]:
        """The block on one sequence: :meth:`attention_residual`, then :meth:`mlp_residual`.

        ``mask[n', n] = False`` forbids output n from reading input n' (e.g. a causal mask).
        """
        return self.mlp_residual(self.attention_residual(x, mask))

    def batched(
        self,
        x: Float[Array, "B N D"],
        mask: Bool[Array, "N N"] | Bool[Array, "B N N"] | None = None,
        *,
        num_outputs: int | None = None,
    ) -> Float[Array, "B Q D"]:
        """``jax.vmap(self)(x)`` through the attention's and the MLP's fast batched paths.

        ``num_outputs=Q`` returns only the first Q output tokens, and does only their work: the
        MLP and LayerNorms act token by token, so the other tokens matter only as keys and values.
        """
        return self.mlp_residual_batched(
            self.attention_residual_batched(x, mask, num_outputs=num_outputs)
        )

    def attention_residual_batched(
        self,
        x: Float[Array, "B N D"],
        mask: Bool[Array, "N N"] | Bool[Array, "B N N"] | None = None,
        *,
        num_outputs: int | None = None,
    ) -> Float[Array, "B Q D"]:
        """:meth:`attention_residual` on a batch, through the attention's fast batched path."""
        x_bar = self.attention_norm(x)
        attended = self.attention.batched(x_bar, mask, num_outputs=num_outputs)
        return (x if self.residual == "input" else x_bar)[:, : attended.shape[1]] + attended

    def mlp_residual_batched(self, y: Float[Array, "B N D"]) -> Float[Array, "B N D"]:
        """:meth:`mlp_residual` on a batch, through the MLP's fast batched path."""
        return y + self.mlp.batched(self.mlp_norm(y))

    def empty_cache(self, window: int, dtype=jax.numpy.float32):
        """The attention's preallocated key-value cache for ``window`` tokens."""
        return self.attention.empty_cache(window, dtype)

    def extend(
        self, x: Float[Array, "T D"], cache, start: Int[Array, ""] | int
    ) -> tuple[Float[Array, "T D"], tuple]:
        """The block on T new tokens at positions ``start, ...``, earlier ones read from the cache.

        See :meth:`MultiHeadAttention.extend`. The LayerNorms and the MLP act token by token and
        need no cache.

        Returns:
            The T new outputs and the attention's cache with the new tokens written in.
        """
        x_bar = jax.vmap(self.attention_norm)(x)
        attended, cache = self.attention.extend(x_bar, cache, start)
        y = (x if self.residual == "input" else x_bar) + attended
        return self.mlp_residual(y), cache


def _zero_last_maps(
    attention: MultiHeadSelfAttention, mlp: MLP | GatedMLP
) -> tuple[MultiHeadSelfAttention, MLP | GatedMLP]:
    """The attention and MLP with the maps that write their outputs (and biases) set to zero."""

    def attention_outputs(a):
        last = a.value_projections if a.output_projections is None else a.output_projections
        return [x for x in (last, a.output_bias) if x is not None]

    def mlp_outputs(m):
        last = m.down if isinstance(m, GatedMLP) else m.layers[-1]
        return [x for x in (last.weight, last.bias) if x is not None]

    return (
        eqx.tree_at(attention_outputs, attention, replace_fn=jnp.zeros_like),
        eqx.tree_at(mlp_outputs, mlp, replace_fn=jnp.zeros_like),
    )
