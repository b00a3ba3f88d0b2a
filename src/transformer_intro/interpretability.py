"""What a trained language model computes, found by intervening on it.

Every measure here runs the book's own :class:`~transformer_intro.models.LanguageModel`, block
by block, through its own modules (:func:`run_with_heads`); nothing is a second model. The one
hook is between a block's attention heads and their sum: the output of head h of block m,
``o_{m,h}(n) = V_{m,h} X̄ A_{m,h}[:, n]`` (its share of the attention's output at position n),
can be kept or replaced before the heads are added. That one hook expresses

* **zero ablation**: head (m, h) replaced by zeros, the same as zeroing its output projection
  ``O_{m,h}`` with ``eqx.tree_at`` (:func:`zero_head`);
* **mean ablation**: replaced by its mean output over held-out windows (:func:`mean_head_outputs`),
  position by position, so that what the head always writes stays and only what it writes for
  *this* input goes;
* **activation patching**: replaced by its output on another input (a clean run's, in a
  corrupted run).

Chapter 10's :class:`~transformer_intro.models.EncoderDecoder` has the same hook on its
decoder's cross-attention heads (:func:`run_decoder_with_heads`), the only way its decoder
reads the source, and a second one on the encoder's outputs, position by position:
:func:`cross_head_patching` and :func:`source_position_patching` put a clean source's head
outputs or encoder outputs into a run on a corrupted source and measure the nats of the clean
answer at every position.

The residual stream it records also gives the **logit lens** (nostalgebraist 2020): the model's
own read-out applied after every block (:func:`logit_lens_losses`). Induction heads (Elhage et
al. 2021; Olsson et al. 2022) are found on repeated random sequences
(:func:`repeated_random_sequences`) by their **prefix-matching score**
(:func:`prefix_matching_scores`) and their **copying score** (:func:`copying_scores`); the
**in-context-learning score** (:func:`in_context_learning_score`) compares the loss late in the
window with the loss early in it. Linear **probes** (:func:`fit_probe`) read a property off the
residual stream; a **control task** (:func:`control_labels`, Hewitt and Liang 2019) keeps a
probe's accuracy from being mistaken for what the model knows.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, ArrayLike, Float, Int, PRNGKeyArray

from .attention import attend, causal_mask, padding_mask
from .block import BlockConfig
from .models import EncoderDecoder, LanguageModel, LMConfig
from .quantisation import holds_blocks
from .training import Recipe

__all__ = [
    "INDUCTION_TOY_CONFIG",
    "INDUCTION_TOY_LENGTH",
    "INDUCTION_TOY_RECIPE",
    "DecoderRun",
    "HeadRun",
    "RepeatedSequences",
    "ablation_losses",
    "control_labels",
    "copying_scores",
    "cross_head_patching",
    "fit_probe",
    "head_outputs",
    "in_context_learning_score",
    "line_position_labels",
    "logit_lens_losses",
    "mean_head_outputs",
    "per_position_losses",
    "prefix_matching_scores",
    "probe_accuracy",
    "repeated_random_sequences",
    "run_decoder_with_heads",
    "run_with_heads",
    "source_position_patching",
    "speaker_name_labels",
    "zero_head",
]


# -- the hook: every head's output, kept or replaced ------------------------------------------


def head_outputs(
    attention, x_bar: Float[Array, "N D"], mask, context: Float[Array, "M D"] | None = None
) -> Float[Array, "H N D"]:
    """Each head's share ``o_h(n)`` of the attention's output.

    Their sum, plus any output bias, is ``attention(x_bar, mask, context=context)``.

    Head h's values are ``W_h x̄`` (``W_h c`` for the context's tokens c in cross-attention),
    its weights ``A_h``, its output ``O_h`` times their weighted average (or ``V_h`` times it
    where the values are full D x D maps).
    """
    weights = attention.attention_weights(x_bar, mask, context=context)  # (H, M, N)
    source = x_bar if context is None else context
    values = attention.per_query_head(attention.value_projections)  # (H, Dv, D)
    per_head = jax.vmap(lambda w, a: attend(source @ w.T, a))(values, weights)  # (H, N, Dv)
    if attention.output_projections is not None:
        per_head = jnp.einsum("hdv,hnv->hnd", attention.output_projections, per_head)
    if attention.combine_heads == "mean":
        per_head = per_head / attention.num_heads
    return per_head


class HeadRun(NamedTuple):
    """What :func:`run_with_heads` records of one sequence.

    Attributes:
        logits: (N, |V|), row n predicting symbol n + 1.
        residuals: (M + 1, N, D): the tokens before the first block and after each block.
        heads: (M, H, N, D): every head's output as it entered the sum (after any replacement).
        weights: (M, H, N, N): every head's attention matrix ``A[m, h, n', n]``.
    """

    logits: Float[Array, "N V"]
    residuals: Float[Array, "M1 N D"]
    heads: Float[Array, "M H N D"]
    weights: Float[Array, "M H N N"]


def _check_plain(model) -> None:
    if not isinstance(model, LanguageModel):
        raise TypeError(f"expected a LanguageModel, got {type(model).__name__}")
    if model.config.scan_blocks or holds_blocks(model):
        raise ValueError(
            "run_with_heads reads the blocks one by one as float weights: give it a model "
            "built with scan_blocks=False and not quantised (dequantise_model(model) for a "
            "quantised one)"
        )


def run_with_heads(
    model: LanguageModel,
    symbols: Int[ArrayLike, " N"],
    keep: Float[ArrayLike, "M H"] | None = None,
    replacement: Float[ArrayLike, "M H ..."] | None = None,
) -> HeadRun:
    """The model on one sequence, with every head's output kept or replaced.

    Head (m, h)'s output becomes ``keep[m, h] o_{m,h} + (1 - keep[m, h]) r_{m,h}``: ``keep = 1``
    everywhere (the default) is the model itself; ``keep[m, h] = 0`` with ``replacement`` None
    (zeros) is zero ablation of that head, with its mean output mean ablation, with another
    run's ``heads`` activation patching. Only the heads' sum is touched: the residual stream,
    the norms and the MLPs run as the model's own modules.

    Args:
        model: a causal :class:`LanguageModel` (blocks not scanned, weights not quantised).
        symbols: N <= window symbol ids.
        keep: (M, H) weights in [0, 1] (or booleans); None keeps every head.
        replacement: what replaces a head's output, broadcastable to (M, H, N, D); None is zeros.

    Returns:
        A :class:`HeadRun`.

    Raises:
        TypeError: if the model is not a LanguageModel.
        ValueError: if its blocks are scanned or quantised, or ``keep`` has the wrong shape.
    """
    _check_plain(model)
    symbols = jnp.asarray(symbols)
    model._check(symbols)
    m_blocks, h_heads = model.config.num_blocks, model.config.block.num_heads
    if keep is None:
        keep = jnp.ones((m_blocks, h_heads))
    keep = jnp.asarray(keep, jnp.float32)
    if keep.shape != (m_blocks, h_heads):
        raise ValueError(
            f"keep must have shape (M, H) = ({m_blocks}, {h_heads}), one weight per head, "
            f"got {keep.shape}"
        )
    n = symbols.shape[0]
    mask = causal_mask(n)
    x = model.embed(symbols)
    residuals, heads, weights = [x], [], []
    for m, block in enumerate(model.blocks):
        attention = block.attention
        x_bar = jax.vmap(block.attention_norm)(x)
        outputs = head_outputs(attention, x_bar, mask)
        if replacement is not None:
            substitute = jnp.broadcast_to(jnp.asarray(replacement)[m], outputs.shape)
        else:
            substitute = jnp.zeros_like(outputs)
        k = keep[m][:, None, None]
        outputs = k * outputs + (1 - k) * substitute
        attended = attention._add_output_bias(outputs.sum(0))
        y = (x if block.residual == "input" else x_bar) + attended
        x = block.mlp_residual(y)
        residuals.append(x)
        heads.append(outputs)
        weights.append(attention.attention_weights(x_bar, mask))
    return HeadRun(model.readout(x), jnp.stack(residuals), jnp.stack(heads), jnp.stack(weights))


def zero_head(model: LanguageModel, block: int, head: int) -> LanguageModel:
    """The model with head ``head`` of block ``block`` silenced by an ``eqx.tree_at`` edit.

    Its output projection ``O_{m,h}`` (or its full value map ``V_{m,h}``) is set to zero, so the
    head writes nothing into the residual stream: zero ablation, as a model of the same class.

    Raises:
        ValueError: if ``block`` or ``head`` is out of range, or the blocks are scanned.
    """
    _check_plain(model)
    m_blocks, h_heads = model.config.num_blocks, model.config.block.num_heads
    if not (0 <= block < m_blocks and 0 <= head < h_heads):
        raise ValueError(
            f"block must be in [0, {m_blocks}) and head in [0, {h_heads}), got ({block}, {head})"
        )
    attention = model.blocks[block].attention
    if attention.output_projections is not None:
        where = lambda mdl: mdl.blocks[block].attention.output_projections
        array = attention.output_projections
    elif attention.group_size == 1:
        where = lambda mdl: mdl.blocks[block].attention.value_projections
        array = attention.value_projections
    else:
        raise ValueError("a head that shares full value maps with others cannot be zeroed alone")
    return eqx.tree_at(where, model, array.at[head].set(0.0))


# -- losses of a batch of windows ----------------------------------------------------------------


def _nats(logits, targets):
    log_p = jax.nn.log_softmax(logits)
    return -jnp.take_along_axis(log_p, targets[..., None], axis=-1)[..., 0]


@eqx.filter_jit
def per_position_losses(
    model: LanguageModel,
    windows: Int[Array, "B N1"],
    keep: Float[Array, "M H"] | None = None,
    replacement: Float[Array, "M H ..."] | None = None,
) -> Float[Array, "B N"]:
    """The nats of every next-symbol prediction of B windows of N + 1 symbols, heads edited.

    ``keep`` and ``replacement`` are :func:`run_with_heads`'s, the same for every window.
    """
    inputs, targets = windows[:, :-1], windows[:, 1:]
    logits = jax.vmap(lambda s: run_with_heads(model, s, keep, replacement).logits)(inputs)
    return _nats(logits, targets)


@eqx.filter_jit
def mean_head_outputs(model: LanguageModel, inputs: Int[Array, "B N"]) -> Float[Array, "M H N D"]:
    """Every head's output at each position, averaged over B input windows.

    This is mean ablation's replacement.
    """
    return jax.vmap(lambda s: run_with_heads(model, s).heads)(inputs).mean(0)


def ablation_losses(
    model: LanguageModel,
    windows: Int[Array, "B N1"],
    replacement: Float[Array, "M H ..."] | None = None,
    chunk: int = 64,
) -> tuple[Float[np.ndarray, " B"], Float[np.ndarray, "M H B"]]:
    """Each window's mean nats per symbol with no head ablated, and with each head ablated alone.

    Args:
        model: the model.
        windows: B windows of N + 1 symbols.
        replacement: None for zero ablation, :func:`mean_head_outputs` for mean ablation.
        chunk: windows per compiled pass.

    Returns:
        ``(intact, ablated)``: (B,) and (M, H, B); ``ablated[m, h] - intact`` is what head (m, h)
        is worth on each window.
    """
    m_blocks, h_heads = model.config.num_blocks, model.config.block.num_heads

    def losses(keep):
        parts = [
            per_position_losses(model, windows[i : i + chunk], keep, replacement).mean(-1)
            for i in range(0, windows.shape[0], chunk)
        ]
        return np.asarray(jnp.concatenate(parts))

    intact = losses(jnp.ones((m_blocks, h_heads)))
    ablated = np.stack(
        [
            losses(jnp.ones((m_blocks, h_heads)).at[m, h].set(0.0))
            for m in range(m_blocks)
            for h in range(h_heads)
        ]
    ).reshape(m_blocks, h_heads, -1)
    return intact, ablated


@eqx.filter_jit
def _lens_nats(model, inputs, targets):
    residuals = jax.vmap(lambda s: run_with_heads(model, s).residuals)(inputs)  # (B, M+1, N, D)
    return _nats(model.readout(residuals), targets[:, None, :]).mean((0, 2))


def logit_lens_losses(
    model: LanguageModel, windows: Int[Array, "B N1"], chunk: int = 64
) -> Float[np.ndarray, " M1"]:
    """The mean nats per symbol of the model's read-out applied after block m, m = 0, ..., M.

    Entry 0 reads the tokens before any block (a bigram model of sorts), entry M is the model's
    own loss: the logit lens.
    """
    parts = [
        np.asarray(_lens_nats(model, windows[i : i + chunk, :-1], windows[i : i + chunk, 1:]))
        * len(windows[i : i + chunk])
        for i in range(0, windows.shape[0], chunk)
    ]
    return np.sum(parts, axis=0) / windows.shape[0]


# -- the encoder-decoder: cross-attention heads and source positions ---------------------------


class DecoderRun(NamedTuple):
    """What :func:`run_decoder_with_heads` records of one (source, target) pair.

    Attributes:
        logits: (N_t, |V|), row n predicting target token n + 1.
        memory: (N_s, D): the encoder's outputs the decoder read (after any replacement).
        heads: (L, H, N_t, D): every cross-attention head's output as it entered the sum.
        weights: (L, H, N_s, N_t): every cross-attention matrix ``A[l, h, n', n]``.
        residuals: (L + 1, N_t, D): the decoder's tokens before its first layer and after each
            (what a probe of the decoder reads).
    """

    logits: Float[Array, "Nt V"]
    memory: Float[Array, "Ns D"]
    heads: Float[Array, "L H Nt D"]
    weights: Float[Array, "L H Ns Nt"]
    residuals: Float[Array, "L1 Nt D"]


def run_decoder_with_heads(
    model: EncoderDecoder,
    source: Int[ArrayLike, " Ns"],
    target_inputs: Int[ArrayLike, " Nt"],
    keep: Float[ArrayLike, "L H"] | None = None,
    replacement: Float[ArrayLike, "L H ..."] | None = None,
    memory: Float[ArrayLike, "Ns D"] | None = None,
) -> DecoderRun:
    """Teacher forcing on one pair, each cross-attention head's output kept or replaced.

    The decoder reads the source only through its cross-attention, so these heads are where a
    clean source's information can be put into a corrupted run. Head (l, h)'s output becomes
    ``keep[l, h] o_{l,h} + (1 - keep[l, h]) r_{l,h}``, as in :func:`run_with_heads`: zeros for
    ``replacement`` None (zero ablation), another run's ``heads`` for activation patching.
    ``memory``, if given, replaces the encoder's outputs (a clean run's rows patched in at some
    source positions). Everything else runs as the model's own modules.

    Args:
        model: chapter 10's :class:`~transformer_intro.models.EncoderDecoder`.
        source: N_s source ids (padding allowed; no head reads it).
        target_inputs: N_t target ids, starting with the start id.
        keep: (L, H) weights in [0, 1]; None keeps every head.
        replacement: what replaces a head's output, broadcastable to (L, H, N_t, D); None is zeros.
        memory: (N_s, D) encoder outputs to read instead of the source's own; None reads them.

    Returns:
        A :class:`DecoderRun`.

    Raises:
        TypeError: if the model is not an EncoderDecoder.
        ValueError: if ``keep`` or ``memory`` has the wrong shape.
    """
    if not isinstance(model, EncoderDecoder):
        raise TypeError(f"expected an EncoderDecoder, got {type(model).__name__}")
    source, target_inputs = jnp.asarray(source), jnp.asarray(target_inputs)
    layers, heads = model.config.decoder_layers, model.config.decoder.num_heads
    keep = jnp.ones((layers, heads)) if keep is None else jnp.asarray(keep, jnp.float32)
    if keep.shape != (layers, heads):
        raise ValueError(
            f"keep must have shape (L, H) = ({layers}, {heads}), one weight per cross-attention "
            f"head, got {keep.shape}"
        )
    own = model.encode(source)
    if memory is None:
        memory = own
    memory = jnp.asarray(memory, own.dtype)
    if memory.shape != own.shape:
        raise ValueError(
            f"memory must have the encoder's shape (N_s, D) = {own.shape}, got {memory.shape}"
        )
    model._check_target(target_inputs.shape[-1])
    n = target_inputs.shape[0]
    cross_mask = padding_mask(source != model.pad_id, n)
    y = model.target_positions(model.target_embedding(target_inputs))
    outputs, weights, residuals = [], [], [y]
    for l, layer in enumerate(model.decoder):
        y = layer.block.attention_residual(y, causal_mask(n))
        attention = layer.cross_attention
        y_bar = layer.cross_attention_norm(y)
        per_head = head_outputs(attention, y_bar, cross_mask, context=memory)
        if replacement is not None:
            substitute = jnp.broadcast_to(jnp.asarray(replacement)[l], per_head.shape)
        else:
            substitute = jnp.zeros_like(per_head)
        k = keep[l][:, None, None]
        per_head = k * per_head + (1 - k) * substitute
        y = layer.block.mlp_residual(y + attention._add_output_bias(per_head.sum(0)))
        outputs.append(per_head)
        weights.append(attention.attention_weights(y_bar, cross_mask, context=memory))
        residuals.append(y)
    logits = jax.vmap(model.unembedding)(model.decoder_norm(y))
    return DecoderRun(logits, memory, jnp.stack(outputs), jnp.stack(weights), jnp.stack(residuals))


def _target_nats(logits, targets, pad_id):
    # padding positions of the target score 0, so that a sum over positions counts real ones;
    # the targets are broadcast over any leading axes of the logits (one run per patch)
    targets = jnp.broadcast_to(targets, logits.shape[:-1])
    return jnp.where(targets != pad_id, _nats(logits, targets), 0.0)


@eqx.filter_jit
def cross_head_patching(
    model: EncoderDecoder,
    clean: Int[Array, "B Ns"],
    corrupted: Int[Array, "B Ns"],
    target_inputs: Int[Array, "B Nt"],
    targets: Int[Array, "B Nt"],
) -> tuple[Float[Array, "B Nt"], Float[Array, "B Nt"], Float[Array, "L H B Nt"]]:
    """The clean answer's nats with each cross-attention head patched from clean into corrupted.

    For each pair the decoder is teacher-forced on the clean answer (``target_inputs``, scored
    against ``targets``) three ways: on the clean source, on the corrupted one, and on the
    corrupted one with head (l, h)'s output replaced by its output in the clean run, for every
    (l, h) alone. Padding positions of the targets score 0.

    Returns:
        ``(clean_nats, corrupted_nats, patched_nats)``: (B, N_t), (B, N_t), (L, H, B, N_t).
    """
    layers, heads = model.config.decoder_layers, model.config.decoder.num_heads

    def one(c, x, t_in, t):
        clean_run = run_decoder_with_heads(model, c, t_in)
        corrupted_run = run_decoder_with_heads(model, x, t_in)
        # one mask per head: that head's keep set to 0, every other's to 1
        masks = 1 - jax.nn.one_hot(jnp.arange(layers * heads), layers * heads)
        masks = masks.reshape(layers * heads, layers, heads)
        patched = jax.vmap(lambda k: run_decoder_with_heads(model, x, t_in, k, clean_run.heads))(
            masks
        ).logits
        return (
            _target_nats(clean_run.logits, t, model.pad_id),
            _target_nats(corrupted_run.logits, t, model.pad_id),
            _target_nats(patched, t, model.pad_id).reshape(layers, heads, -1),
        )

    clean_nats, corrupted_nats, patched = jax.vmap(one)(clean, corrupted, target_inputs, targets)
    return clean_nats, corrupted_nats, jnp.moveaxis(patched, 0, 2)


@eqx.filter_jit
def source_position_patching(
    model: EncoderDecoder,
    clean: Int[Array, "B Ns"],
    corrupted: Int[Array, "B Ns"],
    target_inputs: Int[Array, "B Nt"],
    targets: Int[Array, "B Nt"],
) -> tuple[Float[Array, "B Nt"], Float[Array, "B Nt"], Float[Array, "Ns B Nt"]]:
    """The clean answer's nats with the encoder's output at one source position patched in.

    As :func:`cross_head_patching`, but what is patched from the clean run into the corrupted
    one is the encoder's output at source position n', for every n' alone (the sources must be
    aligned, character for character, for a position to mean the same in both).

    Returns:
        ``(clean_nats, corrupted_nats, patched_nats)``: (B, N_t), (B, N_t), (N_s, B, N_t).
    """

    def one(c, x, t_in, t):
        clean_memory, corrupted_memory = model.encode(c), model.encode(x)
        positions = jnp.eye(c.shape[0], dtype=bool)[:, :, None]  # (Ns, Ns, 1): one row each
        memories = jnp.where(positions, clean_memory, corrupted_memory)
        patched = jax.vmap(lambda mem: run_decoder_with_heads(model, x, t_in, memory=mem).logits)(
            memories
        )
        return (
            _target_nats(run_decoder_with_heads(model, c, t_in).logits, t, model.pad_id),
            _target_nats(run_decoder_with_heads(model, x, t_in).logits, t, model.pad_id),
            _target_nats(patched, t, model.pad_id),
        )

    clean_nats, corrupted_nats, patched = jax.vmap(one)(clean, corrupted, target_inputs, targets)
    return clean_nats, corrupted_nats, jnp.moveaxis(patched, 0, 1)


# -- induction heads ---------------------------------------------------------------------------


def repeated_random_sequences(
    key: PRNGKeyArray, batch_size: int, length: int, vocab_size: int
) -> Int[Array, "B N"]:
    """B sequences of L symbols drawn uniformly from |V|, each followed by itself again.

    The first half cannot be predicted at all (ln |V| nats per symbol is the best); the second
    half can be predicted perfectly by a model that looks up what followed the current symbol
    last time.

    Raises:
        ValueError: if a size is not positive.
    """
    if min(batch_size, length, vocab_size) < 1:
        raise ValueError(
            f"batch_size, length and vocab_size must be positive, got "
            f"{batch_size}, {length}, {vocab_size}"
        )
    half = jax.random.randint(key, (batch_size, length), 0, vocab_size)
    return jnp.concatenate([half, half], axis=1)


@eqx.filter_jit
def prefix_matching_scores(
    model: LanguageModel, sequences: Int[Array, "B N"]
) -> Float[Array, "M H"]:
    """Each head's mean attention, in the second half, on the symbol after the earlier copy.

    At position n >= L of a sequence repeated once (length 2L), the current symbol appeared
    before at n - L, and the symbol that followed it is at n - L + 1: an induction head puts its
    weight there (Olsson et al. 2022). The score is ``A[n - L + 1, n]`` averaged over those
    positions and the B sequences; a head that spreads its weight evenly over the window scores
    about 1 / n.
    """
    length = sequences.shape[1] // 2
    weights = jax.vmap(lambda s: run_with_heads(model, s).weights)(sequences)  # (B, M, H, N, N)
    n = jnp.arange(length, 2 * length)
    return weights[:, :, :, n - length + 1, n].mean((0, 3))


def copying_scores(model: LanguageModel) -> Float[np.ndarray, "M H"]:
    """Each head's copying score ``Σ_i λ_i / Σ_i |λ_i|`` (Elhage et al. 2021).

    The λ_i are the eigenvalues of the head's |V| x |V| circuit from a symbol's embedding,
    through its value and output maps, to the read-out: ``W_U diag(γ_f) V_h diag(γ_a) Eᵀ``,
    with the final and attention norms' gains γ folded in and their centring and scaling left
    out (the usual approximation). A head that raises the logit of the symbol it attends to has
    mostly positive eigenvalues, a score near 1; -1 means it lowers it. The read-out is the
    untied matrix, or the token table where they are tied.
    """
    _check_plain(model)
    table = np.asarray(model.tokeniser.table)  # (V, D)
    readout = table if model.unembedding is None else np.asarray(model.unembedding.weight)
    readout = readout * np.asarray(model.final_norm.weight)
    scores = np.zeros((model.config.num_blocks, model.config.block.num_heads))
    for m, block in enumerate(model.blocks):
        values = np.asarray(block.attention.value_maps())  # (H, D, D)
        gain = np.asarray(block.attention_norm.weight)
        for h, v in enumerate(values):
            eigenvalues = np.linalg.eigvals(readout @ (v * gain) @ table.T)
            scores[m, h] = eigenvalues.sum().real / np.abs(eigenvalues).sum()
    return scores


def in_context_learning_score(
    losses: Float[ArrayLike, "... N"], early: int | None = None, late: int | None = None
) -> Float[Array, "*batch"]:
    """The loss at a late position minus the loss at an early one (Olsson et al. 2022).

    Olsson et al. take tokens 500 and 50 of a 512-token window; the defaults scale those to the
    window N of ``losses`` (its last axis, per-position mean losses): ``early = round(50 N /
    512)``, ``late = round(500 N / 512)``. A negative score says the model predicts better with
    more context.

    Raises:
        ValueError: if the positions are outside the window or not in order.
    """
    losses = jnp.asarray(losses)
    n = losses.shape[-1]
    early = round(50 * n / 512) if early is None else early
    late = min(round(500 * n / 512), n - 1) if late is None else late
    if not 0 <= early < late < n:
        raise ValueError(f"need 0 <= early < late < N = {n}, got early={early}, late={late}")
    return losses[..., late] - losses[..., early]


class RepeatedSequences(eqx.Module):
    """A task for :func:`~transformer_intro.training.fit`: predict repeated random sequences.

    A batch is B sequences of L random symbols repeated (2L + 1 symbols: the last is the
    second copy's continuation, the first symbol again), and the loss the mean nats of every
    next-symbol prediction. ``evaluate`` measures, on fixed sequences, the loss on each half and
    every head's prefix-matching score, so that a run's history shows an induction head form.
    """

    vocab_size: int = eqx.field(static=True)
    length: int = eqx.field(static=True)
    validation: Array

    def __init__(self, vocab_size: int, length: int, num_validation: int = 256):
        """Draw the fixed evaluation sequences (key 1234).

        Args:
            vocab_size: |V|, the symbols drawn from.
            length: L, the length of the random half; the model's window must be at least 2L.
            num_validation: how many sequences ``evaluate`` reads.
        """
        self.vocab_size = vocab_size
        self.length = length
        self.validation = self._draw(jax.random.PRNGKey(1234), num_validation)

    def _draw(self, key, batch_size):
        sequences = repeated_random_sequences(key, batch_size, self.length, self.vocab_size)
        return jnp.concatenate([sequences, sequences[:, :1]], axis=1)

    def batch(self, key: PRNGKeyArray, batch_size: int) -> Int[Array, "B N1"]:
        """B fresh repeated sequences of 2L + 1 symbols."""
        return self._draw(key, batch_size)

    def loss(self, model, sequences: Int[Array, "B N1"]) -> tuple[Array, dict[str, Array]]:
        """The mean cross-entropy of every next-symbol prediction, in nats; no metrics."""
        logits = model.batched(sequences[:, :-1])
        return _nats(logits, sequences[:, 1:]).mean(), {}

    def evaluate(self, model) -> dict[str, float]:
        """Loss on each half of the fixed sequences and each head's prefix-matching score.

        Keys: ``"first_half"``, ``"second_half"`` (nats per symbol) and ``"prefix_m_h"`` for
        head h of block m.
        """
        losses = np.asarray(per_position_losses(model, self.validation).mean(0))
        scores = np.asarray(prefix_matching_scores(model, self.validation[:, :-1]))
        out = {
            "first_half": float(losses[: self.length - 1].mean()),
            "second_half": float(losses[self.length :].mean()),
        }
        for (m, h), score in np.ndenumerate(scores):
            out[f"prefix_{m}_{h}"] = float(score)
        return out


# -- probes --------------------------------------------------------------------------------------

# A speaker's name in the plays: a line of its own after a blank line, ending in a full stop
# ("Hor.", "First Clown.").
_SPEAKER = re.compile(r"(?<=\n\n)[A-Z][A-Za-z' ]{0,30}\.(?=\n)")


def speaker_name_labels(text: str) -> Int[np.ndarray, " L"]:
    """1 for each character of ``text`` inside a speaker's name, 0 elsewhere.

    A speaker's name is a line of its own after a blank line, starting with a capital, ending
    in a full stop, at most 32 characters: how the book's plays write who speaks.
    """
    labels = np.zeros(len(text), np.int32)
    for match in _SPEAKER.finditer(text):
        labels[match.start() : match.end()] = 1
    return labels


def line_position_labels(text: str, width: int = 8, classes: int = 6) -> Int[np.ndarray, " L"]:
    """Each character's position in its line, in classes of ``width`` characters.

    Class c holds columns ``c * width, ..., (c + 1) * width - 1`` (the newline ends its line);
    the last class holds every column beyond.
    """
    labels = np.zeros(len(text), np.int32)
    column = 0
    for i, c in enumerate(text):
        labels[i] = min(column // width, classes - 1)
        column = 0 if c == "\n" else column + 1
    return labels


def control_labels(
    symbols: Int[ArrayLike, " L"], labels: Int[ArrayLike, "*shape"], key: PRNGKeyArray
) -> Int[np.ndarray, " L"]:
    """A control task (Hewitt and Liang 2019): one random label per symbol, whatever its context.

    Each distinct symbol gets a label drawn from the labels' own frequencies, and every
    occurrence of it carries that label. A probe can learn this task only by memorising symbols,
    so the accuracy it reaches is what the probe achieves without the model knowing anything.
    """
    symbols, labels = np.asarray(symbols), np.asarray(labels)
    if symbols.shape != labels.shape:
        raise ValueError(f"symbols {symbols.shape} and labels {labels.shape} differ in shape")
    num_symbols = int(symbols.max()) + 1
    drawn = jax.random.choice(key, jnp.asarray(labels), (num_symbols,))
    return np.asarray(drawn)[symbols]


def fit_probe(
    features: Float[ArrayLike, "L F"],
    labels: Int[ArrayLike, " L"],
    num_classes: int,
    *,
    steps: int = 300,
    learning_rate: float = 0.05,
    weight_decay: float = 1e-4,
) -> tuple[Float[Array, "F C"], Float[Array, " C"]]:
    """A linear probe: multinomial logistic regression ``softmax(W x + b)``, full batch, Adam.

    The features are standardised by their own mean and deviation first (folded back into W and
    b), so that one learning rate suits any layer.

    Returns:
        ``(W, b)``, shapes (F, C) and (C,): the logits of features x are ``x @ W + b``.
    """
    x = jnp.asarray(features, jnp.float32)
    mean, scale = x.mean(0), x.std(0) + 1e-6
    w, b = _train_probe(
        (x - mean) / scale, jnp.asarray(labels), learning_rate, weight_decay,
        num_classes=num_classes, steps=steps,
    )  # fmt: skip
    return w / scale[:, None], b - (mean / scale) @ w


@functools.partial(jax.jit, static_argnames=("num_classes", "steps"))
def _train_probe(z, y, learning_rate, weight_decay, *, num_classes, steps):
    """Full-batch AdamW on the standardised features; one compiled program per shape."""
    optimiser = optax.adamw(learning_rate, weight_decay=weight_decay)
    params = (jnp.zeros((z.shape[1], num_classes)), jnp.zeros(num_classes))

    def step(carry, _):
        p, state = carry
        grads = jax.grad(lambda p: _nats(z @ p[0] + p[1], y).mean())(p)
        updates, state = optimiser.update(grads, state, p)
        return (optax.apply_updates(p, updates), state), None

    (params, _), _ = jax.lax.scan(step, (params, optimiser.init(params)), None, steps)
    return params


def probe_accuracy(probe, features: Float[ArrayLike, "L F"], labels: Int[ArrayLike, " L"]) -> float:
    """The fraction of ``labels`` the probe ``(W, b)`` predicts (its largest logit)."""
    w, b = probe
    predicted = jnp.argmax(jnp.asarray(features) @ w + b, axis=-1)
    return float((predicted == jnp.asarray(labels)).mean())


# Chapter 18's toy: two blocks of two heads (with the book's MLPs, which the task does not need)
# trained on random sequences of L = 24 symbols of 32, repeated; benchmarks/induction_toy.py
# trains seeds 0-2 and saves seed 0's run as book/checkpoints/induction_toy.eqx.
INDUCTION_TOY_LENGTH = 24
INDUCTION_TOY_CONFIG = LMConfig(
    vocab_size=32,
    window=2 * INDUCTION_TOY_LENGTH,
    block=BlockConfig(dim=64, num_heads=2, mlp_hidden_dim=128, value_dim=32, rotary=True),
    num_blocks=2,
)
INDUCTION_TOY_RECIPE = Recipe(
    steps=300, batch_size=32, learning_rate=1e-3, warmup_steps=20, schedule="constant",
    weight_decay=0.0, steps_per_call=5, seed=0,
)  # fmt: skip
