"""Chapter 10 (an encoder-decoder): teacher forcing, the padding mask, label smoothing."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..attention import padding_mask
from .core import Case, Diagnosis, Exercise

TEACHER_FORCING_INPUTS = Exercise(
    name="teacher_forcing_inputs",
    chapter=10,
    title="The decoder's inputs under teacher forcing",
    reference=lambda targets, start_id: jnp.concatenate(
        [jnp.full((targets.shape[0], 1), start_id, targets.dtype), targets[:, :-1]], axis=1
    ),
    cases=lambda: [
        Case("B = 2, N_t = 4, start 1", (np.array([[5, 6, 7, 2], [8, 9, 2, 0]], np.int32), 1)),
        Case("B = 1, N_t = 1, start 3", (np.array([[4]], np.int32), 3)),
    ],
    diagnoses=(
        Diagnosis.like(
            "not_shifted",
            "the decoder reads the targets it must predict: shift them right by one, with "
            "the start symbol first",
            lambda targets, start_id: targets,
        ),
        Diagnosis.like(
            "start_appended",
            "the start symbol is appended: it goes first, then the targets without their last",
            lambda targets, start_id: jnp.concatenate(
                [targets[:, 1:], jnp.full((targets.shape[0], 1), start_id, targets.dtype)], 1
            ),
        ),
        Diagnosis.like(
            "first_dropped",
            "the first target is dropped: the inputs are the start symbol, then targets[:, :-1]",
            lambda targets, start_id: jnp.concatenate(
                [jnp.full((targets.shape[0], 1), start_id, targets.dtype), targets[:, 1:]], 1
            ),
        ),
    ),
)

PADDING_MASK_BY_HAND = Exercise(
    name="padding_mask_by_hand",
    chapter=10,
    title="The padding mask",
    reference=padding_mask,
    cases=lambda: [
        Case("M = 5 inputs, 2 of them padding", (np.array([True, True, True, False, False]),)),
        Case("M = 3 inputs, N = 4 outputs", (np.array([True, False, True]), 4)),
        Case("M = N = 3", (np.array([True, True, False]), 3)),
    ],
    output="(M, N)",
    diagnoses=(
        Diagnosis.like(
            "rows_not_columns",
            "the mask varies along the rows: mask[n', n] = is_real[n'], so every column is "
            "the same (rows are the inputs)",
            lambda is_real, num_outputs=None: (
                padding_mask(is_real, num_outputs).T
                if num_outputs in (None, is_real.shape[0])
                else jnp.broadcast_to(is_real[None, :num_outputs], (is_real.shape[0], num_outputs))
            ),
        ),  # fmt: skip
        Diagnosis.like(
            "inverted",
            "the mask allows the padding and forbids the real tokens: True means 'may read'",
            lambda is_real, num_outputs=None: ~padding_mask(is_real, num_outputs),
        ),
        Diagnosis.like(
            "ignores_num_outputs",
            "the mask is square: it has one column per output, N = num_outputs of them",
            lambda is_real, num_outputs=None: padding_mask(is_real),
        ),
    ),
)


def _smoothed(logits, targets, epsilon, pad_id=0):
    import optax  # training's dependency, imported when first needed

    vocab = logits.shape[-1]
    labels = optax.smooth_labels(jax.nn.one_hot(targets, vocab), epsilon)
    per_symbol = optax.softmax_cross_entropy(logits, labels)
    real = targets != pad_id
    return (per_symbol * real).sum() / real.sum()


def _smoothed_cases():
    rng = np.random.default_rng(19)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    return [
        Case("B = 2, N_t = 3, |V| = 6, eps = 0.1, no padding",
             (2 * n(2, 3, 6), np.array([[1, 2, 3], [4, 5, 1]]), 0.1)),
        Case("B = 2, N_t = 4, |V| = 5, eps = 0.2, padding",
             (2 * n(2, 4, 5), np.array([[1, 2, 0, 0], [3, 4, 2, 0]]), 0.2)),
        Case("eps = 0", (2 * n(1, 3, 4), np.array([[1, 2, 3]]), 0.0)),
    ]  # fmt: skip


def _unsmoothed(logits, targets, epsilon, pad_id=0):
    return _smoothed(logits, targets, 0.0, pad_id)


SMOOTHED_CROSS_ENTROPY = Exercise(
    name="smoothed_cross_entropy",
    chapter=10,
    title="Cross-entropy with label smoothing, padding left out",
    reference=_smoothed,
    cases=_smoothed_cases,
    diagnoses=(
        Diagnosis.like(
            "padding_counted",
            "the padding positions are counted: leave out positions whose target is the "
            "padding symbol, in the sum and in the count",
            lambda logits, targets, epsilon, pad_id=0: _smoothed(logits, targets, epsilon, -1),
        ),
        Diagnosis.like(
            "no_smoothing",
            "there is no smoothing: mix (1 - eps) of the label's loss with eps of the mean "
            "loss over all |V| symbols",
            _unsmoothed,
        ),
        Diagnosis.like(
            "mean_over_all",
            "the sum over real positions is divided by all positions: divide by the number "
            "of real (non-padding) targets",
            lambda logits, targets, epsilon, pad_id=0: (
                _smoothed(logits, targets, epsilon, pad_id)
                * (targets != pad_id).sum()
                / targets.size
            ),
        ),
    ),
)

EXERCISES = [TEACHER_FORCING_INPUTS, PADDING_MASK_BY_HAND, SMOOTHED_CROSS_ENTROPY]
