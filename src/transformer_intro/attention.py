"""Attention, from a weighted average of tokens to multi-head self-attention.

Notation. The maths (Turner, 2023) writes a sequence of N tokens of width D as the columns of a
D x N array X = (x_1, ..., x_N). This code holds the transpose: an (N, D) array whose rows are
tokens, because that is how JAX, Equinox and most libraries lay out sequences. The attention
matrix keeps the maths' orientation: ``A[n', n]`` is how much output token n draws on input token
n', so every *column* of A sums to one, and the maths' ``Y = X A`` becomes ``Y = A.T @ X`` here.

The three forms of attention weights the text builds up to:

    plain dot product      A[n', n] ∝ exp(x_n'ᵀ x_n)
    one shared projection  A[n', n] ∝ exp(x_n'ᵀ Uᵀ U x_n)
    keys and queries       A[n', n] ∝ exp(x_n'ᵀ U_kᵀ U_q x_n) = exp(k_n'ᵀ q_n)

each normalised over n' (down the column).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from .normalisation import RMSNorm
from .positions import rotate_pairs

__all__ = [
    "MultiHeadAttention",
    "MultiHeadSelfAttention",
    "SelfAttention",
    "SharedProjectionAttention",
    "attend",
    "attention_weights",
    "causal_mask",
    "dot_product_attention_weights",
    "from_equinox",
    "padding_mask",
    "qkv_attention",
    "qkv_weights",
    "to_equinox",
]

# ---------------------------------------------------------------------------------------------
# Attention weights
# ---------------------------------------------------------------------------------------------


def causal_mask(num_tokens: int) -> Bool[Array, "N N"]:
    """The causal mask of N tokens: ``mask[n', n]`` is True where n' <= n.

    Output n may then attend to inputs n' = 1, ..., n only, never to a later token.
    """
    return jnp.tril(jnp.ones((num_tokens, num_tokens), dtype=bool)).T


def padding_mask(is_real: Bool[Array, " M"], num_outputs: int | None = None) -> Bool[Array, "M N"]:
    """A mask that lets every output attend to the real (non-padding) inputs only.

    Args:
        is_real: which of the M inputs n' are real tokens (True) rather than padding.
        num_outputs: N, the number of outputs that read them; defaults to M (self-attention).
            Cross-attention passes the number of target tokens.

    Returns:
        ``mask[n', n] = is_real[n']``, shape (M, N): every column is the same.
    """
    num_outputs = is_real.shape[0] if num_outputs is None else num_outputs
    return jnp.broadcast_to(is_real[:, None], (is_real.shape[0], num_outputs))


def _check_mask_shape(mask, num_inputs: int, num_outputs: int, batch: bool = False) -> None:
    """Refuse a mask that is not (Nin, Nout) (or, with ``batch``, (B, Nin, Nout)).

    ``jnp.where`` would stretch a wrong shape without a word: a vector of which inputs are real,
    (Nin,), runs along the outputs instead, so that the real outputs read the padding.

    Raises:
        ValueError: naming the shape expected and the shape given.
    """
    expected = (num_inputs, num_outputs)
    shape = tuple(mask.shape)
    if shape == expected or (batch and len(shape) == 3 and shape[1:] == expected):
        return
    wanted = f"{expected}" + (f" or (B, {num_inputs}, {num_outputs})" if batch else "")
    hint = (
        ": a vector of which inputs are real becomes a mask with padding_mask(is_real, num_outputs)"
        if len(shape) == 1
        else ""
    )
    raise ValueError(
        f"mask must have shape {wanted}, mask[n', n] for input n' and output n; got {shape}{hint}"
    )


def attention_weights(
    keys: Float[Array, "Nin K"],
    queries: Float[Array, "Nout K"],
    *,
    scaled: bool = False,
    mask: Bool[Array, "Nin Nout"] | None = None,
    bias: Float[Array, "#Nin #Nout"] | None = None,
) -> Float[Array, "Nin Nout"]:
    """Column-normalised attention matrix ``A[n', n] = softmax_{n'}(k_n'ᵀ q_n)``.

    Args:
        keys: one key per input token, as rows.
        queries: one query per output token, as rows. In self-attention both come from the same
            tokens; in cross-attention the queries come from another sequence, of any length.
        scaled: divide the scores by sqrt(K), as Vaswani et al. (2017) do. The text's maths does
            not.
        mask: optional boolean (N, N) array; ``mask[n', n] = False`` forbids output n from attending
            to input n' (see :func:`causal_mask`, :func:`padding_mask`). Every column must allow at
            least one input.
        bias: optional score bias ``B[n', n]`` added to the (scaled) scores before the mask, so that
            ``A = softmax_{n'}(k_n'ᵀ q_n + B[n', n])``; (Nin, Nout), or with an axis of size 1
            that broadcasts, e.g. an (Nin, 1) column for a bias per key. Relative position
            encodings, learned content-free mixing and kernel regression are all such biases (book
            chapter 11).

    Returns:
        A, shape (Nin, Nout); each column sums to one over the inputs n'.

    Raises:
        ValueError: if keys and queries are not (N, K) arrays of one width K, or the mask is not
            (Nin, Nout).
    """
    if keys.ndim != 2 or queries.ndim != 2 or keys.shape[1] != queries.shape[1]:
        raise ValueError(
            "keys and queries must be (N, K) arrays of the same width K, "
            f"got {keys.shape} and {queries.shape}"
        )
    if mask is not None:
        _check_mask_shape(mask, keys.shape[0], queries.shape[0])
    scores = keys @ queries.T  # scores[n', n] = k_n' . q_n
    if scaled:
        scores = scores / math.sqrt(keys.shape[-1])
    if bias is not None:
        scores = scores + bias
    if mask is not None:
        scores = jnp.where(mask, scores, -jnp.inf)
    return jax.nn.softmax(scores, axis=0)


def dot_product_attention_weights(x: Float[Array, "N D"], **kwargs) -> Float[Array, "N N"]:
    """The simplest adaptive weights: similarity of raw tokens, ``A[n', n] ∝ exp(x_n'ᵀ x_n)``."""
    return attention_weights(x, x, **kwargs)


def attend(x: Float[Array, "M D"], weights: Float[Array, "M N"]) -> Float[Array, "N D"]:
    """Each output token is the weighted average ``y_n = Σ_n' x_n' A[n', n]`` (maths: Y = X A).

    M inputs and N outputs: M = N in self-attention; in cross-attention the inputs are the
    other sequence's tokens.
    """
    return weights.T @ x


class SharedProjectionAttention(eqx.Module):
    """Self-attention whose keys and queries share one projection U (K x D).

    The scores ``x_n'ᵀ Uᵀ U x_n`` form a symmetric matrix; normalising its columns then makes A
    column-stochastic, which in general breaks that symmetry again.
    """

    projection: Float[Array, "K D"]
    scaled: bool = eqx.field(static=True)

    def __init__(
        self, token_dim: int, projection_dim: int, *, scaled: bool = False, key: PRNGKeyArray
    ):
        """Draw U with Glorot-normal initialisation.

        Args:
            token_dim: D, the width of a token.
            projection_dim: K, the width of the projected tokens ``U x_n``.
            scaled: divide the scores by sqrt(K).
            key: a PRNG key.
        """
        self.projection = jax.nn.initializers.glorot_normal()(key, (projection_dim, token_dim))
        self.scaled = scaled

    def scores(self, x: Float[Array, "N D"]) -> Float[Array, "N N"]:
        """The symmetric scores ``S[n', n] = x_n'ᵀ Uᵀ U x_n``, before any scaling or softmax."""
        projected = x @ self.projection.T
        return projected @ projected.T

    def attention_weights(
        self, x: Float[Array, "N D"], mask: Bool[Array, "N N"] | None = None
    ) -> Float[Array, "N N"]:
        """``A[n', n] = softmax_{n'}(x_n'ᵀ Uᵀ U x_n)``; ``mask`` as in :func:`attention_weights`."""
        projected = x @ self.projection.T
        return attention_weights(projected, projected, scaled=self.scaled, mask=mask)

    def __call__(
        self, x: Float[Array, "N D"], mask: Bool[Array, "N N"] | None = None
    ) -> Float[Array, "N D"]:
        """The attended tokens ``y_n = Σ_n' x_n' A[n', n]`` (maths: Y = X A)."""
        return attend(x, self.attention_weights(x, mask))


class SelfAttention(eqx.Module):
    """Single-head self-attention with separate key and query projections ``U_k``, ``U_q`` (K x D).

    ``k_n = U_k x_n``, ``q_n = U_q x_n`` and ``A[n', n] = softmax_{n'}(k_n'ᵀ q_n)``; the output is
    ``Y = X A``. There is no value projection here: the text adds one (``V_h``) with the heads.
    """

    key_projection: Float[Array, "K D"]
    query_projection: Float[Array, "K D"]
    scaled: bool = eqx.field(static=True)

    def __init__(
        self, token_dim: int, projection_dim: int, *, scaled: bool = False, key: PRNGKeyArray
    ):
        """Draw ``U_k`` and ``U_q`` independently, Glorot-normal.

        Args:
            token_dim: D, the width of a token.
            projection_dim: K, the width of keys and queries.
            scaled: divide the scores by sqrt(K).
            key: a PRNG key.
        """
        k_key, q_key = jax.random.split(key)
        init = jax.nn.initializers.glorot_normal()
        self.key_projection = init(k_key, (projection_dim, token_dim))
        self.query_projection = init(q_key, (projection_dim, token_dim))
        self.scaled = scaled

    def scores(self, x: Float[Array, "N D"]) -> Float[Array, "N N"]:
        """The scores ``S[n', n] = k_n'ᵀ q_n``, before any scaling or softmax."""
        return (x @ self.key_projection.T) @ (x @ self.query_projection.T).T

    def attention_weights(
        self, x: Float[Array, "N D"], mask: Bool[Array, "N N"] | None = None
    ) -> Float[Array, "N N"]:
        """``A[n', n] = softmax_{n'}(k_n'ᵀ q_n)``; ``mask`` as in :func:`attention_weights`."""
        keys = x @ self.key_projection.T
        queries = x @ self.query_projection.T
        return attention_weights(keys, queries, scaled=self.scaled, mask=mask)

    def __call__(
        self, x: Float[Array, "N D"], mask: Bool[Array, "N N"] | None = None
    ) -> Float[Array, "N D"]:
        """The attended tokens ``y_n = Σ_n' x_n' A[n', n]`` (maths: Y = X A)."""
        return attend(x, self.attention_weights(x, mask))


# ---------------------------------------------------------------------------------------------
# Multi-head self-attention
# ---------------------------------------------------------------------------------------------


class MultiHeadAttention(eqx.Module):
    r"""Multi-head attention in the text's form, ``Y = Σ_h V_h X A_h``.

    One module serves every use in the book. By default the tokens attend to themselves
    (self-attention); a ``mask`` restricts which inputs each output may read (causal language
    models, padding); ``context=C`` takes keys and values from a second sequence C instead, so the
    tokens X ask the queries and C answers them (cross-attention, ``Y = Σ_h V_h C A_h`` with
    ``A_h[n', n] = softmax_{n'}(k_n'ᵀ q_n)``, ``k_n' = U_{k,h} c_n'``). ``MultiHeadSelfAttention``
    is the same class under the name the text gives it.

    Head h has its own key and query projections ``U_{k,h}``, ``U_{q,h}`` (K x D) and attention
    matrix ``A_h``, and a value map ``V_h`` (D x D). Two layouts of ``V_h`` are supported:

    * ``value_dim=None``: ``V_h`` is a full D x D matrix, stored directly (the text's form).
    * ``value_dim=Dv``: ``V_h = O_h W_h`` is factored through Dv dimensions, with ``W_h`` (Dv x D)
      and ``O_h`` (D x Dv). This is exactly the usual form of Vaswani et al. (2017): per-head values
      ``X W_hᵀ``, heads concatenated, then one output matrix ``W_O = [O_1 ... O_H]``.

    Correspondence with the Q/K/V notation: ``U_{q,h}`` is the h-th block of rows of ``W_Qᵀ``,
    ``U_{k,h}`` of ``W_Kᵀ``; ``softmax(Q Kᵀ)`` in that notation is ``A_hᵀ`` here (rows vs columns).

    ``__call__`` acts on one sequence and is the readable definition. :meth:`batched` computes the
    same function for a whole batch with a layout chosen for XLA on a CPU (``python
    benchmarks/throughput.py --layouts batched vmap`` prints the train-step ratio of the two); the
    tests check that the two agree, values and gradients.

    Options of today's language models (each off by default, leaving the layer above unchanged):

    * ``num_kv_heads=H_kv`` (grouped-query attention, Ainslie et al. 2023): the H query heads
      share H_kv key-value heads, query head h reading group ``g(h) = h // (H/H_kv)``:
      ``U_{k,h} = U_{k,g(h)}`` and ``W_h = W_{g(h)}``. Equivalently, it is multi-head attention
      whose key and value projections are repeated H/H_kv times (a test checks exactly that).
      H_kv = 1 is multi-query attention (Shazeer 2019). What it buys is the key-value cache:
      H_kv instead of H heads of keys and values per token, an H/H_kv times smaller cache and a
      faster step when generation is limited by reading it.
    * ``qk_norm=True``: an RMSNorm (one gain of width K, shared by the heads) on every key and
      query before the rotation (Dehghani et al. 2023). The score ``k·q`` is then at most ``K γ²``
      in size whatever the token widths grow to, which keeps the softmax from saturating.
    * ``rotary_base`` and ``rotary_layout``: see :func:`~transformer_intro.positions.rotate_pairs`.
    * ``use_bias=True`` (GPT-2): affine instead of linear projections. Only two of the four
      biases change the function, so only those two are stored. A key bias adds ``b_kᵀ q_n`` to
      every score of column n, the same for every input n', and the softmax down the column
      removes it. A value bias adds ``b_v`` to every value; the weights of a column sum to one, so
      ``Σ_n' (W x_n' + b_v) A[n', n] = Σ_n' W x_n' A[n', n] + b_v``, a constant that the output
      map turns into ``O_h b_v``: part of the output bias. What remains is a query bias per head
      and one output bias (a checkpoint's key bias is dropped, its value bias folded in).
    """

    key_projections: Float[Array, "Hkv K D"]
    query_projections: Float[Array, "H K D"]
    value_projections: Float[Array, "Hkv Dv D"]
    output_projections: Float[Array, "H D Dv"] | None
    query_norm: RMSNorm | None
    key_norm: RMSNorm | None
    query_bias: Float[Array, "H K"] | None
    output_bias: Float[Array, " D"] | None
    num_heads: int = eqx.field(static=True)
    num_kv_heads: int = eqx.field(static=True)
    rotary_base: float = eqx.field(static=True)
    rotary_layout: Literal["interleaved", "half"] = eqx.field(static=True)
    scaled: bool = eqx.field(static=True)
    rotary: bool = eqx.field(static=True)
    combine_heads: Literal["sum", "mean"] = eqx.field(static=True)
    qk_activation: Callable | None = eqx.field(static=True)

    def __init__(
        self,
        token_dim: int,
        num_heads: int,
        head_dim: int | None = None,
        value_dim: int | None = None,
        *,
        scaled: bool = True,
        rotary: bool = False,
        combine_heads: Literal["sum", "mean"] = "sum",
        qk_activation: Callable | None = None,
        num_kv_heads: int | None = None,
        qk_norm: bool = False,
        qk_norm_eps: float = 1e-6,
        rotary_base: float = 10_000.0,
        rotary_layout: Literal["interleaved", "half"] = "interleaved",
        use_bias: bool = False,
        key: PRNGKeyArray,
    ):
        """Draw every head's projections (Glorot-normal); biases, if any, start at zero.

        Args:
            token_dim: D, the width of a token.
            num_heads: H.
            head_dim: K, the width of keys and queries. Defaults to D / H, which must then be whole.
            value_dim: None for full D x D value maps ``V_h`` (the text); Dv for ``V_h = O_h W_h``.
            scaled: divide scores by sqrt(K) (Vaswani et al.); the text's maths leaves it out.
            rotary: rotate keys and queries by their position (RoPE, Su et al. 2024) so that the
                scores depend on the relative position of the two tokens.
            combine_heads: "sum" (the maths) or "mean" (the reference code, a rescaled ``V_h``).
            qk_activation: applied to keys and queries; None (the maths) applies nothing. The
                reference code applies a GELU here, and its configuration reproduces that.
            num_kv_heads: H_kv, the number of key-value heads; None means H (multi-head attention),
                1 multi-query attention. H must be a multiple of H_kv.
            qk_norm: an RMSNorm on each head's keys and queries (QK-norm).
            qk_norm_eps: that RMSNorm's epsilon.
            rotary_base: the base of the rotary frequencies, ``ω_i = base^(-2i/K)``.
            rotary_layout: "interleaved" pairs coordinates (2i, 2i+1), "half" pairs (i, i + K/2).
            use_bias: a query bias per head and an output bias, initialised to zero (the only
                biases that change the function, see above).
            key: a PRNG key.

        Raises:
            ValueError: if H < 1, D is not a multiple of H (without ``head_dim``), K is odd with
                ``rotary``, H is not a multiple of H_kv, or an option names no known choice.
        """
        if num_heads < 1:
            raise ValueError(f"num_heads must be at least 1, got {num_heads}")
        if head_dim is None:
            if token_dim % num_heads:
                raise ValueError(
                    f"token width D={token_dim} is not divisible by num_heads={num_heads}; "
                    "choose a width that is, or pass head_dim explicitly"
                )
            head_dim = token_dim // num_heads
        if rotary and head_dim % 2:
            raise ValueError(f"rotary position embeddings need an even head_dim, got {head_dim}")
        if combine_heads not in ("sum", "mean"):
            raise ValueError(f"combine_heads must be 'sum' or 'mean', got {combine_heads!r}")
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if num_kv_heads < 1 or num_heads % num_kv_heads:
            raise ValueError(
                f"num_heads={num_heads} must be a multiple of num_kv_heads={num_kv_heads} (>= 1)"
            )
        if rotary_layout not in ("interleaved", "half"):
            raise ValueError(
                f"rotary_layout must be 'interleaved' or 'half', got {rotary_layout!r}"
            )
        k_key, q_key, v_key, o_key = jax.random.split(key, 4)
        init = jax.nn.initializers.glorot_normal(in_axis=-1, out_axis=-2, batch_axis=0)
        self.key_projections = init(k_key, (num_kv_heads, head_dim, token_dim))
        self.query_projections = init(q_key, (num_heads, head_dim, token_dim))
        if value_dim is None:
            self.value_projections = init(v_key, (num_kv_heads, token_dim, token_dim))
            self.output_projections = None
        else:
            self.value_projections = init(v_key, (num_kv_heads, value_dim, token_dim))
            # One D x (H Dv) output matrix, initialised as a whole and split by head.
            w_o = jax.nn.initializers.glorot_normal()(o_key, (token_dim, num_heads * value_dim))
            self.output_projections = w_o.reshape(token_dim, num_heads, value_dim).transpose(
                1, 0, 2
            )
        self.query_bias = jnp.zeros((num_heads, head_dim)) if use_bias else None
        self.output_bias = jnp.zeros(token_dim) if use_bias else None
        self.query_norm = RMSNorm(head_dim, eps=qk_norm_eps) if qk_norm else None
        self.key_norm = RMSNorm(head_dim, eps=qk_norm_eps) if qk_norm else None
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.scaled = scaled
        self.rotary = rotary
        self.rotary_base = rotary_base
        self.rotary_layout = rotary_layout
        self.combine_heads = combine_heads
        self.qk_activation = qk_activation

    # -- the per-head maps shared by every path ------------------------------------------------

    @property
    def group_size(self) -> int:
        """H / H_kv: how many query heads read each key-value head."""
        return self.num_heads // self.num_kv_heads

    def per_query_head(self, array: Float[Array, "Hkv ..."]) -> Float[Array, "H ..."]:
        """A key-value head's array repeated for each query head of its group g(h)."""
        return array if self.group_size == 1 else jnp.repeat(array, self.group_size, axis=0)

    def _query_bias_rows(self) -> Array | None:
        """The query bias laid out to add to (H, N, K) queries."""
        return None if self.query_bias is None else self.query_bias[:, None, :]

    def _add_output_bias(self, y: Array) -> Array:
        return y if self.output_bias is None else y + self.output_bias

    def _rotate(self, x: Array, positions: Array) -> Array:
        return rotate_pairs(x, positions, base=self.rotary_base, layout=self.rotary_layout)

    def _finish_keys(self, keys: Array, positions: Array) -> Array:
        """Projected keys -> the keys scored: activation, QK-norm, rotation (in that order)."""
        if self.qk_activation is not None:
            keys = self.qk_activation(keys)
        if self.key_norm is not None:
            keys = self.key_norm(keys)
        return self._rotate(keys, positions) if self.rotary else keys

    def _finish_queries(self, queries: Array, positions: Array, bias: Array | None = None) -> Array:
        if bias is not None:
            queries = queries + bias
        if self.qk_activation is not None:
            queries = self.qk_activation(queries)
        if self.query_norm is not None:
            queries = self.query_norm(queries)
        return self._rotate(queries, positions) if self.rotary else queries

    # -- the readable, one-sequence definition -------------------------------------------------

    def value_maps(self) -> Float[Array, "H D D"]:
        """The text's ``V_h`` for every head, multiplied out when it is factored."""
        values = self.per_query_head(self.value_projections)
        if self.output_projections is None:
            return values
        return self.output_projections @ values

    def head_keys_queries(
        self, x: Float[Array, "N D"], context: Float[Array, "M D"] | None = None
    ) -> tuple[Float[Array, "H M K"], Float[Array, "H N K"]]:
        """Every head's keys and queries, as scored (after activation, QK-norm and rotation).

        Keys come from the sequence that is read (``context``, or x itself), queries from x; keys
        of grouped-query attention are repeated so that there is one per query head.
        """
        source = self._source(x, context)
        keys = jnp.einsum("hkd,md->hmk", self.key_projections, source)
        queries = jnp.einsum("hkd,nd->hnk", self.query_projections, x)
        keys = self._finish_keys(keys, jnp.arange(source.shape[0]))
        queries = self._finish_queries(queries, jnp.arange(x.shape[0]), self._query_bias_rows())
        return self.per_query_head(keys), queries

    def attention_weights(
        self,
        x: Float[Array, "N D"],
        mask: Bool[Array, "M N"] | None = None,
        *,
        context: Float[Array, "M D"] | None = None,
    ) -> Float[Array, "H M N"]:
        """``A_h`` for every head, ``A[h, n', n]``; each column of each ``A_h`` sums to one.

        ``mask`` and ``context`` are as in ``__call__``.
        """
        keys, queries = self.head_keys_queries(x, context)
        per_head = lambda k, q: attention_weights(k, q, scaled=self.scaled, mask=mask)
        return jax.vmap(per_head)(keys, queries)

    def __call__(
        self,
        x: Float[Array, "N D"],
        mask: Bool[Array, "M N"] | None = None,
        *,
        context: Float[Array, "M D"] | None = None,
    ) -> Float[Array, "N D"]:
        """Self-attention on x, or, with ``context``, x's queries reading the context's tokens.

        Args:
            x: the N tokens that ask the queries (and, without a context, answer them).
            mask: ``mask[n', n] = False`` forbids output n from reading input n'; its first axis
                runs over the inputs (N without a context, the context's length with one).
            context: the tokens that offer keys and values in cross-attention.

        Returns:
            ``Y = Σ_h V_h X A_h`` as rows (``V_h C A_h`` with a context), shape (N, D).

        Raises:
            ValueError: if x is not one (N, D) sequence, or the context does not fit it.
        """
        if x.ndim != 2 or x.shape[1] != self.token_dim:
            raise ValueError(f"expected one sequence of shape (N, {self.token_dim}), got {x.shape}")
        source = self._source(x, context)
        weights = self.attention_weights(x, mask, context=context)  # (H, M, N)
        values = self.value_maps()  # (H, D, D)
        # Maths: Y = Σ_h V_h X A_h. With tokens as rows: Yᵀ = Σ_h A_hᵀ Xᵀ V_hᵀ.
        per_head = jax.vmap(lambda v, a: attend(source @ v.T, a))(values, weights)
        y = per_head.sum(0) if self.combine_heads == "sum" else per_head.mean(0)
        return self._add_output_bias(y)

    def _source(self, x: Array, context: Array | None) -> Array:
        """The tokens that offer keys and values: x itself, or the context of cross-attention."""
        if context is None:
            return x
        if context.ndim != x.ndim or context.shape[-1] != self.token_dim:
            raise ValueError(
                f"context must hold tokens of width {self.token_dim} in the layout of x "
                f"{x.shape}, got {context.shape}"
            )
        if self.rotary:
            raise ValueError(
                "rotary positions compare positions within one sequence; "
                "use them in self-attention only"
            )
        return context

    # -- generation with a key-value cache ---------------------------------------------------------

    def empty_cache(
        self, window: int, dtype=jnp.float32
    ) -> tuple[Float[Array, "Hkv W K"], Float[Array, "Hkv W Dv"]]:
        """Room for the keys and values of ``window`` tokens, preallocated as zeros.

        There is one slot per key-value head, so grouped-query attention's cache is H/H_kv times
        smaller.

        Returns:
            The cache ``(keys, values)``, shapes (H_kv, window, K) and (H_kv, window, Dv).
        """
        heads, k, _ = self.key_projections.shape
        dv = self.value_projections.shape[1]
        return jnp.zeros((heads, window, k), dtype), jnp.zeros((heads, window, dv), dtype)

    def extend(
        self,
        x: Float[Array, "T D"],
        cache: tuple[Float[Array, "Hkv W K"], Float[Array, "Hkv W Dv"]],
        start: Int[Array, ""] | int,
    ) -> tuple[Float[Array, "T D"], tuple[Float[Array, "Hkv W K"], Float[Array, "Hkv W Dv"]]]:
        """Causal self-attention for T new tokens at positions ``start, ..., start + T - 1``.

        The keys and values of the earlier tokens are read from ``cache`` instead of being
        recomputed; the new tokens' own keys and values are written into it at ``start`` (one
        ``dynamic_update_slice``, so ``start`` may be a traced value and nothing recompiles as it
        moves). Output n reads the cached and new inputs at positions <= its own. With T tokens
        from position 0 this is the prefill, and it equals ``self(x, causal_mask(T))``.

        Args:
            x: the T new tokens.
            cache: the ``(keys, values)`` from :meth:`empty_cache` or an earlier call.
            start: the position of the first new token.

        Returns:
            The T new outputs and the cache with the new tokens' keys and values written in.

        Raises:
            ValueError: if x is not a (T, D) array, or T exceeds the cache's window.
        """
        if x.ndim != 2 or x.shape[1] != self.token_dim:
            raise ValueError(f"expected new tokens of shape (T, {self.token_dim}), got {x.shape}")
        cached_keys, cached_values = cache
        window, t = cached_keys.shape[1], x.shape[0]
        if t > window:
            raise ValueError(f"{t} new tokens do not fit a cache of {window} positions")
        positions = start + jnp.arange(t)

        keys = self._finish_keys(self._heads_of(self.key_projections, x), positions)
        queries = self._heads_of(self.query_projections, x)
        queries = self._finish_queries(queries, positions, self._query_bias_rows())
        values = self._heads_of(self.value_projections, x)
        cached_keys = jax.lax.dynamic_update_slice(
            cached_keys, keys.astype(cached_keys.dtype), (0, start, 0)
        )
        cached_values = jax.lax.dynamic_update_slice(
            cached_values, values.astype(cached_values.dtype), (0, start, 0)
        )
        # Slots after the newest token hold zeros or stale entries; the mask keeps them out.
        mask = (
            jnp.arange(window)[:, None] <= positions[None, :]
        )  # mask[m, n]: input m before output n
        # Grouped queries: the r = H/H_kv query heads of group g read the same cached keys, so they
        # are scored as one block of r T queries against that group's keys (no copy of the cache).
        r = self.group_size
        grouped_queries = queries.reshape(self.num_kv_heads, r * t, -1)
        grouped_mask = mask if r == 1 else jnp.tile(mask, (1, r))
        weights = jax.vmap(
            lambda k, q: attention_weights(k, q, scaled=self.scaled, mask=grouped_mask)
        )(cached_keys, grouped_queries)  # (H_kv, W, r T)
        heads = jnp.einsum("hmt,hmv->htv", weights, cached_values).reshape(self.num_heads, t, -1)
        return self._tokens_from_heads(heads), (cached_keys, cached_values)

    def _heads_of(self, weights: Float[Array, "H K D"], x: Float[Array, "T D"]) -> Array:
        """``W_h x_t`` for every head h and new token t, (H, T, K): one product per head."""
        # Written as "hkd,td->htk", XLA on the CPU copies every projection into another layout
        # at each generated token (63 MiB per token for SmolLM2), while the batched form reads
        # the weights in place.
        return jnp.einsum("hkd,htd->htk", weights, jnp.broadcast_to(x, (len(weights), *x.shape)))

    def _tokens_from_heads(self, heads: Float[Array, "H T Dv"]) -> Float[Array, "T D"]:
        """The heads' outputs as tokens: ``Σ_h O_h v_{h,t}`` (or the mean), plus the output bias."""
        if self.output_projections is not None:
            heads = jnp.einsum("hdv,htv->htd", self.output_projections, heads)
        y = heads.sum(0) if self.combine_heads == "sum" else heads.mean(0)
        return self._add_output_bias(y)

    @property
    def token_dim(self) -> int:
        """D, the width of a token."""
        return self.key_projections.shape[-1]

    @property
    def head_dim(self) -> int:
        """K, the width of keys and queries."""
        return self.key_projections.shape[1]

    # -- the fast batched path -------------------------------------------------------------------

    def batched(
        self,
        x: Float[Array, "B N D"],
        mask: Bool[Array, "M N"] | Bool[Array, "B M N"] | None = None,
        *,
        context: Float[Array, "B M D"] | None = None,
        num_outputs: int | None = None,
    ) -> Float[Array, "B Q D"]:
        """The same as ``jax.vmap(self)(x)``, laid out for speed on a CPU.

        ``mask`` is one (M, N) mask ``mask[n', n]`` for the whole batch or one per example,
        (B, M, N), as padding needs; ``context`` (B, M, D) makes it cross-attention, as in
        ``__call__``.

        The batch axis stays leading throughout: for each head, one matrix product on the
        flattened batch gives its keys, queries and values side by side, and the attention
        products are batched over examples only. Stacking the heads into one wide product looks
        cheaper but forces XLA to copy every (B, N, H, K) array into (B, H, N, K) order and back,
        forward and backward, which measured twice as slow for the reference model.

        ``num_outputs=Q`` computes only the first Q output tokens, ``jax.vmap(self)(x)[:, :Q]``:
        every token still offers its key and value, but only the first Q ask a query. A ViT's last
        block needs nothing but the class token's output, and this skips the rest of its work.

        Raises:
            ValueError: if x is not a (B, N, D) batch, or the context, ``num_outputs`` or the
                mask's shape does not fit it.
        """
        if x.ndim != 3 or x.shape[2] != self.token_dim:
            raise ValueError(f"expected a batch of shape (B, N, {self.token_dim}), got {x.shape}")
        source = self._source(x, context)
        b, n, d = x.shape
        m = source.shape[1]
        if source.shape[0] != b:
            raise ValueError(f"context batch {source.shape[0]} does not match the batch of x, {b}")
        q = n if num_outputs is None else num_outputs
        if not 1 <= q <= n:
            raise ValueError(
                f"num_outputs must be between 1 and the number of tokens {n}, got {num_outputs}"
            )
        if mask is not None:
            _check_mask_shape(mask, m, n, batch=True)
            if mask.ndim == 3 and mask.shape[0] not in (1, b):
                raise ValueError(
                    f"mask must have shape ({m}, {n}) or (B, {m}, {n}) with B = {b}, the batch of "
                    f"x; got {tuple(mask.shape)}"
                )
        k = self.head_dim
        dv = self.value_projections.shape[1]
        # When every token of x asks a query of itself, one wider product is faster than two.
        fused_queries = q == n and context is None
        tokens = source.reshape(b * m, d)
        total = jnp.zeros((b, q, d), x.dtype)
        r = self.group_size
        for g in range(self.num_kv_heads):
            # One product per key-value head: its keys, its values and (when fused) the queries
            # of the r query heads that read them.
            group = range(g * r, (g + 1) * r)
            rows = [self.key_projections[g], self.value_projections[g]]
            if fused_queries:
                rows.extend(self.query_projections[h] for h in group)
            projected = (tokens @ jnp.concatenate(rows, axis=0).T).reshape(b, m, -1)
            keys = self._finish_keys(projected[..., :k], jnp.arange(m))
            values = projected[..., k : k + dv]
            for i, h in enumerate(group):
                if fused_queries:
                    queries = projected[..., k + dv + i * k : k + dv + (i + 1) * k]
                else:
                    queries = x[:, :q] @ self.query_projections[h].T
                bias = None if self.query_bias is None else self.query_bias[h]
                queries = self._finish_queries(queries, jnp.arange(q), bias)
                logits = jnp.einsum(
                    "bjk,bik->bji", queries, keys
                )  # logits[b, n, n'] = q_n . k_n' = A_h[n', n] before softmax
                if self.scaled:
                    logits = logits / math.sqrt(k)
                if mask is not None:
                    logits = jnp.where(jnp.swapaxes(mask[..., :q], -1, -2), logits, -jnp.inf)
                weights = jax.nn.softmax(logits, axis=-1)
                head = jnp.einsum("bji,biv->bjv", weights, values)
                if self.output_projections is not None:
                    head = head @ self.output_projections[h].T
                total = total + head
        total = total if self.combine_heads == "sum" else total / self.num_heads
        return self._add_output_bias(total)


MultiHeadSelfAttention = MultiHeadAttention


# ---------------------------------------------------------------------------------------------
# Bridges to the usual Q/K/V form and to Equinox
# ---------------------------------------------------------------------------------------------


def qkv_weights(mhsa: MultiHeadSelfAttention) -> dict[str, Float[Array, ...]]:
    """The layer's weights in the Q/K/V form: ``Y = concat_h(softmax(Q_h K_hᵀ) V_h) W_O``.

    The text's full-width ``V_h`` becomes ``W_V`` with Dv = D and ``W_O`` a stack of identities.
    Grouped key-value heads are repeated, one per query head.

    Returns:
        A dict of ``W_Q`` and ``W_K`` (D, H K), ``W_V`` (D, H Dv) and ``W_O`` (H Dv, D), which act
        on tokens as rows.

    Raises:
        ValueError: if the layer has QK-norm or biases, which that form has no place for.
    """
    if mhsa.query_norm is not None or mhsa.query_bias is not None:
        raise ValueError("a layer with QK-norm or biases has no plain, unbiased Q/K/V form")
    h, k, d = mhsa.query_projections.shape
    w_q = mhsa.query_projections.reshape(h * k, d).T
    w_k = mhsa.per_query_head(mhsa.key_projections).reshape(h * k, d).T
    dv = mhsa.value_projections.shape[1]
    w_v = mhsa.per_query_head(mhsa.value_projections).reshape(h * dv, d).T
    if mhsa.output_projections is None:
        w_o = jnp.tile(jnp.eye(d), (h, 1))
    else:
        w_o = mhsa.output_projections.transpose(0, 2, 1).reshape(h * dv, d)
    if mhsa.combine_heads == "mean":
        w_o = w_o / h
    return {"W_Q": w_q, "W_K": w_k, "W_V": w_v, "W_O": w_o}


def qkv_attention(
    x: Float[Array, "N D"],
    weights: dict[str, Float[Array, ...]],
    num_heads: int,
    *,
    scaled: bool = True,
) -> Float[Array, "N D"]:
    """Multi-head attention written as Vaswani et al. (2017) write it (queries attend over rows).

    Args:
        x: the N tokens, as rows.
        weights: ``W_Q``, ``W_K``, ``W_V``, ``W_O`` as :func:`qkv_weights` returns them.
        num_heads: H.
        scaled: divide the scores by sqrt(K).
    """
    n = x.shape[0]
    q = (x @ weights["W_Q"]).reshape(n, num_heads, -1).transpose(1, 0, 2)
    k = (x @ weights["W_K"]).reshape(n, num_heads, -1).transpose(1, 0, 2)
    v = (x @ weights["W_V"]).reshape(n, num_heads, -1).transpose(1, 0, 2)
    logits = q @ k.transpose(0, 2, 1)
    if scaled:
        logits = logits / math.sqrt(q.shape[-1])
    heads = jax.nn.softmax(logits, axis=-1) @ v  # (H, N, Dv)
    return heads.transpose(1, 0, 2).reshape(n, -1) @ weights["W_O"]


def to_equinox(mhsa: MultiHeadSelfAttention) -> eqx.nn.MultiheadAttention:
    """An ``equinox.nn.MultiheadAttention`` computing the same function (no biases).

    Raises:
        ValueError: unless the layer is ``scaled`` (Equinox always divides by sqrt(K)), not
            rotary, and has no key/query activation, QK-norm or biases.
    """
    if (
        not mhsa.scaled
        or mhsa.rotary
        or mhsa.qk_activation is not None
        or mhsa.query_norm is not None
        or mhsa.query_bias is not None
    ):
        raise ValueError(
            "only a scaled, non-rotary layer without a key/query activation maps to Equinox"
        )
    w = qkv_weights(mhsa)
    h, k, d = mhsa.query_projections.shape
    dv = mhsa.value_projections.shape[1]
    layer = eqx.nn.MultiheadAttention(
        num_heads=h, query_size=d, qk_size=k, vo_size=dv, output_size=d, key=jax.random.PRNGKey(0)
    )
    # Equinox's Linear stores weight as (out, in), i.e. the transpose of the W's above.
    for name, value in (
        ("query_proj", w["W_Q"]),
        ("key_proj", w["W_K"]),
        ("value_proj", w["W_V"]),
        ("output_proj", w["W_O"]),
    ):
        layer = eqx.tree_at(lambda l, name=name: getattr(l, name).weight, layer, value.T)
    return layer


def from_equinox(layer: eqx.nn.MultiheadAttention) -> MultiHeadSelfAttention:
    """The text's parameterisation of an (unbiased) ``equinox.nn.MultiheadAttention``.

    Raises:
        ValueError: if the Equinox layer has biases.
    """
    if any(
        getattr(layer, p).bias is not None
        for p in ("query_proj", "key_proj", "value_proj", "output_proj")
    ):
        raise ValueError(
            "the text's form has no biases; build the Equinox layer with use_*_bias=False"
        )
    h, k, dv = layer.num_heads, layer.qk_size, layer.vo_size
    d = layer.query_proj.weight.shape[1]
    mhsa = MultiHeadSelfAttention(d, h, k, dv, scaled=True, key=jax.random.PRNGKey(0))
    return eqx.tree_at(
        lambda m: (
            m.query_projections,
            m.key_projections,
            m.value_projections,
            m.output_projections,
        ),
        mhsa,
        (
            layer.query_proj.weight.reshape(h, k, d),
            layer.key_proj.weight.reshape(h, k, d),
            layer.value_proj.weight.reshape(h, dv, d),
            layer.output_proj.weight.reshape(d, h, dv).transpose(1, 0, 2),
        ),
    )
