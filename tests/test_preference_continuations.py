"""DPO for a causal language model: its sampler, its pairs and its task through the one loop."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from factories import tiny_lm

from transformer_intro.models.generation import generate_ids
from transformer_intro.training import Recipe, fit
from transformer_intro.verifier_tasks import (
    PreferenceContinuations,
    continuation_log_probs,
    continuation_matches,
    continuation_preference_pairs,
    sample_continuations,
)

END = 6
PROMPTS = [[1, 2, 3], [4], [2, 2, 5, 1, 3], [3, 1]]


@pytest.fixture(scope="module")
def model():
    return tiny_lm(vocab_size=7, window=16).build(key=jax.random.PRNGKey(0))


def test_greedy_continuations_are_generations_one_prompt_at_a_time(model):
    batched = sample_continuations(
        model, PROMPTS, 4, key=jax.random.PRNGKey(1), temperature=0.0, batch_size=3
    )
    alone = np.stack([generate_ids(model, p, 4) for p in PROMPTS])
    np.testing.assert_array_equal(batched, alone)


def test_a_sample_depends_on_its_key_and_row_not_on_its_batch(model):
    key = jax.random.PRNGKey(2)
    prompts = PROMPTS * 4
    by_three = sample_continuations(model, prompts, 6, key=key, batch_size=3)
    by_eight = sample_continuations(model, prompts, 6, key=key, batch_size=8)
    np.testing.assert_array_equal(by_three, by_eight)
    other = sample_continuations(model, prompts, 6, key=jax.random.PRNGKey(3), batch_size=8)
    assert not np.array_equal(by_eight, other)  # control: the key is used


def test_sampling_refuses_what_it_cannot_sample(model):
    with pytest.raises(ValueError, match="none of them empty"):
        sample_continuations(model, [[1], []], 2, key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="num_tokens"):
        sample_continuations(model, [[1]], 0, key=jax.random.PRNGKey(0))


def test_a_continuation_matches_when_it_begins_with_the_answer():
    samples = np.array([[1, 6, 3], [1, 2, 6], [1, 6, 6], [2, 6, 0]])
    answers = [[1, 6], [1, 6], [1, 6], [1, 6]]
    np.testing.assert_array_equal(
        continuation_matches(samples, answers), [True, False, True, False]
    )
    assert not continuation_matches(np.array([[1, 6]]), [[1, 6, 6]])[0]  # longer than sampled


def test_pairs_hold_the_answer_and_a_wrong_sample_cut_at_its_end(model):
    prompts = [[1 + s % 5, 1 + s // 5] for s in range(25)]  # 25 distinct prompts
    answers = [[1 + s % 3, END] for s in range(25)]
    pairs, right = continuation_preference_pairs(
        model, prompts, answers, key=jax.random.PRNGKey(4), end_id=END, group_size=8
    )
    assert right.shape == (25, 8)
    mixed = right.any(1) & ~right.all(1)
    assert len(pairs) == mixed.sum() > 0
    for prompt, chosen, rejected in pairs:
        s = next(i for i, p in enumerate(prompts) if np.array_equal(p, prompt))
        np.testing.assert_array_equal(chosen, answers[s])
        assert not continuation_matches(rejected[None], [answers[s]])[0]
        assert END not in rejected[:-1]  # cut after its first end token, where it has one
    with pytest.raises(ValueError, match="end token"):
        continuation_preference_pairs(
            model, prompts[:1], [[1, 2]], key=jax.random.PRNGKey(0), end_id=END
        )


def test_a_continuations_log_probability_is_the_sum_over_its_tokens(model):
    pairs = [([1, 2, 3], [4, END], [5, 5, END]), ([2], [3, 3, END], [1, END])]
    task = PreferenceContinuations(pairs, model, window=8, vocab_size=7)
    for s, (prompt, chosen, _) in enumerate(pairs):
        ids = jnp.asarray(prompt + chosen)
        log_p = jax.nn.log_softmax(model(ids[:-1]))
        by_hand = sum(log_p[len(prompt) - 1 + t, y] for t, y in enumerate(chosen))
        assert float(task.reference_chosen[s]) == pytest.approx(float(by_hand), abs=1e-5)
        shifted = sum(log_p[len(prompt) + t - 2, y] for t, y in enumerate(chosen))
        assert abs(float(shifted) - float(by_hand)) > 1e-3  # control: one position off
    whole = continuation_log_probs(model, *task.rejected)
    np.testing.assert_allclose(whole, task.reference_rejected, rtol=1e-6)


def test_dpo_on_continuations_starts_at_log_two_and_trains_through_fit(model):
    rng = np.random.default_rng(0)
    pairs = [(list(rng.integers(1, 6, 3)), [1, 2, END], [3, 4, END]) for _ in range(16)]
    task = PreferenceContinuations(pairs, model, window=8, vocab_size=7, beta=0.5, chunk=5)
    before = task.evaluate(model)
    assert before["loss"] == pytest.approx(np.log(2), abs=1e-6)
    assert before["margin"] == pytest.approx(0.0, abs=1e-5)
    recipe = Recipe(steps=20, batch_size=8, learning_rate=1e-2, warmup_steps=1, steps_per_call=5)
    trained, history = fit(model, task, recipe)
    after = task.evaluate(trained)
    assert after["loss"] < before["loss"] - 0.05
    assert after["margin"] > 0 and after["ranked right"] == 1.0
    assert len(history.train_loss) == 4


def test_the_task_refuses_no_pairs_and_pairs_too_long(model):
    with pytest.raises(ValueError, match="at least one"):
        PreferenceContinuations([], model, window=8, vocab_size=7)
    with pytest.raises(ValueError, match="longer than the model's window"):
        PreferenceContinuations([([1] * 8, [2, END], [3, END])], model, window=8, vocab_size=7)
