"""Tasks that learn from a verifier rather than from answers (chapter 17); ``fit`` trains them.

A *verifier* scores an answer without being shown how to write it. For the dates of chapter 10
the generator is a perfect one: it knows the ISO form of every date it writes. Two tasks use it:

* :class:`GroupRelativeRewards` (GRPO): each step draws P prompts, samples G answers to each from
  the model being trained, scores them, and takes the gradient of
  :func:`~transformer_intro.training.policy_gradient.grpo_loss` (the clipped objective and the
  KL to a reference model): the sampling happens inside the loss, so ``fit``'s one loop and its
  one compiled step serve reinforcement learning as they serve supervised learning;
* :class:`PreferencePairs` (DPO): pairs of a right and a wrong answer to one prompt, which
  :func:`preference_pairs` builds from the model's own samples with the verifier, and the loss
  :func:`~transformer_intro.training.policy_gradient.dpo_loss`;
* :class:`PreferenceContinuations`: DPO for a causal language model (SmolLM2 with adapters),
  whose answers continue a prompt; :func:`continuation_preference_pairs` builds its pairs from
  :func:`sample_continuations`, generation's prefill and decoding loop batched by ``vmap``.

Answers are sampled by :func:`sample_targets`, greedy decoding's loop with the book's one sampler,
:func:`~transformer_intro.models.generation.sample_token`, in place of the argmax.
"""

from __future__ import annotations

import datetime

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Int, PRNGKeyArray

from .datasets import dates
from .models.generation import decode, prefill, sample_token
from .tasks import pack_pairs
from .training import policy_gradient as pg
from .training.recipe import Recipe
from .xla_flags import optimised_jit

__all__ = [
    "DATES_DPO_RECIPE",
    "DATES_GRPO_RECIPE",
    "DATES_PARTIAL_REWARD_RECIPE",
    "DATES_SFT_RECIPE",
    "GROUP_SIZE",
    "REWARDS",
    "GroupRelativeRewards",
    "PreferenceContinuations",
    "PreferencePairs",
    "answer_mask",
    "answer_log_probs",
    "continuation_log_probs",
    "continuation_matches",
    "continuation_preference_pairs",
    "encoded",
    "exact_match_reward",
    "greedy_exact_matches",
    "greedy_rewards",
    "preference_pairs",
    "sample_continuations",
    "sample_targets",
    "unseen_format_prompts",
    "year_reward",
]


def sample_targets(
    model,
    sources: Int[Array, "B M"],
    keys: Array,
    start_id: int,
    length: int | None = None,
    temperature: float = 1.0,
) -> Int[Array, "B N"]:
    """Sample one answer to each source, one token at a time, with row b's key ``keys[b]``.

    ``keys`` holds one PRNG key per source, (B, 2) from ``jax.random.split``.

    The loop of the encoder-decoder's ``greedy_decode``, with each token drawn from
    ``softmax(logits / temperature)`` by ``sample_token`` (``temperature=0`` is greedy).

    Returns:
        The sampled ids, (B, length); the start id is not among them.
    """
    length = model.max_target_length if length is None else length
    batch = sources.shape[0]
    memory, source_is_real = model.encode_batched(sources), sources != model.pad_id
    buffer = jnp.full((batch, length), model.pad_id, sources.dtype).at[:, 0].set(start_id)
    sample = jax.vmap(sample_token, in_axes=(0, 0, None))

    def step(t, state):
        buffer, generated = state
        logits = model.decode_batched(memory, source_is_real, buffer)[:, t]
        token = sample(logits, jax.vmap(jax.random.fold_in, (0, None))(keys, t), temperature)
        token = token.astype(buffer.dtype)
        return buffer.at[:, t + 1].set(token), generated.at[:, t].set(token)

    generated = jnp.full((batch, length), model.pad_id, sources.dtype)
    return jax.lax.fori_loop(0, length, step, (buffer, generated))[1]


def answer_mask(tokens: Int[Array, "B N"], end_id: int) -> Bool[Array, "B N"]:
    """True at an answer's tokens up to and including its first end token (all, without one)."""
    ends = tokens == end_id
    return (jnp.cumsum(ends, axis=1) - ends) == 0


def answer_log_probs(model, sources, answers, start_id: int) -> Array:
    """``log π(y_t | x, y_<t)`` of each answer's tokens (teacher forcing), (B, N)."""
    inputs = jnp.concatenate([jnp.full_like(answers[:, :1], start_id), answers[:, :-1]], axis=1)
    return pg.token_log_probs(model.batched(sources, inputs), answers)


def exact_match_reward(answers, targets, pad_id: int = 0) -> Array:
    """1 where the answer is the target at every real target position (its end included)."""
    return jnp.all((answers == targets) | (targets == pad_id), axis=1).astype(jnp.float32)


def year_reward(answers, targets, pad_id: int = 0) -> Array:
    """1 where the answer's first four characters are the target's: the right year alone."""
    return jnp.all(answers[:, :4] == targets[:, :4], axis=1).astype(jnp.float32)


#: The rewards a :class:`GroupRelativeRewards` task can be given, by name.
REWARDS = {"exact match": exact_match_reward, "right year": year_reward}


def _frozen(model):
    """The model with every array's gradient stopped: what samples and what is compared with."""
    params, static = eqx.partition(model, eqx.is_inexact_array)
    return eqx.combine(jax.lax.stop_gradient(params), static)


def _test_split(pairs) -> tuple[Array, Array]:
    sources, targets = (jnp.asarray(a, jnp.int32) for a in pairs)
    if sources.ndim != 2 or targets.ndim != 2 or sources.shape[0] != targets.shape[0]:
        raise ValueError(
            f"a split is (sources (S, N_s), targets (S, N_t)); got shapes {sources.shape} and "
            f"{targets.shape}"
        )
    return sources, targets


@optimised_jit
def _greedy_exact_match(model, sources, targets, start_id: int):
    generated = model.greedy_decode(sources, start_id, targets.shape[1])
    return exact_match_reward(generated, targets, model.pad_id)


def greedy_exact_matches(model, sources, targets, start_id: int) -> np.ndarray:
    """Whether each greedy answer is its target exactly: booleans, (S,)."""
    return greedy_rewards(model, sources, targets, start_id)["exact match"]


@optimised_jit
def _greedy_rewards(model, sources, targets, start_id: int):
    generated = model.greedy_decode(sources, start_id, targets.shape[1])
    return {name: reward(generated, targets, model.pad_id) for name, reward in REWARDS.items()}


def greedy_rewards(model, sources, targets, start_id: int) -> dict[str, np.ndarray]:
    """Every reward of :data:`REWARDS` for each greedy answer: ``{name: booleans (S,)}``."""
    sources, targets = _test_split((sources, targets))
    scores = _greedy_rewards(model, sources, targets, start_id)
    return {name: np.asarray(score) > 0 for name, score in scores.items()}


def _evaluate(model, tests, start_id: int) -> dict[str, float]:
    return {
        f"exact match, {name}": float(_greedy_exact_match(model, s, t, start_id).mean())
        for name, (s, t) in tests.items()
    }


class GroupRelativeRewards(eqx.Module):
    """GRPO on prompts whose right answers the verifier knows: the reward is computed, not taught.

    ``batch(key, P)`` draws P prompts (with their verifier's answers) and one key for each;
    ``loss(model, batch)`` samples G answers to each prompt from the model itself (its gradient
    stopped), scores them with the reward, turns the rewards into group-relative advantages, and
    returns GRPO's loss on those samples: on policy, the clipped objective at ratio 1 (REINFORCE
    with the group's mean as baseline) plus β times the k3 estimate of the KL to ``reference``.
    The targets never enter the loss except through the reward.

    Metrics: the mean reward, the exact match of the samples, the KL per token, and the share of
    groups whose rewards all agree (they teach nothing: their advantages are 0).
    """

    sources: Array
    targets: Array
    reference: eqx.Module
    tests: dict[str, tuple[Array, Array]]
    group_size: int = eqx.field(static=True)
    start_id: int = eqx.field(static=True)
    end_id: int = eqx.field(static=True)
    reward: str = eqx.field(static=True)
    clip: float = eqx.field(static=True)
    kl_weight: float = eqx.field(static=True)
    level: str = eqx.field(static=True)
    scale_by_std: bool = eqx.field(static=True)
    temperature: float = eqx.field(static=True)

    def __init__(
        self,
        prompts,
        reference,
        *,
        start_id: int,
        end_id: int,
        group_size: int = 8,
        reward: str = "exact match",
        clip: float = 0.2,
        kl_weight: float = 0.04,
        level: str = "sequence",
        scale_by_std: bool = True,
        temperature: float = 1.0,
        tests: dict | None = None,
    ):
        """Hold the prompts, the verifier's answers and the reference model on the device.

        Args:
            prompts: ``(sources, targets)``, (S, N_s) and (S, N_t) ids: the verifier's answers
                are the targets (their end token included).
            reference: the model the KL penalty compares with (the starting model).
            start_id: the id that starts every answer.
            end_id: the id that ends an answer (its tokens after it do not count).
            group_size: G, the answers sampled to each prompt.
            reward: a name in :data:`REWARDS`.
            clip: ε of the ratio's clip.
            kl_weight: β, the weight of the KL penalty.
            level: ``"sequence"`` or ``"token"`` (:func:`~.policy_gradient.masked_mean`).
            scale_by_std: divide the centred rewards by their group's standard deviation.
            temperature: the sampler's temperature.
            tests: ``{name: (sources, targets)}`` that ``evaluate`` measures, greedily.

        Raises:
            ValueError: for an unknown reward or level, a group of fewer than 2, or splits whose
                shapes do not pair up.
        """
        if reward not in REWARDS:
            raise ValueError(f"unknown reward {reward!r}; the rewards are {list(REWARDS)}")
        if level not in ("sequence", "token"):
            raise ValueError(f"level must be 'sequence' or 'token', got {level!r}")
        if group_size < 2:
            raise ValueError(
                f"group_size must be at least 2 (a group's mean is its own baseline), got "
                f"{group_size}"
            )
        self.sources, self.targets = _test_split(prompts)
        self.reference = _frozen(reference)
        self.tests = {name: _test_split(split) for name, split in (tests or {}).items()}
        self.group_size, self.start_id, self.end_id = group_size, start_id, end_id
        self.reward = reward
        self.clip, self.kl_weight, self.level = clip, kl_weight, level
        self.scale_by_std, self.temperature = scale_by_std, temperature

    def batch(self, key: PRNGKeyArray, batch_size: int) -> dict[str, Array]:
        """P = ``batch_size`` prompts drawn with replacement, and G sampling keys for each."""
        draw, sample = jax.random.split(key)
        rows = jax.random.randint(draw, (batch_size,), 0, self.sources.shape[0])
        keys = jax.random.split(sample, batch_size * self.group_size)
        return {"sources": self.sources[rows], "targets": self.targets[rows], "keys": keys}

    def loss(self, model, batch: dict[str, Array]) -> tuple[Array, dict[str, Array]]:
        """GRPO's loss on G answers sampled now to each of the batch's prompts."""
        g = self.group_size
        sources = jnp.repeat(batch["sources"], g, axis=0)
        targets = jnp.repeat(batch["targets"], g, axis=0)
        keys = batch["keys"].reshape(sources.shape[0], -1)
        old = _frozen(model)
        answers = sample_targets(old, sources, keys, self.start_id, targets.shape[1],
                                 self.temperature)  # fmt: skip
        rewards = REWARDS[self.reward](answers, targets, model.pad_id)
        advantages = pg.group_advantages(rewards.reshape(-1, g), scale_by_std=self.scale_by_std)
        mask = answer_mask(answers, self.end_id)
        log_p = answer_log_probs(model, sources, answers, self.start_id)
        log_p_reference = answer_log_probs(self.reference, sources, answers, self.start_id)
        loss, metrics = pg.grpo_loss(
            log_p, log_p, log_p_reference, advantages.reshape(-1), mask,
            clip=self.clip, kl_weight=self.kl_weight, level=self.level,
        )  # fmt: skip
        grouped = rewards.reshape(-1, g)
        return loss, {
            "reward": rewards.mean(),
            "exact match": exact_match_reward(answers, targets, model.pad_id).mean(),
            "kl": metrics["kl"],
            "same reward": jnp.mean(grouped.max(1) == grouped.min(1)),
        }

    def evaluate(self, model) -> dict[str, float]:
        """Greedy exact match on each test split.

        Raises:
            ValueError: if the task has no test splits.
        """
        if not self.tests:
            raise ValueError("this task has no test splits: give tests={name: (sources, targets)}")
        return _evaluate(model, self.tests, self.start_id)


def _dpo_figures(chosen, rejected, reference_chosen, reference_rejected, beta: float):
    """DPO's loss, and beside it the answers' mean log-probabilities, margin and ranking.

    The metrics: the chosen and the rejected answers' mean log-probabilities, the mean margin of
    the log-ratios to the reference, and the share of pairs ranked the right way.
    """
    loss = pg.dpo_loss(chosen, rejected, reference_chosen, reference_rejected, beta)
    margin = (chosen - reference_chosen) - (rejected - reference_rejected)
    return loss, {
        "chosen log p": chosen.mean(),
        "rejected log p": rejected.mean(),
        "margin": margin.mean(),
        "ranked right": jnp.mean(margin > 0),
    }


class PreferencePairs(eqx.Module):
    """DPO on pairs of a preferred and a rejected answer to one prompt.

    The reference model's log-probabilities of both answers are computed once, when the task is
    built. ``loss`` is :func:`~.policy_gradient.dpo_loss` of the answers' whole log-probabilities;
    its metrics are the mean log-probabilities of the chosen and the rejected answers under the
    model, the mean margin and the share of pairs the model ranks the right way.
    """

    sources: Array
    chosen: Array
    rejected: Array
    reference_chosen: Array
    reference_rejected: Array
    tests: dict[str, tuple[Array, Array]]
    start_id: int = eqx.field(static=True)
    end_id: int = eqx.field(static=True)
    beta: float = eqx.field(static=True)

    def __init__(self, pairs, reference, *, start_id: int, end_id: int, beta: float = 0.1,
                 tests: dict | None = None):  # fmt: skip
        """Hold the pairs and the reference's log-probabilities of them.

        Args:
            pairs: ``(sources, chosen, rejected)``, (S, N_s), (S, N_t), (S, N_t) ids.
            reference: the reference model (the starting model).
            start_id: the id that starts every answer.
            end_id: the id that ends an answer (its tokens after it do not count).
            beta: β of the loss.
            tests: ``{name: (sources, targets)}`` that ``evaluate`` measures, greedily.

        Raises:
            ValueError: if the three arrays differ in rows or there are none.
        """
        sources, chosen, rejected = (jnp.asarray(a, jnp.int32) for a in pairs)
        if not sources.shape[0] == chosen.shape[0] == rejected.shape[0] > 0:
            raise ValueError(
                f"pairs need one source, one chosen and one rejected answer each; got "
                f"{sources.shape[0]}, {chosen.shape[0]} and {rejected.shape[0]} rows"
            )
        self.sources, self.chosen, self.rejected = sources, chosen, rejected
        self.start_id, self.end_id, self.beta = start_id, end_id, beta
        reference = _frozen(reference)
        self.reference_chosen = self._whole(reference, sources, chosen)
        self.reference_rejected = self._whole(reference, sources, rejected)
        self.tests = {name: _test_split(split) for name, split in (tests or {}).items()}

    def _whole(self, model, sources, answers) -> Array:
        log_p = answer_log_probs(model, sources, answers, self.start_id)
        return (log_p * answer_mask(answers, self.end_id)).sum(-1)

    def batch(self, key: PRNGKeyArray, batch_size: int) -> dict[str, Array]:
        """B pairs drawn with replacement, with their reference log-probabilities."""
        rows = jax.random.randint(key, (batch_size,), 0, self.sources.shape[0])
        names = ("sources", "chosen", "rejected", "reference_chosen", "reference_rejected")
        return {name: getattr(self, name)[rows] for name in names}

    def loss(self, model, batch: dict[str, Array]) -> tuple[Array, dict[str, Array]]:
        """DPO's loss on the batch's pairs."""
        chosen = self._whole(model, batch["sources"], batch["chosen"])
        rejected = self._whole(model, batch["sources"], batch["rejected"])
        return _dpo_figures(chosen, rejected, batch["reference_chosen"],
                            batch["reference_rejected"], self.beta)  # fmt: skip

    def evaluate(self, model) -> dict[str, float]:
        """Greedy exact match on each test split.

        Raises:
            ValueError: if the task has no test splits.
        """
        if not self.tests:
            raise ValueError("this task has no test splits: give tests={name: (sources, targets)}")
        return _evaluate(model, self.tests, self.start_id)


def preference_pairs(
    model, sources, targets, *, key: PRNGKeyArray, start_id: int, group_size: int = 8,
    batch_size: int = 512,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Pairs the verifier builds from the model's own samples: a right and a wrong answer.

    For each prompt, ``group_size`` answers are sampled; where at least one is right and one
    wrong, the first right one is chosen and the first wrong one rejected. Prompts whose samples
    are all right or all wrong give no pair.

    Returns:
        ``(sources, chosen, rejected)`` of the prompts that gave a pair, as numpy arrays.
    """
    sources, targets = np.asarray(sources), np.asarray(targets)
    draw = optimised_jit(lambda m, s, k: sample_targets(m, s, k, start_id, targets.shape[1]))
    kept = ([], [], [])
    for first in range(0, len(sources), batch_size):
        s = np.repeat(sources[first : first + batch_size], group_size, axis=0)
        t = np.repeat(targets[first : first + batch_size], group_size, axis=0)
        keys = jax.random.split(jax.random.fold_in(key, first), len(s))
        answers = np.asarray(draw(model, jnp.asarray(s), keys))
        right = np.asarray(exact_match_reward(answers, t, 0)).reshape(-1, group_size) > 0
        answers = answers.reshape(-1, group_size, answers.shape[1])
        for row in np.flatnonzero(right.any(1) & ~right.all(1)):
            kept[0].append(s[row * group_size])
            kept[1].append(answers[row, right[row].argmax()])
            kept[2].append(answers[row, (~right[row]).argmax()])
    if not kept[0]:
        raise ValueError(
            "no prompt had both a right and a wrong sampled answer: sample more answers a prompt "
            "(group_size) or more prompts"
        )
    return tuple(np.stack(k) for k in kept)


# ---------------------------------------------------------------------------------------------
# Chapter 17's runs on the dates of chapter 10

#: GRPO on the dates: P = 16 prompts a step, G = 8 answers each (128 sampled answers a step).
DATES_GRPO_RECIPE = Recipe(
    steps=100,
    batch_size=16,
    learning_rate=1e-3,
    warmup_steps=10,
    weight_decay=0.0,
    decay="all",
    b2=0.999,
    steps_per_call=25,
)
#: Supervised training on the same prompts with their answers, 128 answers a step as GRPO reads.
DATES_SFT_RECIPE = DATES_GRPO_RECIPE.replace(batch_size=128)
#: GRPO with a partial reward (reward hacking): logged every 10 steps, to draw the KL against
#: the reward as it trains.
DATES_PARTIAL_REWARD_RECIPE = DATES_GRPO_RECIPE.replace(steps_per_call=10)
#: DPO on pairs built from the model's own samples, 64 pairs a step, logged every 10 steps.
DATES_DPO_RECIPE = DATES_GRPO_RECIPE.replace(batch_size=64, learning_rate=3e-4,
                                             steps_per_call=10)  # fmt: skip
GROUP_SIZE = 8


def unseen_format_prompts(count: int, seed: int = 17) -> list[tuple[str, str]]:
    """Dates written in the formats chapter 10's model never saw, none of them a test date.

    The training formats' dates and the held-out test sets' dates (``load_test_sets(2000)``)
    are excluded, and so is any string a training format also writes.
    """
    tests = dates.load_test_sets(2000, seed=0)
    excluded = [
        datetime.date.fromisoformat(iso)
        for name in ("seen formats", "unseen formats")
        for _, iso in tests[name]
    ]
    return dates.make_pairs(
        count, seed=seed, formats=dates.HELD_OUT_FORMATS, exclude=excluded,
        distinct_from=dates.TRAIN_FORMATS,
    )  # fmt: skip


def encoded(pairs) -> tuple[np.ndarray, np.ndarray]:
    """``(sources, targets)`` of (date string, ISO date) pairs: the prompts and their answers."""
    return (
        dates.encode_sources(text for text, _ in pairs),
        dates.encode_targets(iso for _, iso in pairs)[1],
    )


# ---------------------------------------------------------------------------------------------
# The same for a causal language model, whose answer continues its prompt (SmolLM2)


@optimised_jit
def _continuations(model, ids, lengths, keys, num_tokens: int, window: int, temperature):
    def one(ids, length, key):
        logits, cache = prefill(model, ids, length, window)
        return decode(model, logits, cache, length, key, num_tokens, temperature)

    return jax.vmap(one)(ids, lengths, keys)


def sample_continuations(
    model, prompts, num_tokens: int, *, key: PRNGKeyArray, temperature: float = 1.0,
    batch_size: int = 64,
) -> np.ndarray:  # fmt: skip
    """``num_tokens`` tokens sampled after each prompt by a causal language model, (S, T).

    Row s is drawn with the key ``fold_in(key, s)``, so that a prompt's sample does not depend on
    the prompts that share its batch. Every prompt is zero-padded to the longest one's length
    (rounded up to 16) and runs generation's :func:`~.models.generation.prefill` and
    :func:`~.models.generation.decode`, ``batch_size`` rows at a time under ``vmap``; the last
    batch is filled up with copies so that one program serves them all.

    Raises:
        ValueError: for no prompts, an empty prompt, fewer than one new token, or a prompt and
            its new tokens longer than the model's context.
    """
    prompts = [np.asarray(p, np.int32).ravel() for p in prompts]
    if not prompts or min(p.size for p in prompts) == 0:
        raise ValueError("sample_continuations needs at least one prompt, none of them empty")
    if num_tokens < 1:
        raise ValueError(f"num_tokens must be at least 1, got {num_tokens}")
    context = model.config.window
    if max(p.size for p in prompts) + num_tokens > context:
        raise ValueError(
            f"a prompt of {max(p.size for p in prompts)} tokens and {num_tokens} new ones exceed "
            f"the model's context of {context}"
        )
    longest = min(-(-max(p.size for p in prompts) // 16) * 16, context)
    ids = np.zeros((len(prompts), longest), np.int32)
    for s, p in enumerate(prompts):
        ids[s, : p.size] = p
    lengths = np.array([p.size for p in prompts], np.int32)
    keys = jax.vmap(jax.random.fold_in, (None, 0))(key, jnp.arange(len(prompts)))
    out = []
    for first in range(0, len(prompts), batch_size):
        rows = np.arange(first, first + batch_size) % len(prompts)
        tokens = _continuations(model, jnp.asarray(ids[rows]), jnp.asarray(lengths[rows]),
                                keys[rows], num_tokens, min(longest + num_tokens, context),
                                jnp.float32(temperature))  # fmt: skip
        out.append(np.asarray(tokens)[: len(prompts) - first])
    return np.concatenate(out)


def continuation_matches(samples: np.ndarray, answers) -> np.ndarray:
    """Whether each sample begins with its answer (the answer's end token included): (S,)."""
    return np.array([
        len(a) <= len(s) and np.array_equal(s[: len(a)], a)
        for s, a in zip(samples, answers, strict=True)
    ])  # fmt: skip


def _up_to_end(tokens: np.ndarray, end_id: int) -> np.ndarray:
    ends = np.flatnonzero(tokens == end_id)
    return tokens if ends.size == 0 else tokens[: ends[0] + 1]


def continuation_preference_pairs(
    model, prompts, answers, *, key: PRNGKeyArray, end_id: int, group_size: int = 8,
    num_tokens: int | None = None, batch_size: int = 64,
) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], np.ndarray]:  # fmt: skip
    """Pairs the verifier builds from a causal model's own samples: a right and a wrong answer.

    ``group_size`` continuations of each prompt are sampled (:func:`sample_continuations`, at
    temperature 1); a continuation is right when it begins with the answer, whose last token is
    ``end_id``. Where a prompt's samples hold a right and a wrong one, the pair is the answer
    and the first wrong sample up to its first end token (all of it without one).

    Returns:
        The pairs ``(prompt, chosen, rejected)`` and which samples were right, (S, G) booleans.

    Raises:
        ValueError: if an answer does not end with ``end_id``.
    """
    prompts = [np.asarray(p, np.int32).ravel() for p in prompts]
    answers = [np.asarray(a, np.int32).ravel() for a in answers]
    if any(a.size == 0 or a[-1] != end_id for a in answers):
        raise ValueError(f"every answer must end with the end token {end_id}: the verifier needs "
                         "to know where an answer stops")  # fmt: skip
    num_tokens = max(a.size for a in answers) + 2 if num_tokens is None else num_tokens
    repeated = [p for p in prompts for _ in range(group_size)]
    samples = sample_continuations(model, repeated, num_tokens, key=key, batch_size=batch_size)
    right = continuation_matches(samples, [a for a in answers for _ in range(group_size)])
    right, samples = right.reshape(-1, group_size), samples.reshape(len(prompts), group_size, -1)
    pairs = [
        (prompts[s], answers[s], _up_to_end(samples[s, (~right[s]).argmax()], end_id))
        for s in np.flatnonzero(right.any(1) & ~right.all(1))
    ]
    return pairs, right


@optimised_jit
def continuation_log_probs(model, inputs, targets, answer_mask) -> Array:
    """``log π(y | x)`` of each packed continuation (:func:`~.tasks.pack_pairs`): (B,)."""
    log_p = pg.token_log_probs(model.batched(inputs), targets)
    return jnp.where(answer_mask, log_p, 0.0).sum(-1)


def _log_probs_in_chunks(model, packed, chunk: int) -> Array:
    return jnp.concatenate([
        continuation_log_probs(model, *(a[first : first + chunk] for a in packed))
        for first in range(0, packed[0].shape[0], chunk)
    ])  # fmt: skip


class PreferenceContinuations(eqx.Module):
    """DPO for a causal language model: a preferred and a rejected continuation of one prompt.

    Each pair is packed twice as :class:`~.tasks.SupervisedPairs` packs a prompt and its answer
    (prompt and chosen, prompt and rejected); a continuation's log-probability is the sum of its
    tokens' (:func:`continuation_log_probs`). The reference model's are computed once, when the
    task is built, ``chunk`` pairs at a time. ``loss`` and its metrics are
    :class:`PreferencePairs`'; ``evaluate`` gives them over every pair.
    """

    chosen: tuple[Array, Array, Array]
    rejected: tuple[Array, Array, Array]
    reference_chosen: Array
    reference_rejected: Array
    window: int = eqx.field(static=True)
    beta: float = eqx.field(static=True)
    chunk: int = eqx.field(static=True)

    def __init__(self, pairs, reference, *, window: int, vocab_size: int, beta: float = 0.1,
                 chunk: int = 16):  # fmt: skip
        """Pack the pairs and compute the reference's log-probabilities of them.

        Args:
            pairs: ``(prompt, chosen, rejected)`` token ids, as
                :func:`continuation_preference_pairs` returns them.
            reference: the reference model (the starting model).
            window: N, the window the pairs are packed for (prompt plus answer at most N + 1).
            vocab_size: |V|.
            beta: β of the loss.
            chunk: pairs a pass when the reference's log-probabilities are computed.

        Raises:
            ValueError: for no pairs, or a pair that :func:`~.tasks.pack_pairs` refuses.
        """
        pairs = list(pairs)
        if not pairs:
            raise ValueError("PreferenceContinuations needs at least one (prompt, chosen, "
                             "rejected) pair")  # fmt: skip
        self.chosen = pack_pairs("chosen", [(p, c) for p, c, _ in pairs], window, vocab_size)
        self.rejected = pack_pairs("rejected", [(p, r) for p, _, r in pairs], window, vocab_size)
        self.window, self.beta, self.chunk = window, beta, chunk
        reference = _frozen(reference)
        self.reference_chosen = _log_probs_in_chunks(reference, self.chosen, chunk)
        self.reference_rejected = _log_probs_in_chunks(reference, self.rejected, chunk)

    def batch(self, key: PRNGKeyArray, batch_size: int) -> dict:
        """B pairs drawn with replacement, with their reference log-probabilities."""
        rows = jax.random.randint(key, (batch_size,), 0, self.reference_chosen.shape[0])
        return {
            "chosen": tuple(a[rows] for a in self.chosen),
            "rejected": tuple(a[rows] for a in self.rejected),
            "reference_chosen": self.reference_chosen[rows],
            "reference_rejected": self.reference_rejected[rows],
        }

    def loss(self, model, batch: dict) -> tuple[Array, dict[str, Array]]:
        """DPO's loss on the batch's pairs."""
        chosen = continuation_log_probs(model, *batch["chosen"])
        rejected = continuation_log_probs(model, *batch["rejected"])
        return _dpo_figures(chosen, rejected, batch["reference_chosen"],
                            batch["reference_rejected"], self.beta)  # fmt: skip

    def evaluate(self, model) -> dict[str, float]:
        """The loss and its metrics over every pair, ``chunk`` pairs a pass."""
        chosen = _log_probs_in_chunks(model, self.chosen, self.chunk)
        rejected = _log_probs_in_chunks(model, self.rejected, self.chunk)
        loss, metrics = _dpo_figures(chosen, rejected, self.reference_chosen,
                                     self.reference_rejected, self.beta)  # fmt: skip
        return {"loss": float(loss), **{name: float(v) for name, v in metrics.items()}}
