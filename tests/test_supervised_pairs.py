"""The task of supervised pairs: the loss counts the answer tokens only, and fit trains on it."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from factories import lm_block, tiny_lm

from transformer_intro.adapters import LoRALanguageModel
from transformer_intro.models import LanguageModel
from transformer_intro.tasks import SupervisedPairs
from transformer_intro.training import Recipe, fit

CONFIG = tiny_lm(vocab_size=11, num_blocks=2, block=lm_block(num_heads=4))
PAIRS = [([1, 2, 3], [4, 5]), ([6, 7], [8, 9, 10, 3]), ([2], [5])]


def _model():
    return LanguageModel(CONFIG, key=jax.random.PRNGKey(0))


def _all(task):
    """Every training pair, in order, as one batch."""
    return {"inputs": task.inputs, "targets": task.targets, "answer_mask": task.answer_mask}


def _log_softmax(logits):
    return logits - jax.scipy.special.logsumexp(logits, axis=-1, keepdims=True)


# One compiled forward pass per sequence length: run op by op, the passes made the loss test
# take 14.4 s against 8.9.
_forward = eqx.filter_jit(lambda model, tokens: model(tokens))


def _by_hand(model, pairs, count_prompt=False):
    """Mean -log p over the answer tokens (with the prompt's too if ``count_prompt``).

    Each pair runs alone, unpadded: row n of the logits of prompt + answer[:-1] predicts
    token n + 1.
    """
    terms = []
    for prompt, answer in pairs:
        tokens = prompt + answer
        log_p = _log_softmax(_forward(model, jnp.array(tokens[:-1])))
        first = 0 if count_prompt else len(prompt) - 1
        terms += [-log_p[n, tokens[n + 1]] for n in range(first, len(tokens) - 1)]
    return float(np.mean(terms))


def test_packing_and_mask():
    task = SupervisedPairs(PAIRS, window=8, vocab_size=11, pad_id=0)
    assert task.inputs.shape == task.targets.shape == task.answer_mask.shape == (3, 8)
    np.testing.assert_array_equal(task.inputs[0], [1, 2, 3, 4, 5, 0, 0, 0])
    np.testing.assert_array_equal(task.targets[0], [2, 3, 4, 5, 0, 0, 0, 0])
    np.testing.assert_array_equal(task.answer_mask[0], [0, 0, 1, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(task.answer_mask[1], [0, 1, 1, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(task.answer_mask[2], [1, 0, 0, 0, 0, 0, 0, 0])
    assert int(task.answer_mask.sum()) == sum(len(a) for _, a in PAIRS)


def test_loss_is_the_mean_over_answer_tokens_and_the_prompt_control_is_rejected():
    model = _model()
    task = SupervisedPairs(PAIRS, window=8, vocab_size=11)
    loss, metrics = task.loss(model, _all(task))
    expected = _by_hand(model, PAIRS)
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
    # control: counting the prompt's tokens too is another number, which the check refuses
    control = _by_hand(model, PAIRS, count_prompt=True)
    assert abs(control - expected) > 1e-3
    assert not np.isclose(float(loss), control, rtol=1e-5)
    assert 0.0 <= float(metrics["accuracy"]) <= 1.0


def test_padding_never_counts():
    model = _model()
    task = SupervisedPairs(PAIRS, window=8, vocab_size=11, pad_id=0)
    other = SupervisedPairs(PAIRS, window=8, vocab_size=11, pad_id=7)
    padding = ~task.answer_mask & (jnp.arange(8) >= jnp.array([[4], [5], [1]]))
    assert np.all(np.asarray(task.targets)[np.asarray(padding)] == 0)
    a, b = task.loss(model, _all(task))[0], other.loss(model, _all(other))[0]
    np.testing.assert_allclose(float(a), float(b), rtol=1e-6)
    # Scrambling every padded target leaves the loss exactly as it was.
    batch = _all(task)
    scrambled = dict(batch, targets=jnp.where(padding, 9, batch["targets"]))
    assert float(task.loss(model, scrambled)[0]) == float(a)


def test_prompt_targets_do_not_count_and_answer_targets_do():
    model = _model()
    task = SupervisedPairs(PAIRS, window=8, vocab_size=11)
    batch = _all(task)
    loss = float(task.loss(model, batch)[0])
    prompt_changed = dict(batch, targets=batch["targets"].at[0, 0].set(9))  # predicts prompt 2
    assert not batch["answer_mask"][0, 0]
    assert float(task.loss(model, prompt_changed)[0]) == loss
    answer_changed = dict(batch, targets=batch["targets"].at[0, 2].set(9))  # predicts answer 4
    assert batch["answer_mask"][0, 2]
    assert abs(float(task.loss(model, answer_changed)[0]) - loss) > 1e-4


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        ([([1, 2], [])], "empty answer"),
        ([([], [1, 2])], "empty prompt"),
        ([([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])], "longer than the model's window of 8"),
        ([([1, 2], [11])], r"outside the vocabulary \[0, 11\)"),
        ([([-1, 2], [3])], "outside the vocabulary"),
        ([([1.5, 2], [3])], "not ids"),
        ([], "no pairs"),
    ],
)
def test_bad_pairs_are_refused_by_name(pairs, message):
    with pytest.raises(ValueError, match=message):
        SupervisedPairs(pairs, window=8, vocab_size=11)


def test_a_pair_of_exactly_window_plus_one_tokens_fits():
    task = SupervisedPairs([([1, 2, 3, 4], [5, 6, 7, 8, 9])], window=8, vocab_size=11)
    np.testing.assert_array_equal(task.answer_mask[0], [0, 0, 0, 1, 1, 1, 1, 1])


def test_a_model_of_another_vocabulary_is_refused():
    task = SupervisedPairs(PAIRS, window=8, vocab_size=12)
    with pytest.raises(ValueError, match="12 symbols"):
        task.loss(_model(), _all(task))


def test_evaluate_needs_test_pairs():
    with pytest.raises(ValueError, match="no test pairs"):
        SupervisedPairs(PAIRS, window=8, vocab_size=11).evaluate(_model())


def test_fit_trains_an_adapter_on_the_answers():
    model = _model()
    task = SupervisedPairs(PAIRS, PAIRS, window=8, vocab_size=11)
    lora = LoRALanguageModel(model, 2, key=jax.random.PRNGKey(1))
    before = task.evaluate(lora)
    assert np.isclose(before["loss"], _by_hand(model, PAIRS), rtol=1e-5)
    recipe = Recipe(steps=60, batch_size=8, learning_rate=2e-2, warmup_steps=5, steps_per_call=20)
    lora, history = fit(lora, task, recipe, progress=False)
    after = task.evaluate(lora)
    assert after["loss"] < before["loss"] - 0.5
    assert after["exact_match"] == 1.0
    # Greedy decoding from each prompt writes the answer, as the exact match says.
    merged = lora.merged()
    for prompt, answer in PAIRS:
        tokens = list(prompt)
        for _ in answer:
            tokens.append(int(_forward(merged, jnp.array(tokens))[-1].argmax()))
        assert tokens[len(prompt) :] == answer
