"""How a model is trained.

The optimiser, its learning-rate schedule, which parameters weight decay applies to, clipping, the
batch size and number of steps, and how steps are grouped on the device.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Literal

import jax
import optax

__all__ = ["Recipe", "decay_mask"]


def decay_mask(params) -> object:
    """True at the parameters weight decay shrinks under ``decay="matrices"``: arrays of two or
    more axes (projections, MLP weights, embedding tables); False at vectors (biases, LayerNorm
    gains and shifts, the class token)."""
    return jax.tree_util.tree_map(lambda p: p.ndim >= 2, params)


@dataclasses.dataclass(frozen=True)
class Recipe:
    """Every number of a training run, as plain values (so it saves as JSON).

    The optimiser is AdamW (Loshchilov & Hutter 2019): Adam's update with moment decay rates
    ``b1`` and ``b2``, plus weight decay, ``θ ← θ - η_t (update + weight_decay · θ)``.

    Attributes:
        steps: T, the number of optimiser steps.
        batch_size: B, examples per step.
        learning_rate: the peak learning rate η.
        warmup_steps: steps over which η_t rises linearly from 0 to η.
        schedule: ``"cosine"``, warm-up then a cosine decay to ``final_learning_rate`` at step T;
            or ``"constant"``, warm-up (if any) then η throughout.
        final_learning_rate: η_T of the cosine schedule.
        weight_decay: the AdamW decay coefficient.
        decay: which parameters weight decay applies to: ``"all"`` of them (the ViT chapter's
            recipe, as the reference trains), or only the ``"matrices"`` (arrays of two or more
            axes: biases and LayerNorm parameters are left alone, the usual GPT practice).
        b1: Adam's first-moment decay rate.
        b2: Adam's second-moment decay rate.
        clip_norm: when a float, gradients are rescaled so that their global norm is at most this.
        steps_per_call: how many steps one compiled call runs (a ``lax.scan``); progress,
            logging and callbacks happen between calls.
        micro_batches: the batch is cut into this many equal parts whose gradients are averaged
            (the same update, less memory per pass).
        seed: the run's seed; step t's batch is drawn with ``fold_in(PRNGKey(seed), t)``.
    """

    steps: int
    batch_size: int
    learning_rate: float
    warmup_steps: int = 0
    schedule: Literal["cosine", "constant"] = "cosine"
    final_learning_rate: float = 0.0
    weight_decay: float = 0.0
    decay: Literal["all", "matrices"] = "matrices"
    b1: float = 0.9
    b2: float = 0.999
    clip_norm: float | None = None
    steps_per_call: int = 25
    micro_batches: int = 1
    seed: int = 0

    def __post_init__(self):
        for name in ("steps", "batch_size", "steps_per_call", "micro_batches"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must not be negative, got {self.warmup_steps}")
        if self.schedule not in ("cosine", "constant"):
            raise ValueError(f"schedule must be 'cosine' or 'constant', got {self.schedule!r}")
        if self.decay not in ("all", "matrices"):
            raise ValueError(f"decay must be 'all' or 'matrices', got {self.decay!r}")
        if self.batch_size % self.micro_batches:
            raise ValueError(
                f"micro_batches={self.micro_batches} does not divide batch_size={self.batch_size}"
            )
        if self.clip_norm is not None and self.clip_norm <= 0:
            raise ValueError(f"clip_norm must be positive or None, got {self.clip_norm}")

    def replace(self, **changes) -> Recipe:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Recipe:
        return cls(**json.loads(text))

    def learning_rate_schedule(self) -> optax.Schedule:
        """η_t as a function of the step t (an Optax schedule; call it on steps to plot it)."""
        if self.schedule == "constant":
            if self.warmup_steps == 0:
                return optax.constant_schedule(self.learning_rate)
            return optax.linear_schedule(0.0, self.learning_rate, self.warmup_steps)
        warmup = max(self.warmup_steps, 1)  # Optax needs at least one warm-up step
        return optax.warmup_cosine_decay_schedule(
            0.0, self.learning_rate, warmup, max(self.steps, warmup + 1), self.final_learning_rate
        )

    def optimiser(self) -> optax.GradientTransformation:
        """AdamW with this recipe's schedule and decay policy, after clipping when ``clip_norm``."""
        adamw = optax.adamw(
            self.learning_rate_schedule(),
            b1=self.b1,
            b2=self.b2,
            weight_decay=self.weight_decay,
            mask=decay_mask if self.decay == "matrices" else None,
        )
        if self.clip_norm is None:
            return adamw
        return optax.chain(optax.clip_by_global_norm(self.clip_norm), adamw)
