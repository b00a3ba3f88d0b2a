"""Muon in the training recipe: which parameters it updates, that its update for a matrix is
orthogonalised (and AdamW's is not), that it equals Newton-Schulz built by hand, and that the
recipe's new fields round-trip and are checked."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from factories import lm_block, tiny_lm

from transformer_intro import LanguageModel
from transformer_intro.tasks import SHAKESPEARE_RECIPE, NextSymbolPrediction
from transformer_intro.training import Recipe, fit
from transformer_intro.training.recipe import muon_dimensions, optimiser_labels

TINY_LM = tiny_lm(num_blocks=2, block=lm_block(mlp_hidden_dim=48))
# Constant learning rate from step 0, no clipping and no decay: one update is the bare rule.
BARE = Recipe(
    steps=1, batch_size=4, learning_rate=1e-3, schedule="constant", muon_learning_rate=0.05
)


def model():
    return LanguageModel(TINY_LM, key=jax.random.PRNGKey(0))


def params_of(m):
    return eqx.filter(m, eqx.is_inexact_array)


def labelled(m) -> dict[str, str]:
    return {
        jax.tree_util.keystr(path): label
        for path, label in jax.tree_util.tree_leaves_with_path(optimiser_labels(params_of(m)))
    }


def test_muon_takes_the_blocks_matrices_and_adamw_the_rest():
    labels = labelled(model())
    muon = {k for k, v in labels.items() if v == "muon"}
    expected = {
        f".blocks[{m}].{name}"
        for m in range(TINY_LM.num_blocks)
        for name in (
            "attention.query_projections",
            "attention.key_projections",
            "attention.value_projections",
            "attention.output_projections",
            "mlp.layers[0].weight",
            "mlp.layers[1].weight",
        )
    }
    assert muon == expected
    # The embedding table and the read-out are matrices too, but not the blocks': AdamW.
    assert labels[".tokeniser.table"] == labels[".unembedding.weight"] == "adamw"
    assert labels[".blocks[0].attention_norm.weight"] == labels[".final_norm.bias"] == "adamw"
    assert labels[".blocks[0].mlp.layers[0].bias"] == "adamw"


def test_muon_reads_each_tensor_as_the_right_matrix():
    dims = muon_dimensions(params_of(model()))
    attention = dims.blocks[0].attention
    # (H, K, D) projections: input D (axis 2), output the (H, K) axes: one (H K) x D matrix.
    assert tuple(attention.query_projections) == (2, (0, 1))
    # (H, D, Dv) output projections: inputs (H, Dv), output D: W_O = [O_1 ... O_H].
    assert tuple(attention.output_projections) == ((0, 2), 1)
    # Equinox's Linear stores (out, in).
    assert tuple(dims.blocks[0].mlp.layers[0].weight) == (1, (0,))
    assert dims.tokeniser.table is None and dims.unembedding.weight is None


def newton_schulz(g, steps=5, coefficients=(3.4445, -4.7750, 2.0315)):
    """Jordan et al.'s quintic iteration, by hand in NumPy (float64)."""
    x = np.asarray(g, np.float64)
    x = x / (np.linalg.norm(x) + 1e-8)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    a, b, c = coefficients
    for _ in range(steps):
        s = x @ x.T
        x = a * x + (b * s + c * s @ s) @ x
    return x.T if tall else x


def one_update(recipe: Recipe, grads_of):
    """The update of a recipe's optimiser for the gradient ``grads_of(params)``."""
    params = params_of(model())
    optimiser = recipe.optimiser()
    updates, _ = optimiser.update(grads_of(params), optimiser.init(params), params)
    return updates


def lopsided_gradient(params):
    """Random gradients, and for block 0's first MLP matrix (48 x 16) one dominated by a single
    direction: its singular values span orders of magnitude."""
    leaves, treedef = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(jax.random.PRNGKey(1), len(leaves))
    grads = jax.tree_util.tree_unflatten(
        treedef, [jax.random.normal(k, p.shape) for k, p in zip(keys, leaves)]
    )
    a, b, noise = jax.random.normal(jax.random.PRNGKey(2), (3, 48, 16))
    lopsided = 10.0 * jnp.outer(a[:, 0], b[0]) + noise
    return eqx.tree_at(lambda g: g.blocks[0].mlp.layers[0].weight, grads, lopsided)


def singular_values(x):
    return np.linalg.svd(np.asarray(x, np.float64), compute_uv=False)


def test_muon_update_is_orthogonalised_and_adamws_is_not():
    g = lopsided_gradient(params_of(model())).blocks[0].mlp.layers[0].weight
    s = singular_values(g)
    assert s[0] / s[-1] > 20  # the gradient itself is far from orthogonal
    muon = one_update(BARE.replace(matrix_optimiser="muon"), lopsided_gradient)
    adamw = one_update(BARE, lopsided_gradient)
    s_muon = singular_values(muon.blocks[0].mlp.layers[0].weight)
    s_adamw = singular_values(adamw.blocks[0].mlp.layers[0].weight)
    # Newton-Schulz's quintic spreads the singular values around 1 (about 0.5 to 1.2).
    assert s_muon[0] / s_muon[-1] < 2.0
    assert s_adamw[0] / s_adamw[-1] > 10.0  # negative control: AdamW's is lopsided too
    # The (H, K, D) query projections are orthogonalised as one (H K) x D matrix.
    q = muon.blocks[1].attention.query_projections
    s_q = singular_values(q.reshape(-1, q.shape[-1]))
    assert s_q[0] / s_q[-1] < 2.0


def test_muon_equals_newton_schulz_by_hand():
    muon = one_update(BARE.replace(matrix_optimiser="muon"), lopsided_gradient)
    g = lopsided_gradient(params_of(model())).blocks[0].mlp.layers[0].weight
    # First step: the Nesterov momentum is a multiple of g, which the normalisation removes.
    # The (48 out x 16 in) matrix is scaled by sqrt(max(1, fan_out / fan_in)) = sqrt(3).
    expected = -0.05 * np.sqrt(48 / 16) * newton_schulz(g)
    np.testing.assert_allclose(muon.blocks[0].mlp.layers[0].weight, expected, atol=2e-5)
    # Negative control: one Newton-Schulz step fewer is a different update.
    assert np.abs(expected + 0.05 * np.sqrt(3) * newton_schulz(g, steps=4)).max() > 1e-2
    # The other parameters get exactly AdamW's update (Adam's first step: lr * sign(g)).
    adamw = one_update(BARE, lopsided_gradient)
    np.testing.assert_array_equal(muon.tokeniser.table, adamw.tokeniser.table)
    np.testing.assert_array_equal(muon.final_norm.weight, adamw.final_norm.weight)


@pytest.mark.unchecked  # the package's own error, for input its annotations exclude
def test_default_recipe_is_adamw_and_fields_round_trip():
    assert SHAKESPEARE_RECIPE.matrix_optimiser == "adamw"
    recipe = SHAKESPEARE_RECIPE.replace(matrix_optimiser="muon", muon_learning_rate=0.03)
    assert Recipe.from_json(recipe.to_json()) == recipe
    # A recipe saved before these fields existed still loads, as AdamW.
    old = '{"batch_size": 4, "learning_rate": 0.001, "steps": 3}'
    assert Recipe.from_json(old).matrix_optimiser == "adamw"
    with pytest.raises(ValueError, match="matrix_optimiser must be 'adamw' or 'muon'"):
        recipe.replace(matrix_optimiser="sgd")
    with pytest.raises(ValueError, match="muon_learning_rate must be positive"):
        recipe.replace(muon_learning_rate=0.0)
    with pytest.raises(ValueError, match="muon_momentum"):
        recipe.replace(muon_momentum=1.0)


def test_fit_with_muon_learns():
    rng = np.random.default_rng(0)
    text = np.tile(rng.integers(0, 7, 23), 20)  # a repeating pattern: learnable
    task = NextSymbolPrediction(text, window=8, validation_ids=text)
    recipe = Recipe(
        steps=60,
        batch_size=16,
        learning_rate=1e-2,
        warmup_steps=5,
        clip_norm=1.0,
        weight_decay=0.1,
        matrix_optimiser="muon",
        steps_per_call=20,
    )
    before = task.evaluate(model())["nats_per_symbol"]
    trained, history = fit(model(), task, recipe, progress=False)
    after = task.evaluate(trained)["nats_per_symbol"]
    assert np.isfinite(history.train_loss).all()
    assert after < 0.5 * before


def test_repr_shows_muon_settings_only_when_muon_acts():
    adamw = Recipe(steps=10, batch_size=4, learning_rate=1e-3)
    assert "muon" not in repr(adamw) and repr(adamw).endswith("seed=0)")
    muon = adamw.replace(matrix_optimiser="muon", muon_momentum=0.9)
    assert "matrix_optimiser='muon'" in repr(muon) and "muon_momentum=0.9" in repr(muon)
    # the printout hides nothing a reader could not rebuild: JSON keeps every field
    assert Recipe.from_json(adamw.to_json()) == adamw
