"""Chapter 20 (scaling laws): a run's training FLOPs, an IsoFLOP parabola's optimum, a power law."""

from __future__ import annotations

import numpy as np

from .core import Case, Diagnosis, Exercise, Property


def _flops(num_blocks, dim, mlp_hidden_dim, vocab_size, window, tokens, attention=True, k=6):
    matrices = num_blocks * (4 * dim * dim + 2 * dim * mlp_hidden_dim) + vocab_size * dim
    per_token = k * matrices + (2 * k * num_blocks * window * dim if attention else 0)
    return float(per_token) * tokens


RUN_FLOPS = Exercise(
    name="run_flops",
    chapter=20,
    title="The training FLOPs of a run, counted by hand",
    reference=_flops,
    cases=lambda: [
        Case("chapter 9's model, 4,096 characters", (4, 128, 512, 84, 64, 4096)),
        Case("M = 2, D = 48, F = 192, 1.1 million characters", (2, 48, 192, 84, 64, 1_146_880)),
        Case("M = 1, D = 32, F = 128, a window of 16, 100 tokens", (1, 32, 128, 50, 16, 100)),
    ],
    output="a number, FLOPs",
    rtol=1e-9,
    diagnoses=(
        Diagnosis.like(
            "no_attention",
            "attention's scores and weighted sums are left out: add 12 M n D per token (4 M n D "
            "forward, three times that to train), which no parameter accounts for",
            lambda *a: _flops(*a, attention=False),
            rtol=1e-9,
        ),
        Diagnosis.like(
            "forward_only",
            "only the forward pass is counted: the backward pass costs twice the forward, so "
            "training costs 6 FLOPs per matrix parameter and token, not 2",
            lambda *a: _flops(*a, k=2),
            rtol=1e-9,
        ),
        Diagnosis.like(
            "table_counted",
            "the token table is counted as a matrix product: it is a look-up; only the read-out "
            "(|V| D) multiplies",
            lambda m, d, f, v, n, t: _flops(m, d, f, v, n, t) + 6.0 * v * d * t,
            rtol=1e-9,
        ),
    ),
)


def _parabola_optimum(sizes, losses, in_log=True, vertex=True):
    sizes, losses = np.asarray(sizes, np.float64), np.asarray(losses, np.float64)
    if not vertex:
        return float(sizes[np.argmin(losses)])
    x = np.log(sizes) if in_log else sizes
    a, b, _ = np.polyfit(x, losses, 2)
    return float(np.exp(-b / (2 * a))) if in_log else float(-b / (2 * a))


def _bowl(n_opt, curvature, sizes, tilt=0.0, seed=0):
    rng = np.random.default_rng(seed)
    x = np.log(np.asarray(sizes, float) / n_opt)
    return (sizes, 1.4 + curvature * x**2 + tilt * x**3 + 0.002 * rng.normal(size=x.size))


PARABOLA_OPTIMUM = Exercise(
    name="parabola_optimum",
    chapter=20,
    title="The optimal size at one compute: the vertex of a parabola in log |θ|",
    reference=_parabola_optimum,
    cases=lambda: [
        Case("five sizes around 90,000", _bowl(9e4, 0.08, np.geomspace(2e4, 4e5, 5))),
        Case(
            "five sizes, the optimum between two runs",
            _bowl(1.3e5, 0.05, np.geomspace(3e4, 5e5, 5), tilt=0.01, seed=1),
        ),
        Case("seven sizes around 600,000", _bowl(6e5, 0.1, np.geomspace(1e5, 3e6, 7), seed=2)),
    ],
    output="a number, parameters",
    rtol=1e-6,
    properties=(
        Property(
            "within the sizes tried",
            lambda got, case: min(case.args[0]) <= got <= max(case.args[0]),
            "the optimum lies between the smallest and the largest size tried",
        ),
    ),
    diagnoses=(
        Diagnosis.like(
            "best_run",
            "the best run's size is returned: fit the parabola through all the runs and take "
            "its vertex, which lies between the sizes tried",
            lambda s, loss: _parabola_optimum(s, loss, vertex=False),
            rtol=1e-6,
        ),
        Diagnosis.like(
            "log_returned",
            "the vertex -b / 2a is log |θ|: return its exponential",
            lambda s, loss: float(np.log(_parabola_optimum(s, loss))),
            rtol=1e-6,
        ),
        Diagnosis.like(
            "linear_sizes",
            "the parabola is fitted against |θ| itself: fit it against log |θ|, where the runs "
            "are evenly spaced and the bowl is symmetric",
            lambda s, loss: _parabola_optimum(s, loss, in_log=False),
            rtol=1e-6,
        ),
    ),
)


def _power_law(x, y, log_coefficient=False, linear=False):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    slope, intercept = np.polyfit(np.log(x), np.log(y), 1)
    if linear:  # a straight line through the raw values
        slope, intercept = np.polyfit(x, y, 1)
        return float(slope), float(intercept)
    return float(slope), float(intercept if log_coefficient else np.exp(intercept))


def _power_cases():
    rng = np.random.default_rng(20)
    c = np.array([5e11, 1e12, 2e12, 4e12])
    noisy = 0.08 * c**0.45 * np.exp(0.03 * rng.normal(size=c.size))
    x = np.array([1.0, 10.0, 100.0])
    return [
        Case("exact, exponent 0.5", (c, 0.1 * c**0.5)),
        Case("four amounts of compute with scatter, exponent near 0.45", (c, noisy)),
        Case("a falling law, y = 3 x^-0.3", (x, 3 * x**-0.3)),
    ]


POWER_LAW_FIT = Exercise(
    name="power_law_fit",
    chapter=20,
    title="A power law y = c x^u fitted in log space",
    reference=_power_law,
    cases=_power_cases,
    output="(u, c)",
    rtol=1e-6,
    diagnoses=(
        Diagnosis.like(
            "log_coefficient",
            "the intercept of the line is log c: return its exponential as the coefficient",
            lambda x, y: _power_law(x, y, log_coefficient=True),
            rtol=1e-6,
        ),
        Diagnosis.like(
            "linear_fit",
            "the line is fitted to x and y themselves: fit log y against log x, where a power "
            "law is a straight line of slope u",
            lambda x, y: _power_law(x, y, linear=True),
            rtol=1e-6,
        ),
    ),
)

EXERCISES = [RUN_FLOPS, PARABOLA_OPTIMUM, POWER_LAW_FIT]
