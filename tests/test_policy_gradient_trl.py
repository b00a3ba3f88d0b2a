"""Chapter 17's GRPO and DPO losses against trl 1.16.0's, on the same numbers.

trl computes its losses inside its trainers' ``_compute_loss`` methods, which read a handful of
the trainer's settings and call a model. Each test runs that very method on a stand-in trainer
holding only those settings, with a stand-in model that returns given log-probabilities, so
trl's own arithmetic computes the loss from the numbers ours is given. Each comparison has a
negative control: a setting changed on one side only must make the two disagree.
"""

import collections
import types

import jax.numpy as jnp
import numpy as np
import pytest

from transformer_intro.training import policy_gradient as pg

torch = pytest.importorskip("torch")
grpo_trainer = pytest.importorskip("trl.trainer.grpo_trainer")
dpo_trainer = pytest.importorskip("trl.trainer.dpo_trainer")
trl_utils = pytest.importorskip("trl.trainer.utils")


class _Accelerator:
    device = "cpu"

    @staticmethod
    def gather(x):
        return x

    gather_for_metrics = gather

    @staticmethod
    def reduce(x, reduction="sum"):
        return x


def _metrics():
    return collections.defaultdict(lambda: collections.defaultdict(list))


def trl_grpo_loss(log_p, log_old, log_ref, advantages, mask, *, clip, beta, loss_type):
    """trl's GRPO loss for these per-token log-probabilities, and its gradient in ``log_p``."""
    log_p = torch.tensor(np.asarray(log_p), dtype=torch.float64, requires_grad=True)
    trainer = types.SimpleNamespace(
        _get_per_token_logps_and_entropies=lambda *a, **k: (log_p, torch.zeros_like(log_p), None),
        aux_loss_enabled=False, top_entropy_quantile=1.0, off_policy_mask_threshold=None,
        importance_sampling_level="token", beta=beta, loss_type=loss_type,
        args=types.SimpleNamespace(use_bias_correction_kl=False, delta=None),
        epsilon_low=clip, epsilon_high=clip, use_vllm=False,
        model=types.SimpleNamespace(training=True), current_gradient_accumulation_steps=1,
        _entropy_bonus_enabled=False, _metrics=_metrics(), accelerator=_Accelerator(),
    )  # fmt: skip
    b, t = log_p.shape
    inputs = {
        "prompt_ids": torch.zeros((b, 1), dtype=torch.long),
        "prompt_mask": torch.ones((b, 1), dtype=torch.long),
        "completion_ids": torch.zeros((b, t), dtype=torch.long),
        "completion_mask": torch.tensor(np.asarray(mask), dtype=torch.float64),
        "advantages": torch.tensor(np.asarray(advantages), dtype=torch.float64),
        "old_per_token_logps": torch.tensor(np.asarray(log_old), dtype=torch.float64),
        "ref_per_token_logps": torch.tensor(np.asarray(log_ref), dtype=torch.float64),
    }
    loss = grpo_trainer.GRPOTrainer._compute_loss(trainer, None, inputs)
    loss.backward()
    return float(loss), log_p.grad.detach().numpy()


def ours_grpo(log_p, log_old, log_ref, advantages, mask, *, clip, beta, level):
    import jax

    def loss(lp):
        return pg.grpo_loss(lp, log_old, log_ref, advantages, mask,
                            clip=clip, kl_weight=beta, level=level)[0]  # fmt: skip

    value, grad = jax.value_and_grad(loss)(jnp.asarray(log_p, jnp.float32))
    return float(value), np.asarray(grad)


@pytest.fixture(scope="module")
def numbers():
    rng = np.random.default_rng(0)
    b, t = 6, 5
    log_old = -rng.uniform(0.1, 3.0, (b, t))
    log_p = log_old + rng.normal(0, 0.3, (b, t))  # off policy: ratios on both sides of the clip
    log_ref = log_old + rng.normal(0, 0.2, (b, t))
    mask = np.ones((b, t))
    mask[1, 3:] = mask[4, 1:] = 0  # answers of different lengths
    advantages = rng.normal(size=b)
    return log_p, log_old, log_ref, advantages, mask


@pytest.mark.parametrize(("loss_type", "level"), [("grpo", "sequence"), ("bnpo", "token")])
def test_grpo_loss_and_gradient_equal_trls(numbers, loss_type, level):
    theirs = trl_grpo_loss(*numbers, clip=0.2, beta=0.04, loss_type=loss_type)
    ours = ours_grpo(*numbers, clip=0.2, beta=0.04, level=level)
    assert np.isclose(ours[0], theirs[0], rtol=1e-5, atol=1e-6)
    assert np.allclose(ours[1], theirs[1], rtol=1e-4, atol=1e-6)
    # controls: the other level, another clip, or no KL term on our side only
    other = "token" if level == "sequence" else "sequence"
    assert not np.isclose(ours_grpo(*numbers, clip=0.2, beta=0.04, level=other)[0], theirs[0])
    assert not np.allclose(ours_grpo(*numbers, clip=0.1, beta=0.04, level=level)[1], theirs[1])
    assert not np.isclose(ours_grpo(*numbers, clip=0.2, beta=0.0, level=level)[0], theirs[0])


def test_group_advantages_equal_trls_formula():
    rewards = np.random.default_rng(1).integers(0, 2, (4, 8)).astype(np.float64)
    rewards[0] = 1.0  # a group with no spread
    r = torch.tensor(rewards)
    centred = r - r.mean(1, keepdim=True)
    theirs = centred / (trl_utils.nanstd(r, dim=1, keepdim=True) + 1e-4)  # GRPOTrainer's lines
    assert np.allclose(pg.group_advantages(rewards), theirs.numpy(), atol=1e-4)
    assert np.allclose(pg.group_advantages(rewards, scale_by_std=False), centred.numpy())
    # control: the population standard deviation (divided by G, not G - 1) is not trl's
    population = centred / (r.std(1, correction=0, keepdim=True) + 1e-4)
    assert not np.allclose(pg.group_advantages(rewards), population.numpy(), atol=1e-3)


def trl_dpo_loss(chosen, rejected, ref_chosen, ref_rejected, beta):
    """trl's DPO loss ("sigmoid", reverse KL) for these answers' summed log-probabilities."""
    b = len(chosen)
    # one completion token per answer: its log-probability is the answer's whole log-probability
    log_probs = torch.tensor(np.concatenate([chosen, rejected])[:, None], dtype=torch.float64)
    outputs = types.SimpleNamespace(
        log_probs=log_probs, entropy=torch.zeros_like(log_probs),
        mean_logits=torch.zeros_like(log_probs), is_top1=torch.zeros_like(log_probs, dtype=bool),
    )  # fmt: skip
    trainer = types.SimpleNamespace(
        model=types.SimpleNamespace(training=True), accelerator=_Accelerator(),
        aux_loss_enabled=False, ld_alpha=None, precompute_ref_logps=True,
        f_divergence_type="reverse_kl", loss_types=["sigmoid"], loss_weights=[1.0], beta=beta,
        use_weighting=False, _metrics=_metrics(), _total_train_tokens=0, _tp_size=1,
    )  # fmt: skip
    inputs = {
        "input_ids": torch.zeros((2 * b, 2), dtype=torch.long),
        "attention_mask": torch.ones((2 * b, 2), dtype=torch.long),
        "completion_mask": torch.tensor([[0, 1]] * (2 * b)),
        "ref_chosen_logps": torch.tensor(ref_chosen, dtype=torch.float64),
        "ref_rejected_logps": torch.tensor(ref_rejected, dtype=torch.float64),
    }
    loss = dpo_trainer.DPOTrainer._compute_loss(trainer, lambda **k: outputs, inputs, False)
    return float(loss), trainer._metrics["train"]


def test_dpo_loss_equals_trls():
    rng = np.random.default_rng(2)
    chosen, rejected, ref_c, ref_r = (rng.normal(-8, 2, 5) for _ in range(4))
    theirs, metrics = trl_dpo_loss(chosen, rejected, ref_c, ref_r, beta=0.1)
    assert np.isclose(float(pg.dpo_loss(chosen, rejected, ref_c, ref_r, 0.1)), theirs, rtol=1e-5)
    # both are log 2 at the reference
    assert np.isclose(trl_dpo_loss(ref_c, ref_r, ref_c, ref_r, 0.1)[0], np.log(2))
    # trl's logged margin is β times ours
    margin = 0.1 * ((chosen - ref_c) - (rejected - ref_r)).mean()
    assert np.isclose(metrics["rewards/margins"][0], margin)
    # controls: another β, or the pairs swapped, on our side only
    assert not np.isclose(float(pg.dpo_loss(chosen, rejected, ref_c, ref_r, 0.2)), theirs)
    assert not np.isclose(float(pg.dpo_loss(rejected, chosen, ref_r, ref_c, 0.1)), theirs)
