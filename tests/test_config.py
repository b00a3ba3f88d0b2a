"""Configurations that build their models, registered by name; one JSON mixin for every config.

Every model class is registered (transformer_intro.config.register_model) under its name with
the configuration that builds it, which is all a checkpoint needs to rebuild it: each model
round-trips through save_checkpoint/load_checkpoint, and so does a model defined here, outside
the package, with no edit to training.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import pytest
from factories import tiny_encoder_decoder, tiny_lm, tiny_vit

from transformer_intro import (
    MLP,
    EncoderDecoder,
    LanguageModel,
    LMConfig,
    VisionTransformer,
)
from transformer_intro.block import BlockConfig
from transformer_intro.config import MODEL_CONFIGS, JsonConfig, ModelConfig, register_model
from transformer_intro.training import Recipe, load_checkpoint, save_checkpoint
from transformer_intro.training.checkpoints import CheckpointError

# A tiny configuration of every registered model.
TINY = {
    "VisionTransformer": tiny_vit(),
    "LanguageModel": tiny_lm(),
    "EncoderDecoder": tiny_encoder_decoder(encoder_layers=1),
}
RECIPE = Recipe(steps=4, batch_size=2, learning_rate=1e-3)


def leaves(model) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array))]


def same_weights(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(leaves(a), leaves(b), strict=True))


def test_the_books_models_are_registered_and_each_has_a_tiny_configuration_here():
    assert set(MODEL_CONFIGS) == set(TINY)
    assert {MODEL_CONFIGS[name].model_class.__name__ for name in MODEL_CONFIGS} == set(TINY)


@pytest.mark.parametrize("name", sorted(TINY))
def test_a_configuration_builds_its_model(name):
    config = TINY[name]
    model = config.build(key=jax.random.PRNGKey(0))
    assert type(model).__name__ == name and isinstance(config, MODEL_CONFIGS[name])
    assert model.config == config
    again = config.build(key=jax.random.PRNGKey(0))
    other = config.build(key=jax.random.PRNGKey(1))
    assert same_weights(model, again) and not same_weights(model, other)


def test_build_draws_the_weights_the_constructor_draws():
    key = jax.random.PRNGKey(3)
    vit, lm, ed = (TINY[n] for n in ("VisionTransformer", "LanguageModel", "EncoderDecoder"))
    assert same_weights(vit.build(key=key), VisionTransformer(vit, key=key))
    assert same_weights(lm.build(key=key), LanguageModel(lm, key=key))
    assert same_weights(ed.build(key=key), EncoderDecoder(ed, key=key))


@pytest.mark.parametrize("name", sorted(TINY))
def test_every_model_round_trips_through_the_one_checkpoint_format(tmp_path, name):
    model = TINY[name].build(key=jax.random.PRNGKey(2))
    loaded, info = load_checkpoint(save_checkpoint(tmp_path / "m.eqx", model, recipe=RECIPE))
    assert type(loaded) is type(model) and loaded.config == model.config
    assert same_weights(loaded, model) and info.recipe == RECIPE


@pytest.mark.parametrize("name", sorted(TINY))
def test_an_unknown_configuration_key_in_a_checkpoint_is_named(tmp_path, name):
    path = save_checkpoint(tmp_path / "m.eqx", TINY[name].build(key=jax.random.PRNGKey(0)))
    header, arrays = path.read_bytes().split(b"\n", 1)
    header = json.loads(header)
    header["model_config"]["flux_capacitor"] = 3
    path.write_bytes(json.dumps(header).encode() + b"\n" + arrays)
    with pytest.raises(CheckpointError, match=r"model configuration has fields .*flux_capacitor"):
        load_checkpoint(path)


def test_an_unknown_model_class_in_a_checkpoint_names_those_it_can_build(tmp_path):
    path = save_checkpoint(
        tmp_path / "m.eqx", TINY["LanguageModel"].build(key=jax.random.PRNGKey(0))
    )
    header, arrays = path.read_bytes().split(b"\n", 1)
    path.write_bytes(header.replace(b'"LanguageModel"', b'"Mamba"') + b"\n" + arrays)
    with pytest.raises(
        CheckpointError, match="holds a 'Mamba', which this version cannot build"
    ) as e:
        load_checkpoint(path)
    assert all(name in str(e.value) for name in TINY) and "import the module" in str(e.value)


# -- a model from outside the package ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AffineConfig(ModelConfig):
    """y = W x + b, the smallest model: here to show that registering is all a model needs."""

    width: int = 3


@pytest.fixture
def affine_model():
    """A model class registered for one test, and unregistered after it."""

    @register_model(AffineConfig)
    class Affine(eqx.Module):
        linear: eqx.nn.Linear
        config: AffineConfig = eqx.field(static=True)

        def __init__(self, config: AffineConfig, *, key):
            self.linear = eqx.nn.Linear(config.width, config.width, key=key)
            self.config = config

    yield Affine
    del MODEL_CONFIGS["Affine"]


def test_a_registered_model_from_outside_checkpoints_with_no_edit_to_training(
    tmp_path, affine_model
):
    model = AffineConfig(width=4).build(key=jax.random.PRNGKey(0))
    assert type(model) is affine_model
    loaded, _ = load_checkpoint(save_checkpoint(tmp_path / "a.eqx", model))
    assert type(loaded) is affine_model and loaded.config == AffineConfig(width=4)
    assert same_weights(loaded, model)


def test_two_model_classes_of_one_name_are_refused(affine_model):
    with pytest.raises(ValueError, match="a model class named 'Affine' is registered already"):

        @register_model(AffineConfig)
        class Affine(eqx.Module):  # noqa: F811  (another class of the same name: the point)
            pass


def test_a_configuration_without_a_registered_model_says_so():
    @dataclasses.dataclass(frozen=True)
    class LonelyConfig(ModelConfig):
        width: int = 1

    with pytest.raises(TypeError, match=r"LonelyConfig builds no model: decorate the model class"):
        LonelyConfig().build(key=jax.random.PRNGKey(0))


def test_an_unregistered_model_is_refused_by_save(tmp_path):
    with pytest.raises(TypeError, match="cannot checkpoint a MLP; the models that can are"):
        save_checkpoint(tmp_path / "u.eqx", MLP(4, 8, key=jax.random.PRNGKey(0)))


# -- the JSON mixin ----------------------------------------------------------------------------

CONFIGS = [*TINY.values(), RECIPE, TINY["LanguageModel"].block]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: type(c).__name__)
def test_every_config_shares_the_json_mixin_and_round_trips(config):
    assert isinstance(config, JsonConfig)
    for method in ("replace", "to_json", "from_json", "from_dict"):
        owner = next(k for k in type(config).__mro__ if method in vars(k))
        assert owner is JsonConfig, f"{type(config).__name__}.{method} is {owner.__name__}'s"
    assert type(config).from_json(config.to_json()) == config


@pytest.mark.unchecked  # the package's own error, for input its annotations exclude
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: type(c).__name__)
def test_unknown_keys_are_refused_by_name(config):
    cls = type(config)
    fields = json.loads(config.to_json())
    text = json.dumps({**fields, "colour": "red", "aardvark": 1})
    with pytest.raises(ValueError, match=rf"{cls.__name__} has no field 'aardvark', 'colour'"):
        cls.from_json(text)
    with pytest.raises(ValueError, match=rf"{cls.__name__} has no field 'colour'; its fields are"):
        config.replace(colour="red")
    with pytest.raises(ValueError, match="read from a JSON object, got a list"):
        cls.from_json("[1, 2]")


# -- the encoder-decoder's configuration is checked like the others ----------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"source_vocab_size": 0}, "source_vocab_size must be a whole number >= 1, got 0"),
        ({"max_target_length": 2.5}, "max_target_length must be a whole number >= 1, got 2.5"),
        ({"decoder_layers": True}, "decoder_layers must be a whole number >= 1, got True"),
        (
            {"decoder": BlockConfig(dim=32, num_heads=2, mlp_hidden_dim=32)},
            "encoder.dim=16 and decoder.dim=32 must be equal",
        ),
        ({"position_scale": -1.0}, "position_scale must be a finite number >= 0, got -1.0"),
        ({"position_scale": float("nan")}, "position_scale must be a finite number >= 0"),
        ({"pad_id": 8}, r"pad_id=8 is not an id of both vocabularies \(source 9, target 8"),
        ({"pad_id": -1}, "pad_id must be a whole number >= 0, got -1"),
    ],
)
@pytest.mark.unchecked  # the package's own error, for input its annotations exclude
def test_a_bad_encoder_decoder_configuration_is_named(changes, message):
    config = TINY["EncoderDecoder"]
    with pytest.raises(ValueError, match=message):
        config.replace(**changes)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"dim": 10, "num_heads": 4}, "dim=10 is not divisible by num_heads=4"),
        ({"value_dim": 0}, "value_dim must be None or at least 1, got 0"),
        ({"num_kv_heads": 3}, "num_heads=2 must be a multiple of num_kv_heads=3"),
        ({"head_dim": 3, "rotary": True}, "rotary positions need an even head_dim, got 3"),
        ({"norm": "batch"}, "norm must be one of"),
        ({"mlp": "gated", "mlp_num_layers": 2}, "a gated MLP has one hidden layer"),
        ({"mlp_bias": False}, "the plain MLP always has biases"),
    ],
)
@pytest.mark.unchecked  # the package's own error, for input its annotations exclude
def test_a_bad_block_configuration_is_named(changes, message):
    with pytest.raises(ValueError, match=message):
        BlockConfig(**{"dim": 16, "num_heads": 2, "mlp_hidden_dim": 32, **changes})


@pytest.mark.parametrize("name", sorted(TINY))
def test_every_model_takes_every_block_option(name):
    # One block description: an option of the block is an option of every model.
    gqa_rms_gated = dict(
        num_kv_heads=1, norm="rms", mlp="gated", activation="silu", qk_norm=True, rotary=True
    )
    config = TINY[name]
    stacks = ["encoder", "decoder"] if name == "EncoderDecoder" else ["block"]
    changed = config.replace(
        **{s: getattr(config, s).replace(value_dim=8, **gqa_rms_gated) for s in stacks}
    )
    model = changed.build(key=jax.random.PRNGKey(0))
    blocks = [layer.block for layer in model.decoder] if name == "EncoderDecoder" else model.blocks
    for block in blocks:
        assert block.attention.num_kv_heads == 1 and block.attention.rotary
        assert type(block.mlp).__name__ == "GatedMLP" and type(block.mlp_norm).__name__ == "RMSNorm"


# -- small helpers --------------------------------------------------------------------------------


def test_count_parameters_counts_every_weight_and_bias():
    from transformer_intro import count_parameters

    assert count_parameters(MLP(4, 8, key=jax.random.PRNGKey(0))) == 4 * 8 + 8 + 8 * 4 + 4


def test_synthetic_digits_are_uint8_images_with_int32_labels_and_a_seed_repeats_them():
    from transformer_intro.datasets.synthetic import synthetic_digits

    images, labels = synthetic_digits(5, seed=1)
    assert images.shape == (5, 28, 28) and images.dtype == np.uint8 and labels.dtype == np.int32
    assert np.array_equal(images, synthetic_digits(5, seed=1)[0])


def test_an_option_added_later_is_written_only_when_set():
    # Chapter 9's committed checkpoint was written before scan_blocks existed: its configuration,
    # written again, is the same text, so a model saved again is the same file.
    config = LMConfig(vocab_size=5)
    assert "scan_blocks" not in json.loads(config.to_json())
    scanned = config.replace(scan_blocks=True)
    assert json.loads(scanned.to_json())["scan_blocks"] is True
    assert LMConfig.from_json(scanned.to_json()) == scanned
    assert LMConfig.from_json(config.to_json()) == config
    with open(Path(__file__).parents[1] / "book/checkpoints/shakespeare_lm.eqx", "rb") as f:
        header = json.loads(f.readline())
    committed = LMConfig.from_dict(header["model_config"])
    assert json.loads(committed.to_json()) == header["model_config"]
