"""The transformer block: multi-head self-attention, then a token-wise MLP.

Each is wrapped in a residual connection and preceded by a normalisation (the pre-norm
arrangement, Xiong et al. 2020). The normalisation is LayerNorm or RMSNorm, the MLP plain or
gated: the same block expresses the 2017-2020 transformer and the Llama-family block (RMSNorm,
SwiGLU).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from .activations import ACTIVATIONS, activation
from .attention import MultiHeadAttention, MultiHeadSelfAttention
from .config import JsonConfig, short_repr
from .mlp import MLP, GatedMLP
from .normalisation import LayerNorm, RMSNorm

__all__ = ["BlockConfig", "Norm", "Residual", "TransformerBlock"]

Residual = Literal["input", "normalised"]
Norm = Literal["layer", "rms"]


@dataclasses.dataclass(frozen=True)
class BlockConfig(JsonConfig):
    """Every choice that shapes a :class:`TransformerBlock`. Plain values, so it saves as JSON.

    Every model nests one (the encoder-decoder one per stack): what a block can do, every model
    can. The defaults are the text's block with the usual choices (pre-norm LayerNorm, residuals
    from the input, scaled scores, summed heads, a GELU MLP).

    Attributes:
        dim: D, the width of a token.
        num_heads: H.
        mlp_hidden_dim: the width of the MLP's hidden layers.
        head_dim: K, the width of keys and queries; None means D / H.
        value_dim: None for full D x D value maps ``V_h`` (the text); Dv for ``V_h = O_h W_h``.
        num_kv_heads: H_kv key-value heads shared by the H query heads; None means H.
        scaled: divide attention scores by sqrt(K).
        combine_heads: "sum" (the maths) or "mean" (the reference code).
        qk_activation: None (the maths), or the name, in
            :data:`~transformer_intro.activations.ACTIVATIONS`, of a map applied to keys and
            queries (the reference ViT's "gelu_tanh").
        qk_norm: an RMSNorm on every key and query (QK-norm), with epsilon ``norm_eps``.
        attention_bias: a query bias per head and an output bias in the attention (GPT-2).
        rotary: rotate keys and queries by their position (RoPE).
        rotary_base: the base of the rotary frequencies.
        rotary_layout: "interleaved" pairs (2i, 2i+1), "half" pairs (i, i + K/2).
        norm: "layer" (LayerNorm) or "rms" (RMSNorm) before each branch (and, in a model, before
            its read-out).
        norm_eps: the normalisations' epsilon (also QK-norm's).
        residual: where the first residual starts, "input" (X) or "normalised" (X̄).
        mlp: "mlp" (``W_2 σ(W_1 x + b_1) + b_2``) or "gated" (``W_down (σ(W_gate x) ⊙ W_up x)``).
        mlp_num_layers: the number of hidden layers of a plain MLP (a gated one has one).
        activation: σ, the MLP's nonlinearity, a name in ``ACTIVATIONS``; "silu" with
            ``mlp="gated"`` is SwiGLU.
        mlp_bias: biases in a gated MLP (the plain MLP always has them).
        zero_init_residual: start each branch's last linear map (and its bias) at zero, so that
            with ``residual="input"`` the block starts as the identity.

    Raises:
        ValueError: on construction, naming the option, if a size is not positive, D is not a
            multiple of H without ``head_dim``, H is not a multiple of H_kv, K is odd with
            ``rotary``, an option names no known choice, or the MLP options contradict each
            other.
    """

    dim: int
    num_heads: int
    mlp_hidden_dim: int
    head_dim: int | None = None
    value_dim: int | None = None
    num_kv_heads: int | None = None
    scaled: bool = True
    combine_heads: Literal["sum", "mean"] = "sum"
    qk_activation: str | None = None
    qk_norm: bool = False
    attention_bias: bool = False
    rotary: bool = False
    rotary_base: float = 10_000.0
    rotary_layout: Literal["interleaved", "half"] = "interleaved"
    norm: Norm = "layer"
    norm_eps: float = 1e-5
    residual: Residual = "input"
    mlp: Literal["mlp", "gated"] = "mlp"
    mlp_num_layers: int = 1
    activation: str = "gelu_tanh"
    mlp_bias: bool = True
    zero_init_residual: bool = False

    def __post_init__(self):
        """Check the choices together, so that a bad one fails here and not deep in the model."""
        for name in ("dim", "num_heads", "mlp_hidden_dim", "mlp_num_layers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("head_dim", "value_dim", "num_kv_heads"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be None or at least 1, got {getattr(self, name)}")
        if self.head_dim is None and self.dim % self.num_heads:
            raise ValueError(
                f"model width dim={self.dim} is not divisible by num_heads={self.num_heads}; "
                "change one of them or set head_dim"
            )
        kv_heads = self.num_heads if self.num_kv_heads is None else self.num_kv_heads
        if self.num_heads % kv_heads:
            raise ValueError(
                f"num_heads={self.num_heads} must be a multiple of num_kv_heads={kv_heads}"
            )
        if self.rotary and self.keys_dim % 2:
            raise ValueError(f"rotary positions need an even head_dim, got {self.keys_dim}")
        choices = {
            "combine_heads": ("sum", "mean"),
            "qk_activation": (None, *ACTIVATIONS),
            "rotary_layout": ("interleaved", "half"),
            "norm": ("layer", "rms"),
            "residual": ("input", "normalised"),
            "mlp": ("mlp", "gated"),
            "activation": tuple(ACTIVATIONS),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.mlp == "gated" and self.mlp_num_layers != 1:
            raise ValueError(
                f"a gated MLP has one hidden layer, got mlp_num_layers={self.mlp_num_layers}"
            )
        if self.mlp == "mlp" and not self.mlp_bias:
            raise ValueError("the plain MLP always has biases: mlp_bias=False needs mlp='gated'")
        if self.norm_eps <= 0 or self.rotary_base <= 0:
            raise ValueError(
                f"norm_eps and rotary_base must be positive, got {self.norm_eps}, "
                f"{self.rotary_base}"
            )

    @property
    def keys_dim(self) -> int:
        """K, the width of keys and queries (``head_dim``, or D / H)."""
        return self.dim // self.num_heads if self.head_dim is None else self.head_dim

    def __repr__(self) -> str:
        # The sizes always, the other options where they differ from the text's block.
        return short_repr(self, 3)

    def make_norm(self) -> LayerNorm | RMSNorm:
        """A new normalisation of this block's kind and epsilon over D (unit gain, zero shift)."""
        return (LayerNorm if self.norm == "layer" else RMSNorm)(self.dim, eps=self.norm_eps)

    def attention_options(self) -> dict:
        """The keyword arguments of :class:`MultiHeadAttention` this configuration chooses."""
        return dict(
            head_dim=self.head_dim,
            value_dim=self.value_dim,
            scaled=self.scaled,
            rotary=self.rotary,
            combine_heads=self.combine_heads,
            qk_activation=None if self.qk_activation is None else activation(self.qk_activation),
            num_kv_heads=self.num_kv_heads,
            qk_norm=self.qk_norm,
            qk_norm_eps=self.norm_eps,
            rotary_base=self.rotary_base,
            rotary_layout=self.rotary_layout,
            use_bias=self.attention_bias,
        )

    def cross_attention(self, *, key: PRNGKeyArray) -> MultiHeadAttention:
        """Attention of this block's kind from a sequence to another (the encoder-decoder's).

        Positions are not rotated: the two sequences' positions do not count on one scale.
        """
        options = self.attention_options() | {"rotary": False}
        return MultiHeadAttention(self.dim, self.num_heads, key=key, **options)

    def build(self, *, key: PRNGKeyArray) -> TransformerBlock:
        """The :class:`TransformerBlock` of this configuration, its weights drawn with ``key``."""
        return TransformerBlock(self, key=key)


class TransformerBlock(eqx.Module):
    r"""One block, ``X ↦ X'``, on one sequence of tokens (rows), as a :class:`BlockConfig` says.

    With ``residual="input"`` (the default, and common practice)::

        Y  = X + MHSA(LayerNorm(X))
        X' = Y + MLP(LayerNorm(Y))

    With ``residual="normalised"``, the text's equations, the first residual starts from the
    *normalised* input: ``Y = X̄ + MHSA(X̄)``, ``X̄ = LayerNorm(X)``. Then the block never passes
    X through unchanged, even when both branches output zero.

    ``norm="rms"`` puts :class:`RMSNorm` where LayerNorm is, and ``mlp="gated"`` a
    :class:`GatedMLP` (SwiGLU with ``activation="silu"``) where the MLP is; the attention's
    options (grouped-query heads, QK-norm, rotary base and layout, biases) are the
    configuration's too.

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

    def __init__(self, config: BlockConfig, *, key: PRNGKeyArray):
        """Build the two normalisations (unit gain, zero shift), the attention and the MLP.

        Args:
            config: the block's widths and the choice of each part.
            key: a PRNG key.

        Raises:
            TypeError: if ``config`` is not a :class:`BlockConfig`.
        """
        if not isinstance(config, BlockConfig):
            raise TypeError(
                f"a TransformerBlock is built from a BlockConfig, got a {type(config).__name__}: "
                "TransformerBlock(BlockConfig(dim=D, num_heads=H, mlp_hidden_dim=F), key=key)"
            )
        attention_key, mlp_key = jax.random.split(key)
        d = config.dim
        self.attention_norm = config.make_norm()
        self.attention = MultiHeadSelfAttention(
            d, config.num_heads, key=attention_key, **config.attention_options()
        )
        self.mlp_norm = config.make_norm()
        sigma = activation(config.activation)
        if config.mlp == "gated":
            self.mlp = GatedMLP(
                d, config.mlp_hidden_dim, activation=sigma, use_bias=config.mlp_bias, key=mlp_key
            )
        else:
            self.mlp = MLP(
                d, config.mlp_hidden_dim, config.mlp_num_layers, activation=sigma, key=mlp_key
            )
        if config.zero_init_residual:
            self.attention, self.mlp = _zero_last_maps(self.attention, self.mlp)
        self.residual = config.residual

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
