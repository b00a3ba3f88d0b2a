"""The one training loop: recipes, tasks, fit, resuming, callbacks, placement, and checkpoints."""

from __future__ import annotations

import os
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from factories import tiny_encoder_decoder, tiny_lm, tiny_vit

from transformer_intro import (
    LanguageModel,
    VisionTransformer,
)
from transformer_intro.parallel import make_mesh
from transformer_intro.tasks import (
    DATES_RECIPE,
    SHAKESPEARE_RECIPE,
    VIT_RECIPE,
    ImageClassification,
    NextSymbolPrediction,
    SequenceToSequence,
)
from transformer_intro.training import (
    Every,
    History,
    Recipe,
    RunDiverged,
    fit,
    load_checkpoint,
    loss_differences,
    retrace,
    save_checkpoint,
    train_step,
)
from transformer_intro.training.checkpoints import CheckpointError

ROOT = Path(__file__).resolve().parents[1]
TINY_VIT = tiny_vit()
TINY_LM = tiny_lm()


def params(model) -> list[np.ndarray]:
    return [
        np.asarray(x) for x in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))
    ]


def same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(params(a), params(b), strict=True))


def digits(n=64, seed=0):
    """Images whose label is which quadrant is bright: learnable in a few steps."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, n)
    images = rng.integers(0, 40, (n, 8, 8)).astype(np.uint8)
    for i, label in enumerate(labels):
        r, c = divmod(int(label), 2)
        images[i, 4 * r : 4 * r + 4, 4 * c : 4 * c + 4] += 200
    return images, labels


@pytest.fixture(scope="module")
def image_task():
    return ImageClassification(digits(), digits(32, seed=1), max_shift=1, eval_batch_size=20)


def small_recipe(**changes) -> Recipe:
    base = Recipe(steps=12, batch_size=16, learning_rate=3e-3, warmup_steps=2, steps_per_call=4)
    return base.replace(**changes)


# -- recipes -------------------------------------------------------------------------------------


@pytest.mark.unchecked  # the package's own error, for input its annotations exclude
def test_recipe_replace_json_and_checks():
    recipe = SHAKESPEARE_RECIPE.replace(steps=10, warmup_steps=2)  # a warm-up within the run
    assert recipe.steps == 10 and recipe.b2 == 0.99 and recipe.clip_norm == 1.0
    assert Recipe.from_json(recipe.to_json()) == recipe
    with pytest.raises(ValueError, match="decay must be 'all' or 'matrices'"):
        recipe.replace(decay="biases")
    with pytest.raises(ValueError, match="micro_batches=3 does not divide batch_size=64"):
        recipe.replace(micro_batches=3)
    with pytest.raises(ValueError, match="schedule must be"):
        recipe.replace(schedule="linear")


def test_the_chapters_recipes_keep_their_numbers():
    assert (VIT_RECIPE.decay, VIT_RECIPE.b2, VIT_RECIPE.clip_norm) == ("all", 0.999, None)
    assert VIT_RECIPE.weight_decay == 0.05 and VIT_RECIPE.steps == 10 * (60_000 // 64)
    assert (SHAKESPEARE_RECIPE.decay, SHAKESPEARE_RECIPE.b2) == ("matrices", 0.99)
    assert (DATES_RECIPE.steps, DATES_RECIPE.batch_size, DATES_RECIPE.learning_rate) == (
        850,
        128,
        4e-3,
    )


def test_schedule_warms_up_then_decays_to_the_final_rate():
    recipe = Recipe(
        steps=100, batch_size=1, learning_rate=1.0, warmup_steps=10, final_learning_rate=0.1
    )
    eta = recipe.learning_rate_schedule()
    assert float(eta(0)) == 0.0 and float(eta(10)) == pytest.approx(1.0)
    assert float(eta(100)) == pytest.approx(0.1) and float(eta(5)) == pytest.approx(0.5)
    constant = recipe.replace(schedule="constant", warmup_steps=0).learning_rate_schedule()
    assert float(constant(0)) == float(constant(99)) == 1.0


def test_decay_policy_all_shrinks_vectors_matrices_does_not():
    """With zero gradients, AdamW's only move is weight decay: which parameters shrink?"""
    model = VisionTransformer(TINY_VIT, key=jax.random.PRNGKey(0))
    model = eqx.tree_at(lambda m: m.final_norm.weight, model, jnp.full(16, 2.0))
    zeros = jax.tree_util.tree_map(jnp.zeros_like, eqx.filter(model, eqx.is_inexact_array))
    moved = {}
    for decay in ("all", "matrices"):
        recipe = Recipe(
            steps=10,
            batch_size=1,
            learning_rate=0.1,
            weight_decay=0.5,
            decay=decay,
            schedule="constant",
        )
        opt = recipe.optimiser()
        state = opt.init(eqx.filter(model, eqx.is_inexact_array))
        updates, _ = opt.update(zeros, state, eqx.filter(model, eqx.is_inexact_array))
        new = eqx.apply_updates(model, updates)
        moved[decay] = (
            float(new.final_norm.weight[0]),
            float(
                jnp.abs(new.head.layers[0].weight).sum()
                / jnp.abs(model.head.layers[0].weight).sum()
            ),
        )
    assert moved["all"][0] == pytest.approx(2.0 * (1 - 0.05))  # the LayerNorm gain decays
    assert moved["matrices"][0] == 2.0  # left alone
    assert moved["all"][1] == pytest.approx(0.95) and moved["matrices"][1] == pytest.approx(0.95)


# -- tasks ---------------------------------------------------------------------------------------


def test_a_batch_depends_only_on_its_key(image_task):
    key = jax.random.PRNGKey(3)
    a, b = image_task.batch(key, 8), image_task.batch(key, 8)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    c = image_task.batch(jax.random.PRNGKey(4), 8)
    assert not np.array_equal(a["labels"], c["labels"]) or not np.array_equal(
        a["images"], c["images"]
    )
    assert a["images"].shape == (8, 1, 8, 8) and a["images"].dtype == jnp.float32
    assert float(a["images"].min()) >= -1 and float(a["images"].max()) <= 1


def test_next_symbol_and_sequence_tasks_batch_and_evaluate():
    ids = np.arange(200) % 7
    task = NextSymbolPrediction(
        ids, window=8, validation_ids=ids[:50], num_validation_windows=8, eval_chunk=4
    )
    windows = task.batch(jax.random.PRNGKey(0), 5)
    assert windows.shape == (5, 9)
    assert np.all((np.diff(np.asarray(windows), axis=1) % 7) == 1)  # consecutive symbols
    model = LanguageModel(TINY_LM, key=jax.random.PRNGKey(0))
    loss, _ = task.loss(model, windows)
    assert float(loss) == pytest.approx(np.log(7), rel=0.2)  # a fresh model guesses uniformly
    assert task.evaluate(model)["nats_per_symbol"] == pytest.approx(np.log(7), rel=0.2)
    with pytest.raises(ValueError, match="no window of 9"):
        NextSymbolPrediction(ids[:8], window=8)

    rng = np.random.default_rng(0)
    sources = rng.integers(1, 9, (20, 6))
    targets = np.concatenate([sources[:, :4] % 5 + 3, np.full((20, 1), 2)], axis=1)
    inputs = np.concatenate([np.ones((20, 1), int), targets[:, :-1]], axis=1)
    seq = SequenceToSequence((sources, inputs, targets), (sources, inputs, targets), start_id=1)
    model = tiny_encoder_decoder(encoder_layers=1, decoder_layers=1).build(
        key=jax.random.PRNGKey(0)
    )
    figures = seq.evaluate(model)
    assert set(figures) == {"exact_match", "loss", "accuracy"} and 0 <= figures["exact_match"] <= 1

    # Exact match is whole sequences: a model that copies the targets scores 1.
    class Oracle(eqx.Module):
        pad_id: int = 0

        def greedy_decode(self, s, start, length):
            return jnp.asarray(targets)

        def batched(self, s, t):
            return jax.nn.one_hot(jnp.asarray(targets), 8) * 50.0

    assert seq.evaluate(Oracle())["exact_match"] == 1.0


# -- fit -----------------------------------------------------------------------------------------


def test_fit_trains_logs_and_evaluates(image_task):
    model = VisionTransformer(TINY_VIT.replace(num_classes=4), key=jax.random.PRNGKey(0))
    before = image_task.evaluate(model)
    model, history = fit(
        model, image_task, small_recipe(steps=40, steps_per_call=10), eval_every=20, progress=False
    )
    assert history.step == [10, 20, 30, 40]
    assert len(history.train_loss) == len(history.seconds) == 4 and history.seconds == sorted(
        history.seconds
    )
    assert [e["step"] for e in history.evaluations] == [20, 40]
    assert history.evaluations[-1]["loss"] < before["loss"]
    assert set(history.train_metrics[0]) == {"accuracy"}
    assert history.first_reached("accuracy", 0.0) == (20, history.evaluations[0]["seconds"])
    assert history.first_reached("accuracy", 1.01) is None
    with pytest.raises(ValueError, match="no evaluation recorded 'exact_match'"):
        history.first_reached("exact_match", 0.5)
    assert History.from_json(history.to_json()) == history


def test_fit_equals_train_step_by_step(image_task):
    """fit is train_step on the batch of key fold_in(PRNGKey(seed), t), step after step."""
    recipe = small_recipe(steps=6, steps_per_call=3, seed=7)
    model = VisionTransformer(TINY_VIT.replace(num_classes=4), key=jax.random.PRNGKey(1))
    trained, _ = fit(model, image_task, recipe, progress=False)
    opt = recipe.optimiser()
    state = opt.init(eqx.filter(model, eqx.is_inexact_array))
    step = eqx.filter_jit(train_step)
    for t in range(6):
        batch = image_task.batch(jax.random.fold_in(jax.random.PRNGKey(7), t), recipe.batch_size)
        model, state, _, _ = step(model, state, batch, task=image_task, optimiser=opt)
    worst = max(np.abs(a - b).max() for a, b in zip(params(model), params(trained)))
    assert worst < 1e-5


def test_resuming_from_a_checkpoint_replays_the_same_batches(image_task, tmp_path, capsys):
    recipe = small_recipe()
    init = VisionTransformer(TINY_VIT.replace(num_classes=4), key=jax.random.PRNGKey(0))
    whole, _ = fit(init, image_task, recipe, progress=False)
    path = tmp_path / "run.eqx"
    calls = []
    stop_at_8 = Every(8, lambda step, model, history: calls.append(step) or True)
    half, history = fit(init, image_task, recipe, checkpoint_path=path, callbacks=[stop_at_8])
    assert calls == [8] and history.step[-1] == 8 and not same(half, whole)
    # A run a callback ended shows a finished bar of the steps it ran, not one stuck at 8/12.
    bar = capsys.readouterr().err.split("\r")[-1]
    assert "100%" in bar and "8/8" in bar and "/12" not in bar, bar
    resumed, history = fit(
        init, image_task, recipe, checkpoint_path=path, resume=True, progress=False
    )
    assert history.step == [4, 8, 12]
    assert same(resumed, whole)
    with pytest.raises(ValueError, match="was trained with"):
        fit(
            init,
            image_task,
            recipe.replace(learning_rate=1.0),
            checkpoint_path=path,
            resume=True,
            progress=False,
        )


def test_retrace_checks_a_saved_runs_first_steps_and_rejects_another_run(image_task, tmp_path):
    recipe = small_recipe()
    init = VisionTransformer(TINY_VIT.replace(num_classes=4), key=jax.random.PRNGKey(0))
    whole, history = fit(init, image_task, recipe, progress=False)
    path = tmp_path / "run.eqx"
    save_checkpoint(path, whole, recipe=recipe, history=history, step=recipe.steps)
    seen = []
    saved, info, first = retrace(
        init,
        image_task,
        path,
        steps=8,
        progress=False,
        callbacks=[lambda step, model, h: seen.append(step)],
    )
    assert first.step == [4, 8] and seen == [4, 8]
    assert same(saved, whole) and info.history == history
    assert max(loss_differences(first, history).values()) < 1e-6
    # Negative controls: another starting model, and other data, are not the saved run.
    other = VisionTransformer(TINY_VIT.replace(num_classes=4), key=jax.random.PRNGKey(1))
    with pytest.raises(RunDiverged, match="not the saved run"):
        retrace(other, image_task, path, steps=8, progress=False)
    shifted = ImageClassification(digits(seed=2), digits(32, seed=1), max_shift=1)
    with pytest.raises(RunDiverged, match="steps 1 to 4"):
        retrace(init, shifted, path, steps=4, progress=False)
    with pytest.raises(ValueError, match="between 1 and the saved run's 12"):
        retrace(init, image_task, path, steps=13, progress=False)
    bare = tmp_path / "bare.eqx"
    save_checkpoint(bare, whole)
    with pytest.raises(CheckpointError, match="no recipe or no history"):
        retrace(init, image_task, bare, steps=4, progress=False)


def test_loss_differences_compares_only_the_same_spans():
    a = History(step=[4, 8, 12], train_loss=[2.0, 1.0, 0.5])
    b = History(step=[4, 12], train_loss=[2.2, 0.5])
    assert loss_differences(a, b) == pytest.approx({(0, 4): 0.2 / 2.2})


def test_callbacks_run_between_calls(image_task):
    seen = []
    model = VisionTransformer(TINY_VIT.replace(num_classes=4), key=jax.random.PRNGKey(0))
    fit(
        model,
        image_task,
        small_recipe(steps=7, steps_per_call=2),
        callbacks=[
            lambda step, m, h: seen.append((step, h.step[-1])),
            Every(3, lambda s, m, h: seen.append(-s)),
        ],
        progress=False,
    )
    # Calls end at multiples of 2 and of 3 (the Every callback's period) and at the last step;
    # calls of 1 and 2 steps: two compilations.
    assert seen == [(2, 2), (3, 3), -3, (4, 4), (6, 6), -6, (7, 7)]


def test_fit_on_a_one_device_mesh_equals_plain_fit(image_task):
    recipe = small_recipe(steps=4)
    model = VisionTransformer(TINY_VIT.replace(num_classes=4), key=jax.random.PRNGKey(0))
    plain, _ = fit(model, image_task, recipe, progress=False)
    meshed, _ = fit(model, image_task, recipe, mesh=make_mesh(1), progress=False)
    assert max(np.abs(a - b).max() for a, b in zip(params(plain), params(meshed))) < 1e-6
    with pytest.raises(ValueError, match="need a mesh"):
        fit(model, image_task, recipe, rules=lambda *a: None, progress=False)


# -- checkpoints ---------------------------------------------------------------------------------


def models():
    return {
        "vit": VisionTransformer(TINY_VIT, key=jax.random.PRNGKey(1)),
        "lm": LanguageModel(TINY_LM, key=jax.random.PRNGKey(2)),
        "encoder-decoder": tiny_encoder_decoder().build(key=jax.random.PRNGKey(3)),
    }


@pytest.mark.parametrize("name", ["vit", "lm", "encoder-decoder"])
def test_every_model_round_trips_through_a_checkpoint(tmp_path, name):
    model = models()[name]
    recipe = small_recipe()
    opt_state = recipe.optimiser().init(eqx.filter(model, eqx.is_inexact_array))
    history = History(step=[4], seconds=[0.5], train_loss=[1.0], train_metrics=[{}])
    path = save_checkpoint(
        tmp_path / "m.eqx",
        model,
        opt_state=opt_state,
        recipe=recipe,
        history=history,
        step=4,
        extra={"symbols": ["a", "b"]},
    )
    loaded, info = load_checkpoint(path)
    assert type(loaded) is type(model) and loaded.config == model.config and same(loaded, model)
    assert info.recipe == recipe and info.history == history and info["step"] == 4
    assert info.extra == {"symbols": ["a", "b"]}
    assert jax.tree_util.tree_structure(info.opt_state) == jax.tree_util.tree_structure(opt_state)
    plain, info = load_checkpoint(save_checkpoint(tmp_path / "p.eqx", model))
    assert same(plain, model) and info.recipe is None and info.opt_state is None


def test_checkpoint_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_checkpoint(tmp_path / "absent.eqx")
    with pytest.raises(TypeError, match="cannot checkpoint a MLP"):
        from transformer_intro import MLP

        save_checkpoint(tmp_path / "x.eqx", MLP(4, 8, key=jax.random.PRNGKey(0)))
    (tmp_path / "old.eqx").write_bytes(b'{"model_config": {}}\n')
    with pytest.raises(ValueError, match="is not a"):
        load_checkpoint(tmp_path / "old.eqx")


def test_the_books_committed_checkpoints_load():
    from transformer_intro import Vocabulary
    from transformer_intro.datasets.shakespeare import load_shakespeare
    from transformer_intro.tasks import inputs_and_targets

    vit, info = load_checkpoint(ROOT / "book" / "checkpoints" / "vit_default.eqx")
    assert isinstance(vit, VisionTransformer) and info.extra["test_accuracy"] > 0.98
    lm, info = load_checkpoint(ROOT / "book" / "checkpoints" / "shakespeare_lm.eqx")
    assert isinstance(lm, LanguageModel)
    assert info.history.evaluations[-1]["nats_per_symbol"] < 1.75
    vocabulary = Vocabulary(info.extra["symbols"])
    ids = vocabulary.encode(load_shakespeare("validation")[:6_500])
    windows = jnp.asarray(np.stack([ids[i : i + 65] for i in range(0, 6_400, 65)]))
    inputs, targets = inputs_and_targets(windows)
    # Compiled: run op by op, the forward pass made this test take 10.5 s against 7.5.
    logits = eqx.filter_jit(type(lm).batched)(lm, inputs)
    nats = float(-jnp.take_along_axis(jax.nn.log_softmax(logits), targets[..., None], -1).mean())
    assert nats < 2.0  # a trained model: the uniform guess is log 84 = 4.4 nats
    mnist = os.environ.get("MNIST_DIR")
    if mnist:
        from transformer_intro.datasets import load_mnist

        images, labels = load_mnist("test")
        task = ImageClassification((images[:1000], labels[:1000]), (images[:1000], labels[:1000]))
        assert task.evaluate(vit)["accuracy"] > 0.97
