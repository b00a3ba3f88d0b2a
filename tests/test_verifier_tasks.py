"""Chapter 17's tasks: the sampler, the rewards, GRPO's and DPO's tasks through the one loop."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from factories import tiny_encoder_decoder

from transformer_intro.datasets import dates
from transformer_intro.training import Recipe, fit
from transformer_intro.verifier_tasks import (
    GroupRelativeRewards,
    PreferencePairs,
    answer_log_probs,
    answer_mask,
    encoded,
    exact_match_reward,
    greedy_exact_matches,
    greedy_rewards,
    preference_pairs,
    sample_targets,
    unseen_format_prompts,
    year_reward,
)

RECIPE = Recipe(steps=4, batch_size=4, learning_rate=1e-3, warmup_steps=1, steps_per_call=2)


@pytest.fixture(scope="module")
def model():
    config = tiny_encoder_decoder(
        len(dates.SOURCE_VOCABULARY),
        len(dates.TARGET_VOCABULARY),
        dates.MAX_SOURCE_LENGTH,
        dates.TARGET_LENGTH,
        encoder_layers=1,
        decoder_layers=1,
    )
    return config.build(key=jax.random.PRNGKey(0))


@pytest.fixture(scope="module")
def prompts():
    return encoded(unseen_format_prompts(64))


def test_prompts_are_unseen_formats_and_never_test_dates():
    pairs = unseen_format_prompts(300)
    tests = dates.load_test_sets(2000, seed=0)
    test_isos = {iso for name in ("seen formats", "unseen formats") for _, iso in tests[name]}
    assert not {iso for _, iso in pairs} & test_isos
    assert all(
        any(dates.FORMATS[f](__import__("datetime").date.fromisoformat(iso)) == text
            for f in dates.HELD_OUT_FORMATS)
        for text, iso in pairs
    )  # fmt: skip


def test_sampling_at_temperature_zero_is_greedy_and_at_one_follows_the_model(model, prompts):
    sources = jnp.asarray(prompts[0][:8])
    keys = jax.random.split(jax.random.PRNGKey(1), 8)
    greedy = model.greedy_decode(sources, dates.START_ID)
    assert np.array_equal(sample_targets(model, sources, keys, dates.START_ID, temperature=0.0),
                          greedy)  # fmt: skip
    # the first token's frequencies over 4,000 draws match the model's probabilities
    n = 4000
    one = jnp.repeat(sources[:1], n, axis=0)
    drawn = sample_targets(model, one, jax.random.split(jax.random.PRNGKey(2), n),
                           dates.START_ID, length=1)[:, 0]  # fmt: skip
    start = jnp.full((1, 1), dates.START_ID)
    p = np.asarray(jax.nn.softmax(model.batched(sources[:1], start)[0, 0]))
    frequencies = np.bincount(np.asarray(drawn), minlength=len(p)) / n
    assert np.all(np.abs(frequencies - p) <= 4.5 * np.sqrt(p * (1 - p) / n) + 1e-3)
    # control: the greedy token alone is not what sampling draws from an untrained model
    assert frequencies.max() < 0.9


def test_answer_mask_and_rewards():
    end = dates.END_ID
    answers = jnp.array([[5, end, 7, 7], [5, 6, 7, 8], [end, 3, end, 3]])
    assert answer_mask(answers, end).tolist() == [
        [True, True, False, False],
        [True, True, True, True],
        [True, False, False, False],
    ]
    targets = jnp.array([[5, 6, 7, 8, 9, end], [1, 2, 3, 4, 5, end]])
    got = jnp.array([[5, 6, 7, 8, 9, end], [1, 2, 3, 4, 6, end]])
    assert exact_match_reward(got, targets).tolist() == [1.0, 0.0]
    assert year_reward(got, targets).tolist() == [1.0, 1.0]
    # a target's padding is not compared
    padded = jnp.array([[5, end, 0]])
    assert exact_match_reward(jnp.array([[5, end, 9]]), padded).tolist() == [1.0]


def test_grpo_task_trains_through_fit_and_refuses_bad_settings(model, prompts):
    tests = {"unseen": (prompts[0][:8], prompts[1][:8])}
    task = GroupRelativeRewards(prompts, model, start_id=dates.START_ID, end_id=dates.END_ID,
                                group_size=4, tests=tests)  # fmt: skip
    batch = task.batch(jax.random.PRNGKey(3), 3)
    assert batch["sources"].shape == (3, dates.MAX_SOURCE_LENGTH) and batch["keys"].shape[0] == 12
    loss, metrics = task.loss(model, batch)
    # at the reference, on policy, the advantages of each group sum to zero: the loss is 0
    assert abs(float(loss)) < 1e-5 and float(metrics["kl"]) < 1e-6
    trained, history = fit(model, task, RECIPE, progress=False)
    assert np.all(np.isfinite(history.train_loss)) and "reward" in history.train_metrics[0]
    assert not np.allclose(trained.unembedding.bias, model.unembedding.bias)
    assert set(task.evaluate(trained)) == {"exact match, unseen"}
    bad_settings = (
        ({"reward": "kindness"}, "unknown reward"),
        ({"group_size": 1}, "at least 2"),
        ({"level": "word"}, "level"),
    )
    for bad, match in bad_settings:
        with pytest.raises(ValueError, match=match):
            GroupRelativeRewards(prompts, model, start_id=1, end_id=2, **bad)


def test_preference_pairs_and_dpo_through_fit(model, prompts):
    # a reference that writes the right answer: its samples give right and wrong answers
    sources, targets = prompts
    with pytest.raises(ValueError, match="no prompt"):
        preference_pairs(model, sources[:4], targets[:4], key=jax.random.PRNGKey(4),
                         start_id=dates.START_ID, group_size=2)  # fmt: skip
    chosen = jnp.asarray(targets[:8])
    rejected = chosen.at[:, 3].set((chosen[:, 3] + 1 - 3) % 10 + 3)  # a wrong digit
    tests = {"unseen": (sources[:8], targets[:8])}
    task = PreferencePairs((sources[:8], chosen, rejected), model, start_id=dates.START_ID,
                           end_id=dates.END_ID, tests=tests)  # fmt: skip
    batch = task.batch(jax.random.PRNGKey(5), 8)
    loss, metrics = task.loss(model, batch)
    assert np.isclose(float(loss), np.log(2), atol=1e-5)  # the policy is the reference
    drawn = batch["chosen"]
    log_p = answer_log_probs(model, batch["sources"], drawn, dates.START_ID)
    whole = (log_p * answer_mask(drawn, dates.END_ID)).sum(-1)
    assert np.allclose(metrics["chosen log p"], whole.mean(), atol=1e-4)
    trained, history = fit(
        model, task, RECIPE.replace(steps=10, learning_rate=1e-2), progress=False
    )
    assert history.train_loss[-1] < history.train_loss[0]
    assert history.train_metrics[-1]["margin"] > 0
    assert greedy_exact_matches(trained, sources[:8], targets[:8], dates.START_ID).shape == (8,)
    with pytest.raises(ValueError, match="rows"):
        PreferencePairs((sources[:8], chosen[:4], rejected), model, start_id=1, end_id=2)


def test_greedy_rewards_score_the_greedy_answers(model, prompts):
    sources, targets = (jnp.asarray(a[:16]) for a in prompts)
    greedy = model.greedy_decode(sources, dates.START_ID, targets.shape[1])
    # targets that agree with the greedy answers in the year only, or everywhere
    year_only = greedy.at[:, 5].set((greedy[:, 5] + 1 - 3) % 10 + 3)
    for wanted, exact, year in ((greedy, 1.0, 1.0), (year_only, 0.0, 1.0)):
        scores = greedy_rewards(model, sources, wanted, dates.START_ID)
        assert set(scores) == {"exact match", "right year"}
        assert scores["exact match"].mean() == exact and scores["right year"].mean() == year
    got = greedy_rewards(model, sources, targets, dates.START_ID)
    assert np.array_equal(got["exact match"], np.asarray(exact_match_reward(greedy, targets)) > 0)
    assert np.array_equal(got["right year"], np.asarray(year_reward(greedy, targets)) > 0)
    assert np.array_equal(greedy_exact_matches(model, sources, targets, dates.START_ID),
                          got["exact match"])  # fmt: skip
    # control: a year one digit off is not the right year
    wrong_year = greedy.at[:, 0].set((greedy[:, 0] + 1 - 3) % 10 + 3)
    assert greedy_rewards(model, sources, wrong_year, dates.START_ID)["right year"].sum() == 0
