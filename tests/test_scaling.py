"""The scaling-law accounting and fits (transformer_intro.training.scaling), checked independently.

The parameter counts against the model's arrays enumerated by hand; the hand count of training
FLOPs against XLA's own count of the compiled gradient (the compute appendix's check); the fits
on data drawn from known laws, each with a control that must fail.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from transformer_intro.training import scaling


def test_parameter_counts_partition_the_arrays() -> None:
    config = scaling.scaling_config(32, 2, vocab_size=11)
    model = scaling.build_model(config, seed=0)
    counts = scaling.parameter_counts(model)
    leaves = jax.tree.leaves(eqx.filter(model, eqx.is_inexact_array))
    assert counts["all"] == sum(a.size for a in leaves)
    # by hand: table 11 x 32; read-out 32 x 11 + 11; per block attention 4 D², MLP 8 D² + 5 D,
    # two LayerNorms 4 D; the final LayerNorm 2 D
    d, v, m = 32, 11, 2
    blocks = m * (4 * d * d + 8 * d * d + 5 * d + 4 * d)
    assert counts["without_embeddings_and_readout"] == blocks + 2 * d
    assert counts["without_embeddings"] == blocks + 2 * d + d * v + v
    assert counts["all"] == counts["without_embeddings"] + v * d
    # |θ_W| is the blocks' matrices and the read-out's: the counts less biases and norms
    assert scaling.matrix_parameters(config) == m * 12 * d * d + v * d


def test_ladder_grows_and_spans_the_sweep() -> None:
    sizes = []
    for dim, blocks in scaling.LADDER:
        config = scaling.scaling_config(dim, blocks, vocab_size=84)
        sizes.append(scaling.matrix_parameters(config))
    ratios = np.diff(np.log(sizes))
    assert np.all(ratios > 0), sizes  # every rung larger than the one below
    assert np.all(np.abs(ratios - math.log(2) / 2) < 0.25), np.exp(ratios)  # about sqrt(2) apart


def test_hand_count_of_training_flops_agrees_with_xla() -> None:
    config = scaling.scaling_config(48, 2, vocab_size=84)
    model = scaling.build_model(config, seed=0)
    params, static = eqx.partition(model, eqx.is_array)
    batch = 4
    windows = jnp.zeros((batch, config.window + 1), jnp.int32)

    def loss(params, windows):
        logits = eqx.combine(params, static).batched(windows[:, :-1])
        return optax.softmax_cross_entropy_with_integer_labels(logits, windows[:, 1:]).mean()

    with jax.default_device(jax.devices("cpu")[0]):
        compiled = jax.jit(jax.grad(loss)).lower(params, windows).compile()
    xla = compiled.cost_analysis()["flops"] / (batch * config.window)
    by_hand = scaling.training_flops_per_token(config)
    # XLA also counts the elementwise work (norms, GELU, softmax): a few per cent more
    assert 0.97 < xla / by_hand < 1.15, xla / by_hand
    # the control: 6 |θ_W| alone leaves out attention's 12 M n D, which XLA does count
    assert xla / (6 * scaling.matrix_parameters(config)) > 1.1


def test_steps_spend_the_budget() -> None:
    config = scaling.scaling_config(48, 2, vocab_size=84)
    per_step = scaling.training_flops_per_token(config) * 4096
    steps = scaling.steps_for_budget(config, 1e12, 4096, multiple=20)
    assert steps % 20 == 0
    assert abs(steps * per_step - 1e12) <= 10 * per_step  # within half a multiple
    with pytest.raises(ValueError, match="larger budget or a smaller model"):
        scaling.steps_for_budget(config, per_step / 10, 4096)


def test_scaling_config_refuses_a_width_the_heads_do_not_divide() -> None:
    with pytest.raises(ValueError, match="multiple of the 4 heads"):
        scaling.scaling_config(30, 2, vocab_size=84)


def test_parabola_finds_a_known_vertex() -> None:
    n = np.geomspace(1e4, 1e6, 5)
    loss = 0.3 * (np.log(n) - math.log(8e4)) ** 2 + 1.5
    n_opt, l_opt = scaling.isoflop_optimum(n, loss)
    assert n_opt == pytest.approx(8e4, rel=1e-6) and l_opt == pytest.approx(1.5, abs=1e-9)
    with pytest.raises(ValueError, match="do not bracket"):  # control: a loss still falling
        scaling.fit_parabola(np.log(n), -((np.log(n) - 20) ** 2))


def test_power_law_in_log_space() -> None:
    c = np.geomspace(1e11, 1e13, 4)
    exponent, coefficient = scaling.fit_power_law(c, 3e-2 * c**0.47)
    assert exponent == pytest.approx(0.47, abs=1e-9)
    assert coefficient == pytest.approx(3e-2, rel=1e-6)
    with pytest.raises(ValueError, match="positive"):
        scaling.fit_power_law([1.0, 2.0], [1.0, -1.0])


def _isoflop_runs(rng, noise):
    """Runs of four budgets on a loss bowl whose optimum grows as C^0.5: (C, N, L)."""
    budgets, sizes, losses = [], [], []
    for c in (1e11, 2e11, 4e11, 8e11):
        n_opt = 0.1 * c**0.5
        for n in n_opt * np.geomspace(0.25, 4, 5):
            budgets.append(c)
            sizes.append(n)
            losses.append(0.2 * np.log(n / n_opt) ** 2 + 1.0 + noise * rng.normal())
    return np.array(budgets), np.array(sizes), np.array(losses)


def test_bootstrap_interval_holds_the_true_exponent() -> None:
    rng = np.random.default_rng(0)
    budgets, n, loss = _isoflop_runs(rng, noise=0.01)
    exponents = scaling.bootstrap_optima(budgets, n, loss, samples=200, seed=1)
    low, high = np.percentile(exponents[:, 0], [2.5, 97.5])
    assert low < 0.5 < high, (low, high)
    # D_opt = C / (6 N_opt): its exponent is one minus N's in every sample
    np.testing.assert_allclose(exponents[:, 0] + exponents[:, 1], 1.0, atol=1e-9)
    # control: without noise the interval shrinks to the exponent itself
    budgets, n, loss = _isoflop_runs(rng, noise=0.0)
    exact = scaling.bootstrap_optima(budgets, n, loss, samples=20, seed=1)
    np.testing.assert_allclose(exact[:, 0], 0.5, atol=1e-6)


def test_loss_surface_recovers_known_parameters() -> None:
    truth = scaling.LossSurface(E=1.2, A=40.0, alpha=0.4, B=300.0, beta=0.35)
    rng = np.random.default_rng(2)
    n = np.exp(rng.uniform(np.log(1e4), np.log(1e6), 40))
    d = np.exp(rng.uniform(np.log(1e6), np.log(1e8), 40))
    fitted = scaling.fit_loss_surface(n, d, truth(n, d))
    grid_n, grid_d = np.geomspace(1e4, 1e6, 5), np.geomspace(1e6, 1e8, 5)
    np.testing.assert_allclose(fitted(grid_n, grid_d), truth(grid_n, grid_d), rtol=2e-3)
    # the optimum under C = 6 N D: fewer FLOPs nowhere along the budget's curve
    n_opt, d_opt = scaling.surface_optimum(truth, 1e14)
    assert 6 * n_opt * d_opt == pytest.approx(1e14)
    for factor in (0.8, 1.25):
        assert truth(n_opt, d_opt) < truth(n_opt * factor, d_opt / factor)


def test_total_parameters_from_the_configuration_and_the_nearest_model() -> None:
    for dim, blocks in ((24, 1), (48, 2)):
        config = scaling.scaling_config(dim, blocks, vocab_size=84)
        model = scaling.build_model(config, seed=0)
        assert scaling.total_parameters(config) == scaling.parameter_counts(model)["all"]
    near = scaling.config_near(4e5, vocab_size=84)
    assert abs(math.log(scaling.total_parameters(near) / 4e5)) < math.log(1.1)
    assert 20 <= near.block.dim / near.num_blocks <= 48
    # control: a size between two shapes picks the nearer, not the first or the largest
    assert scaling.config_near(1e4, 84) != scaling.config_near(1e6, 84)
