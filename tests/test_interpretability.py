"""The interventions of chapter 18 against properties of the maths, each with a control.

Ablating nothing changes nothing; a head whose output projection is zeroed (an ``eqx.tree_at``
edit) computes what zero ablation computes; patching a run into itself changes nothing, and
patching another run's heads into every block reproduces that run. The induction measures are
checked on attention matrices built by hand, the logit lens against the model's own loss, the
probes on properties that are and are not linearly readable.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from factories import lm_block, tiny_encoder_decoder, tiny_lm

from transformer_intro.attention import causal_mask, padding_mask
from transformer_intro.interpretability import (
    RepeatedSequences,
    ablation_losses,
    control_labels,
    copying_scores,
    cross_head_patching,
    fit_probe,
    head_outputs,
    in_context_learning_score,
    line_position_labels,
    logit_lens_losses,
    mean_head_outputs,
    per_position_losses,
    prefix_matching_scores,
    probe_accuracy,
    repeated_random_sequences,
    run_decoder_with_heads,
    run_with_heads,
    source_position_patching,
    speaker_name_labels,
    zero_head,
)
from transformer_intro.models import LanguageModel

CONFIG = tiny_lm(vocab_size=11, window=16, num_blocks=2)


@pytest.fixture(scope="module")
def model():
    return LanguageModel(CONFIG, key=jax.random.PRNGKey(0))


@pytest.fixture(scope="module")
def windows():
    return jax.random.randint(jax.random.PRNGKey(1), (6, 17), 0, 11)


def test_the_heads_sum_to_the_attention(model):
    x = jax.random.normal(jax.random.PRNGKey(2), (7, 16))
    attention = model.blocks[0].attention
    mask = jnp.tril(jnp.ones((7, 7), bool)).T
    parts = head_outputs(attention, x, mask)
    assert parts.shape == (2, 7, 16)
    assert jnp.allclose(parts.sum(0), attention(x, mask), atol=1e-5)
    assert not jnp.allclose(parts[0], attention(x, mask), atol=1e-3)  # one head is not all


def test_ablating_nothing_changes_nothing(model, windows):
    s = windows[0, :-1]
    run = run_with_heads(model, s)
    assert jnp.allclose(run.logits, model(s), atol=1e-5)
    assert jnp.allclose(run.weights, model.attention_maps(s), atol=1e-6)
    assert run.residuals.shape == (3, 16, 16) and run.heads.shape == (2, 2, 16, 16)
    # keep = 1 ignores whatever replacement is given
    noise = jax.random.normal(jax.random.PRNGKey(3), run.heads.shape)
    assert jnp.allclose(run_with_heads(model, s, None, noise).logits, model(s), atol=1e-5)


@pytest.mark.parametrize("block, head", [(0, 0), (0, 1), (1, 1)])
def test_a_zeroed_output_projection_is_zero_ablation(model, windows, block, head):
    s = windows[1, :-1]
    keep = jnp.ones((2, 2)).at[block, head].set(0.0)
    ablated = run_with_heads(model, s, keep).logits
    assert jnp.allclose(ablated, zero_head(model, block, head)(s), atol=1e-5)
    assert jnp.abs(ablated - model(s)).max() > 1e-3  # the head mattered
    other = (block, 1 - head)  # control: another head zeroed is told apart
    assert jnp.abs(ablated - zero_head(model, *other)(s)).max() > 1e-3


def test_zero_head_leaves_the_model_unchanged_elsewhere(model):
    edited = zero_head(model, 1, 0)
    assert jnp.all(edited.blocks[1].attention.output_projections[0] == 0)
    assert jnp.all(edited.blocks[1].attention.output_projections[1]
                   == model.blocks[1].attention.output_projections[1])  # fmt: skip
    assert jnp.all(edited.blocks[0].attention.output_projections
                   == model.blocks[0].attention.output_projections)  # fmt: skip
    with pytest.raises(ValueError, match="head in"):
        zero_head(model, 1, 2)


def test_patching_a_run_into_itself_changes_nothing(model, windows):
    clean, corrupted = windows[2, :-1], windows[3, :-1]
    clean_run = run_with_heads(model, clean)
    none_kept = jnp.zeros((2, 2))
    itself = run_with_heads(model, clean, none_kept, clean_run.heads)
    assert jnp.allclose(itself.logits, clean_run.logits, atol=1e-5)
    # Every head of every block patched from the clean run: the attention of the corrupted run
    # is the clean run's, but its residual stream still starts from its own symbols.
    patched = run_with_heads(model, corrupted, none_kept, clean_run.heads)
    assert jnp.abs(patched.logits - clean_run.logits).max() > 1e-3
    assert jnp.abs(patched.logits - model(corrupted)).max() > 1e-3


def test_mean_ablation_replaces_a_head_by_its_mean(model, windows):
    inputs = windows[:, :-1]
    mean = mean_head_outputs(model, inputs)
    outputs = jax.vmap(lambda s: run_with_heads(model, s).heads)(inputs)
    assert jnp.allclose(mean, outputs.mean(0), atol=1e-6)
    keep = jnp.ones((2, 2)).at[0, 1].set(0.0)
    run = run_with_heads(model, inputs[0], keep, mean)
    assert jnp.allclose(run.heads[0, 1], mean[0, 1], atol=1e-6)
    assert jnp.allclose(run.heads[0, 0], outputs[0, 0, 0], atol=1e-5)


def test_ablation_losses(model, windows):
    intact, zero = ablation_losses(model, windows, chunk=4)
    assert intact.shape == (6,) and zero.shape == (2, 2, 6)
    direct = per_position_losses(model, windows).mean(-1)
    assert np.allclose(intact, direct, atol=1e-5)
    by_edit = per_position_losses(zero_head(model, 1, 0), windows).mean(-1)
    assert np.allclose(zero[1, 0], by_edit, atol=1e-5)
    assert not np.allclose(zero[1, 1], by_edit, atol=1e-4)  # control: the wrong head


def test_the_logit_lens_ends_at_the_models_loss(model, windows):
    lens = logit_lens_losses(model, windows, chunk=4)
    assert lens.shape == (3,)
    assert np.isclose(lens[-1], float(per_position_losses(model, windows).mean()), atol=1e-5)
    assert not np.isclose(lens[0], lens[-1], atol=1e-3)


def test_prefix_matching_scores_on_a_hand_made_attention():
    # A one-block, one-head model whose attention we replace by an exact induction pattern
    # cannot be built from weights; instead the score is checked on the quantity it averages.
    config = tiny_lm(window=12, block=lm_block(8, 2, 8))
    model = LanguageModel(config, key=jax.random.PRNGKey(4))
    sequences = repeated_random_sequences(jax.random.PRNGKey(5), 3, 6, 7)
    assert sequences.shape == (3, 12) and jnp.all(sequences[:, :6] == sequences[:, 6:])
    scores = prefix_matching_scores(model, sequences)
    maps = jax.vmap(model.attention_maps)(sequences)  # (B, M, H, N, N)
    by_hand = np.mean([[[maps[b, 0, h, n - 5, n] for n in range(6, 12)] for b in range(3)]
                       for h in range(2)], axis=(1, 2))  # fmt: skip
    assert np.allclose(scores[0], by_hand, atol=1e-6)
    # control: the weight on the copy itself (n - L) is another number
    itself = np.mean([[maps[b, 0, 0, n - 6, n] for n in range(6, 12)] for b in range(3)])
    assert not np.isclose(scores[0, 0], itself, atol=1e-4)
    # an untrained head spreads its weight: close to the mean of 1/(n+1)
    assert np.all(np.abs(scores - np.mean(1 / (np.arange(6, 12) + 1))) < 0.1)


def test_copying_scores_of_a_copying_and_an_anticopying_head():
    config = tiny_lm(vocab_size=8, window=4, block=lm_block(8, 2, 8))
    model = LanguageModel(config, key=jax.random.PRNGKey(6))
    eye = jnp.eye(8)
    attention = model.blocks[0].attention
    # V_0 = I and V_1 = -I through the factored maps (O_h W_h), embeddings and read-out I
    values = jnp.stack([eye[:4], eye[4:]])  # W_h, (H, Dv, D)
    outputs = jnp.stack([eye[:, :4], -eye[:, 4:]])  # O_h, (H, D, Dv)
    assert attention.value_projections.shape == values.shape
    model = eqx.tree_at(
        lambda m: (m.blocks[0].attention.value_projections,
                   m.blocks[0].attention.output_projections,
                   m.tokeniser.table, m.unembedding.weight),
        model, (values, outputs, eye, eye))  # fmt: skip
    scores = copying_scores(model)
    # O_0 W_0 keeps coordinates 0-3 (4 eigenvalues 1, 4 zeros); O_1 W_1 negates 4-7
    assert np.allclose(scores, [[1.0, -1.0]], atol=1e-6)


def test_in_context_learning_score():
    losses = jnp.linspace(3.0, 1.0, 64)
    score = in_context_learning_score(losses)
    assert np.isclose(score, losses[62] - losses[6])
    assert score < 0
    with pytest.raises(ValueError, match="early < late"):
        in_context_learning_score(losses, early=10, late=5)


def test_the_repeated_sequences_task(model):
    task = RepeatedSequences(vocab_size=11, length=8, num_validation=4)
    batch = task.batch(jax.random.PRNGKey(7), 5)
    assert batch.shape == (5, 17)
    assert jnp.all(batch[:, :8] == batch[:, 8:16]) and jnp.all(batch[:, 16] == batch[:, 0])
    loss, _ = task.loss(model, batch)
    assert np.isclose(float(loss), float(per_position_losses(model, batch).mean()), atol=1e-5)
    report = task.evaluate(model)
    assert set(report) == {"first_half", "second_half"} | {
        f"prefix_{m}_{h}" for m in range(2) for h in range(2)
    }
    # untrained: both halves near ln |V|
    assert abs(report["first_half"] - np.log(11)) < 0.5


def test_speaker_and_line_labels():
    text = "Ham.\nTo be, or not.\n\nHor.\nMy lord.\n\nFirst Clown.\nAy.\n"
    speakers = speaker_name_labels(text)
    marked = "".join(c for c, s in zip(text, speakers) if s)
    assert marked == "Hor.First Clown."  # "Ham." follows no blank line
    columns = line_position_labels("abcdefghij\nab", width=4, classes=2)
    assert columns.tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0]


def test_a_probe_reads_a_linear_property_and_not_its_control():
    key_x, key_c = jax.random.split(jax.random.PRNGKey(8))
    symbols = jax.random.randint(key_x, (4000,), 0, 40)
    table = jax.random.normal(jax.random.PRNGKey(9), (40, 6))
    # features: the symbol's embedding plus a coordinate that carries the label
    labels = (jax.random.uniform(key_c, (4000,)) < 0.5).astype(jnp.int32)
    features = jnp.concatenate([table[symbols], 2.0 * labels[:, None] - 1.0], axis=1)
    train, test = slice(0, 3000), slice(3000, None)
    probe = fit_probe(features[train], labels[train], 2)
    assert probe_accuracy(probe, features[test], labels[test]) > 0.99
    # The control task labels each symbol at random: the embedding lets the probe memorise it
    # on the training symbols, the label coordinate does not help.
    control = control_labels(symbols, labels, jax.random.PRNGKey(10))
    assert all(len(set(control[np.asarray(symbols) == s].tolist())) <= 1 for s in range(40))
    control_probe = fit_probe(features[train], control[train], 2)
    accuracy = probe_accuracy(control_probe, features[test], control[test])
    assert accuracy < 0.99
    with pytest.raises(ValueError, match="differ in shape"):
        control_labels(symbols, labels[:10], jax.random.PRNGKey(0))


def test_bad_models_are_refused(model):
    with pytest.raises(ValueError, match="scan_blocks=False"):
        run_with_heads(model.stacked(), jnp.arange(4))
    with pytest.raises(ValueError, match="keep must have shape"):
        run_with_heads(model, jnp.arange(4), jnp.ones((3, 2)))
    with pytest.raises(TypeError, match="LanguageModel"):
        run_with_heads(object(), jnp.arange(4))


# -- the encoder-decoder: cross-attention heads and source positions ---------------------------

DATES_CONFIG = tiny_encoder_decoder(9, 7, 6, 5, encoder_layers=1, decoder_layers=2)


@pytest.fixture(scope="module")
def translator():
    # weights drawn larger than at initialisation, so that every head matters visibly
    model = DATES_CONFIG.build(key=jax.random.PRNGKey(4))
    leaves, tree = jax.tree_util.tree_flatten(model)
    keys = jax.random.split(jax.random.PRNGKey(5), len(leaves))
    leaves = [
        x + 0.5 * jax.random.normal(k, x.shape) if eqx.is_inexact_array(x) else x
        for x, k in zip(leaves, keys)
    ]
    return jax.tree_util.tree_unflatten(tree, leaves)


@pytest.fixture(scope="module")
def date_pairs():
    # clean and corrupted sources (the last position padding in both), teacher-forced targets
    # whose last position is padding
    clean = jnp.array([[3, 4, 5, 6, 7, 0], [8, 3, 3, 5, 1, 0]])
    corrupted = jnp.array([[3, 4, 8, 2, 7, 0], [1, 6, 3, 5, 4, 0]])
    target_inputs = jnp.array([[1, 3, 4, 5, 0], [1, 6, 5, 4, 0]])
    targets = jnp.array([[3, 4, 5, 2, 0], [6, 5, 4, 2, 0]])
    return clean, corrupted, target_inputs, targets


def decoder_by_hand(model, source, target_inputs, patch=None, clean_source=None):
    """The decoder written out; cross-attention head ``patch`` = (l, h) taken from clean_source.

    Returns the logits and, per layer, the cross-attention's input (its queries' tokens).
    """
    n = target_inputs.shape[0]
    mask = padding_mask(source != model.pad_id, n)
    memory = model.encode(source)
    clean_inputs = None
    if clean_source is not None:
        _, clean_inputs = decoder_by_hand(model, clean_source, target_inputs)
        clean_memory = model.encode(clean_source)
        clean_mask = padding_mask(clean_source != model.pad_id, n)

    def head_output(layer, y, memory, mask, h):
        # head h's share of the cross-attention, A_hᵀ Z V_hᵀ as rows
        a = layer.cross_attention
        weights = a.attention_weights(layer.cross_attention_norm(y), mask, context=memory)
        return weights[h].T @ memory @ a.value_maps()[h].T

    y = model.target_positions(model.target_embedding(target_inputs))
    inputs = []
    for l, layer in enumerate(model.decoder):
        y = layer.block.attention_residual(y, causal_mask(n))
        inputs.append(y)
        total = 0.0
        for h in range(layer.cross_attention.num_heads):
            if patch == (l, h):
                total = total + head_output(layer, clean_inputs[l], clean_memory, clean_mask, h)
            else:
                total = total + head_output(layer, y, memory, mask, h)
        y = layer.block.mlp_residual(y + total)
    return jax.vmap(model.unembedding)(model.decoder_norm(y)), inputs


def test_the_decoder_with_every_head_kept_is_the_model(translator, date_pairs):
    clean, _, target_inputs, _ = date_pairs
    run = run_decoder_with_heads(translator, clean[0], target_inputs[0])
    assert jnp.allclose(run.logits, translator(clean[0], target_inputs[0]), atol=1e-5)
    weights = translator.cross_attention_weights(clean[0], target_inputs[0])
    assert jnp.allclose(run.weights, weights, atol=1e-6)
    assert run.heads.shape == (2, 2, 5, 16) and run.memory.shape == (6, 16)
    hand, _ = decoder_by_hand(translator, clean[0], target_inputs[0])
    assert jnp.allclose(hand, run.logits, atol=1e-5)


def test_the_decoders_residual_stream_ends_in_its_logits(translator, date_pairs):
    clean, _, target_inputs, _ = date_pairs
    run = run_decoder_with_heads(translator, clean[0], target_inputs[0])
    assert run.residuals.shape == (3, 5, 16)
    embedded = translator.target_positions(translator.target_embedding(target_inputs[0]))
    assert jnp.allclose(run.residuals[0], embedded)
    read_out = jax.vmap(translator.unembedding)(translator.decoder_norm(run.residuals[-1]))
    assert jnp.allclose(read_out, run.logits, atol=1e-6)
    too_early = jax.vmap(translator.unembedding)(translator.decoder_norm(run.residuals[1]))
    assert not jnp.allclose(too_early, run.logits, atol=1e-3)  # control: one layer short


@pytest.mark.parametrize("layer, head", [(0, 0), (0, 1), (1, 0)])
def test_a_patched_head_is_the_hand_written_patch(translator, date_pairs, layer, head):
    clean, corrupted, target_inputs, _ = date_pairs
    c, x, t = clean[0], corrupted[0], target_inputs[0]
    clean_run = run_decoder_with_heads(translator, c, t)
    keep = jnp.ones((2, 2)).at[layer, head].set(0.0)
    patched = run_decoder_with_heads(translator, x, t, keep, clean_run.heads).logits
    hand, _ = decoder_by_hand(translator, x, t, (layer, head), c)
    assert jnp.abs(patched - hand).max() < 1e-5
    corrupted_logits = translator(x, t)
    assert jnp.abs(patched - corrupted_logits).max() > 1e-2  # the patch changed the run
    other = (layer, 1 - head)  # control: the hand-written patch of another head is told apart
    assert jnp.abs(patched - decoder_by_hand(translator, x, t, other, c)[0]).max() > 1e-2


def test_patching_every_head_or_every_position_restores_the_clean_run(translator, date_pairs):
    """The decoder reads the source only through cross-attention, so all of it patched is clean."""
    clean, corrupted, target_inputs, _ = date_pairs
    c, x, t = clean[1], corrupted[1], target_inputs[1]
    clean_run = run_decoder_with_heads(translator, c, t)
    every = run_decoder_with_heads(translator, x, t, jnp.zeros((2, 2)), clean_run.heads)
    assert jnp.allclose(every.logits, clean_run.logits, atol=1e-5)
    # one layer's heads are not enough: the other layer still reads the corrupted source
    first = run_decoder_with_heads(
        translator, x, t, jnp.array([[0.0, 0.0], [1.0, 1.0]]), clean_run.heads
    )
    assert jnp.abs(first.logits - clean_run.logits).max() > 1e-2
    memory = run_decoder_with_heads(translator, x, t, memory=clean_run.memory)
    assert jnp.allclose(memory.logits, clean_run.logits, atol=1e-5)


def test_cross_head_patching_is_each_head_patched_alone(translator, date_pairs):
    clean, corrupted, target_inputs, targets = date_pairs
    clean_nats, corrupted_nats, patched = cross_head_patching(
        translator, clean, corrupted, target_inputs, targets
    )
    assert clean_nats.shape == corrupted_nats.shape == (2, 5) and patched.shape == (2, 2, 2, 5)
    assert jnp.all(clean_nats[:, -1] == 0) and jnp.all(patched[..., -1] == 0)  # padding scores 0
    for b in range(2):
        log_p = jax.nn.log_softmax(translator(clean[b], target_inputs[b]))
        expected = -log_p[jnp.arange(4), targets[b, :4]]
        assert jnp.allclose(clean_nats[b, :4], expected, atol=1e-5)
        hand, _ = decoder_by_hand(translator, corrupted[b], target_inputs[b], (1, 1), clean[b])
        expected = -jax.nn.log_softmax(hand)[jnp.arange(4), targets[b, :4]]
        assert jnp.allclose(patched[1, 1, b, :4], expected, atol=1e-4)
        assert jnp.abs(patched[1, 0, b, :4] - expected).max() > 1e-3  # another head differs


def test_source_position_patching_is_one_encoder_output_patched(translator, date_pairs):
    clean, corrupted, target_inputs, targets = date_pairs
    _, corrupted_nats, patched = source_position_patching(
        translator, clean, corrupted, target_inputs, targets
    )
    assert patched.shape == (6, 2, 5)
    # where the sources agree the encoder's outputs may still differ (it reads the whole source),
    # but the padding at the end is read by no head: patching it changes nothing
    assert jnp.allclose(patched[5], corrupted_nats, atol=1e-5)
    assert jnp.abs(patched[2] - corrupted_nats).max() > 1e-3  # a position that differs does
    memory = jnp.asarray(translator.encode(corrupted[0])).at[2].set(translator.encode(clean[0])[2])
    run = run_decoder_with_heads(translator, corrupted[0], target_inputs[0], memory=memory)
    expected = -jax.nn.log_softmax(run.logits)[jnp.arange(4), targets[0, :4]]
    assert jnp.allclose(patched[2, 0, :4], expected, atol=1e-5)


def test_bad_decoder_runs_are_refused(model, translator, date_pairs):
    clean, _, target_inputs, _ = date_pairs
    with pytest.raises(TypeError, match="EncoderDecoder"):
        run_decoder_with_heads(model, clean[0], target_inputs[0])
    with pytest.raises(ValueError, match="one weight per cross-attention head"):
        run_decoder_with_heads(translator, clean[0], target_inputs[0], jnp.ones((2, 3)))
    with pytest.raises(ValueError, match="memory must have"):
        run_decoder_with_heads(translator, clean[0], target_inputs[0], memory=jnp.ones((6, 8)))
