"""Bad input gets one clear sentence: checkpoints, resuming, recipes, tasks' splits, and a loss
that stops being finite each raise a ValueError naming the problem and the fix (issue 41)."""

from __future__ import annotations

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from factories import tiny_lm as tiny_lm_config
from factories import tiny_vit

from transformer_intro import LanguageModel, VisionTransformer
from transformer_intro.attention import (
    MultiHeadAttention,
    attention_weights,
    causal_mask,
    padding_mask,
)
from transformer_intro.tasks import ImageClassification, NextSymbolPrediction, SequenceToSequence
from transformer_intro.training import (
    Every,
    History,
    Recipe,
    fit,
    load_checkpoint,
    save_checkpoint,
)
from transformer_intro.training.checkpoints import CheckpointError
from transformer_intro.training.loop import NonFiniteLoss

TINY_LM = tiny_lm_config()
RECIPE = Recipe(steps=12, batch_size=4, learning_rate=1e-3, steps_per_call=2)


def tiny_lm(config=TINY_LM, seed=0):
    return LanguageModel(config, key=jax.random.PRNGKey(seed))


def resumable(path, model, recipe=RECIPE):
    """A checkpoint as fit writes it, at step 4, without training."""
    opt_state = recipe.optimiser().init(eqx.filter(model, eqx.is_inexact_array))
    history = History(step=[4], seconds=[0.1], train_loss=[1.0], train_metrics=[{}])
    return save_checkpoint(path, model, opt_state=opt_state, recipe=recipe, history=history, step=4)


def rewrite_header(path, change):
    """The checkpoint at ``path`` with ``change(header)`` as its header line."""
    header, arrays = path.read_bytes().split(b"\n", 1)
    header = json.loads(header)
    change(header)
    path.write_bytes(json.dumps(header).encode() + b"\n" + arrays)
    return path


def symbols():
    return np.arange(200) % 7


# -- load_checkpoint -----------------------------------------------------------------------------


def test_random_bytes_are_not_a_checkpoint(tmp_path):
    path = tmp_path / "noise.eqx"
    path.write_bytes(bytes(range(128, 256)) * 8)
    with pytest.raises(CheckpointError, match=r"is not a .* file \(its first line is not a JSON"):
        load_checkpoint(path)


def test_a_header_that_is_a_json_list_is_not_a_checkpoint(tmp_path):
    path = tmp_path / "list.eqx"
    path.write_bytes(b"[1, 2]\n")
    with pytest.raises(CheckpointError, match="its first line is not a JSON object"):
        load_checkpoint(path)


def test_an_unknown_model_class_names_the_classes_it_can_build(tmp_path):
    path = rewrite_header(
        save_checkpoint(tmp_path / "m.eqx", tiny_lm()), lambda h: h.update(model_class="GPT")
    )
    with pytest.raises(CheckpointError, match="holds a 'GPT', which this version cannot build"):
        load_checkpoint(path)


def test_a_header_without_its_keys_is_damaged(tmp_path):
    path = rewrite_header(save_checkpoint(tmp_path / "m.eqx", tiny_lm()), lambda h: h.pop("step"))
    with pytest.raises(CheckpointError, match="header lacks step: the file is damaged"):
        load_checkpoint(path)


@pytest.mark.parametrize("keep", [0.5, 0.99])
def test_a_truncated_checkpoint_says_so(tmp_path, keep):
    path = save_checkpoint(tmp_path / "m.eqx", tiny_lm())
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(CheckpointError, match="is truncated or damaged"):
        load_checkpoint(path)


def test_a_recipe_field_from_a_newer_version_is_named(tmp_path):
    path = rewrite_header(
        resumable(tmp_path / "m.eqx", tiny_lm()), lambda h: h["recipe"].update(lion_beta=0.9)
    )
    with pytest.raises(CheckpointError, match=r"recipe has fields .* \(lion_beta\).* newer"):
        load_checkpoint(path)


def test_a_model_configuration_field_from_a_newer_version_is_named(tmp_path):
    path = rewrite_header(
        save_checkpoint(tmp_path / "m.eqx", tiny_lm()),
        lambda h: h["model_config"].update(sliding_window=4),
    )
    with pytest.raises(CheckpointError, match=r"model configuration has fields .*sliding_window"):
        load_checkpoint(path)


# -- save_checkpoint -----------------------------------------------------------------------------


def test_an_interrupted_save_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    path = save_checkpoint(tmp_path / "m.eqx", tiny_lm(seed=0), extra={"version": 1})

    def half_then_fail(f, tree):
        f.write(b"\x93NUMPY some of the arrays")
        raise KeyboardInterrupt

    monkeypatch.setattr(eqx, "tree_serialise_leaves", half_then_fail)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, tiny_lm(seed=1), extra={"version": 2})
    monkeypatch.undo()
    _, info = load_checkpoint(path)
    assert info.extra == {"version": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["m.eqx"]  # no temporary file left behind


# -- resuming ------------------------------------------------------------------------------------


def test_resuming_with_a_changed_model_configuration_names_the_fields(tmp_path):
    path = resumable(tmp_path / "run.eqx", tiny_lm())
    changed = tiny_lm(
        TINY_LM.replace(block=TINY_LM.block.replace(rotary_base=500.0, activation="silu"))
    )
    task = NextSymbolPrediction(symbols(), window=8)
    with pytest.raises(
        CheckpointError,
        match=r"different model configuration \(block.rotary_base: 10000.0 there, 500.0 here; "
        r"block.activation: 'gelu_tanh' there, 'silu' here\)",
    ):
        fit(changed, task, RECIPE, checkpoint_path=path, resume=True, progress=False)


def test_resuming_with_a_recipe_of_another_optimiser_names_the_field(tmp_path):
    path = resumable(tmp_path / "run.eqx", tiny_lm())
    task = NextSymbolPrediction(symbols(), window=8)
    with pytest.raises(CheckpointError, match=r"different recipe \(clip_norm: None there, 1.0"):
        fit(
            tiny_lm(),
            task,
            RECIPE.replace(clip_norm=1.0),
            checkpoint_path=path,
            resume=True,
            progress=False,
        )


def test_resuming_another_model_class_names_both(tmp_path):
    path = resumable(tmp_path / "run.eqx", tiny_lm())
    vit = VisionTransformer(
        tiny_vit(),
        key=jax.random.PRNGKey(0),
    )
    images = np.zeros((4, 8, 8), np.uint8)
    task = ImageClassification((images, np.zeros(4, int)))
    with pytest.raises(CheckpointError, match="holds a LanguageModel, not a VisionTransformer"):
        fit(vit, task, RECIPE, checkpoint_path=path, resume=True, progress=False)


def test_resuming_without_a_checkpoint_path_says_to_pass_one(tmp_path):
    task = NextSymbolPrediction(symbols(), window=8)
    with pytest.raises(ValueError, match="resume=True has no checkpoint .* pass checkpoint_path"):
        fit(tiny_lm(), task, RECIPE, resume=True, progress=False)
    # The control: with a path, the same call resumes from the checkpoint there (at step 4).
    path = resumable(tmp_path / "run.eqx", tiny_lm())
    _, history = fit(tiny_lm(), task, RECIPE, checkpoint_path=path, resume=True, progress=False)
    assert history.step[:2] == [4, 6]


# -- callbacks -----------------------------------------------------------------------------------


@pytest.mark.parametrize("steps", [0, -3, 2.5, True])
@pytest.mark.unchecked  # the package's own error, for input its annotations exclude
def test_every_with_a_period_below_one_step_names_the_value_and_the_fix(steps):
    with pytest.raises(
        ValueError, match=rf"Every's steps must be a whole number >= 1, got {steps}"
    ):
        Every(steps, lambda step, model, history: None)
    assert Every(np.int64(3), print).steps == 3  # the control: a NumPy integer is a whole number


# -- Recipe --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value, allowed",
    [
        ("learning_rate", -1.0, "positive"),
        ("learning_rate", 0.0, "positive"),
        ("learning_rate", float("nan"), "positive"),
        ("b1", 1.0, r"in \[0, 1\)"),
        ("b1", -0.1, r"in \[0, 1\)"),
        ("b2", 1.0, r"in \[0, 1\)"),
        ("b2", 1.5, r"in \[0, 1\)"),
        ("weight_decay", -0.1, ">= 0"),
        ("warmup_steps", 100, r"in \[0, steps=12\]"),
        ("steps", 10.5, "a whole number >= 1"),
        ("batch_size", 4.0, "a whole number >= 1"),
        ("steps_per_call", 2.5, "a whole number >= 1"),
        ("micro_batches", True, "a whole number >= 1"),
        ("seed", -1, "a whole number >= 0"),
        ("final_learning_rate", -1e-4, r"in \[0, learning_rate=0.001\]"),
        ("final_learning_rate", 0.1, r"in \[0, learning_rate=0.001\]"),
        ("clip_norm", float("inf"), "positive or None"),
    ],
)
@pytest.mark.unchecked  # the package's own error, for input its annotations exclude
def test_a_recipe_field_out_of_range_names_field_value_and_range(field, value, allowed):
    with pytest.raises(ValueError, match=rf"Recipe's {field} must be .*{allowed}.*, got {value}"):
        RECIPE.replace(**{field: value})


# -- tasks' splits -------------------------------------------------------------------------------


def pairs(rows, target_rows=None, length=5):
    rng = np.random.default_rng(0)
    target_rows = rows if target_rows is None else target_rows
    targets = rng.integers(1, 8, (target_rows, length))
    return rng.integers(1, 9, (rows, 6)), targets, targets


def test_sequence_pairs_of_different_row_counts_are_refused():
    with pytest.raises(
        ValueError, match="training split has 4 sources, 5 decoder inputs and 5 targets"
    ):
        SequenceToSequence(pairs(4, 5), start_id=1)
    with pytest.raises(ValueError, match="test split has 3 sources, 2 decoder inputs"):
        SequenceToSequence(pairs(4), pairs(3, 2), start_id=1)


def test_decoder_inputs_and_targets_of_different_lengths_are_refused():
    sources, inputs, targets = pairs(4)
    with pytest.raises(ValueError, match=r"decoder inputs are \(4, 4\) but its targets \(4, 5\)"):
        SequenceToSequence((sources, inputs[:, :4], targets), start_id=1)


def test_an_image_test_split_of_3_images_and_5_labels_is_refused():
    images = np.zeros((6, 8, 8), np.uint8)
    with pytest.raises(ValueError, match="test split has 3 images and 5 labels: give one label"):
        ImageClassification((images, np.zeros(6, int)), (images[:3], np.zeros(5, int)))


# -- a loss that stops being finite --------------------------------------------------------------


class Diverging(NextSymbolPrediction):
    """A loss that turns NaN after a few steps, deterministically.

    The log of a gain the optimiser pushes down by about the learning rate each step: negative,
    and the loss NaN, from the fifth step on.
    """

    def loss(self, model, windows):
        loss, metrics = super().loss(model, windows)
        return loss + 100.0 * jnp.log(model.final_norm.weight[0]), metrics


def test_fit_stops_on_a_non_finite_loss_and_keeps_the_last_good_checkpoint(tmp_path):
    task = Diverging(symbols(), window=8, validation_ids=symbols(), num_validation_windows=4)
    recipe = RECIPE.replace(learning_rate=0.3, schedule="constant")
    path = tmp_path / "run.eqx"
    with pytest.raises(
        NonFiniteLoss,
        match=r"loss became nan at step 5 \(the last finite loss was .*, at step 4\)\. "
        rf"{path} still holds step 4\. Lower the learning rate",
    ):
        fit(tiny_lm(), task, recipe, eval_every=2, checkpoint_path=path, progress=False)
    model, info = load_checkpoint(path)
    assert info.step == 4 and info.history.step == [2, 4]
    # 4 validation windows, fewer than a chunk of 128: evaluated all the same, finite at step 2
    # (the model after step 4 is the one whose loss is NaN).
    evaluated = [row["nats_per_symbol"] for row in info.history.evaluations]
    assert len(evaluated) == 2 and np.isfinite(evaluated[0])
    leaves = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))
    assert all(bool(jnp.isfinite(x).all()) for x in leaves)
    # From the first step on: there is no finite loss to report.
    poisoned = eqx.tree_at(lambda m: m.final_norm.weight, tiny_lm(), jnp.full(16, jnp.nan))
    with pytest.raises(NonFiniteLoss, match="at step 1 \\(no step of this fit call had a finite"):
        fit(poisoned, task, recipe, progress=False)


# -- a validation loss over any number of windows ------------------------------------------------


@pytest.mark.parametrize("windows, eval_chunk", [(5, 128), (5, 2), (6, 3), (1, 128)])
def test_the_validation_loss_is_the_mean_over_every_window(windows, eval_chunk):
    # Fewer windows than a chunk once mapped over no chunk at all (the mean of nothing, NaN), and
    # a remainder beyond whole chunks was dropped without a word.
    ids = np.random.default_rng(0).integers(0, 7, 300)
    task = NextSymbolPrediction(
        ids, window=8, validation_ids=ids, num_validation_windows=windows, eval_chunk=eval_chunk
    )
    model = tiny_lm()
    # Independent reference: the loss of each window alone, averaged over the windows.
    each = [float(task.loss(model, w[None])[0]) for w in task.validation_windows]
    assert task.evaluate(model)["nats_per_symbol"] == pytest.approx(np.mean(each), rel=1e-5)
    # Control: dropping the last window gives another number, which the comparison would see.
    if windows > 1:
        assert np.mean(each[:-1]) != pytest.approx(np.mean(each), rel=1e-5)


def test_no_validation_windows_is_refused():
    with pytest.raises(ValueError, match="num_validation_windows must be at least 1, got 0"):
        NextSymbolPrediction(
            symbols(), window=8, validation_ids=symbols(), num_validation_windows=0
        )


# -- masks ---------------------------------------------------------------------------------------


def attention_layer(num_heads=2):
    return MultiHeadAttention(8, num_heads, key=jax.random.PRNGKey(0))


def tokens(n, seed=1):
    return jax.random.normal(jax.random.PRNGKey(seed), (n, 8))


@pytest.mark.unchecked  # the package's own error, which a reader sees without the hook
def test_a_padding_vector_given_as_a_mask_is_refused_naming_the_shape():
    is_real = jnp.array([True, True, True, True, False, False])
    layer, x = attention_layer(), tokens(6)
    # Without the check, (6,) broadcast along the outputs: every output read the padding.
    with pytest.raises(
        ValueError, match=r"mask must have shape \(6, 6\).*got \(6,\).*padding_mask"
    ):
        layer(x, is_real)
    with pytest.raises(ValueError, match=r"mask must have shape \(6, 6\) or \(B, 6, 6\)"):
        layer.batched(x[None], is_real)
    with pytest.raises(ValueError, match=r"mask must have shape \(6, 6\).*got \(6,\)"):
        attention_weights(x, x, mask=is_real)
    # The mask the message names is accepted, and no output reads a padding input.
    weights = layer.attention_weights(x, padding_mask(is_real))
    assert bool(jnp.all(weights[:, ~is_real] == 0))


@pytest.mark.unchecked
def test_a_mask_of_the_wrong_orientation_or_size_is_refused():
    layer, x, memory = attention_layer(), tokens(3), tokens(5, seed=2)
    is_real = jnp.array([True, True, True, False, False])
    with pytest.raises(ValueError, match=r"mask must have shape \(5, 3\).*got \(3, 5\)"):
        layer(x, padding_mask(is_real, 3).T, context=memory)
    with pytest.raises(ValueError, match=r"mask must have shape \(3, 3\).*got \(3, 1\)"):
        layer(x, jnp.ones((3, 1), bool))  # broadcast in jnp.where, silently
    with pytest.raises(ValueError, match=r"or \(B, 3, 3\), .*; got \(2, 1, 3, 3\)"):
        layer.batched(x[None], jnp.ones((2, 1, 3, 3), bool))
    with pytest.raises(
        ValueError, match=r"or \(B, 3, 3\) with B = 1, the batch of x; got \(2, 3, 3\)"
    ):
        layer.batched(x[None], jnp.ones((2, 3, 3), bool))  # one mask per example, for 1 example
    # Control: the right shapes pass, and equal each other.
    one = layer(x, padding_mask(is_real, 3), context=memory)
    batch = layer.batched(x[None], padding_mask(is_real, 3)[None], context=memory[None])
    assert jnp.allclose(one, batch[0], atol=1e-5)
    assert jnp.allclose(
        layer(x, causal_mask(3)), layer.batched(x[None], causal_mask(3))[0], atol=1e-5
    )


def test_an_all_padding_source_is_refused_naming_the_pair():
    sources, inputs, targets = pairs(4)
    sources[2] = 0  # pad_id 0 throughout: the decoder would attend to nothing (NaN)
    with pytest.raises(ValueError, match=r"training split's source 2 is all padding \(pad_id 0\)"):
        SequenceToSequence((sources, inputs, targets), start_id=1)
    with pytest.raises(ValueError, match=r"test split's source 2 is all padding \(pad_id 0\)"):
        SequenceToSequence(pairs(4), (sources, inputs, targets), start_id=1)
    # Another padding id makes the row real again; zeros beside real tokens are fine.
    SequenceToSequence((sources, inputs, targets), start_id=1, pad_id=9)
    sources[2, :3] = 5
    SequenceToSequence((sources, inputs, targets), start_id=1)
