"""Reference solutions of the checked exercises, written the way their chapters write them.

Each function has the name of its exercise (``check(token_rows)`` finds the exercise by the
function's name) and is what the solution dropdown of the chapter shows. They are deliberately
short and plain: the package's own functions, which :mod:`.core` compares against, are the
references; these are what a reader is expected to write.
"""

from __future__ import annotations

from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np

# fmt: off
__all__ = [
    "token_rows", "patches_of", "patch_tokens",
    "column_softmax", "scaled_attention_weights", "weighted_average",
    "split_heads", "value_maps", "multi_head_self_attention",
    "gelu_tanh", "mlp_on_tokens", "mlp_parameters",
    "layer_norm", "layer_norm_columns", "residual_stack",
    "pre_norm_block", "post_norm_block_by_hand", "block_parameters",
    "encode_text", "sinusoidal_table", "shift_map",
    "mean_cross_entropy", "with_class_token", "warmup_cosine",
    "adamw_update", "training_step",
    "causal_mask_by_hand", "top_k_logits", "next_symbol_pairs", "cached_attention",
    "teacher_forcing_inputs", "padding_mask_by_hand", "smoothed_cross_entropy",
    "causal_linear_attention", "nadaraya_watson_by_hand", "hopfield_step",
    "mean_over_devices", "split_for_devices", "accumulated_gradient",
    "count_pairs", "merge_pair", "most_frequent_pair",
    "rms_norm", "swiglu", "rotate_pairs_by_hand",
    "repeat_kv_heads", "half_split_rows", "bits_per_character",
    "prefix_matching_score",
    "mean_ablate",
    "patching_effect",
]
# fmt: on


# -- Chapter 1: tokens ------------------------------------------------------------------------


def token_rows(table, ids):
    """The tokens of a sequence of word ids: row ``ids[n]`` of the table.

    Args:
        table: the tokeniser's table, shape (|V|, D), one row per word.
        ids: the N word ids, integers from 0.

    Returns:
        x, shape (N, D): one token per row.
    """
    return table[ids]


def patches_of(image, patch_size):
    """Cut a (C, H, W) image into P x P patches, flattened channel by channel.

    Args:
        image: channels first, (C, H, W); H and W are multiples of P.
        patch_size: P.

    Returns:
        The (N, C P P) tokens, patches read left to right, top to bottom.
    """
    C, H, W = image.shape
    P = patch_size
    grid = image.reshape(C, H // P, P, W // P, P)  # (c, i, y, j, x)
    patches = grid.transpose(1, 3, 0, 2, 4)  # (i, j, c, y, x)
    return patches.reshape((H // P) * (W // P), C * P * P)


def patch_tokens(patches, weight, bias):
    """The same affine map L p + b on every flattened patch p (tokens as rows).

    Args:
        patches: (N, C P P), one flattened patch per row.
        weight: L, shape (D, C P P).
        bias: b, shape (D,).

    Returns:
        The (N, D) tokens.
    """
    return patches @ weight.T + bias


# -- Chapter 2: attention ---------------------------------------------------------------------


def column_softmax(scores):
    """Softmax down every column, ``A[n', n] = softmax_n'(s[n', n])``.

    Args:
        scores: (N_in, N_out), one column per output token.

    Returns:
        A of the same shape; every column sums to one. Safe for large scores.
    """
    shifted = scores - scores.max(axis=0, keepdims=True)  # the largest is 0
    e = jnp.exp(shifted)
    return e / e.sum(axis=0, keepdims=True)


def scaled_attention_weights(keys, queries, mask=None):
    """``A[n', n] = softmax_n'(k_n' . q_n / sqrt(K))``, restricted to ``mask``.

    Args:
        keys: (N_in, K), one key per input token.
        queries: (N_out, K), one query per output token.
        mask: optional boolean (N_in, N_out); False: n may not read n'.

    Returns:
        A, shape (N_in, N_out); every column sums to one.
    """
    K = keys.shape[1]
    scores = keys @ queries.T / jnp.sqrt(K)  # scores[n', n]
    if mask is not None:
        scores = jnp.where(mask, scores, -jnp.inf)
    return jax.nn.softmax(scores, axis=0)


def weighted_average(x, weights):
    """``y_n = sum_n' x_n' A[n', n]`` for every output n (maths: Y = X A).

    Args:
        x: the (N, D) input tokens, as rows.
        weights: A, shape (N, N_out); column n holds output n's weights.

    Returns:
        y, shape (N_out, D).
    """
    return weights.T @ x


# -- Chapter 3: multi-head self-attention -----------------------------------------------------


def split_heads(x, num_heads):
    """Cut the (N, H K) keys or queries of all heads into H arrays of (N, K).

    Args:
        x: (N, H K); head h owns columns h K, ..., (h + 1) K - 1.
        num_heads: H.

    Returns:
        (H, N, K): head first.
    """
    N, HK = x.shape
    return x.reshape(N, num_heads, HK // num_heads).transpose(1, 0, 2)


def value_maps(W, O):
    """Every head's value map ``V_h = O_h W_h``.

    Args:
        W: the value projections W_h, shape (H, D_v, D).
        O: the output projections O_h, shape (H, D, D_v).

    Returns:
        (H, D, D), one D x D map per head.
    """
    return O @ W  # batched over the head axis


def multi_head_self_attention(x, U_q, U_k, W, O):
    """``Y = sum_h V_h X A_h`` with scaled weights, tokens as rows.

    Args:
        x: (N, D) tokens.
        U_q: (H, K, D) query projections; U_k the same for keys.
        U_k: (H, K, D).
        W: (H, D_v, D) value projections.
        O: (H, D, D_v) output projections.

    Returns:
        y, shape (N, D).
    """
    y = jnp.zeros_like(x)
    for h in range(U_q.shape[0]):
        keys, queries = x @ U_k[h].T, x @ U_q[h].T  # (N, K) each
        scores = keys @ queries.T / jnp.sqrt(U_q.shape[1])
        A = jax.nn.softmax(scores, axis=0)  # A[n', n]
        y = y + A.T @ x @ W[h].T @ O[h].T  # rows of (V_h X A_h)^T
    return y


# -- Chapter 4: the token-wise MLP ------------------------------------------------------------


def gelu_tanh(x):
    """The GELU in its tanh form (jax.nn.gelu's default).

    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, elementwise.
    """
    inner = jnp.sqrt(2 / jnp.pi) * (x + 0.044715 * x**3)
    return 0.5 * x * (1 + jnp.tanh(inner))


def mlp_on_tokens(x, W_1, b_1, W_2, b_2):
    """The same two-layer MLP on every token, as two matrix products.

    Args:
        x: (N, D) tokens.
        W_1: (F, D); b_1: (F,).
        b_1: (F,).
        W_2: (D, F); b_2: (D,).
        b_2: (D,).

    Returns:
        (N, D): row n is ``W_2 gelu(W_1 x_n + b_1) + b_2``.
    """
    return jax.nn.gelu(x @ W_1.T + b_1) @ W_2.T + b_2


def mlp_parameters(D, F, L):
    """The number of parameters of an MLP with L - 1 hidden layers of width F.

    Args:
        D: token width (input and output).
        F: hidden width.
        L: number of hidden layers, L >= 1 (L + 1 linear maps).
    """
    return (D * F + F) + (L - 1) * (F * F + F) + (F * D + D)


# -- Chapter 5: residuals and LayerNorm -------------------------------------------------------


def layer_norm(x, gamma, beta, eps=1e-5):
    """LayerNorm of every token (row) on its own.

    Args:
        x: (N, D) tokens.
        gamma: (D,) gains.
        beta: (D,) shifts.
        eps: added to the variance inside the square root.

    Returns:
        (N, D).
    """
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + eps) * gamma + beta


def layer_norm_columns(X, gamma, beta, eps=1e-5):
    """LayerNorm in the maths' layout: X is D x N, one token per column.

    Args:
        X: (D, N), tokens as columns.
        gamma: (D,) gains.
        beta: (D,) shifts.
        eps: added to the variance inside the square root.

    Returns:
        (D, N).
    """
    mu = X.mean(axis=0)  # one mean per token
    sigma = jnp.sqrt(((X - mu) ** 2).mean(axis=0) + eps)
    return (X - mu) / sigma * gamma[:, None] + beta[:, None]


def residual_stack(x, branches):
    """Apply ``x <- x + f(x)`` for each branch f in turn.

    Args:
        x: (N, D) tokens.
        branches: a list of functions (N, D) -> (N, D).

    Returns:
        The (N, D) residual stream after the last branch.
    """
    for f in branches:
        x = x + f(x)
    return x


# -- Chapter 6: the transformer block ---------------------------------------------------------


def pre_norm_block(x, norm_1, attention, norm_2, mlp):
    """One pre-norm block: normalise, attend, add; normalise, MLP, add.

    Args:
        x: (N, D) tokens.
        norm_1: the LayerNorm before attention.
        attention: the multi-head self-attention, (N, D) -> (N, D).
        norm_2: the LayerNorm before the MLP.
        mlp: the MLP of one token, (D,) -> (D,).

    Returns:
        (N, D).
    """
    y = x + attention(norm_1(x))
    return y + jax.vmap(mlp)(norm_2(y))


def post_norm_block_by_hand(x, norm_1, attention, norm_2, mlp):
    """The original transformer's block: add, then normalise, per branch.

    Args:
        x: (N, D) tokens.
        norm_1: the LayerNorm after attention.
        attention: the multi-head self-attention.
        norm_2: the LayerNorm after the MLP.
        mlp: the MLP of one token.

    Returns:
        (N, D).
    """
    y = norm_1(x + attention(x))
    return norm_2(y + jax.vmap(mlp)(y))


def block_parameters(D, H, K, F, value_dim=None):
    """The number of parameters of a block: two LayerNorms, MHSA, an MLP.

    Args:
        D: token width.
        H: heads.
        K: key and query width of a head.
        F: hidden width of the MLP.
        value_dim: None for full D x D value maps, else D_v for V_h = O_h W_h.
    """
    value_maps = D * D if value_dim is None else 2 * value_dim * D
    return 4 * D + H * (2 * K * D + value_maps) + (2 * D * F + F + D)


# -- Chapter 7: tokens and embeddings ---------------------------------------------------------


def encode_text(text, symbols):
    """The id of every character: its place among the sorted symbols.

    Args:
        text: a string.
        symbols: a string whose distinct characters form the vocabulary.

    Returns:
        An integer array of len(text) ids.
    """
    vocabulary = sorted(set(symbols))
    ids = {symbol: i for i, symbol in enumerate(vocabulary)}
    return np.array([ids[c] for c in text])


def sinusoidal_table(num_positions, dim, base=10_000.0):
    """``PE[n, 2i] = sin(n w_i)``, ``PE[n, 2i+1] = cos(n w_i)``.

    The frequencies are ``w_i = base^(-2i/D)``, i = 0, ..., D/2 - 1.

    Args:
        num_positions: N, positions n = 0, ..., N - 1.
        dim: D, even.
        base: the base of the frequencies.

    Returns:
        (N, D).
    """
    n = jnp.arange(num_positions)[:, None]
    omega = base ** (-jnp.arange(0, dim, 2) / dim)
    angles = n * omega  # (N, D/2)
    table = jnp.stack([jnp.sin(angles), jnp.cos(angles)], axis=-1)
    return table.reshape(num_positions, dim)


def shift_map(k, dim):
    """S_k with PE[n + k] = S_k PE[n]: a rotation by k w_i of every pair i.

    Args:
        k: the shift.
        dim: D, even.

    Returns:
        (D, D), block diagonal.
    """
    omega = 10000.0 ** (-jnp.arange(0, dim, 2) / dim)
    c, s = jnp.cos(k * omega), jnp.sin(k * omega)
    blocks = [jnp.array([[ci, si], [-si, ci]]) for ci, si in zip(c, s)]
    return jax.scipy.linalg.block_diag(*blocks)


# -- Chapter 8: the vision transformer --------------------------------------------------------


def mean_cross_entropy(logits, labels):
    """``-log softmax(logits_b)[label_b]``, averaged over the batch.

    Args:
        logits: (B, C) class scores.
        labels: (B,) integer labels.
    """
    log_p = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.take_along_axis(log_p, labels[:, None], axis=1).mean()


def with_class_token(patches, class_token, positions):
    """The ViT's X^(0): the class token, then the patches plus positions.

    Args:
        patches: (N, D) patch tokens.
        class_token: (D,).
        positions: (N, D) position embeddings of the patches.

    Returns:
        (N + 1, D).
    """
    return jnp.concatenate([class_token[None], patches + positions], axis=0)


def warmup_cosine(t, warmup_steps, steps, peak, final):
    """eta_t: a linear warm-up to ``peak``, a cosine decay to ``final``.

    Args:
        t: step numbers, an integer array.
        warmup_steps: t_w.
        steps: T.
        peak: the largest learning rate.
        final: the learning rate at T and after.
    """
    t_w, T = warmup_steps, steps
    progress = jnp.minimum(t - t_w, T - t_w) / (T - t_w)  # 1 after T
    cosine = final + (peak - final) / 2 * (1 + jnp.cos(jnp.pi * progress))
    return jnp.where(t < t_w, peak * t / t_w, cosine)


def adamw_update(grads, params, mu, nu, t, eta, b1, b2, eps, lam, decay):
    """One AdamW step on dicts of arrays, as (eq-vit-adamw) writes it.

    Returns:
        (new_params, mu, nu): theta_{t+1}, mu_t and nu_t.
    """
    new_params, new_mu, new_nu = {}, {}, {}
    for name, g in grads.items():
        theta = params[name]
        m = b1 * mu[name] + (1 - b1) * g
        v = b2 * nu[name] + (1 - b2) * g**2
        m_hat = m / (1 - b1 ** (t + 1))  # steps count from t = 0
        v_hat = v / (1 - b2 ** (t + 1))
        step = m_hat / (jnp.sqrt(v_hat) + eps)
        if decay[name]:  # decoupled: beside the step, not in g
            step = step + lam * theta
        new_params[name] = theta - eta * step
        new_mu[name], new_nu[name] = m, v
    return new_params, new_mu, new_nu


def training_step(params, opt_state, batch, loss, optimiser, clip_norm):
    """The loss and its gradient, clipped (eq-vit-clip), then the update.

    Returns:
        (new_params, new_opt_state, loss value at params).
    """
    value, grads = jax.value_and_grad(loss)(params, batch)
    leaves = jax.tree_util.tree_leaves(grads)
    norm = jnp.sqrt(sum(jnp.sum(g**2) for g in leaves))
    scale = jnp.minimum(1, clip_norm / norm)
    grads = jax.tree_util.tree_map(lambda g: g * scale, grads)
    updates, opt_state = optimiser.update(grads, opt_state, params)
    params = jax.tree_util.tree_map(lambda p, u: p + u, params, updates)
    return params, opt_state, value


# -- Chapter 9: a language model --------------------------------------------------------------


def causal_mask_by_hand(num_tokens):
    """``mask[n', n]`` is True where output n may read input n': n' <= n.

    Returns:
        A boolean (N, N) array.
    """
    n_in = jnp.arange(num_tokens)[:, None]  # n' down the rows
    n_out = jnp.arange(num_tokens)[None, :]  # n along the columns
    return n_in <= n_out


def top_k_logits(logits, k):
    """Keep the k largest logits, set the others to -inf.

    Args:
        logits: (|V|,).
        k: how many to keep, 1 <= k <= |V|.
    """
    kth_largest = jnp.sort(logits)[-k]
    return jnp.where(logits >= kth_largest, logits, -jnp.inf)


def next_symbol_pairs(windows):
    """Inputs and targets from windows of N + 1 symbols.

    Args:
        windows: (B, N + 1) symbol ids.

    Returns:
        (inputs, targets), each (B, N): target n is the symbol after input n.
    """
    return windows[:, :-1], windows[:, 1:]


def cached_attention(cache_keys, cache_values, key, value, query, t):
    """Write this token's key and value at row t, attend over rows 0..t.

    Returns:
        (output, cache_keys, cache_values): (D_v,), (W, K), (W, D_v).
    """
    cache_keys = cache_keys.at[t].set(key)
    cache_values = cache_values.at[t].set(value)
    scores = cache_keys[: t + 1] @ query / jnp.sqrt(query.shape[0])
    weights = jax.nn.softmax(scores)  # over the filled rows n' <= t
    return weights @ cache_values[: t + 1], cache_keys, cache_values


# -- Chapter 10: an encoder-decoder -----------------------------------------------------------


def teacher_forcing_inputs(targets, start_id):
    """The decoder's inputs: the start symbol, then all targets but the last.

    Args:
        targets: (B, N_t) symbol ids.
        start_id: the start symbol.

    Returns:
        (B, N_t).
    """
    start = jnp.full((targets.shape[0], 1), start_id, dtype=targets.dtype)
    return jnp.concatenate([start, targets[:, :-1]], axis=1)


def padding_mask_by_hand(is_real, num_outputs=None):
    """``mask[n', n] = is_real[n']``: every output reads the real inputs only.

    Args:
        is_real: (M,) booleans, False for padding.
        num_outputs: N, the number of outputs; M by default.

    Returns:
        A boolean (M, N) array.
    """
    N = is_real.shape[0] if num_outputs is None else num_outputs
    return jnp.broadcast_to(is_real[:, None], (is_real.shape[0], N))


def smoothed_cross_entropy(logits, targets, epsilon, pad_id=0):
    """Label-smoothed cross-entropy, averaged over the non-padding targets.

    Args:
        logits: (B, N_t, |V|).
        targets: (B, N_t) symbol ids.
        epsilon: the smoothing, 0 <= eps < 1.
        pad_id: the padding symbol.
    """
    log_p = jax.nn.log_softmax(logits)
    true = -jnp.take_along_axis(log_p, targets[..., None], axis=-1)[..., 0]
    spread = -log_p.mean(axis=-1)  # -log p averaged over the |V| symbols
    r = targets != pad_id
    return (r * ((1 - epsilon) * true + epsilon * spread)).sum() / r.sum()


# -- Chapter 11: relations to other architectures ---------------------------------------------


def causal_linear_attention(keys, queries, values):
    """Linear attention with phi = elu + 1, each output reading n' <= n only.

    Args:
        keys: (N, K).
        queries: (N, K).
        values: (N, D_v).

    Returns:
        (N, D_v).
    """
    phi = lambda x: jax.nn.elu(x) + 1
    similarities = phi(keys) @ phi(queries).T  # [n', n]
    N = keys.shape[0]
    causal = jnp.arange(N)[:, None] <= jnp.arange(N)  # n' <= n
    similarities = jnp.where(causal, similarities, 0.0)
    weights = similarities / similarities.sum(axis=0, keepdims=True)
    return weights.T @ values


def nadaraya_watson_by_hand(inputs, targets, queries, bandwidth):
    """The Nadaraya-Watson estimate at every query, Gaussian kernel.

    Args:
        inputs: (N_in, D) data points x_i.
        targets: (N_in, D_y) their values y_i.
        queries: (N_out, D) points to estimate at.
        bandwidth: sigma.

    Returns:
        (N_out, D_y).
    """
    d2 = ((inputs[:, None, :] - queries[None, :, :]) ** 2).sum(-1)  # [i, n]
    kernel = jnp.exp(-d2 / (2 * bandwidth**2))
    return (kernel / kernel.sum(axis=0)).T @ targets


def hopfield_step(state, patterns, beta):
    """One update xi <- X softmax(beta X^T xi) of a modern Hopfield network.

    Args:
        state: xi, shape (D,).
        patterns: the N stored patterns as rows, (N, D).
        beta: the inverse temperature.
    """
    p = jax.nn.softmax(beta * patterns @ state)  # one weight per pattern
    return patterns.T @ p


# -- Chapter 12: parallel training ------------------------------------------------------------


def mean_over_devices(grad):
    """On every device: the mean of the gradients over the axis 'devices'."""
    return jax.lax.pmean(grad, "devices")


def split_for_devices(batch, num_devices):
    """Cut a batch (B, ...) into G contiguous slices, shape (G, B / G, ...)."""
    B = batch.shape[0]
    return batch.reshape(num_devices, B // num_devices, *batch.shape[1:])


def accumulated_gradient(loss, params, batch, micro_batches):
    """The gradient of ``loss(params, batch)``, one micro-batch at a time.

    Args:
        loss: a mean loss, ``loss(params, batch)``.
        params: a dictionary of arrays.
        batch: a dictionary of arrays with the examples on the first axis.
        micro_batches: k; B must be a multiple of k.

    Returns:
        The gradient, the same structure as ``params``.
    """
    parts = {name: jnp.split(a, micro_batches) for name, a in batch.items()}
    total = None
    for i in range(micro_batches):
        chunk = {name: p[i] for name, p in parts.items()}
        g = jax.grad(loss)(params, chunk)
        total = g if total is None else jax.tree.map(jnp.add, total, g)
    return jax.tree.map(lambda g: g / micro_batches, total)


# -- Chapter 13: subword tokens ---------------------------------------------------------------


def count_pairs(chunks):
    """Count adjacent pairs, each chunk weighted by how often it occurs.

    Args:
        chunks: a dictionary from a chunk (a tuple of token ids) to its count.

    Returns:
        A Counter from pair to count.
    """
    counts = Counter()
    for word, f in chunks.items():
        for pair in zip(word, word[1:]):
            counts[pair] += f
    return counts


def merge_pair(word, pair, new):
    """Replace every non-overlapping occurrence of ``pair``, left to right.

    Args:
        word: a list of token ids.
        pair: the two ids to merge.
        new: the id of the merged token.

    Returns:
        The new list of ids.
    """
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == tuple(pair):
            out.append(new)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


def most_frequent_pair(counts):
    """The pair with the highest count; ties: smaller left id, then right."""
    return min(counts, key=lambda pair: (-counts[pair], pair))


# -- Chapter 14: the modern transformer -------------------------------------------------------


def rms_norm(x, gamma, eps=1e-6):
    """RMSNorm of every token: x / sqrt(mean(x^2) + eps) * gamma.

    Args:
        x: (N, D).
        gamma: (D,) gains.
        eps: added to the mean square inside the square root.
    """
    return x / jnp.sqrt((x**2).mean(axis=-1, keepdims=True) + eps) * gamma


def swiglu(x, W_gate, W_up, W_down):
    """The SwiGLU MLP on every token, no biases.

    Args:
        x: (N, D).
        W_gate: (F, D).
        W_up: (F, D).
        W_down: (D, F).

    Returns:
        (N, D): W_down (silu(W_gate x_n) * W_up x_n) for every n.
    """
    return (jax.nn.silu(x @ W_gate.T) * (x @ W_up.T)) @ W_down.T


def rotate_pairs_by_hand(x, positions, base=10_000.0):
    """Rotate pair (2i, 2i + 1) of token n by n w_i, w_i = base^(-2i/K).

    Args:
        x: (N, K) keys or queries, K even.
        positions: (N,) integer positions.
        base: the base of the frequencies.

    Returns:
        (N, K).
    """
    K = x.shape[-1]
    omega = base ** (-jnp.arange(0, K, 2) / K)
    angle = positions[:, None] * omega  # (N, K/2)
    a, b = x[:, 0::2], x[:, 1::2]
    c, s = jnp.cos(angle), jnp.sin(angle)
    return jnp.stack([a * c - b * s, a * s + b * c], axis=-1).reshape(x.shape)


# -- Chapter 15: a pretrained model -----------------------------------------------------------


def repeat_kv_heads(kv, num_heads):
    """Key-value heads repeated: query head h reads group h // (H / H_kv).

    Returns:
        (H, ...).
    """
    return jnp.repeat(kv, num_heads // kv.shape[0], axis=0)


def half_split_rows(weight, num_heads):
    """Rows of a GGUF U_q or U_k put back in the half-split order.

    Args:
        weight: (H K, D), each head's K rows in the interleaved order.
        num_heads: H.

    Returns:
        (H K, D): per head, half[p] = file, p = half_to_interleaved(K).
    """
    rows, D = weight.shape
    K = rows // num_heads
    i = np.arange(K // 2)
    p = np.stack([i, i + K // 2], axis=-1).reshape(K)  # 0, K/2, 1, ...
    per_head = np.asarray(weight).reshape(num_heads, K, D)
    half = np.empty_like(per_head)
    half[:, p] = per_head
    return half.reshape(rows, D)


def bits_per_character(log_probs, targets, characters):
    """Bits per character of one window of predictions.

    Args:
        log_probs: (N, |V|) log-probabilities of the N predictions.
        targets: (N,) the token ids that came next.
        characters: (|V|,) the characters each id spells.

    Returns:
        The summed -log p in bits, over the characters spelled.
    """
    nats = -log_probs[np.arange(len(targets)), targets].sum()
    return nats / np.log(2) / characters[targets].sum()


# Chapter 16


def dequantise_q8_0(block):
    """The 32 weights w = d q of one Q8_0 block of 34 bytes."""
    d = block[:2].view(np.float16).astype(np.float32)[0]  # the scale
    q = block[2:].view(np.int8).astype(np.float32)  # 32 signed codes
    return d * q


def lora_forward(W, R, Z, x, alpha):
    """W x + (alpha / r) Z R x, without forming Z R."""
    r = R.shape[0]
    return W @ x + alpha / r * (Z @ (R @ x))


def merge_lora(W, R, Z, alpha):
    """W + (alpha / r) Z R."""
    return W + alpha / R.shape[0] * (Z @ R)


def matvec_intensity(d_out, d_in, bytes_per_weight):
    """FLOPs per byte of W x: 2 D_out D_in FLOPs over the bytes it moves."""
    flops = 2 * d_out * d_in
    return flops / (bytes_per_weight * d_out * d_in + 4 * (d_in + d_out))


def online_softmax_tile(s_hat, zeta, y_tilde, scores, values):
    """The running maximum, normaliser and weighted sum after one tile."""
    new = np.maximum(s_hat, scores.max(axis=0))
    factor = np.exp(s_hat - new)  # rescales the old sums to the new maximum
    weights = np.exp(scores - new)  # (keys of the tile, queries)
    zeta = zeta * factor + weights.sum(axis=0)
    return new, zeta, y_tilde * factor[:, None] + weights.T @ values


def saved_log_sum_exp(keys, queries):
    """ℓ_n = log Σ_n' exp(k_n'ᵀ q_n / sqrt(K)), computed stably."""
    scores = keys @ queries.T / np.sqrt(keys.shape[1])
    top = scores.max(axis=0)
    return top + np.log(np.exp(scores - top).sum(axis=0))


# Chapter 17


def group_advantages(rewards, scale_by_std):
    """Each reward minus its group's mean, over its sample std + 1e-4."""
    centred = rewards - rewards.mean(axis=1, keepdims=True)
    if not scale_by_std:
        return centred
    return centred / (rewards.std(axis=1, ddof=1, keepdims=True) + 1e-4)


def clipped_objective(log_ratio, advantages, clip):
    """min(κ A, clip(κ, 1 - ε, 1 + ε) A), κ = exp(log_ratio)."""
    ratio = jnp.exp(log_ratio)
    clipped = jnp.clip(ratio, 1 - clip, 1 + clip)
    return jnp.minimum(ratio * advantages, clipped * advantages)


def dpo_loss(chosen, rejected, reference_chosen, reference_rejected, beta):
    """-mean log σ(β m), m the margin of the log-ratios to the reference."""
    margin = (chosen - reference_chosen) - (rejected - reference_rejected)
    return -jnp.mean(jax.nn.log_sigmoid(beta * margin))


def prefix_matching_score(weights, length):
    """The mean of A[n - L + 1, n] over n = L, ..., 2L - 1 (from 0)."""
    n = np.arange(length, 2 * length)
    return weights[n - length + 1, n].mean()


def mean_ablate(outputs, reference, head):
    """Head `head`'s output replaced by its mean per position."""
    outputs = np.array(outputs)
    outputs[head] = reference[:, head].mean(axis=0)
    return outputs


def patching_effect(clean, corrupted, patched):
    """(corrupted - patched) / (corrupted - clean), per example."""
    return (corrupted - patched) / (corrupted - clean)


# Chapter 20


def run_flops(num_blocks, dim, mlp_hidden_dim, vocab_size, window, tokens):
    """(6 |θ_W| + 12 M n D) FLOPs per token, times the tokens."""
    matrices = num_blocks * (4 * dim**2 + 2 * dim * mlp_hidden_dim)
    matrices += vocab_size * dim  # the read-out; the token table is a look-up
    attention = 12 * num_blocks * window * dim
    return (6 * matrices + attention) * tokens


def parabola_optimum(sizes, losses):
    """exp(-b / 2a) of the parabola L = a x² + b x + c, x = log |θ|."""
    a, b, _ = np.polyfit(np.log(sizes), losses, 2)
    return np.exp(-b / (2 * a))


def power_law_fit(x, y):
    """(u, c) of y = c x^u: a line through (log x, log y)."""
    u, log_c = np.polyfit(np.log(x), np.log(y), 1)
    return u, np.exp(log_c)
