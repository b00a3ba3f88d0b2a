"""FlashAttention (transformer_intro.flash_attention), tested as Stanford CS336's assignment 2 does.

The forward pass must keep for the backward pass its inputs, its output and one log-sum-exp per
query, and nothing of size N x N (read from what ``jax.vjp`` holds); the outputs and the
gradients of the keys, queries and values must equal ``jax.nn.dot_product_attention``'s (an
independent reference) and the book's own attention, with and without the causal mask. The
controls: a backward pass that uses the running maximum instead of the log-sum-exp, and a missing
mask, must both fail the same comparison. The compiled programs' scratch memory grows as N² for
the plain form and as N for the tiled one.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_intro.flash_attention import (
    flash_attention,
    flash_attention_backward,
    flash_attention_forward,
    plain_attention,
)

jax.config.update("jax_default_matmul_precision", "highest")

TOLERANCE = 1e-4  # float32 sums of 128 terms of order one; CS336 allows 1e-2


def _sequence(num_tokens=128, width=64, seed=0, spread=2.0):
    keys = jax.random.split(jax.random.PRNGKey(seed), 4)
    k, q, v, w = (jax.random.normal(key, (num_tokens, width)) for key in keys)
    return spread * k, spread * q, v, w


def _reference(keys, queries, values, causal):
    """jax.nn.dot_product_attention on one sequence with one head: (N, 1, K) arrays."""
    out = jax.nn.dot_product_attention(
        queries[:, None], keys[:, None], values[:, None], is_causal=causal
    )
    return out[:, 0]


def _gradients(attention, keys, queries, values, weights):
    loss = lambda k, q, v: jnp.sum(attention(k, q, v) * weights)  # noqa: E731
    return jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(keys, queries, values)


def _max_error(a, b):
    return max(float(jnp.abs(x - y).max()) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("causal", [False, True])
def test_forward_and_gradients_equal_jax_and_the_books_attention(causal):
    k, q, v, w = _sequence()
    tiled = lambda k, q, v: flash_attention(k, q, v, causal=causal, query_tile=32, key_tile=16)  # noqa: E731
    reference = lambda k, q, v: _reference(k, q, v, causal)  # noqa: E731
    books = lambda k, q, v: plain_attention(k, q, v, causal=causal)  # noqa: E731
    out = jax.jit(tiled)(k, q, v)
    assert _max_error([out], [reference(k, q, v)]) < TOLERANCE
    assert _max_error([out], [books(k, q, v)]) < TOLERANCE
    grads = _gradients(tiled, k, q, v, w)
    assert _max_error(grads, _gradients(reference, k, q, v, w)) < TOLERANCE
    assert _max_error(grads, _gradients(books, k, q, v, w)) < TOLERANCE


def test_a_batch_of_heads_as_cs336_tests_it():
    """4 sequences of 128 tokens of width 64 through vmap, forward and backward."""
    keys = jax.random.split(jax.random.PRNGKey(7), 4)
    k, q, v, w = (jax.random.normal(key, (4, 128, 64)) for key in keys)
    tiled = jax.jit(jax.vmap(lambda k, q, v: flash_attention(k, q, v, causal=True)))
    reference = lambda k, q, v: jax.nn.dot_product_attention(  # noqa: E731
        q[:, :, None], k[:, :, None], v[:, :, None], is_causal=True
    )[:, :, 0]
    assert _max_error([tiled(k, q, v)], [reference(k, q, v)]) < TOLERANCE
    assert _max_error(_gradients(tiled, k, q, v, w), _gradients(reference, k, q, v, w)) < TOLERANCE


def test_cross_attention_with_other_lengths_and_value_width():
    keys = jax.random.split(jax.random.PRNGKey(3), 4)
    k, v = jax.random.normal(keys[0], (96, 16)), jax.random.normal(keys[1], (96, 8))
    q, w = jax.random.normal(keys[2], (40, 16)), jax.random.normal(keys[3], (40, 8))
    tiled = lambda k, q, v: flash_attention(k, q, v, query_tile=20, key_tile=32)  # noqa: E731
    assert _max_error([jax.jit(tiled)(k, q, v)], [plain_attention(k, q, v)]) < TOLERANCE
    assert (
        _max_error(_gradients(tiled, k, q, v, w), _gradients(plain_attention, k, q, v, w))
        < TOLERANCE
    )


@pytest.mark.parametrize("causal", [False, True])
def test_the_forward_saves_one_log_sum_exp_per_query_and_nothing_n_by_n(causal):
    num_tokens, width = 128, 64
    k, q, v, _ = _sequence(num_tokens, width)
    _, backward = jax.vjp(jax.jit(lambda k, q, v: flash_attention(k, q, v, causal=causal)), k, q, v)
    saved = jax.tree.leaves(backward)
    shapes = sorted(tuple(x.shape) for x in saved)
    assert shapes == [(num_tokens,)] + [(num_tokens, width)] * 4  # k, q, v, y and ℓ
    assert all(x.size < num_tokens**2 for x in saved)
    log_sum_exp = next(x for x in saved if x.ndim == 1)
    scores = k @ q.T / np.sqrt(width)
    if causal:
        scores = jnp.where(jnp.tril(jnp.ones((num_tokens, num_tokens), bool)).T, scores, -jnp.inf)
    assert float(jnp.abs(log_sum_exp - jax.nn.logsumexp(scores, axis=0)).max()) < TOLERANCE


def test_the_inspection_sees_the_plain_forms_n_by_n_weights():
    """Control for the test above: the same inspection finds plain attention's N x N array."""
    k, q, v, _ = _sequence(128, 64)
    _, backward = jax.vjp(lambda k, q, v: plain_attention(k, q, v, causal=True), k, q, v)
    assert any(tuple(x.shape) == (128, 128) for x in jax.tree.leaves(backward))


@pytest.mark.parametrize("causal", [False, True])
def test_control_a_backward_without_the_log_sum_exp_is_wrong(causal):
    """The running maximum in place of ℓ = ŝ + log ζ leaves the weights unnormalised."""
    k, q, v, w = _sequence()
    forward = jax.jit(flash_attention_forward, static_argnames="causal")
    backward = jax.jit(flash_attention_backward, static_argnames="causal")
    outputs, log_sum_exp = forward(k, q, v, causal=causal)
    right = backward(k, q, v, outputs, log_sum_exp, w, causal=causal)
    reference = _gradients(lambda k, q, v: _reference(k, q, v, causal), k, q, v, w)
    assert _max_error(right, reference) < TOLERANCE
    scores = k @ q.T / np.sqrt(k.shape[1])
    if causal:
        scores = jnp.where(jnp.tril(jnp.ones(scores.shape, bool)).T, scores, -jnp.inf)
    running_max = scores.max(axis=0)  # ŝ without log ζ
    wrong = backward(k, q, v, outputs, running_max, w, causal=causal)
    assert _max_error(wrong, reference) > 100 * TOLERANCE


def test_control_a_missing_mask_is_caught():
    k, q, v, w = _sequence()
    unmasked = lambda k, q, v: flash_attention(k, q, v, causal=False)  # noqa: E731
    causal = lambda k, q, v: _reference(k, q, v, True)  # noqa: E731
    assert _max_error([jax.jit(unmasked)(k, q, v)], [causal(k, q, v)]) > 100 * TOLERANCE
    assert _max_error(_gradients(unmasked, k, q, v, w), _gradients(causal, k, q, v, w)) > (
        100 * TOLERANCE
    )


def test_large_scores_do_not_overflow():
    k, q, v, _ = _sequence(64, 16, spread=30.0)  # scores in the thousands
    out = jax.jit(lambda k, q, v: flash_attention(k, q, v, causal=True, key_tile=8))(k, q, v)
    assert bool(jnp.all(jnp.isfinite(out)))
    assert _max_error([out], [_reference(k, q, v, True)]) < TOLERANCE


def test_bad_input_is_refused_with_the_fix():
    k, q, v, _ = _sequence(96, 16)
    with pytest.raises(ValueError, match="tile size must divide"):
        flash_attention(k, q, v, key_tile=64)
    with pytest.raises(ValueError, match="as many queries as keys"):
        flash_attention(k, q[:48], v, causal=True, query_tile=16, key_tile=32)


def _scratch_bytes(attention, num_tokens, width=32):
    """Scratch memory of the compiled forward and backward pass (XLA's temp allocation)."""
    spec = jax.ShapeDtypeStruct((num_tokens, width), jnp.float32)
    loss_gradients = jax.grad(lambda k, q, v: jnp.sum(attention(k, q, v) ** 2), argnums=(0, 1, 2))
    compiled = jax.jit(loss_gradients).lower(spec, spec, spec).compile()
    return compiled.memory_analysis().temp_size_in_bytes


def test_memory_grows_as_n_squared_plain_and_as_n_tiled():
    lengths = (256, 512, 1024)
    plain = [
        _scratch_bytes(lambda k, q, v: plain_attention(k, q, v, causal=True), n) for n in lengths
    ]
    tiled = [
        _scratch_bytes(lambda k, q, v: flash_attention(k, q, v, causal=True), n) for n in lengths
    ]
    plain_growth = [b / a for a, b in zip(plain, plain[1:])]
    tiled_growth = [b / a for a, b in zip(tiled, tiled[1:])]
    assert all(3.5 < g < 4.5 for g in plain_growth), plain_growth  # doubling N: four times
    assert all(1.5 < g < 2.5 for g in tiled_growth), tiled_growth  # doubling N: twice
    # N x N float32 weights, kept for the backward pass: the plain form holds at least one.
    assert all(p >= 4 * n * n for p, n in zip(plain, lengths))
    assert tiled[-1] < plain[-1] / 4
