"""Typical wrong answers to the book's checked exercises, each with the diagnosis it must get.

Every entry is written the way a reader would write the mistake (not as a transformed reference),
so tests/test_exercises.py checks that the diagnoses recognise real code.
"""

from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import optax


def _naive_softmax(scores):
    e = jnp.exp(scores)
    return e / e.sum(axis=0, keepdims=True)


def _mask_after(keys, queries, mask=None):
    A = jax.nn.softmax(keys @ queries.T / jnp.sqrt(keys.shape[1]), axis=0)
    return A if mask is None else A * mask


def _layer_norm_axis0(x, gamma, beta, eps=1e-5):
    mu, var = x.mean(0), x.var(0)
    return (x - mu) / jnp.sqrt(var + eps) * gamma + beta


def _mhsa_mean(x, U_q, U_k, W, O):
    heads = []
    for h in range(U_q.shape[0]):
        A = jax.nn.softmax((x @ U_k[h].T) @ (x @ U_q[h].T).T / jnp.sqrt(U_q.shape[1]), axis=0)
        heads.append(A.T @ x @ W[h].T @ O[h].T)
    return sum(heads) / len(heads)


def _mhsa_unscaled(x, U_q, U_k, W, O):
    y = 0
    for h in range(U_q.shape[0]):
        A = jax.nn.softmax((x @ U_k[h].T) @ (x @ U_q[h].T).T, axis=0)
        y = y + A.T @ x @ W[h].T @ O[h].T
    return y


def _first_merge(word, pair, new):
    for i in range(len(word) - 1):
        if (word[i], word[i + 1]) == tuple(pair):
            return word[:i] + [new] + word[i + 2 :]
    return list(word)


def _overlapping_merge(word, pair, new):
    out = []
    for i, a in enumerate(word):
        if i + 1 < len(word) and (a, word[i + 1]) == tuple(pair):
            out.append(new)
        elif i > 0 and (word[i - 1], a) == tuple(pair):
            continue
        else:
            out.append(a)
    return out


def _sum_accumulated(loss, params, batch, micro_batches):
    total = None
    for i in range(micro_batches):
        chunk = {k: jnp.split(a, micro_batches)[i] for k, a in batch.items()}
        g = jax.grad(loss)(params, chunk)
        total = g if total is None else jax.tree.map(jnp.add, total, g)
    return total


def _permute_back(weight, num_heads):
    rows, D = weight.shape
    K = rows // num_heads
    p = np.stack([np.arange(K // 2), np.arange(K // 2) + K // 2], axis=-1).reshape(K)
    return np.asarray(weight).reshape(num_heads, K, D)[:, p].reshape(rows, D)


def _whole_matrix(weight, num_heads):
    K = weight.shape[0]  # forgot the heads: one permutation of all rows
    p = np.stack([np.arange(K // 2), np.arange(K // 2) + K // 2], axis=-1).reshape(K)
    half = np.empty_like(np.asarray(weight))
    half[p] = weight
    return half


def _once_per_chunk(chunks):
    counts = Counter()
    for word, f in chunks.items():
        for pair in set(zip(word, word[1:])):
            counts[pair] += f
    return counts


def _sines_then_cosines(num_positions, dim, base=10_000.0):
    angles = jnp.arange(num_positions)[:, None] * base ** (-jnp.arange(0, dim, 2) / dim)
    return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=1)


def _rope_half(x, positions, base=10_000.0):
    K = x.shape[-1]
    angle = positions[:, None] * base ** (-jnp.arange(0, K, 2) / K)
    a, b = x[:, : K // 2], x[:, K // 2 :]
    c, s = jnp.cos(angle), jnp.sin(angle)
    return jnp.concatenate([a * c - b * s, a * s + b * c], axis=-1)


def _rope_backwards(x, positions, base=10_000.0):
    K = x.shape[-1]
    angle = positions[:, None] * base ** (-jnp.arange(0, K, 2) / K)
    a, b = x[:, 0::2], x[:, 1::2]
    c, s = jnp.cos(angle), jnp.sin(angle)
    return jnp.stack([a * c + b * s, -a * s + b * c], axis=-1).reshape(x.shape)


def _adamw(grads, params, mu, nu, t, lr, b1, b2, eps, wd, decay, *, mistake=None):
    """AdamW as a reader writes it; ``mistake`` names the one slip it makes."""
    new, new_mu, new_nu = {}, {}, {}
    for name in grads:
        g, theta = grads[name], params[name]
        decayed = decay[name] or mistake == "every array"
        if mistake == "L2 in the gradient" and decayed:
            g = g + wd * theta
        m = b1 * mu[name] + (1 - b1) * g
        v = b2 * nu[name] + (1 - b2) * g * g
        if mistake == "no correction":
            m_hat, v_hat = m, v
        elif mistake == "b**t":
            m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
        else:
            m_hat, v_hat = m / (1 - b1 ** (t + 1)), v / (1 - b2 ** (t + 1))
        if mistake == "eps inside":
            update = m_hat / jnp.sqrt(v_hat + eps)
        else:
            update = m_hat / (jnp.sqrt(v_hat) + eps)
        if decayed and mistake != "L2 in the gradient":
            update = update + wd * theta
        new[name] = theta - lr * update
        if mistake == "hats kept":
            new_mu[name], new_nu[name] = m_hat, v_hat
        else:
            new_mu[name], new_nu[name] = m, v
    return new, new_mu, new_nu


def _adamw_with(mistake):
    return lambda *args: _adamw(*args, mistake=mistake)


def _adamw_decay_outside_rate(grads, params, mu, nu, t, lr, b1, b2, eps, wd, decay):
    new, mu, nu = _adamw(grads, params, mu, nu, t, lr, b1, b2, eps, 0.0, decay)
    return {k: p - wd * params[k] if decay[k] else p for k, p in new.items()}, mu, nu


def _norm(tree):
    return jnp.sqrt(sum(jnp.sum(x**2) for x in jax.tree_util.tree_leaves(tree)))


def _step(params, opt_state, batch, loss, optimiser, clip_norm, *, mistake=None):
    """One training step as a reader writes it; ``mistake`` names the one slip it makes."""
    value, grads = jax.value_and_grad(loss)(params, batch)
    norm = _norm(grads)
    if mistake == "per array":
        grads = {k: g * jnp.minimum(1.0, clip_norm / jnp.linalg.norm(g)) for k, g in grads.items()}
    elif mistake == "always":
        grads = jax.tree_util.tree_map(lambda g: g * clip_norm / norm, grads)
    elif mistake not in ("no clip", "clip after"):
        grads = jax.tree_util.tree_map(lambda g: g * jnp.minimum(1.0, clip_norm / norm), grads)
    updates, new_state = optimiser.update(grads, opt_state, params)
    if mistake == "clip after":
        scale = jnp.minimum(1.0, clip_norm / _norm(updates))
        updates = jax.tree_util.tree_map(lambda u: u * scale, updates)
    if mistake == "not applied":
        new_params = params
    elif mistake == "minus":
        new_params = jax.tree_util.tree_map(lambda p, u: p - u, params, updates)
    else:
        new_params = optax.apply_updates(params, updates)
    if mistake == "loss after":
        value = loss(new_params, batch)
    return new_params, opt_state if mistake == "old state" else new_state, value


def _step_with(mistake):
    return lambda *args: _step(*args, mistake=mistake)


def _cached_unscaled(cache_keys, cache_values, key, value, query, t):
    cache_keys, cache_values = cache_keys.at[t].set(key), cache_values.at[t].set(value)
    weights = jax.nn.softmax(cache_keys[: t + 1] @ query)
    return weights @ cache_values[: t + 1], cache_keys, cache_values


def _cached_whole_window(cache_keys, cache_values, key, value, query, t):
    cache_keys, cache_values = cache_keys.at[t].set(key), cache_values.at[t].set(value)
    weights = jax.nn.softmax(cache_keys @ query / jnp.sqrt(len(query)))
    return weights @ cache_values, cache_keys, cache_values


def _cached_read_then_write(cache_keys, cache_values, key, value, query, t):
    # attends over the rows already there, then writes: the token never reads itself
    n = max(t, 1)
    weights = jax.nn.softmax(cache_keys[:n] @ query / jnp.sqrt(len(query)))
    out = weights @ cache_values[:n]
    return out, cache_keys.at[t].set(key), cache_values.at[t].set(value)


def _cached_after_last(cache_keys, cache_values, key, value, query, t):
    row = min(t + 1, cache_keys.shape[0] - 1)
    cache_keys, cache_values = cache_keys.at[row].set(key), cache_values.at[row].set(value)
    weights = jax.nn.softmax(cache_keys[: t + 1] @ query / jnp.sqrt(len(query)))
    return weights @ cache_values[: t + 1], cache_keys, cache_values


def _cached_unwritten(cache_keys, cache_values, key, value, query, t):
    keys = jnp.concatenate([cache_keys[:t], key[None]])
    values = jnp.concatenate([cache_values[:t], value[None]])
    weights = jax.nn.softmax(keys @ query / jnp.sqrt(len(query)))
    return weights @ values, cache_keys, cache_values


# name -> [(wrong function, the diagnosis key it must get), ...]
MISTAKES = {
    "prefix_matching_score": [
        (lambda w, L: w[np.arange(L), np.arange(L, 2 * L)].mean(), "the_copy_itself"),
        (lambda w, L: w[np.arange(L, 2 * L), np.arange(1, L + 1)].mean(), "rows_and_columns"),
        (
            lambda w, L: np.mean([w[n - L + 1, n] if n >= L else 0 for n in range(2 * L)]),
            "whole_window",
        ),
    ],
    "mean_ablate": [
        (lambda y, r, h: np.concatenate([y[:h], 0 * y[h : h + 1], y[h + 1 :]]), "zero_ablation"),
        (
            lambda y, r, h: np.concatenate(
                [y[:h], np.broadcast_to(r[:, h].mean((0, 1)), y[h : h + 1].shape), y[h + 1 :]]
            ),
            "positions_averaged",
        ),
        (lambda y, r, h: r.mean(0), "every_head"),
    ],
    "patching_effect": [
        (lambda c, k, p: (p - c) / (k - c), "share_left"),
        (lambda c, k, p: k - p, "not_normalised"),
    ],
    "token_rows": [
        (lambda table, ids: table[ids - 1], "one_based"),
        (lambda table, ids: table[ids].T, "transposed"),
    ],
    "patches_of": [
        (
            lambda image, P: (
                image.reshape(image.shape[0], image.shape[1] // P, P, -1, P)
                .transpose(1, 3, 2, 4, 0)
                .reshape(-1, image.shape[0] * P * P)
            ),
            "channels_last",
        ),
        (
            lambda image, P: (
                image.reshape(image.shape[0], image.shape[1] // P, P, -1, P)
                .transpose(3, 1, 0, 2, 4)
                .reshape(-1, image.shape[0] * P * P)
            ),
            "column_order",
        ),
    ],
    "patch_tokens": [
        (lambda patches, weight, bias: patches @ weight.T, "no_bias"),
        (lambda patches, weight, bias: patches @ weight + bias, "weight_not_transposed"),
    ],
    "column_softmax": [
        (_naive_softmax, "overflow"),
        (lambda scores: jax.nn.softmax(scores, axis=1), "over_rows"),
    ],
    "scaled_attention_weights": [
        (
            lambda k, q, mask=None: jax.nn.softmax(
                jnp.where(True if mask is None else mask, k @ q.T, -jnp.inf), axis=0
            ),
            "unscaled",
        ),
        (_mask_after, "mask_after_softmax"),
        (
            lambda k, q, mask=None: jax.nn.softmax(
                jnp.where(True if mask is None else mask, k @ q.T / jnp.sqrt(k.shape[1]), -jnp.inf),
                axis=1,
            ),
            "over_queries",
        ),
    ],
    "weighted_average": [
        (lambda x, weights: weights @ x, "A_not_transposed"),
        (lambda x, weights: x.T @ weights, "transposed"),
    ],
    "split_heads": [
        (lambda x, h: x.reshape(h, x.shape[0], -1), "reshape_only"),
        (lambda x, h: jnp.stack([x[:, i::h] for i in range(h)]), "strided_heads"),
    ],
    "value_maps": [
        (lambda W, O: jnp.einsum("hvd,hev->hde", W, O), "transposed_maps"),
        (lambda W, O: sum(O[h] @ W[h] for h in range(W.shape[0])), "summed_heads"),
    ],
    "multi_head_self_attention": [
        (_mhsa_mean, "mean_of_heads"),
        (_mhsa_unscaled, "unscaled"),
    ],
    "gelu_tanh": [
        (lambda x: x * jax.scipy.stats.norm.cdf(x), "exact_gelu"),
        (lambda x: jnp.maximum(x, 0), "relu"),
    ],
    "mlp_on_tokens": [
        (lambda x, W_1, b_1, W_2, b_2: jax.nn.relu(x @ W_1.T + b_1) @ W_2.T + b_2, "relu"),
        (
            lambda x, W_1, b_1, W_2, b_2: jax.nn.gelu(jax.nn.gelu(x @ W_1.T + b_1) @ W_2.T + b_2),
            "activation_at_end",
        ),
    ],
    "mlp_parameters": [
        (lambda D, F, L: D * F + (L - 1) * F * F + F * D, "no_biases"),
        (lambda D, F, L: (D * F + F) + (L - 2) * (F * F + F) + (F * D + D), "L_maps"),
    ],
    "layer_norm": [
        (_layer_norm_axis0, "over_tokens"),
        (
            lambda x, g, b, eps=1e-5: (
                (x - x.mean(-1, keepdims=True))
                / jnp.sqrt(x.var(-1, keepdims=True, ddof=1) + eps)
                * g
                + b
            ),
            "unbiased_variance",
        ),
        (
            lambda x, g, b, eps=1e-5: (
                (x - x.mean(-1, keepdims=True)) / (x.std(-1, keepdims=True) + eps) * g + b
            ),
            "eps_outside_sqrt",
        ),
    ],
    "layer_norm_columns": [
        (
            lambda X, g, b, eps=1e-5: (
                (X - X.mean(1, keepdims=True))
                / jnp.sqrt(X.var(1, keepdims=True) + eps)
                * g[:, None]
                + b[:, None]
            ),
            "over_tokens",
        ),
        (
            lambda X, g, b, eps=1e-5: (X - X.mean(0)) / jnp.sqrt(X.var(0) + eps) * g + b,
            "gamma_on_tokens",
        ),
    ],
    "residual_stack": [
        (lambda x, branches: [x := f(x) for f in branches][-1] if branches else x, "no_skip"),
        (lambda x, branches: x + sum(f(x) for f in branches), "all_read_input"),
    ],
    "pre_norm_block": [
        (
            lambda x, n1, a, n2, m: (y := n1(x) + a(n1(x))) + jax.vmap(m)(n2(y)),
            "residual_from_normalised",
        ),
        (lambda x, n1, a, n2, m: (y := x + a(n1(x))) + jax.vmap(m)(y), "mlp_not_normalised"),
    ],
    "post_norm_block_by_hand": [
        (lambda x, n1, a, n2, m: (y := x + a(n1(x))) + jax.vmap(m)(n2(y)), "pre_norm"),
        (lambda x, n1, a, n2, m: (y := x + n1(a(x))) + n2(jax.vmap(m)(y)), "no_skip_inside_norm"),
    ],
    "block_parameters": [
        (
            lambda D, H, K, F, value_dim=None: (
                H * (2 * K * D + (D * D if value_dim is None else 2 * value_dim * D))
                + 2 * D * F
                + F
                + D
            ),
            "no_layer_norms",
        ),
        (
            lambda D, H, K, F, value_dim=None: (
                4 * D
                + H * (2 * K * D + (D * D if value_dim is None else 2 * value_dim * D))
                + 2 * D * F
            ),
            "no_mlp_biases",
        ),
    ],
    "encode_text": [
        (
            lambda text, symbols: np.array([list(dict.fromkeys(symbols)).index(c) for c in text]),
            "first_seen_order",
        ),
        (
            lambda text, symbols: np.array([sorted(set(symbols)).index(c) + 1 for c in text]),
            "one_based",
        ),
    ],
    "sinusoidal_table": [
        (_sines_then_cosines, "sines_then_cosines"),
        (
            lambda N, D, base=10_000.0: jnp.stack(
                [
                    jnp.sin(jnp.arange(N)[:, None] * base ** (-jnp.arange(D // 2) / D)),
                    jnp.cos(jnp.arange(N)[:, None] * base ** (-jnp.arange(D // 2) / D)),
                ],
                -1,
            ).reshape(N, D),
            "exponent_i_over_D",
        ),
    ],
    "shift_map": [
        (
            lambda k, dim: jax.scipy.linalg.block_diag(
                *[
                    jnp.array([[jnp.cos(k * w), -jnp.sin(k * w)], [jnp.sin(k * w), jnp.cos(k * w)]])
                    for w in 10000.0 ** (-jnp.arange(0, dim, 2) / dim)
                ]
            ),
            "backwards",
        ),
        (
            lambda k, dim: jax.scipy.linalg.block_diag(
                *[jnp.array([[jnp.cos(k), jnp.sin(k)], [-jnp.sin(k), jnp.cos(k)]])] * (dim // 2)
            ),
            "one_frequency",
        ),
    ],
    "mean_cross_entropy": [
        (
            lambda logits, labels: (
                -jnp.log(
                    jnp.take_along_axis(
                        jnp.exp(logits) / jnp.exp(logits).sum(1, keepdims=True), labels[:, None], 1
                    )
                ).mean()
            ),
            "overflow",
        ),
        (
            lambda logits, labels: (
                -jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], 1).sum()
            ),
            "sum_not_mean",
        ),
        (lambda logits, labels: -logits[jnp.arange(len(labels)), labels].mean(), "no_log_softmax"),
    ],
    "with_class_token": [
        (lambda p, c, pos: jnp.concatenate([p + pos, c[None]]), "class_token_last"),
        (lambda p, c, pos: jnp.concatenate([c[None], p]), "no_positions"),
    ],
    "warmup_cosine": [
        (
            lambda t, w, T, peak, final: (
                final + (peak - final) / 2 * (1 + jnp.cos(jnp.pi * jnp.minimum(t, T) / T))
            ),
            "no_warmup",
        ),
        (
            lambda t, w, T, peak, final: jnp.where(
                t < w,
                peak * t / w,
                peak / 2 * (1 + jnp.cos(jnp.pi * jnp.minimum(t - w, T - w) / (T - w))),
            ),
            "decay_to_zero",
        ),
    ],
    "adamw_update": [
        (_adamw_with("no correction"), "no_bias_correction"),
        (_adamw_with("b**t"), "bias_correction_from_one"),
        (_adamw_with("hats kept"), "returned_corrected_moments"),
        (_adamw_with("every array"), "decay_on_every_array"),
        (_adamw_with("L2 in the gradient"), "coupled_decay"),
        (_adamw_decay_outside_rate, "decay_without_learning_rate"),
        (_adamw_with("eps inside"), "eps_inside_sqrt"),
    ],
    "training_step": [
        (_step_with("not applied"), "not_applied"),
        (_step_with("minus"), "updates_subtracted"),
        (_step_with("clip after"), "clipped_updates"),
        (_step_with("no clip"), "not_clipped"),
        (_step_with("per array"), "clipped_per_array"),
        (_step_with("always"), "always_rescaled"),
        (_step_with("loss after"), "loss_after_update"),
        (_step_with("old state"), "old_state"),
    ],
    "causal_mask_by_hand": [
        (lambda n: jnp.tril(jnp.ones((n, n), dtype=bool)), "transposed"),
        (lambda n: jnp.arange(n)[:, None] < jnp.arange(n), "excludes_itself"),
        (lambda n: jnp.arange(n)[:, None] <= jnp.arange(n) + 1, "sees_next"),
    ],
    "top_k_logits": [
        (
            lambda logits, k: jnp.where(logits >= jnp.sort(logits)[-k], logits, 0.0),
            "zero_not_minus_inf",
        ),
        (
            lambda logits, k: jnp.where(logits > jnp.sort(logits)[-k], logits, -jnp.inf),
            "k_minus_one",
        ),
    ],
    "next_symbol_pairs": [
        (lambda w: (w[:, 1:], w[:, :-1]), "targets_before"),
        (lambda w: (w[:, :-1], w[:, :-1]), "not_shifted"),
    ],
    "cached_attention": [
        (_cached_unscaled, "no_scale"),
        (_cached_whole_window, "reads_unfilled_rows"),
        (_cached_read_then_write, "misses_itself"),
        (_cached_after_last, "written_one_late"),
        (_cached_unwritten, "cache_not_written"),
    ],
    "teacher_forcing_inputs": [
        (lambda t, s: t, "not_shifted"),
        (
            lambda t, s: jnp.concatenate([t[:, 1:], jnp.full((t.shape[0], 1), s, t.dtype)], 1),
            "start_appended",
        ),
    ],
    "padding_mask_by_hand": [
        (
            lambda r, n=None: (
                jnp.broadcast_to(r[None, :], (len(r), len(r) if n is None else n))
                if n in (None, len(r))
                else jnp.broadcast_to(r[None, :n], (len(r), n))
            ),
            "rows_not_columns",
        ),
        (lambda r, n=None: jnp.broadcast_to(r[:, None], (len(r), len(r))), "ignores_num_outputs"),
    ],
    "smoothed_cross_entropy": [
        (
            lambda logits, t, eps, pad_id=0: (
                (1 - eps)
                * -jnp.take_along_axis(jax.nn.log_softmax(logits), t[..., None], -1)[..., 0]
                - eps * jax.nn.log_softmax(logits).mean(-1)
            ).mean(),
            "padding_counted",
        ),
        (
            lambda logits, t, eps, pad_id=0: (
                -(
                    (t != pad_id)
                    * jnp.take_along_axis(jax.nn.log_softmax(logits), t[..., None], -1)[..., 0]
                ).sum()
                / (t != pad_id).sum()
            ),
            "no_smoothing",
        ),
    ],
    "causal_linear_attention": [
        (
            lambda k, q, v: (lambda s: (s / s.sum(0)).T @ v)(
                (jax.nn.elu(k) + 1) @ (jax.nn.elu(q) + 1).T
            ),
            "not_causal",
        ),
        (lambda k, q, v: (lambda s: (s / s.sum(0)).T @ v)(jnp.triu(k @ q.T)), "no_feature_map"),
    ],
    "nadaraya_watson_by_hand": [
        (
            lambda x, y, q, s: jnp.exp(-((x[:, None] - q[None]) ** 2).sum(-1) / (2 * s**2)).T @ y,
            "not_normalised",
        ),
        (
            lambda x, y, q, s: (lambda k: (k / k.sum(0)).T @ y)(
                jnp.exp(-((x[:, None] - q[None]) ** 2).sum(-1) / (2 * s))
            ),
            "sigma_not_squared",
        ),
    ],
    "hopfield_step": [
        (lambda xi, X, beta: X.T @ jax.nn.softmax(X @ xi), "no_beta"),
        (lambda xi, X, beta: X.T @ (beta * X @ xi), "no_softmax"),
    ],
    "mean_over_devices": [
        (lambda g: jax.lax.psum(g, "devices"), "psum_not_mean"),
        (lambda g: g, "local_only"),
    ],
    "split_for_devices": [
        (lambda b, g: jnp.stack([b[i::g] for i in range(g)]), "interleaved"),
        (lambda b, g: b.reshape(b.shape[0] // g, g, *b.shape[1:]), "axes_swapped"),
    ],
    "accumulated_gradient": [
        (_sum_accumulated, "summed"),
        (
            lambda loss, p, b, k: jax.grad(loss)(p, {n: a[: len(a) // k] for n, a in b.items()}),
            "first_only",
        ),
    ],
    "count_pairs": [
        (lambda chunks: Counter(p for w in chunks for p in zip(w, w[1:])), "unweighted"),
        (_once_per_chunk, "once_per_chunk"),
    ],
    "merge_pair": [
        (_first_merge, "first_only"),
        (_overlapping_merge, "overlapping"),
    ],
    "most_frequent_pair": [
        (lambda counts: max(counts, key=counts.get), "first_counted"),
        (lambda counts: max(counts, key=lambda p: (counts[p], p)), "larger_ids"),
    ],
    "rms_norm": [
        (
            lambda x, g, eps=1e-6: (
                (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + eps) * g
            ),
            "centred",
        ),
        (
            lambda x, g, eps=1e-6: x / jnp.sqrt((x**2).sum(-1, keepdims=True) + eps) * g,
            "sum_not_mean",
        ),
    ],
    "swiglu": [
        (lambda x, g, u, d: ((x @ g.T) * jax.nn.silu(x @ u.T)) @ d.T, "activation_on_up"),
        (lambda x, g, u, d: (jax.nn.gelu(x @ g.T) * (x @ u.T)) @ d.T, "gelu"),
    ],
    "rotate_pairs_by_hand": [
        (_rope_half, "half_layout"),
        (_rope_backwards, "backwards"),
    ],
    "repeat_kv_heads": [
        (lambda kv, h: jnp.concatenate([kv] * (h // kv.shape[0])), "tiled"),
        (lambda kv, h: kv, "no_repeat"),
    ],
    "half_split_rows": [
        (_permute_back, "wrong_direction"),
        (_whole_matrix, "whole_matrix"),
    ],
    "bits_per_character": [
        (
            lambda lp, t, c: -lp[np.arange(len(t)), t].sum() / c[t].sum(),
            "nats",
        ),
        (
            lambda lp, t, c: -lp[np.arange(len(t)), t].sum() / np.log(2) / len(t),
            "per_token",
        ),
    ],
    "dequantise_q8_0": [
        (
            lambda block: block[:2].view(np.float16).astype(np.float32)[0] * block[2:],
            "unsigned_codes",
        ),
        (lambda block: block[2:].view(np.int8).astype(np.float32), "no_scale"),
    ],
    "lora_forward": [
        (lambda W, R, Z, x, alpha: W @ x + alpha * (Z @ (R @ x)), "alpha_not_over_r"),
        (lambda W, R, Z, x, alpha: W @ x + Z @ (R @ x), "no_scale"),
        (lambda W, R, Z, x, alpha: alpha / R.shape[0] * (Z @ (R @ x)), "no_base"),
    ],
    "merge_lora": [
        (lambda W, R, Z, alpha: W + alpha * Z @ R, "alpha_not_over_r"),
        (lambda W, R, Z, alpha: alpha / R.shape[0] * Z @ R, "no_base"),
    ],
    "group_advantages": [
        (
            lambda r, s: (
                (r - r.mean(1, keepdims=True)) / (r.std(1, keepdims=True) + 1e-4)
                if s
                else r - r.mean(1, keepdims=True)
            ),
            "population_std",
        ),
        (
            lambda r, s: (r - r.mean()) / (r.std(ddof=1) + 1e-4) if s else r - r.mean(),
            "whole_batch",
        ),
    ],
    "clipped_objective": [
        (lambda lr, a, c: jnp.clip(jnp.exp(lr), 1 - c, 1 + c) * a, "clipped_only"),
        (
            lambda lr, a, c: jnp.maximum(jnp.exp(lr) * a, jnp.clip(jnp.exp(lr), 1 - c, 1 + c) * a),
            "max_not_min",
        ),
    ],
    "dpo_loss": [
        (lambda c, r, rc, rr, b: -jnp.mean(jax.nn.log_sigmoid(b * (c - r))), "no_reference"),
        (lambda c, r, rc, rr, b: -jnp.mean(jax.nn.log_sigmoid((c - rc) - (r - rr))), "no_beta"),
    ],
    "matvec_intensity": [
        (
            lambda d_out, d_in, b: d_out * d_in / (b * d_out * d_in + 4 * (d_in + d_out)),
            "one_flop_per_weight",
        ),
        (lambda d_out, d_in, b: 2 / b, "weights_only"),
        (
            lambda d_out, d_in, b: 2 * d_out * d_in / (4 * d_out * d_in + 4 * (d_in + d_out)),
            "weights_as_float32",
        ),
    ],
    "online_softmax_tile": [
        (
            lambda m, zeta, y, s, v: (
                np.maximum(m, s.max(0)),
                zeta + np.exp(s - np.maximum(m, s.max(0))).sum(0),
                y + np.exp(s - np.maximum(m, s.max(0))).T @ v,
            ),
            "no_rescale",
        ),
        (
            lambda m, zeta, y, s, v: (
                m,
                zeta * np.exp(m - np.maximum(m, s.max(0)))
                + np.exp(s - np.maximum(m, s.max(0))).sum(0),
                y * np.exp(m - np.maximum(m, s.max(0)))[:, None]
                + np.exp(s - np.maximum(m, s.max(0))).T @ v,
            ),
            "old_maximum",
        ),
    ],
    "saved_log_sum_exp": [
        (lambda k, q: np.log(np.exp(k @ q.T).sum(0)), "no_scale"),
        (lambda k, q: (k @ q.T / np.sqrt(k.shape[1])).max(0), "maximum_only"),
    ],
    "run_flops": [
        (lambda m, d, f, v, n, t: 6 * (m * (4 * d * d + 2 * d * f) + v * d) * t, "no_attention"),
        (
            lambda m, d, f, v, n, t: (
                (2 * (m * (4 * d * d + 2 * d * f) + v * d) + 4 * m * n * d) * t
            ),
            "forward_only",
        ),
        (
            lambda m, d, f, v, n, t: (
                (6 * (m * (4 * d * d + 2 * d * f) + 2 * v * d) + 12 * m * n * d) * t
            ),
            "table_counted",
        ),
    ],
    "parabola_optimum": [
        (lambda sizes, losses: sizes[np.argmin(losses)], "best_run"),
        (
            lambda sizes, losses: (lambda a, b, c: -b / (2 * a))(
                *np.polyfit(np.log(sizes), losses, 2)
            ),
            "log_returned",
        ),
        (
            lambda sizes, losses: (lambda a, b, c: -b / (2 * a))(*np.polyfit(sizes, losses, 2)),
            "linear_sizes",
        ),
    ],
    "power_law_fit": [
        (lambda x, y: tuple(np.polyfit(np.log(x), np.log(y), 1)), "log_coefficient"),
        (lambda x, y: tuple(np.polyfit(x, y, 1)), "linear_fit"),
    ],
}
