"""Evaluation: bits per character over windows that score each token once, and the intervals.

Bits per character is checked against three independent things: a model whose output is uniform
(log2 |V| bits per token, exactly), a two-symbol model computed by hand, and the same losses
summed window by window from the model's own call on unpadded slices. The windows are checked
by enumeration; the intervals against SciPy's binomtest and against their exact coverage.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import binom, binomtest

from transformer_intro.datasets.shakespeare import VALIDATION_PLAYS, load_play, load_shakespeare
from transformer_intro.models import SHAKESPEARE_CONFIG, LanguageModel
from transformer_intro.models.quantised import dequantise_model, quantise_model
from transformer_intro.tokenisers import BytePairEncoding, Vocabulary
from transformer_intro.training.evaluation import (
    TextLoss,
    character_counts,
    clopper_pearson_interval,
    held_out_passages,
    scoring_windows,
    text_loss,
    token_loss,
    wilson_interval,
)

TEXT = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer"


class Uniform(eqx.Module):
    """Logits of zero everywhere: every token has probability 1 / |V|."""

    vocab_size: int = eqx.field(static=True)

    def batched(self, inputs):
        return jnp.zeros((*inputs.shape, self.vocab_size))


class Bigram(eqx.Module):
    """log p(next | current) from a fixed table: the last token alone decides."""

    log_table: jax.Array

    def batched(self, inputs):
        return self.log_table[inputs]


# ---------------------------------------------------------------------------------------------
# Windows
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("length", [2, 3, 10, 64, 65, 66, 129, 1000])
@pytest.mark.parametrize(
    ("context", "stride"), [(1, 1), (8, 8), (8, 3), (8, 1), (64, 64), (64, 32)]
)
def test_windows_score_every_token_after_the_first_once(length, context, stride):
    ids = np.arange(length) * 7 % 50
    w = scoring_windows(ids, context, stride)
    scored = np.sort(w.positions[w.scored])
    assert np.array_equal(scored, np.arange(1, length))  # no gap, no token twice
    inside = w.positions >= 0
    assert np.array_equal(w.targets[inside], ids[w.positions[inside]])
    assert np.array_equal(w.inputs[inside], ids[w.positions[inside] - 1])
    # Each scored target after the first window has at least N - stride tokens before it.
    place = np.broadcast_to(np.arange(context), w.scored.shape)
    later = w.scored.copy()
    later[0] = False
    assert (place[later] >= context - stride).all()
    assert w.inputs.shape == (w.inputs.shape[0], context)
    if w.inputs.shape[0] > 1:  # no window beyond the one that scores the last token
        assert w.scored[-1].any()


def test_windows_control_scoring_every_target_counts_some_twice():
    w = scoring_windows(np.arange(100) % 9, 16, 8)
    every = w.positions[w.positions >= 0]  # what scoring all targets of each window would count
    assert every.size > np.unique(every).size


@pytest.mark.parametrize(
    ("ids", "context", "stride", "message"),
    [
        (np.array([3]), 4, None, "at least two"),
        (np.arange(10), 0, None, "context"),
        (np.arange(10), 4, 5, "stride"),
        (np.arange(10), 4, 0, "stride"),
    ],
)
def test_windows_reject_bad_arguments(ids, context, stride, message):
    with pytest.raises(ValueError, match=message):
        scoring_windows(ids, context, stride)


# ---------------------------------------------------------------------------------------------
# Bits per character
# ---------------------------------------------------------------------------------------------


def test_uniform_model_gives_log2_v_bits_per_token_and_that_per_character():
    bpe = BytePairEncoding.train(TEXT * 4, 300)
    ids = np.asarray(bpe.encode(TEXT))
    assert ids.size < len(TEXT)  # some tokens spell several characters
    result = text_loss(Uniform(len(bpe)), bpe, TEXT, context=8)
    assert result.tokens == ids.size - 1
    first = len(bpe.decode([int(ids[0])]))
    assert result.characters == len(TEXT) - first  # the first token is read, never predicted
    assert result.bits_per_token == pytest.approx(math.log2(len(bpe)), rel=1e-6)
    expected = math.log2(len(bpe)) * (ids.size - 1) / (len(TEXT) - first)
    assert result.bits_per_character == pytest.approx(expected, rel=1e-6)


def test_a_bigram_model_by_hand():
    vocabulary = Vocabulary("ab")
    p = np.array([[0.25, 0.75], [0.5, 0.5]])  # p(next | a), p(next | b)
    model = Bigram(jnp.log(jnp.asarray(p, jnp.float32)))
    # "abab": a->b (0.75), b->a (0.5), a->b (0.75); 3 predicted characters.
    hand = (2 * math.log2(4 / 3) + 1) / 3
    for context in (1, 2, 3, 8):  # a bigram needs one token of context: every cut is the same
        result = text_loss(model, vocabulary, "abab", context=context)
        assert (result.tokens, result.characters) == (3, 3)
        assert result.bits_per_character == pytest.approx(hand, rel=1e-6)


@pytest.fixture(scope="module")
def tiny_model():
    config = SHAKESPEARE_CONFIG.replace(
        block=SHAKESPEARE_CONFIG.block.replace(
            dim=32, num_heads=2, mlp_hidden_dim=64, value_dim=16
        ),
        vocab_size=40,
        window=16,
        num_blocks=2,
    )
    return LanguageModel(config, key=jax.random.PRNGKey(3))


def by_hand(model, ids, context, stride):
    """The scored nats, window by window, from the model's own call on unpadded slices."""
    total, scored_up_to, start = 0.0, 0, 0
    while scored_up_to < len(ids) - 1:
        window = ids[start : start + context + 1]
        log_p = jax.nn.log_softmax(model(jnp.asarray(window[:-1])), axis=-1)
        nats = -np.take_along_axis(np.asarray(log_p), window[1:, None], axis=1)[:, 0]
        targets = start + 1 + np.arange(len(window) - 1)
        total += nats[targets > scored_up_to].sum()
        scored_up_to = targets[-1]
        start += stride
    return total


@pytest.mark.parametrize(("context", "stride"), [(16, 16), (16, 5), (7, 7)])
def test_windows_equal_the_model_called_on_each_slice(tiny_model, context, stride):
    ids = np.random.default_rng(0).integers(0, 40, 101)
    counts = np.ones(40, np.int64)
    result = token_loss(tiny_model, ids, counts, context=context, stride=stride, batch_size=3)
    assert result.nats == pytest.approx(by_hand(tiny_model, ids, context, stride), rel=1e-5)
    assert result.tokens == result.characters == 100
    # Control: another cut of the same text gives another sum (context matters), well beyond
    # the agreement asserted above.
    other = token_loss(tiny_model, ids, counts, context=context, stride=1)
    assert other.nats == pytest.approx(by_hand(tiny_model, ids, context, 1), rel=1e-5)
    assert abs(other.nats - result.nats) > 1e-4 * result.nats


def test_batches_do_not_change_the_loss(tiny_model):
    ids = np.random.default_rng(1).integers(0, 40, 77)
    counts = np.ones(40, np.int64)
    one = token_loss(tiny_model, ids, counts, context=16)
    four = token_loss(tiny_model, ids, counts, context=16, batch_size=4)
    assert four.nats == pytest.approx(one.nats, rel=1e-6) and four.windows == one.windows == 5


def test_a_quantised_model_is_read_through_its_cache(tiny_model):
    ids = np.random.default_rng(2).integers(0, 40, 40)
    counts = np.ones(40, np.int64)
    quantised = quantise_model(tiny_model, "Q8_0")
    kept = token_loss(quantised, ids, counts, context=16)
    floats = token_loss(dequantise_model(quantised), ids, counts, context=16)
    assert kept.nats == pytest.approx(floats.nats, rel=1e-4)
    original = token_loss(tiny_model, ids, counts, context=16)
    assert kept.nats != original.nats  # control: the blocks' rounding is there


def test_texts_add_and_each_is_read_on_its_own():
    vocabulary = Vocabulary("ab")
    model = Bigram(jnp.log(jnp.asarray([[0.25, 0.75], [0.5, 0.5]], jnp.float32)))
    both = text_loss(model, vocabulary, ["abab", "ba"], context=4)
    assert (both.tokens, both.windows) == (4, 2)  # "ba" adds one prediction, b->a
    assert both.nats == pytest.approx(2 * math.log(4 / 3) + 2 * math.log(2), rel=1e-6)
    separate = text_loss(model, vocabulary, "abab", context=4) + text_loss(
        model, vocabulary, "ba", context=4
    )
    assert both.nats == pytest.approx(separate.nats, rel=1e-6)
    assert isinstance(both, TextLoss) and both.characters == separate.characters == 4


def test_character_counts_count_a_split_character_once():
    text = "café, naïve über"
    bpe = BytePairEncoding.train(text * 3, 262)
    counts = character_counts(bpe)
    assert int(counts[np.asarray(bpe.encode(text))].sum()) == len(text)
    single_bytes = counts[: bpe.num_bytes]
    assert set(single_bytes.tolist()) == {0, 1}  # a continuation byte starts no character
    assert character_counts(Vocabulary("xyz")).tolist() == [1, 1, 1]


def test_a_tokeniser_that_loses_characters_is_an_error():
    class Lossy(Vocabulary):
        def encode(self, text):
            return super().encode(text.replace("b", ""))

    with pytest.raises(ValueError, match="spell 2 characters, but it has 4"):
        text_loss(Uniform(2), Lossy("ab"), "abab", context=4)


def test_characters_must_cover_every_id():
    with pytest.raises(ValueError, match="one count per token id"):
        token_loss(Uniform(5), np.array([0, 4, 2]), np.ones(3, np.int64), context=4)


def test_held_out_passages_are_the_middle_of_each_held_out_play():
    passages = held_out_passages()
    assert [len(p) for p in passages] == [25_000] * 4
    train = load_shakespeare("train")
    for name, passage in zip(VALIDATION_PLAYS, passages, strict=True):
        play = load_play(name)
        start = play.index(passage)
        assert abs(start - (len(play) - len(passage) - start)) <= 1  # centred
        assert passage[1000:1200] not in train  # held out: not in the training plays
    with pytest.raises(ValueError, match="fewer than"):
        held_out_passages(10**6)


# ---------------------------------------------------------------------------------------------
# Intervals
# ---------------------------------------------------------------------------------------------

CASES = [(0, 1), (1, 1), (0, 10), (10, 10), (3, 10), (71, 200), (88, 200), (1, 200), (199, 200),
         (500, 1000), (0, 5000)]  # fmt: skip


@pytest.mark.parametrize(("k", "n"), CASES)
def test_wilson_interval_equals_scipys(k, n):
    reference = binomtest(k, n).proportion_ci(0.95, method="wilson")
    low, high = wilson_interval(k, n)
    assert low == pytest.approx(reference.low, abs=1e-9)
    assert high == pytest.approx(reference.high, abs=1e-9)
    assert 0 <= low <= k / n <= high <= 1


@pytest.mark.parametrize(("k", "n"), CASES)
def test_clopper_pearson_interval_equals_scipys(k, n):
    reference = binomtest(k, n).proportion_ci(0.95, method="exact")
    low, high = clopper_pearson_interval(k, n)
    assert low == pytest.approx(reference.low, abs=1e-9)
    assert high == pytest.approx(reference.high, abs=1e-9)
    assert 0 <= low <= k / n <= high <= 1


def test_worked_values_from_the_formulas():
    z = 1.959963984540054
    n = 10  # no success: Wilson's high end is z^2 / (n + z^2), the exact one 1 - 0.025^(1/n)
    assert wilson_interval(0, n) == (0.0, pytest.approx(z * z / (n + z * z), rel=1e-12))
    assert clopper_pearson_interval(0, n)[1] == pytest.approx(1 - 0.025 ** (1 / n), rel=1e-9)
    assert wilson_interval(n, n) == (pytest.approx(n / (n + z * z), rel=1e-12), 1.0)


def coverage(interval, p, n):
    """The exact probability that the interval from k ~ Binomial(n, p) contains p."""
    ks = np.arange(n + 1)
    inside = np.array([interval(k, n)[0] <= p <= interval(k, n)[1] for k in ks])
    return float(binom.pmf(ks, n, p)[inside].sum())


def wald(k, n):
    half = 1.96 * math.sqrt(k / n * (1 - k / n) / n)
    return k / n - half, k / n + half


@pytest.mark.parametrize("p", [0.05, 0.4])
def test_coverage_by_exact_enumeration(p):
    assert coverage(clopper_pearson_interval, p, 200) >= 0.95
    assert 0.93 < coverage(wilson_interval, p, 200) < 0.97
    # Control: the textbook interval k/n +- 1.96 se falls short where the proportion is small.
    if p < 0.1:
        assert coverage(wald, p, 200) < 0.93


@pytest.mark.parametrize(
    ("k", "n", "message"),
    [(5, 4, "between 0 and trials"), (0, 0, "at least 1"), (-1, 10, "between 0"),
     (1.5, 10, "whole number"), (3, 10.5, "whole number")],
)  # fmt: skip
def test_bad_counts_name_the_problem(k, n, message):
    for interval in (wilson_interval, clopper_pearson_interval):
        with pytest.raises(ValueError, match=message):
            interval(k, n)


def test_confidence_must_be_a_probability():
    with pytest.raises(ValueError, match="confidence"):
        wilson_interval(3, 10, confidence=95)
    narrow, wide = wilson_interval(30, 100, 0.5), wilson_interval(30, 100, 0.99)
    assert wide[0] < narrow[0] < narrow[1] < wide[1]
