"""The policy-gradient pieces of chapter 17, against the maths: properties and exact enumeration.

The enumerable policy has |V| = 3 symbols and L = 3 positions: 27 sequences, so every expectation
over its samples is also a finite sum, computed exactly. A Monte Carlo estimator is accepted when
its mean over many samples is within 4.5 standard errors of the exact value in every coordinate,
and each estimator that the maths says is biased is rejected by the same test.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_intro.training import policy_gradient as pg

V, L = 3, 3
SEQUENCES = pg.all_sequences(V, L)
THETA = jax.random.normal(jax.random.PRNGKey(0), (L, V, V))
# A reward for every sequence: the number of 2s, plus 1 when the sequence ends in 0.
REWARD = jnp.asarray((SEQUENCES == 2).sum(1) + (SEQUENCES[:, -1] == 0), jnp.float32)


def log_pi(theta):
    return pg.tabular_log_probs(theta, SEQUENCES).sum(-1)  # log π(y) for all 27 sequences


def expected_reward(theta):
    return jnp.sum(jnp.exp(log_pi(theta)) * REWARD)


EXACT_GRADIENT = np.asarray(jax.grad(expected_reward)(THETA)).ravel()
SCORES = np.asarray(jax.jacobian(log_pi)(THETA)).reshape(len(SEQUENCES), -1)  # ∇ log π(y)
PROBABILITIES = np.asarray(jnp.exp(log_pi(THETA)))


def draws(n, seed):
    return np.random.default_rng(seed).choice(len(SEQUENCES), size=n, p=PROBABILITIES)


def within_sampling_error(per_sample, exact, z=4.5):
    """Whether the mean of per-sample estimates is within z standard errors of ``exact``."""
    mean = per_sample.mean(0)
    error = per_sample.std(0, ddof=1) / np.sqrt(len(per_sample)) + 1e-9
    return bool(np.all(np.abs(mean - exact) <= z * error + 1e-6))


def test_the_enumerable_policy_is_a_distribution():
    assert SEQUENCES.shape == (27, 3) and len({tuple(s) for s in SEQUENCES}) == 27
    assert np.isclose(PROBABILITIES.sum(), 1.0, atol=1e-5)


def test_reinforce_is_unbiased_and_its_controls_are_not():
    index = draws(40_000, seed=1)
    r, score = np.asarray(REWARD)[index], SCORES[index]
    assert within_sampling_error(r[:, None] * score, EXACT_GRADIENT)
    # any baseline independent of the sample keeps the estimator unbiased
    assert within_sampling_error((r - 1.3)[:, None] * score, EXACT_GRADIENT)
    # control 1: the gradient of π instead of log π (no log-derivative) is biased
    grad_pi = PROBABILITIES[:, None] * SCORES
    assert not within_sampling_error(r[:, None] * grad_pi[index], EXACT_GRADIENT)
    # control 2: a baseline that depends on the sample's own action is biased
    own = np.asarray(SEQUENCES[index, 0] == 1, np.float32) * 2.0
    assert not within_sampling_error((r - own)[:, None] * score, EXACT_GRADIENT)


def test_group_advantages_sum_to_zero_and_are_scaled_by_the_sample_std():
    rewards = jax.random.uniform(jax.random.PRNGKey(2), (5, 8))
    plain = pg.group_advantages(rewards, scale_by_std=False)
    scaled = pg.group_advantages(rewards)
    assert np.allclose(plain.sum(1), 0, atol=1e-5) and np.allclose(scaled.sum(1), 0, atol=1e-4)
    assert np.allclose(scaled.std(1, ddof=1), 1, atol=1e-3)
    # a group whose answers are all right (or all wrong) teaches nothing: advantages 0, not NaN
    same = pg.group_advantages(jnp.ones((2, 4)))
    assert np.all(same == 0)
    with pytest.raises(ValueError, match="group size"):
        pg.group_advantages(jnp.ones(8))


def test_clipped_and_unclipped_objectives_agree_at_ratio_one():
    advantages = jnp.array([1.0, -2.0, 0.5])
    zero = jnp.zeros(3)
    assert np.allclose(pg.clipped_objective(zero, advantages), advantages)
    unclipped = lambda lr: jnp.sum(jnp.exp(lr) * advantages)  # noqa: E731
    clipped = lambda lr: jnp.sum(pg.clipped_objective(lr, advantages, 0.2))  # noqa: E731
    assert np.allclose(jax.grad(clipped)(zero), jax.grad(unclipped)(zero))
    # away from 1 they differ: past the clip in the advantage's direction the gradient is 0
    far = jnp.log(jnp.array([1.5, 0.5, 1.1]))
    assert np.allclose(jax.grad(clipped)(far), [0.0, 0.0, 1.1 * 0.5], atol=1e-6)
    assert not np.allclose(jax.grad(clipped)(far), jax.grad(unclipped)(far))


def test_on_policy_grpo_gradient_is_reinforce_with_the_group_mean_as_baseline():
    group = draws(8, seed=3)[None]  # one prompt, G = 8 answers
    rewards = REWARD[group]
    advantages = pg.group_advantages(rewards, scale_by_std=False)[0]
    mask = jnp.ones((8, L), bool)

    def loss(theta, kl_weight=0.0, level="sequence"):
        log_p = pg.tabular_log_probs(theta, SEQUENCES[group[0]])
        return pg.grpo_loss(log_p, log_p, log_p, advantages, mask,
                            kl_weight=kl_weight, level=level)[0]  # fmt: skip

    grpo = -np.asarray(jax.grad(loss)(THETA)).ravel() * L  # the mean over L tokens undone
    baseline = np.asarray(rewards[0] - rewards[0].mean())
    reinforce = (baseline[:, None] * SCORES[group[0]]).mean(0)
    assert np.allclose(grpo, reinforce, atol=1e-5)
    # token and sequence levels agree when every answer has L tokens
    assert np.allclose(jax.grad(loss)(THETA), jax.grad(lambda t: loss(t, level="token"))(THETA))
    # control: the gradient without a baseline is another vector
    assert not np.allclose(grpo, (np.asarray(rewards[0])[:, None] * SCORES[group[0]]).mean(0))
    # on policy the KL term's value is 0 and so is its gradient (k3's gradient at ρ = 1)
    assert np.allclose(jax.grad(lambda t: loss(t, 1.0))(THETA), jax.grad(loss)(THETA), atol=1e-6)


def test_token_and_sequence_levels_differ_when_lengths_differ():
    values = jnp.array([[1.0, 1.0, 1.0, 1.0], [4.0, 0.0, 0.0, 0.0]])
    mask = jnp.array([[1, 1, 1, 1], [1, 0, 0, 0]], bool)
    assert np.isclose(pg.masked_mean(values, mask, "sequence"), (1 + 4) / 2)
    assert np.isclose(pg.masked_mean(values, mask, "token"), (4 + 4) / 5)
    with pytest.raises(ValueError, match="level"):
        pg.masked_mean(values, mask, "answer")


def test_k3_is_an_unbiased_estimate_of_the_sequence_kl_with_less_variance_than_log_ratio():
    reference = THETA + 0.3 * jax.random.normal(jax.random.PRNGKey(4), THETA.shape)
    log_p = pg.tabular_log_probs(THETA, SEQUENCES)
    log_ref = pg.tabular_log_probs(reference, SEQUENCES)
    exact = float(pg.exact_kl(log_p.sum(-1), log_ref.sum(-1)))
    k3 = np.asarray(pg.kl_k3(log_p, log_ref).sum(-1))  # per sequence, summed over tokens
    k1 = np.asarray((log_p - log_ref).sum(-1))
    assert exact > 0.01
    # in expectation over π, exactly
    assert np.isclose((PROBABILITIES * k3).sum(), exact, rtol=1e-4)
    assert np.isclose((PROBABILITIES * k1).sum(), exact, rtol=1e-4)
    assert k3.min() >= 0 > k1.min()  # k3 is never negative; log ratios can be
    variance = lambda x: (PROBABILITIES * (x - exact) ** 2).sum()  # noqa: E731
    assert variance(k3) < variance(k1)
    # sampled: within sampling error; control: the same estimate from the reference's samples
    index = draws(20_000, seed=5)
    assert within_sampling_error(k3[index][:, None], np.array([exact]))
    q = np.asarray(jnp.exp(log_ref.sum(-1)))
    wrong = np.random.default_rng(6).choice(27, size=20_000, p=q / q.sum())
    assert not within_sampling_error(k3[wrong][:, None], np.array([exact]))


def test_dpo_loss_is_log_2_at_the_reference_and_its_gradient_is_the_naive_forms():
    rng = np.random.default_rng(7)
    chosen, rejected, ref_c, ref_r = (jnp.asarray(rng.normal(size=6) - 5) for _ in range(4))
    assert np.isclose(pg.dpo_loss(ref_c, ref_r, ref_c, ref_r), np.log(2))

    def naive(c, r):
        z = 0.5 * ((c - ref_c) - (r - ref_r))
        return -jnp.mean(jnp.log(1 / (1 + jnp.exp(-z))))

    ours = jax.grad(lambda c, r: pg.dpo_loss(c, r, ref_c, ref_r, beta=0.5), (0, 1))
    assert np.allclose(pg.dpo_loss(chosen, rejected, ref_c, ref_r, 0.5), naive(chosen, rejected))
    for a, b in zip(ours(chosen, rejected), jax.grad(naive, (0, 1))(chosen, rejected)):
        assert np.allclose(a, b, atol=1e-6)
    # the gradient pushes the chosen answers up and the rejected ones down, equally
    grad_c, grad_r = ours(chosen, rejected)
    assert np.all(grad_c < 0) and np.allclose(grad_c, -grad_r)
    # control: a margin taken the wrong way round is another loss
    assert not np.isclose(pg.dpo_loss(rejected, chosen, ref_c, ref_r), naive(chosen, rejected))
    # a huge margin stays finite, where the naive form's log(sigmoid) rounds to log 0
    assert np.isfinite(pg.dpo_loss(jnp.array([-1e4]), jnp.array([0.0]), jnp.zeros(1), jnp.zeros(1)))


def test_token_log_probs_and_all_sequences():
    logits = jax.random.normal(jax.random.PRNGKey(8), (2, 4, 5))
    tokens = jnp.array([[0, 1, 2, 3], [4, 4, 0, 1]])
    expected = jax.nn.log_softmax(logits)[jnp.arange(2)[:, None], jnp.arange(4)[None], tokens]
    assert np.allclose(pg.token_log_probs(logits, tokens), expected)
    assert pg.all_sequences(2, 3).tolist()[:3] == [[0, 0, 0], [0, 0, 1], [0, 1, 0]]
    with pytest.raises(ValueError, match="at least 1"):
        pg.all_sequences(0, 2)
