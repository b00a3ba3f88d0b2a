"""FlashAttention: softmax attention in tiles, never holding the N x N matrix (Dao et al., 2022).

Plain attention computes every score ``s[n', n] = k_n'ᵀ q_n / sqrt(K)`` at once, an N x N array,
and automatic differentiation keeps the N x N attention weights for the backward pass. The tiled
form takes the queries a tile at a time and streams the keys and values past them a tile at a
time, keeping for every query only the online softmax's running state (book chapter 11): the
largest score so far ``ŝ``, the normaliser ``ζ`` relative to it and the weighted sum ``ỹ``,

    ŝ_j = max(ŝ_{j-1}, max_{n' in tile j} s[n', n]),
    ζ_j = ζ_{j-1} e^{ŝ_{j-1} - ŝ_j} + Σ_{n' in tile j} e^{s[n', n] - ŝ_j},
    ỹ_j = ỹ_{j-1} e^{ŝ_{j-1} - ŝ_j} + Σ_{n' in tile j} e^{s[n', n] - ŝ_j} v_n',

and ``y_n = ỹ / ζ`` after the last tile. The forward pass saves one number per query besides its
inputs and output, the log-sum-exp of its scores ``ℓ_n = ŝ + log ζ``. From it the backward pass
(``jax.custom_vjp``) recomputes any tile of the weights exactly, ``A[n', n] = e^{s[n', n] - ℓ_n}``,
and with ``δ_n = Σ_i dy_{n,i} y_{n,i}`` (one more number per query) the gradients are
FlashAttention-2's (Dao, 2023):

    dV = Aᵀ-weighted dY:   dv_n' = Σ_n A[n', n] dy_n,
    dS[n', n] = A[n', n] (v_n'ᵀ dy_n - δ_n),
    dq_n = Σ_n' dS[n', n] k_n' / sqrt(K),   dk_n' = Σ_n dS[n', n] q_n / sqrt(K).

Tokens are rows, as everywhere in the package's code: keys (Nin, K), queries (Nout, K), values
(Nin, Dv), output (Nout, Dv). Batches and heads are a ``jax.vmap`` away.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .attention import attend, attention_weights, causal_mask

__all__ = [
    "flash_attention",
    "flash_attention_backward",
    "flash_attention_forward",
    "plain_attention",
]


def _tiles(num: int, tile: int, what: str) -> int:
    """How many tiles of ``tile`` rows ``num`` rows make; a tile that does not divide is refused."""
    if tile < 1 or num % tile:
        raise ValueError(
            f"the {what} tile size must divide the number of {what} ({num}); got {tile}: "
            f"pass {what[:-1]}_tile= a divisor of {num}, or pad the sequence"
        )
    return num // tile


def _check(keys, queries, values, causal: bool) -> None:
    if keys.ndim != 2 or queries.ndim != 2 or values.ndim != 2:
        raise ValueError(
            "keys, queries and values must be (N, K), (N, K) and (N, Dv) arrays of one sequence "
            f"(vmap over batches and heads), got {keys.shape}, {queries.shape}, {values.shape}"
        )
    if keys.shape[1] != queries.shape[1] or keys.shape[0] != values.shape[0]:
        raise ValueError(
            "keys and queries must have one width K and keys and values one length Nin, got "
            f"keys {keys.shape}, queries {queries.shape}, values {values.shape}"
        )
    if causal and keys.shape[0] != queries.shape[0]:
        raise ValueError(
            f"the causal mask needs as many queries as keys, got {queries.shape[0]} queries "
            f"and {keys.shape[0]} keys"
        )


def _tile_scores(key_tile, query_tile, key_start, query_start, scale, causal):
    """Scores ``s[n', n]`` of one tile, (key rows, query rows), -inf where the mask forbids."""
    scores = key_tile @ query_tile.T * scale
    if causal:
        key_index = key_start + jnp.arange(key_tile.shape[0])[:, None]
        query_index = query_start + jnp.arange(query_tile.shape[0])[None, :]
        scores = jnp.where(key_index <= query_index, scores, -jnp.inf)
    return scores


def flash_attention_forward(
    keys: Float[Array, "Nin K"],
    queries: Float[Array, "Nout K"],
    values: Float[Array, "Nin Dv"],
    *,
    causal: bool = False,
    query_tile: int = 64,
    key_tile: int = 64,
) -> tuple[Float[Array, "Nout Dv"], Float[Array, " Nout"]]:
    """The tiled forward pass: the output and each query's log-sum-exp ``ℓ_n``.

    Args:
        keys: (Nin, K), one key per input token.
        queries: (Nout, K), one query per output token.
        values: (Nin, Dv), one value per input token.
        causal: output n attends to inputs n' <= n only.
        query_tile: queries per tile (clipped to Nout); must divide Nout.
        key_tile: keys per tile (clipped to Nin); must divide Nin.

    Returns:
        y (Nout, Dv) and ``ℓ_n = log Σ_n' e^{s[n', n]}`` (Nout,).
    """
    _check(keys, queries, values, causal)
    num_in, num_out = keys.shape[0], queries.shape[0]
    query_tile, key_tile = min(query_tile, num_out), min(key_tile, num_in)
    query_tiles = _tiles(num_out, query_tile, "queries")
    key_tiles = _tiles(num_in, key_tile, "keys")
    scale = 1 / math.sqrt(keys.shape[1])
    tiled_keys = keys.reshape(key_tiles, key_tile, -1)
    tiled_values = values.reshape(key_tiles, key_tile, -1)

    def one_query_tile(query_block, query_start):
        def step(state, tile):
            running_max, normaliser, weighted_sum = state
            key_block, value_block, key_start = tile
            scores = _tile_scores(key_block, query_block, key_start, query_start, scale, causal)
            new_max = jnp.maximum(running_max, scores.max(axis=0))
            # A query that has seen only masked keys keeps ŝ = -inf; exponents are taken
            # relative to 0 then, so that -inf - (-inf) never makes a NaN.
            shift = jnp.where(jnp.isfinite(new_max), new_max, 0.0)
            correction = jnp.exp(running_max - shift)
            weights = jnp.exp(scores - shift)  # (key rows, query rows)
            normaliser = normaliser * correction + weights.sum(axis=0)
            weighted_sum = weighted_sum * correction[:, None] + weights.T @ value_block
            return (new_max, normaliser, weighted_sum), None

        initial = (
            jnp.full(query_tile, -jnp.inf, keys.dtype),
            jnp.zeros(query_tile, keys.dtype),
            jnp.zeros((query_tile, values.shape[1]), values.dtype),
        )
        starts = jnp.arange(key_tiles) * key_tile
        (running_max, normaliser, weighted_sum), _ = jax.lax.scan(
            step, initial, (tiled_keys, tiled_values, starts)
        )
        return weighted_sum / normaliser[:, None], running_max + jnp.log(normaliser)

    outputs, log_sum_exp = jax.vmap(one_query_tile)(
        queries.reshape(query_tiles, query_tile, -1), jnp.arange(query_tiles) * query_tile
    )
    return outputs.reshape(num_out, -1), log_sum_exp.reshape(num_out)


def flash_attention_backward(
    keys: Float[Array, "Nin K"],
    queries: Float[Array, "Nout K"],
    values: Float[Array, "Nin Dv"],
    outputs: Float[Array, "Nout Dv"],
    log_sum_exp: Float[Array, " Nout"],
    output_gradient: Float[Array, "Nout Dv"],
    *,
    causal: bool = False,
    query_tile: int = 64,
    key_tile: int = 64,
) -> tuple[Float[Array, "Nin K"], Float[Array, "Nout K"], Float[Array, "Nin Dv"]]:
    """The tiled backward pass from the saved log-sum-exp: (dkeys, dqueries, dvalues).

    Each tile of weights is recomputed as ``A[n', n] = e^{s[n', n] - ℓ_n}``. The key tiles'
    gradients scan over the query tiles and the query tiles' gradients over the key tiles, so
    that each sum is accumulated in one place and no tile of size N x N is ever formed.
    """
    _check(keys, queries, values, causal)
    num_in, num_out = keys.shape[0], queries.shape[0]
    query_tile, key_tile = min(query_tile, num_out), min(key_tile, num_in)
    query_tiles = _tiles(num_out, query_tile, "queries")
    key_tiles = _tiles(num_in, key_tile, "keys")
    scale = 1 / math.sqrt(keys.shape[1])
    # δ_n = dy_n . y_n, the softmax's correction: one number per query.
    delta = jnp.sum(output_gradient * outputs, axis=1)
    tiled = lambda x, tile, count: x.reshape(count, tile, -1)  # noqa: E731
    tiled_keys, tiled_values = tiled(keys, key_tile, key_tiles), tiled(values, key_tile, key_tiles)
    tiled_queries = tiled(queries, query_tile, query_tiles)
    tiled_dy = tiled(output_gradient, query_tile, query_tiles)
    tiled_lse = log_sum_exp.reshape(query_tiles, query_tile)
    tiled_delta = delta.reshape(query_tiles, query_tile)
    key_starts = jnp.arange(key_tiles) * key_tile
    query_starts = jnp.arange(query_tiles) * query_tile

    def weights_and_score_gradient(key_part, query_part):
        key_block, value_block, key_start = key_part
        query_block, dy_block, lse_block, delta_block, query_start = query_part
        scores = _tile_scores(key_block, query_block, key_start, query_start, scale, causal)
        weights = jnp.exp(scores - lse_block[None, :])  # A[n', n], exact from ℓ_n
        score_gradient = weights * (value_block @ dy_block.T - delta_block[None, :])
        return weights, score_gradient

    def query_gradient(query_block, dy_block, lse_block, delta_block, query_start):
        def step(dq, tile):
            _, ds = weights_and_score_gradient(
                tile, (query_block, dy_block, lse_block, delta_block, query_start)
            )
            return dq + ds.T @ tile[0] * scale, None

        dq, _ = jax.lax.scan(
            step, jnp.zeros_like(query_block), (tiled_keys, tiled_values, key_starts)
        )
        return dq

    def key_and_value_gradients(key_block, value_block, key_start):
        def step(state, tile):
            dk, dv = state
            a, ds = weights_and_score_gradient((key_block, value_block, key_start), tile)
            query_block, dy_block = tile[0], tile[1]
            return (dk + ds @ query_block * scale, dv + a @ dy_block), None

        initial = (jnp.zeros_like(key_block), jnp.zeros_like(value_block))
        (dk, dv), _ = jax.lax.scan(
            step,
            initial,
            (tiled_queries, tiled_dy, tiled_lse, tiled_delta, query_starts),
        )
        return dk, dv

    dq = jax.vmap(query_gradient)(tiled_queries, tiled_dy, tiled_lse, tiled_delta, query_starts)
    dk, dv = jax.vmap(key_and_value_gradients)(tiled_keys, tiled_values, key_starts)
    return dk.reshape(keys.shape), dq.reshape(queries.shape), dv.reshape(values.shape)


@partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def _flash(keys, queries, values, causal, query_tile, key_tile):
    outputs, _ = flash_attention_forward(
        keys, queries, values, causal=causal, query_tile=query_tile, key_tile=key_tile
    )
    return outputs


def _flash_forward(keys, queries, values, causal, query_tile, key_tile):
    outputs, log_sum_exp = flash_attention_forward(
        keys, queries, values, causal=causal, query_tile=query_tile, key_tile=key_tile
    )
    # What the backward pass keeps: the inputs, the output and one ℓ_n per query.
    return outputs, (keys, queries, values, outputs, log_sum_exp)


def _flash_backward(causal, query_tile, key_tile, saved, output_gradient):
    return flash_attention_backward(
        *saved, output_gradient, causal=causal, query_tile=query_tile, key_tile=key_tile
    )


_flash.defvjp(_flash_forward, _flash_backward)


def flash_attention(
    keys: Float[Array, "Nin K"],
    queries: Float[Array, "Nout K"],
    values: Float[Array, "Nin Dv"],
    *,
    causal: bool = False,
    query_tile: int = 64,
    key_tile: int = 64,
) -> Float[Array, "Nout Dv"]:
    """Scaled softmax attention in tiles, differentiable with the tiled backward pass.

    Equal to ``plain_attention(keys, queries, values, causal=causal)`` up to rounding, with
    memory that grows as N, not N², in the forward pass and in the backward pass.

    Args:
        keys: (Nin, K), one key per input token (tokens as rows).
        queries: (Nout, K), one query per output token.
        values: (Nin, Dv), one value per input token.
        causal: output n attends to inputs n' <= n only (needs Nin = Nout).
        query_tile: queries per tile (clipped to Nout); must divide Nout.
        key_tile: keys per tile (clipped to Nin); must divide Nin.

    Returns:
        y, (Nout, Dv): ``y_n = Σ_n' A[n', n] v_n'`` with ``A = softmax_n'(k_n'ᵀ q_n / sqrt(K))``.

    Raises:
        ValueError: for arrays that are not one sequence's, widths or lengths that do not
            match, or a tile size that does not divide its sequence.
    """
    return _flash(keys, queries, values, causal, query_tile, key_tile)


def plain_attention(
    keys: Float[Array, "Nin K"],
    queries: Float[Array, "Nout K"],
    values: Float[Array, "Nin Dv"],
    *,
    causal: bool = False,
) -> Float[Array, "Nout Dv"]:
    """The same attention with every score at once: the N x N matrix, as chapter 2 builds it."""
    _check(keys, queries, values, causal)
    mask = causal_mask(keys.shape[0]) if causal else None
    return attend(values, attention_weights(keys, queries, scaled=True, mask=mask))
