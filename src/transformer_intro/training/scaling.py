"""Scaling laws measured on one's own runs: the accounting (parameters, tokens, FLOPs) and the fits.

Chapter 20 trains a sweep of character language models at fixed compute budgets
(``benchmarks/scaling_sweep.py``) and fits two of Hoffmann et al.'s (2022) three approaches to
the runs:

- the accounting: a run's parameters under three conventions (:func:`parameter_counts`), its
  training FLOPs per token counted by hand as in the compute appendix
  (:func:`training_flops_per_token`, ``6 |θ_W| + 12 M n D``), and the steps that spend a budget
  (:func:`steps_for_budget`);
- Approach 2: a parabola in ``log N`` through the losses of one budget's runs
  (:func:`fit_parabola`), its vertex the budget's optimal size; the optima against the budgets
  fitted as a power law in log space (:func:`fit_power_law`), with a bootstrap over the runs
  (:func:`bootstrap_optima`);
- Approach 3: ``L(N, D) = E + A / N^α + B / D^β`` fitted to every run at once
  (:func:`fit_loss_surface`), and the compute-optimal split it implies
  (:func:`surface_optimum`).

The models come from one function, :func:`scaling_config` (and :func:`build_model`), so that a
change to the model's configuration is made in one place. Pure NumPy and SciPy above the model.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence

import equinox as eqx
import jax
import numpy as np
from jaxtyping import ArrayLike

from ..block import BlockConfig
from ..models.language_model import LanguageModel, LMConfig

__all__ = [
    "BATCH_SIZE",
    "CONVENTIONS",
    "LADDER",
    "WINDOW",
    "LossSurface",
    "bootstrap_optima",
    "resampled_optima",
    "build_model",
    "config_near",
    "fit_loss_surface",
    "fit_parabola",
    "fit_power_law",
    "isoflop_optimum",
    "matrix_parameters",
    "parameter_counts",
    "scaling_config",
    "steps_for_budget",
    "surface_optimum",
    "total_parameters",
    "training_flops_per_token",
]

# Numbers to fit: an array, or a list of floats
Values = ArrayLike | Sequence[float]

WINDOW = 64  # n, the symbols each example reads (chapter 9's window)
BATCH_SIZE = 16  # B examples a step: B n = 1,024 characters a step in every run
NUM_HEADS = 4  # every model of the sweep has four heads (chapter 9's number)

# The sweep's sizes (D, M), about a factor sqrt(2) apart in parameters without the embeddings,
# from 9 thousand to 0.7 million; width over depth between 20 and 48.
LADDER: tuple[tuple[int, int], ...] = (
    (24, 1),
    (32, 1),
    (40, 1),
    (48, 1),
    (40, 2),
    (48, 2),
    (56, 2),
    (72, 2),
    (72, 3),
    (80, 3),
    (96, 3),
    (104, 4),
    (120, 4),
)

# The three ways of counting N, as parameter_counts names them.
CONVENTIONS = ("all", "without_embeddings", "without_embeddings_and_readout")


def scaling_config(dim: int, num_blocks: int, vocab_size: int) -> LMConfig:
    """The sweep's model of width ``dim`` and ``num_blocks`` blocks: chapter 9's model otherwise.

    Four heads, an MLP four times as wide as the tokens, rotary positions, LayerNorm, a separate
    read-out; the window of :data:`WINDOW` symbols.

    Raises:
        ValueError: if ``dim`` is not a positive multiple of the four heads, or ``num_blocks`` or
            ``vocab_size`` is not positive.
    """
    if dim < NUM_HEADS or dim % NUM_HEADS:
        raise ValueError(
            f"dim={dim} must be a positive multiple of the {NUM_HEADS} heads: choose e.g. "
            f"{max(NUM_HEADS, dim - dim % NUM_HEADS)}"
        )
    return LMConfig(
        vocab_size=vocab_size,
        window=WINDOW,
        block=BlockConfig(
            dim=dim,
            num_heads=NUM_HEADS,
            mlp_hidden_dim=4 * dim,
            value_dim=dim // NUM_HEADS,
            rotary=True,
        ),
        num_blocks=num_blocks,
    )


def build_model(config: LMConfig, *, seed: int) -> LanguageModel:
    """The model of ``config`` with its starting weights drawn from ``PRNGKey(seed)``."""
    return LanguageModel(config, key=jax.random.PRNGKey(seed))


def _size(tree) -> int:
    return sum(a.size for a in jax.tree.leaves(eqx.filter(tree, eqx.is_inexact_array)))


def parameter_counts(model: LanguageModel) -> dict[str, int]:
    """N under the three conventions, read from the model's arrays.

    ``all``: every trained number. ``without_embeddings``: less the token table (and a learned
    position table, if any), Kaplan et al.'s "non-embedding" count. ``without_embeddings_and_
    readout``: less the read-out's matrix and bias too, the blocks and the final norm only.
    """
    total = _size(model)
    embeddings = model.tokeniser.table.size
    if model.position_embedding is not None:
        embeddings += _size(model.position_embedding)
    readout = 0 if model.unembedding is None else _size(model.unembedding)
    return {
        "all": total,
        "without_embeddings": total - embeddings,
        "without_embeddings_and_readout": total - embeddings - readout,
    }


def total_parameters(config: LMConfig) -> int:
    """|θ| of a sweep model (:func:`scaling_config`'s shape) from its configuration alone.

    Per block the four attention matrices, the MLP's two matrices and biases, two LayerNorms;
    the final LayerNorm, the read-out with its bias, the token table.
    """
    d, f, v = config.block.dim, config.block.mlp_hidden_dim, config.vocab_size
    block = 4 * d * d + 2 * d * f + f + d + 4 * d
    return config.num_blocks * block + 2 * d + v * d + v + v * d


def config_near(parameters: float, vocab_size: int) -> LMConfig:
    """The sweep-shaped model whose |θ| is nearest ``parameters`` (in ratio).

    Widths are multiples of 8 from 16 to 512 (each of the 4 heads an even width, as rotary
    positions need), depths 1 to 8, and width over depth between 20 and 48, as on :data:`LADDER`.
    """
    shapes = [
        (dim, blocks)
        for dim in range(16, 513, 2 * NUM_HEADS)
        for blocks in range(1, 9)
        if 20 <= dim / blocks <= 48
    ]
    configs = [scaling_config(dim, blocks, vocab_size) for dim, blocks in shapes]
    return min(configs, key=lambda c: abs(math.log(total_parameters(c) / parameters)))


def matrix_parameters(config: LMConfig) -> int:
    """|θ_W|: the parameters that a matrix product multiplies by, from the configuration alone.

    The blocks' projections and MLP matrices and the read-out; the token table is a look-up (the
    compute appendix's count, equation eq-compute-forward).
    """
    d, f, k = config.block.dim, config.block.mlp_hidden_dim, config.block.keys_dim
    h, h_kv = config.block.num_heads, config.block.num_kv_heads or config.block.num_heads
    attention = d * k * (2 * h + 2 * h_kv)
    mlp = (3 if config.block.mlp == "gated" else 2) * d * f
    return config.num_blocks * (attention + mlp) + config.vocab_size * config.block.dim


def training_flops_per_token(config: LMConfig, window: int | None = None) -> int:
    """The compute appendix's hand count of training FLOPs per token: ``6 |θ_W| + 12 M n D``.

    ``6 |θ_W|``: a forward pass (two FLOPs per matrix parameter) and a backward pass twice its
    size. ``12 M n D``: attention's scores and weighted sums over a window of ``n`` symbols,
    which no parameter accounts for (``4 M n D`` forward, three times that to train).
    """
    n = config.window if window is None else window
    return 6 * matrix_parameters(config) + 12 * config.num_blocks * n * config.block.dim


def steps_for_budget(
    config: LMConfig, budget: float, tokens_per_step: int, *, multiple: int = 1
) -> int:
    """The steps that spend ``budget`` training FLOPs, rounded to the nearest ``multiple``.

    (The training loop compiles one program for a span of ``steps_per_call`` steps: a run of a
    whole number of spans compiles it once.)

    Raises:
        ValueError: if the budget is too small for one ``multiple`` of steps.
    """
    per_step = training_flops_per_token(config) * tokens_per_step
    steps = round(budget / (per_step * multiple)) * multiple
    if steps < 1:
        raise ValueError(
            f"a budget of {budget:.3g} FLOPs is less than half a step ({per_step:.3g} FLOPs) of "
            "this model: choose a larger budget or a smaller model"
        )
    return steps


def fit_parabola(log_n: Values, loss: Values) -> tuple[float, float, float]:
    """``(a, b, c)`` of the least-squares parabola ``L = a x² + b x + c`` with ``x = log N``.

    Raises:
        ValueError: with fewer than three points, or when the parabola opens downwards (the
            runs do not bracket a minimum: add a smaller or a larger model).
    """
    x, y = np.asarray(log_n, float), np.asarray(loss, float)
    if x.size < 3 or x.shape != y.shape:
        raise ValueError(f"a parabola needs three or more (log N, L) pairs, got {x.size}")
    a, b, c = np.polyfit(x, y, 2)
    if a <= 0:
        raise ValueError(
            "the losses do not curve upwards on both sides (a <= 0): the sizes do not bracket "
            "the optimum; add runs on the side where the loss still falls"
        )
    return float(a), float(b), float(c)


def isoflop_optimum(n: Values, loss: Values) -> tuple[float, float]:
    """``(N_opt, L_opt)``: the vertex of the parabola in ``log N`` through one budget's runs."""
    a, b, c = fit_parabola(np.log(np.asarray(n, float)), loss)
    x = -b / (2 * a)
    return float(math.exp(x)), float(c - b * b / (4 * a))


def fit_power_law(x: Values, y: Values) -> tuple[float, float]:
    """``(exponent, coefficient)`` of ``y = coefficient · x^exponent``, a line in log-log space.

    Raises:
        ValueError: with fewer than two points or a value that is not positive.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.size < 2 or x.shape != y.shape:
        raise ValueError(f"a power law needs two or more (x, y) pairs, got {x.size}")
    if np.any(x <= 0) or np.any(y <= 0):
        raise ValueError("a power law is fitted to positive values only (their logarithms)")
    slope, intercept = np.polyfit(np.log(x), np.log(y), 1)
    return float(slope), float(math.exp(intercept))


def resampled_optima(
    budgets: Values,
    n: Values,
    loss: Values,
    *,
    tokens: Values | None = None,
    samples: int = 1000,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each budget's optimum on resampled runs: ``(budgets, N_opt, D_opt)``.

    ``budgets`` comes back sorted and without repeats, ``N_opt`` and ``D_opt`` as
    ``(samples, budgets)`` arrays. Each sample draws, within every budget, as many runs as it
    has, with replacement; a resample with fewer than three distinct sizes, or whose parabola
    opens downwards, is drawn again. D_opt is ``C / (6 N_opt)`` unless ``tokens`` gives each
    run's D, in which case D_opt is the budget's line of ``log D`` against ``log N`` at N_opt.
    """
    budgets, n, loss = (np.asarray(v, float) for v in (budgets, n, loss))
    tokens = None if tokens is None else np.asarray(tokens, float)
    rng = np.random.default_rng(seed)
    unique = np.unique(budgets)
    groups = [np.flatnonzero(budgets == c) for c in unique]
    n_opt = np.empty((samples, unique.size))
    d_opt = np.empty((samples, unique.size))
    for s in range(samples):
        for j, members in enumerate(groups):
            for _ in range(100):
                pick = rng.choice(members, size=members.size, replace=True)
                if np.unique(n[pick]).size < 3:
                    continue
                try:
                    n_opt[s, j] = isoflop_optimum(n[pick], loss[pick])[0]
                except ValueError:
                    continue
                break
            else:
                raise ValueError("a budget's resamples never bracketed an optimum")
            if tokens is None:
                d_opt[s, j] = unique[j] / (6 * n_opt[s, j])
            else:  # D against N within the budget: a line in log-log space
                slope, coef = fit_power_law(n[members], tokens[members])
                d_opt[s, j] = coef * n_opt[s, j] ** slope
    return unique, n_opt, d_opt


def bootstrap_optima(
    budgets: Values,
    n: Values,
    loss: Values,
    *,
    tokens: Values | None = None,
    samples: int = 1000,
    seed: int = 0,
) -> np.ndarray:
    """Approach 2 on resampled runs: ``(samples, 2)`` exponents of N_opt and D_opt against C.

    The resampling is :func:`resampled_optima`'s; each sample's optima are fitted with
    :func:`fit_power_law`.
    """
    unique, n_opt, d_opt = resampled_optima(
        budgets, n, loss, tokens=tokens, samples=samples, seed=seed
    )
    return np.array(
        [[fit_power_law(unique, a)[0], fit_power_law(unique, b)[0]] for a, b in zip(n_opt, d_opt)]
    )


@dataclasses.dataclass(frozen=True)
class LossSurface:
    """``L(N, D) = E + A / N^α + B / D^β`` (Hoffmann et al. 2022, Approach 3)."""

    E: float
    A: float
    alpha: float
    B: float
    beta: float

    def __call__(self, n, d):
        """The loss the surface predicts for ``n`` parameters trained on ``d`` tokens."""
        n, d = np.asarray(n, float), np.asarray(d, float)
        return self.E + self.A / n**self.alpha + self.B / d**self.beta


def fit_loss_surface(
    n: Values, d: Values, loss: Values, *, delta: float = 1e-3, start: LossSurface | None = None
) -> LossSurface:
    """Approach 3: the surface minimising the Huber loss of ``log L`` over every run.

    As Hoffmann et al., the parameters are ``e = log E``, ``a = log A``, ``b = log B``, α and β,
    the prediction ``log(exp(e) + exp(a - α log N) + exp(b - β log D))``, the Huber threshold
    ``delta``, and L-BFGS started from the 32 corners of a grid (the best end is kept), or from
    ``start`` alone (a bootstrap's refits start from the fit to all the runs).

    Raises:
        ValueError: with fewer runs than the five parameters.
    """
    from scipy.optimize import minimize  # only here: the rest of the package does not need it

    log_n, log_d = np.log(np.asarray(n, float)), np.log(np.asarray(d, float))
    log_l = np.log(np.asarray(loss, float))
    if log_l.size < 5:
        raise ValueError(f"five parameters need five or more runs, got {log_l.size}")

    def objective(p):
        e, a, alpha, b, beta = p
        terms = np.stack([np.full_like(log_n, e), a - alpha * log_n, b - beta * log_d])
        predicted = np.logaddexp.reduce(terms, axis=0)
        r = predicted - log_l
        small = np.abs(r) <= delta
        return np.sum(np.where(small, 0.5 * r * r, delta * (np.abs(r) - 0.5 * delta)))

    if start is not None:
        p = [math.log(start.E), math.log(start.A), start.alpha, math.log(start.B), start.beta]
        e, a, alpha, b, beta = minimize(objective, p, method="L-BFGS-B").x
        return LossSurface(E=math.exp(e), A=math.exp(a), alpha=alpha, B=math.exp(b), beta=beta)
    best = None
    grid = itertools.product((-0.5, 0.5), (2.0, 6.0), (0.3, 0.7), (2.0, 6.0), (0.3, 0.7))
    for p in grid:
        result = minimize(objective, p, method="L-BFGS-B")
        if best is None or result.fun < best.fun:
            best = result
    e, a, alpha, b, beta = best.x
    return LossSurface(E=math.exp(e), A=math.exp(a), alpha=alpha, B=math.exp(b), beta=beta)


def surface_optimum(surface: LossSurface, budget: float, flops_per_parameter_token: float = 6.0):
    """``(N_opt, D_opt)`` minimising the surface under ``C = k N D`` (k = 6 by default).

    Setting the derivative of ``A / N^α + B (k N / C)^β`` to zero gives
    ``N_opt = G (C / k)^(β / (α + β))`` with ``G = (α A / (β B))^(1 / (α + β))``.
    """
    s = surface
    g = (s.alpha * s.A / (s.beta * s.B)) ** (1 / (s.alpha + s.beta))
    n_opt = g * (budget / flops_per_parameter_token) ** (s.beta / (s.alpha + s.beta))
    return float(n_opt), float(budget / (flops_per_parameter_token * n_opt))
