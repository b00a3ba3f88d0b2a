"""Chapter 8 (the vision transformer): cross-entropy, the class token, the learning rate."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .core import Case, Diagnosis, Exercise, Property


def _cross_entropy(logits, labels):
    import optax  # training's dependency, imported when first needed

    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def _ce_cases():
    rng = np.random.default_rng(17)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    return [
        Case("B = 4, C = 10", (2 * n(4, 10), np.array([3, 0, 9, 3]))),
        Case("B = 1, C = 3", (n(1, 3), np.array([2]))),
        Case("logits near 100, B = 3, C = 5", (100 + n(3, 5), np.array([0, 4, 1])), large=True),
    ]


MEAN_CROSS_ENTROPY = Exercise(
    name="mean_cross_entropy",
    chapter=8,
    title="The mean cross-entropy of a batch of class scores",
    reference=_cross_entropy,
    cases=_ce_cases,
    overflow="overflows for logits near 100: use jax.nn.log_softmax (or subtract each row's "
    "maximum before exponentiating)",
    properties=(Property("positive", lambda got, case: float(got) > 0, "the loss is negative"),),
    diagnoses=(
        Diagnosis.like(
            "no_log_softmax",
            "the logits are used as log-probabilities: take the log-softmax of each row first",
            lambda logits, labels: -jnp.take_along_axis(logits, labels[:, None], 1).mean(),
        ),
        Diagnosis.like(
            "sum_not_mean",
            "the losses are summed over the batch: the chapter's loss is their mean",
            lambda logits, labels: _cross_entropy(logits, labels) * logits.shape[0],
        ),
        Diagnosis.like(
            "sign",
            "the sign is wrong: the loss is minus the log-probability of the label",
            lambda logits, labels: -_cross_entropy(logits, labels),
        ),
        Diagnosis.like(
            "softmax_over_batch",
            "the softmax runs over the batch (axis 0): each example's scores are normalised "
            "over its C classes",
            lambda logits, labels: (
                -jnp.take_along_axis(jax.nn.log_softmax(logits, axis=0), labels[:, None], 1).mean()
            ),
        ),
    ),
)


def _class_cases():
    rng = np.random.default_rng(18)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    return [
        Case("N = 4 patches, D = 3", (n(4, 3), n(3), n(4, 3))),
        Case("N = 1 patch, D = 5", (n(1, 5), n(5), n(1, 5))),
    ]


WITH_CLASS_TOKEN = Exercise(
    name="with_class_token",
    chapter=8,
    title="The ViT's first tokens: the class token, then the position-embedded patches",
    reference=lambda patches, class_token, positions: jnp.concatenate(
        [class_token[None], patches + positions]
    ),
    cases=_class_cases,
    output="(N + 1, D)",
    diagnoses=(
        Diagnosis.like(
            "class_token_last",
            "the class token is appended: it comes first, row 0",
            lambda patches, class_token, positions: jnp.concatenate(
                [patches + positions, class_token[None]]
            ),
        ),
        Diagnosis.like(
            "no_positions",
            "the position embeddings are not added to the patches",
            lambda patches, class_token, positions: jnp.concatenate([class_token[None], patches]),
        ),
        Diagnosis.like(
            "positions_shifted",
            "the position table is added to the wrong rows: positions[n] goes with patch n, "
            "and the class token gets none",
            lambda patches, class_token, positions: (
                jnp.concatenate([class_token[None], patches])
                + jnp.concatenate([positions, jnp.zeros_like(class_token)[None]])
            ),
        ),
    ),
)


def _schedule(t, warmup_steps, steps, peak, final):
    from ..training import Recipe  # the package's top layer, imported when first needed

    recipe = Recipe(steps=steps, batch_size=1, learning_rate=peak, warmup_steps=warmup_steps,
                    final_learning_rate=final)  # fmt: skip
    return recipe.learning_rate_schedule()(t)


def _cosine(t, warmup_steps, steps, peak, final, warm=lambda t, w: t / w):
    progress = jnp.minimum(t - warmup_steps, steps - warmup_steps) / (steps - warmup_steps)
    cosine = final + (peak - final) / 2 * (1 + jnp.cos(jnp.pi * progress))
    return jnp.where(t < warmup_steps, peak * warm(t, warmup_steps), cosine)


WARMUP_COSINE = Exercise(
    name="warmup_cosine",
    chapter=8,
    title="The learning rate: linear warm-up, then a cosine decay",
    reference=_schedule,
    cases=lambda: [
        Case("T = 100, warm-up 10, every step to 120", (np.arange(121), 10, 100, 1e-3, 1e-5)),
        Case("T = 20, warm-up 4, final 0", (np.arange(25), 4, 20, 3e-4, 0.0)),
    ],
    atol=1e-9,
    rtol=1e-4,
    diagnoses=(
        Diagnosis.like(
            "no_warmup",
            "the rate starts at its peak: it rises linearly from 0 over the warm-up steps",
            lambda t, w, T, peak, final: _cosine(t, 0, T, peak, final),
        ),
        Diagnosis.like(
            "decay_to_zero",
            "the decay ends at 0: it ends at the final learning rate",
            lambda t, w, T, peak, final: _cosine(t, w, T, peak, 0.0),
        ),
        Diagnosis.like(
            "decay_from_zero",
            "the cosine runs over all T steps from t = 0: it starts after the warm-up, "
            "progress (t - t_w) / (T - t_w)",
            lambda t, w, T, peak, final: jnp.where(
                t < w,
                peak * t / w,
                final + (peak - final) / 2 * (1 + jnp.cos(jnp.pi * jnp.minimum(t, T) / T)),
            ),  # fmt: skip
        ),
    ),
)

EXERCISES = [MEAN_CROSS_ENTROPY, WITH_CLASS_TOKEN, WARMUP_COSINE]
