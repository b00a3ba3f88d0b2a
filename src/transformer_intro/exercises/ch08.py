"""Chapter 8 (the vision transformer): cross-entropy, the class token, the learning rate, AdamW.

And one training step: the loss, its gradient, clipping and the update.
"""

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


# -- AdamW, written as the chapter derives it --------------------------------------------------


def _flat(new_params, mu, nu) -> tuple:
    """``(θ_{t+1}, μ_t, ν_t)`` as one tuple of arrays, each dict in the order of its keys."""
    return tuple(d[k] for d in (new_params, mu, nu) for k in sorted(d))


def _flat_output(fn, *args, **kwargs):
    """The reader's three dicts as one tuple of arrays (anything else is passed on as it is)."""
    out = fn(*args, **kwargs)
    try:
        new_params, mu, nu = out
        if all(isinstance(d, dict) and set(d) == set(args[1]) for d in (new_params, mu, nu)):
            return _flat(new_params, mu, nu)
    except (TypeError, ValueError):
        pass
    return out


def _adamw_optax(grads, params, mu, nu, t, learning_rate, b1, b2, eps, weight_decay, decay):
    import optax  # training's dependency, imported when first needed

    optimiser = optax.adamw(learning_rate, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay,
                            mask=dict(decay))  # fmt: skip
    state = optimiser.init(params)
    moments = state[0]._replace(count=jnp.asarray(t, jnp.int32), mu=dict(mu), nu=dict(nu))
    updates, state = optimiser.update(dict(grads), (moments, *state[1:]), dict(params))
    return _flat(optax.apply_updates(dict(params), updates), state[0].mu, state[0].nu)


def _adamw_variant(
    grads, params, mu, nu, t, learning_rate, b1, b2, eps, weight_decay, decay, *,
    corrected=True, first_correction=1, every_array=False, coupled=False, decay_rate=True,
    eps_inside=False, return_corrected=False,
):  # fmt: skip
    """AdamW as the chapter writes it, with one switch per typical mistake."""
    new, new_mu, new_nu = {}, {}, {}
    for k in sorted(params):
        g, p = grads[k], params[k]
        delta = 1.0 if every_array or decay[k] else 0.0
        if coupled:
            g = g + weight_decay * delta * p  # an L2 term in the loss, through the moments
        m = b1 * mu[k] + (1 - b1) * g
        v = b2 * nu[k] + (1 - b2) * g**2
        c1, c2 = (1 - b1 ** (t + first_correction), 1 - b2 ** (t + first_correction))
        m_hat, v_hat = (m / c1, v / c2) if corrected else (m, v)
        root = jnp.sqrt(v_hat + eps) if eps_inside else jnp.sqrt(v_hat) + eps
        step = m_hat / root
        decayed = 0.0 if coupled else weight_decay * delta * p
        if decay_rate:
            new[k] = p - learning_rate * (step + decayed)
        else:
            new[k] = p - learning_rate * step - decayed
        new_mu[k], new_nu[k] = (m_hat, v_hat) if return_corrected else (m, v)
    return _flat(new, new_mu, new_nu)


def _adamw_cases():
    rng = np.random.default_rng(81)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    shapes = {"weight": (4, 3), "bias": (3,)}
    decay = {"weight": True, "bias": False}

    def state(scale, moments):
        grads = {k: scale * n(*s) for k, s in shapes.items()}
        params = {k: n(*s) for k, s in shapes.items()}
        mu = {k: moments * scale * n(*s) for k, s in shapes.items()}
        nu = {k: moments * (scale * n(*s)) ** 2 for k, s in shapes.items()}
        return grads, params, mu, nu

    return [
        Case("step t = 2, a weight matrix and a bias (decayed: the matrix only)",
             (*state(1.0, 1.0), 2, 1e-2, 0.9, 0.999, 1e-8, 0.1, decay)),
        Case("the first step, t = 0, moments at zero",
             (*state(1.0, 0.0), 0, 1e-2, 0.9, 0.99, 1e-8, 0.1, decay)),
        Case("tiny gradients (about 1e-4), t = 5, eps = 1e-8",
             (*state(1e-4, 1.0), 5, 1e-3, 0.9, 0.999, 1e-8, 0.05, decay)),
    ]  # fmt: skip


def _variant(**switch):
    return lambda *args: _adamw_variant(*args, **switch)


ADAMW_UPDATE = Exercise(
    name="adamw_update",
    chapter=8,
    title="One AdamW step: moments, bias correction, decoupled decay of the masked arrays",
    reference=_adamw_optax,
    cases=_adamw_cases,
    run=_flat_output,
    output="(new_params, mu, nu)",
    diagnoses=(
        Diagnosis.like(
            "no_bias_correction",
            "the moments are used without their bias correction: divide mu by 1 - b1**(t + 1) "
            "and nu by 1 - b2**(t + 1) before the update (eq-vit-adam-bias)",
            _variant(corrected=False),
        ),
        Diagnosis.like(
            "bias_correction_from_one",
            "the bias correction uses b**t: the chapter counts steps from t = 0, so it is "
            "1 - b1**(t + 1) and 1 - b2**(t + 1)",
            _variant(first_correction=0),
        ),
        Diagnosis.like(
            "returned_corrected_moments",
            "the bias-corrected moments are returned as the new state: keep mu and nu "
            "uncorrected (the correction is applied afresh at every step)",
            _variant(return_corrected=True),
        ),
        Diagnosis.like(
            "decay_on_every_array",
            "every array is decayed: weight decay applies only where decay[name] is True "
            "(the matrices; biases and other vectors are left alone)",
            _variant(every_array=True),
        ),
        Diagnosis.like(
            "coupled_decay",
            "the decay is added to the gradient (an L2 penalty, Adam's coupled decay): AdamW "
            "adds weight_decay * theta to the update after the division by sqrt(nu_hat) + eps",
            _variant(coupled=True),
        ),
        Diagnosis.like(
            "decay_without_learning_rate",
            "the decay is not multiplied by the learning rate: theta moves by "
            "-eta * (mu_hat / (sqrt(nu_hat) + eps) + weight_decay * theta)",
            _variant(decay_rate=False),
        ),
        Diagnosis.like(
            "eps_inside_sqrt",
            "eps is inside the square root: it is added after it, sqrt(nu_hat) + eps, which "
            "matters when the gradients are small",
            _variant(eps_inside=True),
        ),
    ),
)


# -- One training step: loss, gradient, clipping, update ---------------------------------------


def _train_step_package(params, opt_state, batch, loss, optimiser, clip_norm):
    import optax  # training's dependency, imported when first needed

    from ..training import train_step  # the package's top layer, imported when first needed

    task = _LossTask(loss)
    clipped = optax.chain(optax.clip_by_global_norm(clip_norm), optimiser)
    new_params, state, value, _ = train_step(
        dict(params), (optax.EmptyState(), opt_state), batch, task=task, optimiser=clipped
    )
    return _step_flat(new_params, state[1], value)


class _LossTask:
    """A task whose loss is a plain ``loss(params, batch)``, as ``train_step`` asks for one."""

    def __init__(self, loss):
        self._loss = loss

    def loss(self, params, batch):
        return self._loss(params, batch), {}


def _step_flat(new_params, opt_state, value) -> tuple:
    return (*jax.tree_util.tree_leaves(new_params), *jax.tree_util.tree_leaves(opt_state), value)


def _step_output(fn, params, opt_state, *args):
    out = fn(params, opt_state, *args)
    try:
        new_params, new_state, value = out
        if isinstance(new_params, dict) and set(new_params) == set(params):
            return _step_flat(new_params, new_state, value)
    except (TypeError, ValueError):
        pass
    return out


def _step_variant(
    params, opt_state, batch, loss, optimiser, clip_norm, *, clip="global", apply=1,
    loss_after=False, state_kept=False,
):  # fmt: skip
    """The step as the chapter writes it, with one switch per typical mistake."""
    value, grads = jax.value_and_grad(loss)(params, batch)
    norm = lambda tree: jnp.sqrt(sum(jnp.sum(x**2) for x in jax.tree_util.tree_leaves(tree)))
    if clip == "global":
        grads = jax.tree_util.tree_map(lambda g: g * jnp.minimum(1, clip_norm / norm(grads)), grads)
    elif clip == "each":
        grads = {k: g * jnp.minimum(1, clip_norm / jnp.linalg.norm(g)) for k, g in grads.items()}
    elif clip == "always":
        grads = jax.tree_util.tree_map(lambda g: g * clip_norm / norm(grads), grads)
    updates, new_state = optimiser.update(grads, opt_state, params)
    if clip == "updates":
        updates = jax.tree_util.tree_map(
            lambda u: u * jnp.minimum(1, clip_norm / norm(updates)), updates
        )
    new_params = jax.tree_util.tree_map(lambda p, u: p + apply * u, params, updates)
    if loss_after:
        value = loss(new_params, batch)
    return _step_flat(new_params, opt_state if state_kept else new_state, value)


def _squared_error(params, batch):
    """The mean squared error of a linear map, ``y ≈ x W + b``."""
    return jnp.mean((batch["x"] @ params["weight"] + params["bias"] - batch["y"]) ** 2)


def _step_cases():
    import optax

    rng = np.random.default_rng(82)
    n = lambda *shape: rng.normal(size=shape).astype(np.float32)
    params = {"weight": n(3, 2), "bias": n(2)}
    batch = {"x": n(8, 3), "y": 3 * n(8, 2)}
    sgd = optax.sgd(0.5, momentum=0.9)
    adamw = optax.adamw(1e-2, weight_decay=0.1)
    return [
        Case("SGD with momentum, clipping to 0.5 acts",
             (params, sgd.init(params), batch, _squared_error, sgd, 0.5)),
        Case("AdamW at its first step, clipping to 1 acts",
             (params, adamw.init(params), batch, _squared_error, adamw, 1.0)),
        Case("SGD with momentum, clip norm 100: clipping does nothing",
             (params, sgd.init(params), batch, _squared_error, sgd, 100.0)),
    ]  # fmt: skip


def _step(**switch):
    return lambda *args: _step_variant(*args, **switch)


TRAINING_STEP = Exercise(
    name="training_step",
    chapter=8,
    title="One training step: the loss and its gradient, clipped, then the optimiser's update",
    reference=_train_step_package,
    cases=_step_cases,
    run=_step_output,
    output="(new_params, new_opt_state, loss)",
    diagnoses=(
        Diagnosis.like(
            "not_applied",
            "the parameters come back unchanged: add the optimiser's updates to them "
            "(optax.apply_updates(params, updates))",
            _step(apply=0),
        ),
        Diagnosis.like(
            "updates_subtracted",
            "the updates are subtracted: Optax's updates already point downhill (they carry "
            "the minus sign), so add them",
            _step(apply=-1),
        ),
        Diagnosis.like(
            "clipped_updates",
            "the updates are clipped, after the optimiser: clip the gradient before handing it "
            "to optimiser.update (eq-vit-clip)",
            _step(clip="updates"),
        ),
        Diagnosis.like(
            "not_clipped",
            "the gradient is not clipped: scale it by min(1, clip_norm / ||g||) before the "
            "update (eq-vit-clip)",
            _step(clip=None),
        ),
        Diagnosis.like(
            "clipped_per_array",
            "each array is clipped to norm clip_norm on its own: the norm is the global one, "
            "over all the arrays together",
            _step(clip="each"),
        ),
        Diagnosis.like(
            "always_rescaled",
            "the gradient is rescaled to norm clip_norm even when it is shorter: the factor is "
            "min(1, clip_norm / ||g||)",
            _step(clip="always"),
        ),
        Diagnosis.like(
            "loss_after_update",
            "the loss returned is the loss after the update: return the loss at the parameters "
            "the gradient was taken at",
            _step(loss_after=True),
        ),
        Diagnosis.like(
            "old_state",
            "the optimiser's state comes back unchanged: return the state optimiser.update "
            "gives (it holds the moments or momentum for the next step)",
            _step(state_kept=True),
        ),
    ),
)

EXERCISES = [MEAN_CROSS_ENTROPY, WITH_CLASS_TOKEN, WARMUP_COSINE, ADAMW_UPDATE, TRAINING_STEP]
