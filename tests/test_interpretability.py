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

from transformer_intro.interpretability import (
    RepeatedSequences,
    ablation_losses,
    control_labels,
    copying_scores,
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
    run_with_heads,
    speaker_name_labels,
    zero_head,
)
from transformer_intro.models import LanguageModel, LMConfig

CONFIG = LMConfig(vocab_size=11, window=16, dim=16, num_heads=2, num_blocks=2, mlp_hidden_dim=32)


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
    config = LMConfig(vocab_size=7, window=12, dim=8, num_heads=2, num_blocks=1, mlp_hidden_dim=8)
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
    config = LMConfig(vocab_size=8, window=4, dim=8, num_heads=2, num_blocks=1, mlp_hidden_dim=8)
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
