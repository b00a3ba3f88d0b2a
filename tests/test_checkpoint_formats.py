"""Checkpoints of format 2 (flat configurations) still load, and compute what they computed.

``tests/fixtures/format2/`` holds files written by the last package to write format 2, with each
model's outputs on a fixed input (``make_format2.py`` there says how they were made). Loading one
with this version lifts its configuration into the nested form of format 3 and reads its arrays
as they are, so the outputs must be the same (to float32 rounding); saved again, the model is a
format-3 file whose arrays are the old file's, byte for byte, and which loads to the same
outputs. A damaged or unknown header is refused with a message naming it.
"""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_intro.block import BlockConfig
from transformer_intro.training.checkpoints import (
    FORMAT,
    CheckpointError,
    checkpoint_header,
    load_adapter,
    load_checkpoint,
    save_checkpoint,
)

FIXTURES = Path(__file__).parent / "fixtures" / "format2"
OUTPUTS = np.load(FIXTURES / "outputs.npz")
SYMBOLS = jnp.array([1, 5, 2, 7, 3, 0, 4, 6])


def outputs_of(name: str, model) -> np.ndarray:
    """The model's output on the input ``make_format2.py`` gave it."""
    if name == "vit":
        return np.asarray(model(jax.random.uniform(jax.random.PRNGKey(1), (1, 8, 8))))
    if name == "encoder_decoder":
        return np.asarray(model(jnp.array([3, 4, 5, 0, 0, 0]), jnp.array([1, 2, 3, 4])))
    return np.asarray(model(SYMBOLS))


def assert_same_outputs(actual, recorded):
    # The same weights and the same function; the recording ran outside the tests' precision
    # settings, so the last bit of a sum may differ.
    np.testing.assert_allclose(actual, recorded, rtol=1e-5, atol=1e-6)


MODELS = ["vit", "lm_chapter9", "lm_gpt2", "lm_llama", "encoder_decoder"]


@pytest.mark.parametrize("name", MODELS)
def test_format2_file_loads_with_identical_outputs(name):
    assert json.loads((FIXTURES / f"{name}.eqx").open("rb").readline())["format"].endswith(" 2")
    model, info = load_checkpoint(FIXTURES / f"{name}.eqx")
    assert_same_outputs(outputs_of(name, model), OUTPUTS[name])
    assert info.header["format"] == FORMAT
    blocks = [model.config.encoder, model.config.decoder] if name == "encoder_decoder" else []
    assert all(isinstance(b, BlockConfig) for b in blocks or [model.config.block])


@pytest.mark.parametrize("name", MODELS)
def test_format2_model_saved_again_is_format3_with_identical_outputs(name, tmp_path):
    model, info = load_checkpoint(FIXTURES / f"{name}.eqx")
    path = save_checkpoint(tmp_path / "again.eqx", model, step=info.step, extra=info.extra)
    header = json.loads(path.open("rb").readline())
    assert header["format"] == FORMAT == "transformer_intro checkpoint 3"
    again, _ = load_checkpoint(path)
    assert again.config == model.config
    assert_same_outputs(outputs_of(name, again), OUTPUTS[name])
    # the arrays are stored as they were: only the header line differs
    old = (FIXTURES / f"{name}.eqx").read_bytes()
    assert old[old.index(b"\n") :] == path.read_bytes()[path.read_bytes().index(b"\n") :]


def test_format2_features_are_lifted_to_the_block():
    vit, _ = load_checkpoint(FIXTURES / "vit.eqx")
    assert vit.config.block.qk_activation == "gelu_tanh"  # format 2's ViT called it "gelu"
    gpt2 = checkpoint_header(FIXTURES / "lm_gpt2.eqx").header["model_config"]
    assert gpt2["learned_positions"] and not gpt2["block"]["rotary"]
    llama, _ = load_checkpoint(FIXTURES / "lm_llama.eqx")
    assert llama.config.scan_blocks and llama.config.block.rotary_layout == "half"
    assert llama.config.block.value_dim == 16 // 4  # format 2's LM factored values through D/H


def test_format2_adapter_loads_onto_its_base():
    base, _ = load_checkpoint(FIXTURES / "lm_chapter9.eqx")
    lora, _ = load_adapter(FIXTURES / "lora.eqx", base)
    assert_same_outputs(np.asarray(lora(SYMBOLS)), OUTPUTS["lora"])
    # control: the adapter changes the base's outputs, so the comparison above can fail
    assert not np.allclose(np.asarray(base(SYMBOLS)), OUTPUTS["lora"])


def _rewrite_header(source: Path, target: Path, change) -> Path:
    data = source.read_bytes()
    header = json.loads(data[: data.index(b"\n")])
    change(header)
    target.write_bytes(json.dumps(header).encode() + data[data.index(b"\n") :])
    return target


def test_unknown_format_is_refused_naming_the_formats(tmp_path):
    path = _rewrite_header(
        FIXTURES / "lm_chapter9.eqx",
        tmp_path / "m.eqx",
        lambda h: h.update(format="transformer_intro checkpoint 1"),
    )
    with pytest.raises(CheckpointError, match="checkpoint 1.*reads.*checkpoint 2.*checkpoint 3"):
        load_checkpoint(path)


def test_damaged_format2_configuration_is_refused_naming_the_field(tmp_path):
    path = _rewrite_header(
        FIXTURES / "lm_chapter9.eqx",
        tmp_path / "m.eqx",
        lambda h: h["model_config"].update(norm="batch"),
    )
    with pytest.raises(CheckpointError, match="(?s)model configuration is not valid.*norm"):
        load_checkpoint(path)


def test_format3_header_with_a_flat_configuration_is_refused(tmp_path):
    # a format-2 configuration under a format-3 label: not lifted, so its fields are unknown
    path = _rewrite_header(
        FIXTURES / "lm_chapter9.eqx", tmp_path / "m.eqx", lambda h: h.update(format=FORMAT)
    )
    with pytest.raises(CheckpointError, match="does not know.*dim"):
        load_checkpoint(path)


def test_upgrade_script_rewrites_the_header_only_and_once(tmp_path):
    import importlib.util
    import shutil

    spec = importlib.util.spec_from_file_location(
        "upgrade_checkpoints", Path(__file__).parents[1] / "scripts" / "upgrade_checkpoints.py"
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for name in ("lm_llama", "lora"):
        path = shutil.copy(FIXTURES / f"{name}.eqx", tmp_path / f"{name}.eqx")
        assert script.upgrade(Path(path)) is True
        old, new = (FIXTURES / f"{name}.eqx").read_bytes(), Path(path).read_bytes()
        assert json.loads(new[: new.index(b"\n")])["format"] == FORMAT
        assert old[old.index(b"\n") :] == new[new.index(b"\n") :]
        assert script.upgrade(Path(path)) is False  # format 3 already: left as it is
        assert Path(path).read_bytes() == new
    model, _ = load_checkpoint(tmp_path / "lm_llama.eqx")
    assert_same_outputs(outputs_of("lm_llama", model), OUTPUTS["lm_llama"])


def test_the_books_checkpoints_are_format_3():
    books = sorted((Path(__file__).parents[1] / "book" / "checkpoints").glob("*.eqx"))
    assert books
    for path in books:
        # the file's own line (checkpoint_header reports an old header lifted to format 3)
        with path.open("rb") as f:
            assert json.loads(f.readline())["format"] == FORMAT, path.name
