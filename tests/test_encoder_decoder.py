"""The encoder-decoder and the dates data set: padding, causality, cross-attention, errors."""

import copy
import datetime

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from factories import tiny_encoder_decoder, vit_block

from transformer_intro.datasets import dates
from transformer_intro.models.encoder_decoder import DecoderLayer, EncoderDecoder
from transformer_intro.tasks import SequenceToSequence


def sequence_loss(model, sources, target_inputs, targets):
    """The task's teacher-forced loss and per-token accuracy on one batch."""
    task = SequenceToSequence((sources, target_inputs, targets), start_id=dates.START_ID)
    batch = {"sources": sources, "target_inputs": target_inputs, "targets": targets}
    loss, metrics = task.loss(model, batch)
    return loss, metrics["accuracy"]


SOURCES = ["Monday 22 April 2019", "4/22/2019", "the 3rd of May 1901", "22.04.2019"]
ISOS = ["2019-04-22", "2019-04-22", "1901-05-03", "2019-04-22"]


def small_model(max_source_length=dates.MAX_SOURCE_LENGTH + 8, seed=0):
    config = tiny_encoder_decoder(
        len(dates.SOURCE_VOCABULARY),
        len(dates.TARGET_VOCABULARY),
        max_source_length,
        dates.TARGET_LENGTH + 2,
        block=vit_block(mlp_hidden_dim=24),
        encoder_layers=2,
        decoder_layers=2,
    )
    return EncoderDecoder(config, key=jax.random.PRNGKey(seed))


def unmasked(model):
    """The same weights with the padding id set to one no token has.

    Every mask lets padding through.
    """
    leaky = copy.copy(model)
    # The configuration is a static field, which eqx.tree_at cannot replace; and a valid
    # configuration refuses an id outside the vocabularies, so this one is edited in place.
    config = copy.copy(model.config)
    object.__setattr__(config, "pad_id", -1)
    object.__setattr__(leaky, "config", config)
    return leaky


@pytest.fixture(scope="module")
def model():
    return small_model()


@pytest.fixture(scope="module")
def batch():
    sources = dates.encode_sources(SOURCES)
    target_inputs, targets = dates.encode_targets(ISOS)
    return jnp.asarray(sources), jnp.asarray(target_inputs), jnp.asarray(targets)


def logits_and_decoded(model, sources, target_inputs):
    logits = eqx.filter_jit(lambda m, s, t: m.batched(s, t))(model, sources, target_inputs)
    decoded = eqx.filter_jit(lambda m, s: m.greedy_decode(s, dates.START_ID))(model, sources)
    return logits, decoded


# --- padding --------------------------------------------------------------------------------------


def test_more_source_padding_changes_nothing(model, batch):
    sources, target_inputs, _ = batch
    longer = jnp.asarray(dates.encode_sources(SOURCES, length=dates.MAX_SOURCE_LENGTH + 8))
    with jax.default_matmul_precision("highest"):
        logits, decoded = logits_and_decoded(model, sources, target_inputs)
        logits_padded, decoded_padded = logits_and_decoded(model, longer, target_inputs)
    np.testing.assert_allclose(logits_padded, logits, atol=1e-5, rtol=1e-5)
    np.testing.assert_array_equal(decoded_padded, decoded)
    # Negative control: when padding is read like any other token, the extra padding shows.
    with jax.default_matmul_precision("highest"):
        leaky, _ = logits_and_decoded(unmasked(model), sources, target_inputs)
        leaky_padded, _ = logits_and_decoded(unmasked(model), longer, target_inputs)
    assert np.abs(np.asarray(leaky_padded) - np.asarray(leaky)).max() > 1e-3


def test_padded_target_positions_do_not_change_the_loss(model, batch):
    sources, target_inputs, targets = batch
    target_inputs_padded, targets_padded = (
        jnp.asarray(a) for a in dates.encode_targets(ISOS, length=dates.TARGET_LENGTH + 2)
    )
    with jax.default_matmul_precision("highest"):
        loss, accuracy = sequence_loss(model, sources, target_inputs, targets)
        loss_padded, accuracy_padded = sequence_loss(
            model, sources, target_inputs_padded, targets_padded
        )
        # Negative control: scored as a class of its own, the padding moves the loss.
        leaky_loss, _ = sequence_loss(
            unmasked(model), sources, target_inputs_padded, targets_padded
        )
    np.testing.assert_allclose(loss_padded, loss, rtol=1e-6)
    assert accuracy_padded == accuracy
    assert abs(float(leaky_loss) - float(loss)) > 1e-3


def test_loss_is_the_mean_cross_entropy_of_the_real_targets(model, batch):
    sources, target_inputs, targets = batch
    with jax.default_matmul_precision("highest"):
        logits = model.batched(sources, target_inputs)
        loss, _ = sequence_loss(model, sources, target_inputs, targets)
    log_probs = np.asarray(jax.nn.log_softmax(logits, -1))
    picked = np.take_along_axis(log_probs, np.asarray(targets)[..., None], -1)[..., 0]
    real = np.asarray(targets) != dates.PAD_ID
    np.testing.assert_allclose(loss, -picked[real].mean(), rtol=1e-5)


# --- causality and cross-attention ----------------------------------------------------------------


def test_decoder_is_causal_in_its_own_outputs(model, batch):
    sources, target_inputs, _ = batch
    source, target = sources[0], target_inputs[0]
    changed = target.at[6].set((target[6] + 1) % len(dates.TARGET_VOCABULARY))
    with jax.default_matmul_precision("highest"):
        before, after = model(source, target), model(source, changed)
    np.testing.assert_array_equal(after[:6], before[:6])  # exactly: no earlier position reads it
    assert np.abs(np.asarray(after[6:]) - np.asarray(before[6:])).max() > 1e-4


def test_a_decoder_layer_without_the_causal_mask_is_not_causal():
    # Negative control for the test above: the same check catches bidirectional self-attention.
    layer = DecoderLayer(vit_block(dim=8, mlp_hidden_dim=16), key=jax.random.PRNGKey(3))
    y = jax.random.normal(jax.random.PRNGKey(4), (6, 8))
    memory = jax.random.normal(jax.random.PRNGKey(5), (5, 8))
    real = jnp.ones(5, dtype=bool)
    changed = y.at[4].set(jax.random.normal(jax.random.PRNGKey(6), (8,)))
    bidirectional = lambda y: layer.block.attention_residual(y)  # no mask
    assert np.abs(np.asarray(bidirectional(changed)[:4] - bidirectional(y)[:4])).max() > 1e-4
    np.testing.assert_array_equal(layer(changed, memory, real)[:4], layer(y, memory, real)[:4])


def test_cross_attention_weights_sum_to_one_over_the_real_source_tokens(model, batch):
    sources, target_inputs, _ = batch
    with jax.default_matmul_precision("highest"):
        weights = np.asarray(
            jax.vmap(model.cross_attention_weights)(sources, target_inputs)
        )  # (B, L, H, M, N)
    real = np.asarray(sources) != dates.PAD_ID
    for example, is_real in zip(weights, real):
        np.testing.assert_allclose(example[:, :, is_real].sum(axis=2), 1.0, atol=1e-6)
        assert np.all(example[:, :, ~is_real] == 0)
    # Negative control: without the mask the padding draws weight.
    leaky = np.asarray(unmasked(model).cross_attention_weights(sources[1], target_inputs[1]))
    assert leaky[:, :, ~real[1]].sum(axis=2).min() > 1e-2


# --- the fast path and decoding -------------------------------------------------------------------


def test_batched_equals_vmap_of_one_example(model, batch):
    sources, target_inputs, _ = batch
    with jax.default_matmul_precision("highest"):
        fast = model.batched(sources, target_inputs)
        plain = jax.vmap(model)(sources, target_inputs)
        other = jax.vmap(model)(sources[::-1], target_inputs)  # negative control: mismatched pairs
    np.testing.assert_allclose(fast, plain, atol=1e-5, rtol=1e-5)
    assert np.abs(np.asarray(other) - np.asarray(plain)).max() > 1e-3


def test_greedy_decoding_takes_the_argmax_given_its_own_outputs(model, batch):
    sources = batch[0]
    with jax.default_matmul_precision("highest"):
        generated = np.asarray(model.greedy_decode(sources, dates.START_ID))
        inputs = np.concatenate(
            [np.full((len(sources), 1), dates.START_ID), generated[:, :-1]], axis=1
        )
        logits = model.batched(sources, jnp.asarray(inputs, dtype=jnp.int32))
    np.testing.assert_array_equal(np.asarray(logits).argmax(-1), generated)


# --- the data -------------------------------------------------------------------------------------


def test_every_format_names_the_right_date():
    day = datetime.date(2019, 4, 22)
    for name, write in dates.FORMATS.items():
        text = write(day)
        assert len(text) <= dates.MAX_SOURCE_LENGTH, name
        assert all(symbol in dates.SOURCE_VOCABULARY for symbol in text), name
    assert dates.FORMATS["mm/dd/yyyy"](day) == "04/22/2019"
    assert dates.FORMATS["dd.mm.yyyy"](day) == "22.04.2019"
    assert dates.FORMATS["weekday day month year"](day) == "Monday 22 April 2019"
    assert [dates.ordinal(d) for d in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 31)] == [
        "1st",
        "2nd",
        "3rd",
        "4th",
        "11th",
        "12th",
        "13th",
        "21st",
        "22nd",
        "23rd",
        "31st",
    ]


def test_pairs_are_deterministic_and_test_dates_stay_out_of_training():
    train, test = dates.load_splits(3000, 400, seed=0)
    assert (train, test) == dates.load_splits(3000, 400, seed=0)
    assert len(test) == 400 and len(train) == 3000
    train_dates = {iso for _, iso in train}
    assert not train_dates & {iso for _, iso in test}
    assert not {int(iso[:4]) for iso in train_dates} & dates.HELD_OUT_YEARS
    assert sum(int(iso[:4]) in dates.HELD_OUT_YEARS for _, iso in test) == 200
    for text, iso in test[:50]:  # the weekday, where written, is the date's own
        weekday = dates.WEEKDAYS[datetime.date.fromisoformat(iso).weekday()]
        if any(name in text for name in dates.WEEKDAYS) or any(
            name[:3] + "," in text for name in dates.WEEKDAYS
        ):
            assert weekday[:3] in text


def test_targets_are_the_inputs_shifted_by_one():
    inputs, targets = dates.encode_targets(["2019-04-22"], length=dates.TARGET_LENGTH + 1)
    assert inputs[0, 0] == dates.START_ID and targets[0, dates.ISO_LENGTH] == dates.END_ID
    np.testing.assert_array_equal(
        inputs[0, 1 : dates.ISO_LENGTH + 1], targets[0, : dates.ISO_LENGTH]
    )
    assert inputs[0, -1] == targets[0, -1] == dates.PAD_ID
    assert dates.decode_target(targets[0]) == "2019-04-22"


def test_unknown_symbol_and_too_long_date_are_errors():
    with pytest.raises(ValueError, match=r"'Mon 22 Apr 2019 \?'.*'\?'"):
        dates.encode_sources(["Mon 22 Apr 2019 ?"])
    with pytest.raises(ValueError, match="40 characters; the model reads at most 32"):
        dates.encode_sources(["x" * 40])
    with pytest.raises(ValueError, match="longer than the"):
        small_model(max_source_length=16).encode(jnp.zeros(20, dtype=jnp.int32))
    with pytest.raises(ValueError, match="unknown date format"):
        dates.make_pairs(1, seed=0, formats=["dd/mm/yyyy"])
