"""Chapter 17 (learning from a verifier): group-normalised advantages, PPO's clip, DPO's loss."""

from __future__ import annotations

import numpy as np

from ..training import policy_gradient as pg
from .core import Case, Diagnosis, Exercise, Property


def _f64(*arrays):
    return tuple(np.asarray(a, np.float64) for a in arrays)


def _advantages(rewards, scale_by_std=True, ddof=1, axis=1):
    (rewards,) = _f64(rewards)
    centred = rewards - rewards.mean(axis=axis, keepdims=True)
    if not scale_by_std:
        return centred.astype(np.float32)
    spread = rewards.std(axis=axis, ddof=ddof, keepdims=True)
    return (centred / (spread + pg.STD_EPSILON)).astype(np.float32)


def _advantage_cases():
    rng = np.random.default_rng(41)
    binary = rng.integers(0, 2, (4, 8)).astype(np.float32)
    binary[0] = [1, 0, 0, 0, 0, 0, 0, 0]
    binary[3] = 1.0  # a group whose answers are all right
    return [
        Case("P = 4 prompts, k = 8 rewards of 0 or 1, scaled", (binary, True)),
        Case("P = 4 prompts, k = 8 rewards of 0 or 1, centred only", (binary, False)),
        Case("P = 2, k = 5 graded rewards, scaled",
             (rng.uniform(0, 1, (2, 5)).astype(np.float32), True)),
    ]  # fmt: skip


def _sums_to_zero(got, case):
    return bool(np.allclose(np.asarray(got).sum(axis=1), 0, atol=1e-4))


GROUP_ADVANTAGES = Exercise(
    name="group_advantages",
    chapter=17,
    title="GRPO's advantages: each reward against its group's mean (and spread)",
    reference=lambda rewards, scale_by_std: _advantages(rewards, scale_by_std),
    cases=_advantage_cases,
    output="(P, k)",
    rtol=1e-4,
    atol=1e-4,
    properties=(
        Property(
            "each group's advantages sum to zero",
            _sums_to_zero,
            "a group's advantages do not sum to zero: subtract each group's own mean reward",
        ),
    ),
    diagnoses=(
        Diagnosis.like(
            "population_std",
            "the standard deviation divides by k, not k - 1: use the sample standard "
            "deviation (ddof=1), as trl does",
            lambda rewards, scale_by_std: _advantages(rewards, scale_by_std, ddof=0),
        ),
        Diagnosis.like(
            "whole_batch",
            "the mean (and spread) are taken over the whole batch: take them over each "
            "prompt's group, along axis 1",
            lambda rewards, scale_by_std: _advantages(rewards.reshape(1, -1), scale_by_std).reshape(
                rewards.shape
            ),
        ),
        Diagnosis.like(
            "not_centred",
            "the rewards are divided by the spread without subtracting the group's mean: "
            "the baseline is the mean",
            lambda rewards, scale_by_std: (
                np.asarray(rewards)
                / (
                    (np.asarray(rewards).std(1, ddof=1, keepdims=True) + pg.STD_EPSILON)
                    if scale_by_std
                    else 1.0
                )
            ).astype(np.float32),
        ),
    ),  # fmt: skip
)


def _clipped(log_ratio, advantages, clip):
    log_ratio, advantages = _f64(log_ratio, advantages)
    ratio = np.exp(log_ratio)
    return np.minimum(ratio * advantages, np.clip(ratio, 1 - clip, 1 + clip) * advantages).astype(
        np.float32
    )


def _clip_cases():
    ratios = np.array([0.5, 0.79, 0.9, 1.0, 1.1, 1.21, 2.0])
    log_ratio = np.log(np.concatenate([ratios, ratios])).astype(np.float32)
    advantages = np.repeat([1.5, -0.7], len(ratios)).astype(np.float32)
    rng = np.random.default_rng(42)
    return [
        Case("ratios 0.5 to 2, advantages +1.5 and -0.7, clip 0.2", (log_ratio, advantages, 0.2)),
        Case("random (3, 4) log ratios, clip 0.1",
             (rng.normal(0, 0.3, (3, 4)).astype(np.float32),
              rng.normal(size=(3, 4)).astype(np.float32), 0.1)),
    ]  # fmt: skip


CLIPPED_OBJECTIVE = Exercise(
    name="clipped_objective",
    chapter=17,
    title="PPO's clipped objective, token by token",
    reference=_clipped,
    cases=_clip_cases,
    output="the shape of log_ratio",
    diagnoses=(
        Diagnosis.like(
            "max_not_min",
            "the larger of the two terms is taken: the objective is the minimum, a pessimistic "
            "bound that removes the gain from moving past the clip",
            lambda lr, a, c: (lambda r: np.maximum(r * a, np.clip(r, 1 - c, 1 + c) * a))(
                np.exp(lr)
            ),
        ),
        Diagnosis.like(
            "clipped_only",
            "only the clipped term is kept: without the minimum with the unclipped term, a "
            "token whose ratio moved the wrong way past the clip is not pulled back",
            lambda lr, a, c: np.clip(np.exp(lr), 1 - c, 1 + c) * a,
        ),
        Diagnosis.like(
            "log_ratio_as_ratio",
            "the log ratio is used as the ratio: exponentiate it first, the ratio is "
            "exp(log pi - log pi_old)",
            lambda lr, a, c: np.minimum(lr * a, np.clip(lr, 1 - c, 1 + c) * a),
        ),
    ),
)


def _dpo(chosen, rejected, reference_chosen, reference_rejected, beta):
    c, r, rc, rr = _f64(chosen, rejected, reference_chosen, reference_rejected)
    margin = (c - rc) - (r - rr)
    return np.float32(np.mean(np.logaddexp(0.0, -beta * margin)))  # -log σ(βm), stably


def _dpo_cases():
    rng = np.random.default_rng(43)
    draw = lambda n: tuple(rng.normal(-10, 3, n).astype(np.float32) for _ in range(4))  # noqa: E731
    return [
        Case("6 pairs, beta = 0.1", draw(6) + (0.1,)),
        Case("3 pairs, beta = 0.5", draw(3) + (0.5,)),
        Case("margins of hundreds of nats, beta = 1",
             (np.array([-400.0, 0.0], np.float32), np.array([0.0, -400.0], np.float32),
              np.zeros(2, np.float32), np.zeros(2, np.float32), 1.0)),
    ]  # fmt: skip


DPO_LOSS = Exercise(
    name="dpo_loss",
    chapter=17,
    title="DPO's loss on pairs of a chosen and a rejected answer",
    reference=_dpo,
    cases=_dpo_cases,
    output="a scalar",
    diagnoses=(
        Diagnosis.like(
            "no_reference",
            "the margin uses the policy's log-probabilities alone: subtract the reference's "
            "from each, the loss is on log(pi / pi_ref)",
            lambda c, r, rc, rr, b: _dpo(c, r, 0 * rc, 0 * rr, b),
        ),
        Diagnosis.like(
            "no_beta",
            "the margin is not multiplied by beta: the loss is -log sigmoid(beta m)",
            lambda c, r, rc, rr, b: _dpo(c, r, rc, rr, 1.0),
        ),
        Diagnosis.like(
            "chosen_and_rejected_swapped",
            "the margin is taken the wrong way round: the chosen answer's log-ratio minus the "
            "rejected one's",
            lambda c, r, rc, rr, b: _dpo(r, c, rr, rc, b),
        ),
    ),
)

EXERCISES = [GROUP_ADVANTAGES, CLIPPED_OBJECTIVE, DPO_LOSS]
