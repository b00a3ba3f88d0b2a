"""How a model is trained.

The optimiser, its learning-rate schedule, which parameters weight decay applies to, clipping, the
batch size and number of steps, and how steps are grouped on the device.

Two optimisers: AdamW everywhere (the default), or Muon (Jordan et al. 2024) for the matrices of
the transformer blocks with AdamW for everything else. Muon's update for a matrix is its momentum
*orthogonalised*: the momentum ``Z = Σ_i σ_i a_i b_iᵀ`` (its singular value decomposition) is
replaced by roughly ``Σ_i a_i b_iᵀ``, computed with a few Newton-Schulz iterations, so that every
direction the matrix maps gets an update of the same size, however lopsided the gradient is.
That is a statement about a matrix acting as a linear map, so Muon is given only those:

* the blocks' projections and MLP weights are linear maps of a token, and get Muon;
* an embedding table is a lookup (row s is symbol s's vector, each updated only when s occurs),
  and the read-out's rows are one score per symbol: neither acts as one linear map whose
  directions should move together, and rare symbols' rows would be pushed as hard as common
  ones'; they get AdamW, as in Jordan et al.'s recipe;
* gains, shifts and biases are vectors, with no singular values to equalise: AdamW.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Literal

import jax
import optax
from optax.contrib import MuonDimensionNumbers

from ..config import JsonConfig

__all__ = ["Recipe", "decay_mask", "muon_dimensions", "optimiser_labels"]

MatrixOptimiser = Literal["adamw", "muon"]


def decay_mask(params) -> object:
    """True at the parameters weight decay shrinks under ``decay="matrices"``.

    Those are the arrays of two or more axes (projections, MLP weights, embedding tables); False
    at vectors (biases, LayerNorm gains and shifts, the class token).
    """
    return jax.tree_util.tree_map(lambda p: p.ndim >= 2, params)


def _in_blocks(path) -> bool:
    """Whether a leaf's path passes through a field named ``blocks`` (or ``..._blocks``)."""
    return any(isinstance(k, jax.tree_util.GetAttrKey) and k.name.endswith("blocks") for k in path)


def _last_name(path) -> str:
    names = [k.name for k in path if isinstance(k, jax.tree_util.GetAttrKey)]
    return names[-1] if names else ""


def _dimensions(path, p) -> MuonDimensionNumbers | None:
    if p.ndim < 2 or not _in_blocks(path):
        return None
    if _last_name(path) == "output_projections":
        # (H, D, Dv): head h's O_h maps its Dv values to D. Together the heads' O_h are one
        # D x (H Dv) matrix W_O = [O_1 ... O_H]; its inputs are the (h, v) axes.
        return MuonDimensionNumbers(reduction_axis=(0, 2), output_axis=1)
    # Equinox's Linear stores (out, in), and the attention's (H, K, D) query, key and value
    # projections stack the heads' K x D maps: the last axis is the input D, the other axes
    # together are the output, so (H, K, D) is orthogonalised as one (H K) x D matrix.
    return MuonDimensionNumbers(reduction_axis=p.ndim - 1, output_axis=tuple(range(p.ndim - 1)))


def muon_dimensions(params) -> object:
    """For each parameter, how Muon sees it as a matrix, or None where AdamW updates it.

    Muon takes the arrays of two or more axes inside the model's transformer blocks (any field
    named ``blocks``): the attention projections and the MLP weights. Each is read as one matrix
    from its input axes (``reduction_axis``) to its output axes (``output_axis``). The attention
    module stores per-head tensors; the heads of a query, key or value projection, (H, K, D),
    are orthogonalised together as one (H K) x D matrix, which is the usual ``W_Q`` of
    Vaswani et al. (2017), the matrix Muon's authors orthogonalise. The output projections,
    (H, D, Dv), become the one D x (H Dv) matrix ``W_O``. Everything else (embedding tables, the
    read-out, gains, biases) is None.
    """
    return jax.tree_util.tree_map_with_path(_dimensions, params)


def optimiser_labels(params) -> object:
    """``"muon"`` or ``"adamw"`` at each parameter.

    It says which optimiser updates the parameter when ``matrix_optimiser="muon"`` (see
    :func:`muon_dimensions`).
    """
    return jax.tree_util.tree_map_with_path(
        lambda path, p: "adamw" if _dimensions(path, p) is None else "muon", params
    )


def _is_whole(value, low: int) -> bool:
    # bool is an int to Python, but steps=True is a mistake, not a count.
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= low


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _check(name: str, value, ok: bool, allowed: str) -> None:
    if not ok:
        raise ValueError(f"Recipe's {name} must be {allowed}, got {value!r}")


# The fields that configure Muon; they do nothing unless ``matrix_optimiser="muon"``.
_MUON_FIELDS = ("matrix_optimiser", "muon_learning_rate", "muon_momentum")


@dataclasses.dataclass(frozen=True)
class Recipe(JsonConfig):
    """Every number of a training run, as plain values (so it saves as JSON).

    The optimiser is AdamW (Loshchilov & Hutter 2019): Adam's update with moment decay rates
    ``b1`` and ``b2``, plus weight decay, ``θ ← θ - η_t (update + weight_decay · θ)``. With
    ``matrix_optimiser="muon"`` the blocks' matrices are updated by Muon instead (see the module's
    docstring and :func:`muon_dimensions`), with its own peak learning rate; the rest keeps
    exactly the AdamW above.

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
        matrix_optimiser: what updates the blocks' matrices: ``"adamw"`` (like every other
            parameter), or ``"muon"`` (AdamW still updates the rest).
        muon_learning_rate: Muon's peak learning rate; its schedule has the same shape as η_t,
            scaled by ``muon_learning_rate / learning_rate``. Muon's update has singular values
            near one, so its learning rate is on another scale than Adam's.
        muon_momentum: Muon's momentum decay rate (Nesterov momentum, as Jordan et al.).

    Raises:
        ValueError: if a field is outside its range (the message names the field, its value and
            the range), e.g. ``warmup_steps > steps`` or ``b2 >= 1``.
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
    matrix_optimiser: MatrixOptimiser = "adamw"
    muon_learning_rate: float = 0.02
    muon_momentum: float = 0.95

    def __post_init__(self):
        for name in ("steps", "batch_size", "steps_per_call", "micro_batches"):
            _check(
                name, getattr(self, name), _is_whole(getattr(self, name), 1), "a whole number >= 1"
            )
        _check("seed", self.seed, _is_whole(self.seed, 0), "a whole number >= 0")
        _check(
            "warmup_steps",
            self.warmup_steps,
            _is_whole(self.warmup_steps, 0) and self.warmup_steps <= self.steps,
            f"a whole number in [0, steps={self.steps}]",
        )
        _check(
            "learning_rate",
            self.learning_rate,
            _is_real(self.learning_rate) and self.learning_rate > 0,
            "positive (a finite number > 0)",
        )
        _check(
            "final_learning_rate",
            self.final_learning_rate,
            _is_real(self.final_learning_rate)
            and 0 <= self.final_learning_rate <= self.learning_rate,
            f"in [0, learning_rate={self.learning_rate}]",
        )
        _check(
            "weight_decay",
            self.weight_decay,
            _is_real(self.weight_decay) and self.weight_decay >= 0,
            "a finite number >= 0",
        )
        for name in ("b1", "b2", "muon_momentum"):
            value = getattr(self, name)
            _check(name, value, _is_real(value) and 0 <= value < 1, "in [0, 1)")
        if self.clip_norm is not None:
            _check(
                "clip_norm",
                self.clip_norm,
                _is_real(self.clip_norm) and self.clip_norm > 0,
                "positive or None (no clipping)",
            )
        _check(
            "muon_learning_rate",
            self.muon_learning_rate,
            _is_real(self.muon_learning_rate) and self.muon_learning_rate > 0,
            "positive (a finite number > 0)",
        )
        if self.schedule not in ("cosine", "constant"):
            raise ValueError(f"schedule must be 'cosine' or 'constant', got {self.schedule!r}")
        if self.decay not in ("all", "matrices"):
            raise ValueError(f"decay must be 'all' or 'matrices', got {self.decay!r}")
        if self.batch_size % self.micro_batches:
            raise ValueError(
                f"micro_batches={self.micro_batches} does not divide batch_size={self.batch_size}"
            )
        if self.matrix_optimiser not in ("adamw", "muon"):
            raise ValueError(
                f"matrix_optimiser must be 'adamw' or 'muon', got {self.matrix_optimiser!r}"
            )

    def __repr__(self) -> str:
        # Muon's settings act only when it is chosen: an AdamW recipe prints without them.
        inert = () if self.matrix_optimiser == "muon" else _MUON_FIELDS
        shown = (f for f in dataclasses.fields(self) if f.name not in inert)
        return f"Recipe({', '.join(f'{f.name}={getattr(self, f.name)!r}' for f in shown)})"

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
        """AdamW (or Muon and AdamW) with this recipe's schedule and decay policy.

        Gradients are clipped first when ``clip_norm`` is set.
        """
        schedule = self.learning_rate_schedule()
        update = optax.adamw(
            schedule,
            b1=self.b1,
            b2=self.b2,
            weight_decay=self.weight_decay,
            mask=decay_mask if self.decay == "matrices" else None,
        )
        if self.matrix_optimiser == "muon":
            ratio = self.muon_learning_rate / self.learning_rate
            # optax's Muon, given only the matrices (its own AdamW branch then holds nothing):
            # the other parameters keep exactly the AdamW above. Every matrix is decayed, as
            # under either decay policy, by weight_decay times Muon's learning rate.
            muon = optax.contrib.muon(
                lambda t: ratio * schedule(t),
                beta=self.muon_momentum,
                weight_decay=self.weight_decay,
                muon_weight_dimension_numbers=muon_dimensions,
            )
            update = optax.partition({"muon": muon, "adamw": update}, optimiser_labels)
        if self.clip_norm is None:
            return update
        return optax.chain(optax.clip_by_global_norm(self.clip_norm), update)
