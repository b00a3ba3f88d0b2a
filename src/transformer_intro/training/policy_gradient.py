"""Learning from a reward or a preference: the pieces of REINFORCE, GRPO and DPO (chapter 17).

A sequence model is a *policy* ``π_θ(y | x)``: it gives every answer y to a prompt x a
probability, the product of its next-token probabilities. Training it to raise the expected
reward ``J(θ) = E_{y ~ π_θ}[r(x, y)]`` needs the gradient of an expectation over its own samples,
which the log-derivative identity ``∇π = π ∇log π`` turns into an expectation again:
``∇J = E_{y ~ π_θ}[(r(x, y) - b) ∇log π_θ(y | x)]`` for any baseline b that does not depend on y
(Williams 1992). Everything here is a small function of arrays:

* :func:`group_advantages`: GRPO's baseline, the mean reward of G samples of one prompt, with or
  without division by their standard deviation (Shao et al. 2024);
* :func:`clipped_objective`: PPO's probability ratio and its clip (Schulman et al. 2017);
* :func:`kl_k3` and :func:`exact_kl`: the KL to a reference model, estimated from samples as
  GRPO does, and computed exactly from two distributions;
* :func:`masked_mean`: averaging per-token terms over the tokens ("token" level) or per answer
  first ("sequence" level);
* :func:`grpo_loss`: those together, the loss a training step minimises;
* :func:`dpo_loss`: the loss of direct preference optimisation (Rafailov et al. 2023);
* :func:`token_log_probs`: ``log π(y_t | x, y_<t)`` of given tokens from a model's logits;
* :func:`all_sequences`, :func:`tabular_log_probs`: a policy small enough to enumerate, on which
  the chapter and the tests compute every expectation exactly.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int

__all__ = [
    "all_sequences",
    "clipped_objective",
    "dpo_loss",
    "exact_kl",
    "group_advantages",
    "grpo_loss",
    "kl_k3",
    "masked_mean",
    "tabular_log_probs",
    "token_log_probs",
]

# The small number added to a group's standard deviation, as trl adds it: a group whose rewards
# are all equal has advantages 0, not 0/0.
STD_EPSILON = 1e-4


def group_advantages(
    rewards: ArrayLike, *, scale_by_std: bool = True, epsilon: float = STD_EPSILON
) -> Float[Array, "P G"]:
    """GRPO's advantages: each reward minus its group's mean, optionally over the group's std.

    ``A_i = (r_i - mean_j r_j) / (std_j r_j + ε)``, over the G samples of one prompt (a row).
    The standard deviation is the sample one (divided by G - 1), as trl computes it.

    Args:
        rewards: (P, G), P prompts with G sampled answers each.
        scale_by_std: divide by the group's standard deviation (GRPO as Shao et al. write it);
            False keeps the centred rewards (Dr. GRPO, nanochat).
        epsilon: added to the standard deviation.

    Raises:
        ValueError: if ``rewards`` is not two-dimensional or a group has fewer than 2 samples.
    """
    rewards = jnp.asarray(rewards, jnp.float32)
    if rewards.ndim != 2 or rewards.shape[1] < 2:
        raise ValueError(
            f"rewards must be (prompts, group size) with at least 2 samples a group, got shape "
            f"{rewards.shape}: reshape them to (P, G)"
        )
    centred = rewards - rewards.mean(axis=1, keepdims=True)
    if not scale_by_std:
        return centred
    return centred / (rewards.std(axis=1, ddof=1, keepdims=True) + epsilon)


def clipped_objective(
    log_ratio: Float[ArrayLike, "*#S"], advantages: Float[ArrayLike, "*#S"], clip: float = 0.2
) -> Float[Array, "*S"]:
    """PPO's per-token objective ``min(ρ A, clip(ρ, 1 - ε, 1 + ε) A)``, ρ = exp(log_ratio).

    ``log_ratio`` is ``log π_θ(y_t) - log π_old(y_t)``; the objective is to be maximised. Where
    ρ has moved past the clip in the direction the advantage pushes it, the objective is flat
    and the token gives no gradient.
    """
    ratio = jnp.exp(log_ratio)
    advantages = jnp.asarray(advantages)
    return jnp.minimum(ratio * advantages, jnp.clip(ratio, 1 - clip, 1 + clip) * advantages)


def kl_k3(log_p: Float[ArrayLike, "*S"], log_p_reference: Float[ArrayLike, "*S"]) -> Array:
    """The per-token estimate of KL(π ‖ π_ref) that GRPO uses, from tokens sampled from π.

    ``k3 = ρ - log ρ - 1`` with ``ρ = π_ref(y_t) / π(y_t)``: never negative, and unbiased, since
    ``E_π[ρ] = 1`` and ``E_π[-log ρ] = KL(π ‖ π_ref)``; its sum over an answer's tokens is an
    unbiased estimate of the KL between the two distributions over whole answers.
    """
    log_rho = jnp.asarray(log_p_reference) - jnp.asarray(log_p)
    return jnp.exp(log_rho) - log_rho - 1


def exact_kl(log_p: Float[ArrayLike, "... V"], log_p_reference: Float[ArrayLike, "... V"]):
    """``KL(π ‖ π_ref) = Σ_y π(y) (log π(y) - log π_ref(y))`` over the last axis."""
    log_p = jnp.asarray(log_p)
    return jnp.sum(jnp.exp(log_p) * (log_p - jnp.asarray(log_p_reference)), axis=-1)


def masked_mean(
    values: Float[ArrayLike, "B T"], mask: ArrayLike, level: str = "sequence"
) -> Float[Array, ""]:
    """The mean of per-token values over the real tokens (``mask``), at one of two levels.

    * ``"sequence"``: each answer's mean over its own tokens, then the mean over answers (GRPO
      as Shao et al. write it): a short answer's tokens weigh more than a long one's;
    * ``"token"``: the sum over every real token divided by their number (DAPO's and trl's
      ``bnpo``): every token weighs the same.

    The two agree when every answer has the same number of tokens.

    Raises:
        ValueError: for an unknown level.
    """
    values, mask = jnp.asarray(values), jnp.asarray(mask, values.dtype)
    if level == "token":
        return (values * mask).sum() / jnp.maximum(mask.sum(), 1.0)
    if level == "sequence":
        return ((values * mask).sum(-1) / jnp.maximum(mask.sum(-1), 1.0)).mean()
    raise ValueError(f"level must be 'token' or 'sequence', got {level!r}")


def grpo_loss(
    log_p: Float[Array, "B T"],
    log_p_old: Float[ArrayLike, "B T"],
    log_p_reference: Float[ArrayLike, "B T"],
    advantages: Float[ArrayLike, " B"],
    mask: ArrayLike,
    *,
    clip: float = 0.2,
    kl_weight: float = 0.04,
    level: str = "sequence",
) -> tuple[Float[Array, ""], dict[str, Array]]:
    """GRPO's loss for B sampled answers: minus the clipped objective, plus β times the KL.

    ``L = -mean(min(ρ_t A, clip(ρ_t) A) - β k3_t)`` over the real tokens, averaged at ``level``;
    ρ_t = π_θ(y_t) / π_old(y_t), A the answer's advantage. On policy, π_old is π_θ itself with
    its gradient stopped: ρ = 1 in value, and the gradient is REINFORCE's, with the group's mean
    as baseline.

    Args:
        log_p: (B, T) log-probabilities of the sampled tokens under the model being trained.
        log_p_old: the same under the model that sampled them (no gradient flows through it).
        log_p_reference: the same under the reference (starting) model.
        advantages: (B,) one per answer, from :func:`group_advantages`.
        mask: (B, T), True at an answer's real tokens.
        clip: ε of the clip.
        kl_weight: β, the weight of the KL penalty.
        level: how the per-token terms are averaged (:func:`masked_mean`).

    Returns:
        ``(loss, {"kl": ..., "clipped": ...})``: the k3 estimate of the KL per token, and the
        share of real tokens whose ratio the clip holds.
    """
    log_ratio = log_p - jax.lax.stop_gradient(jnp.asarray(log_p_old))
    advantages = jnp.asarray(advantages)[:, None]
    objective = clipped_objective(log_ratio, advantages, clip)
    kl = kl_k3(log_p, jax.lax.stop_gradient(jnp.asarray(log_p_reference)))
    loss = masked_mean(-(objective - kl_weight * kl), mask, level)
    ratio = jnp.exp(log_ratio)
    clipped = ((ratio > 1 + clip) & (advantages > 0)) | ((ratio < 1 - clip) & (advantages < 0))
    clipped = masked_mean(clipped.astype(log_p.dtype), mask, "token")
    return loss, {"kl": masked_mean(kl, mask, "token"), "clipped": clipped}


def dpo_loss(
    chosen: Float[ArrayLike, " B"],
    rejected: Float[ArrayLike, " B"],
    reference_chosen: Float[ArrayLike, " B"],
    reference_rejected: Float[ArrayLike, " B"],
    beta: float = 0.1,
) -> Float[Array, ""]:
    """DPO's loss, ``-mean log σ(β m)``, m the margin of the log-ratios to the reference.

    ``m = (log π(y_w) - log π_ref(y_w)) - (log π(y_l) - log π_ref(y_l))``

    (Rafailov et al. 2023, the logistic loss of the Bradley-Terry model.)

    Each argument is a whole answer's log-probability (the sum over its tokens) given its prompt:
    the chosen answers y_w and the rejected ones y_l, under the policy and the reference. It is
    ``log 2`` wherever the policy is the reference. ``jax.nn.log_sigmoid`` keeps it finite for
    margins of any size, where ``log(sigmoid(z))`` would round to ``log 0``.
    """
    margin = (jnp.asarray(chosen) - jnp.asarray(reference_chosen)) - (
        jnp.asarray(rejected) - jnp.asarray(reference_rejected)
    )
    return -jax.nn.log_sigmoid(beta * margin).mean()


def token_log_probs(logits: Float[Array, "*B T V"], tokens: Int[ArrayLike, "*B T"]) -> Array:
    """``log softmax(logits)[token]`` at every position: the log-probability of each given token."""
    log_p = jax.nn.log_softmax(logits, axis=-1)
    return jnp.take_along_axis(log_p, jnp.asarray(tokens)[..., None], axis=-1)[..., 0]


# ---------------------------------------------------------------------------------------------
# A policy small enough to enumerate


def all_sequences(vocab_size: int, length: int) -> Int[np.ndarray, "S L"]:
    """Every sequence of ``length`` tokens from ``vocab_size`` symbols: (|V|^L, L), in order."""
    if vocab_size < 1 or length < 1:
        raise ValueError(f"vocab_size and length must be at least 1, got {vocab_size}, {length}")
    return np.array(list(itertools.product(range(vocab_size), repeat=length)), np.int32)


def tabular_log_probs(
    theta: Float[Array, "L V V"], sequences: Int[ArrayLike, "S L"]
) -> Float[Array, "S L"]:
    """Per-token log-probabilities of a policy whose logits are a table.

    ``π(y_t | y_<t) = softmax(θ[t, y_{t-1}])[y_t]``, with ``y_0 = 0`` read before the first
    token: each token depends on its position and on the token before it, a policy with
    L |V|² parameters over |V|^L sequences. Sum over the last axis for ``log π(y)``.
    """
    sequences = jnp.asarray(sequences)
    previous = jnp.concatenate([jnp.zeros_like(sequences[:, :1]), sequences[:, :-1]], axis=1)
    positions = jnp.arange(sequences.shape[1])[None, :]
    logits = theta[positions, previous]  # (S, L, V)
    return token_log_probs(logits, sequences)
