"""The page's model files (transformer_intro.export) and the MNIST-style drawing preparation."""

from __future__ import annotations

import re
from pathlib import Path

import jax
import numpy as np
import pytest

from transformer_intro.block import BlockConfig
from transformer_intro.export import (
    MODELS,
    UnsupportedModel,
    check_supported,
    export_model,
    prepare_drawing,
    read_export,
    supported_options,
)
from transformer_intro.models import CONFIGS, SHAKESPEARE_CONFIG, EncoderDecoderConfig

REPO = Path(__file__).resolve().parents[1]
OUT_DIR = REPO / "_interactive" / "models"
INFER_JS = REPO / "_interactive" / "infer.js"

MAX_BYTES = 2_000_000  # per model file


@pytest.mark.parametrize("name", sorted(MODELS))
def test_committed_files_are_up_to_date(name, tmp_path):
    """Exporting the committed checkpoint again writes the committed file."""
    fresh = export_model(
        name, tmp_path, checkpoints=REPO / "book" / "checkpoints", infer_js=INFER_JS
    )
    committed = OUT_DIR / f"{name}.js"
    assert committed.is_file(), f"run `python -m transformer_intro.export` to write {committed}"
    if fresh.read_bytes() == committed.read_bytes():
        return
    # zlib's output may differ between zlib builds: then the decoded contents must be equal.
    new_payload, new_tensors = read_export(fresh)
    old_payload, old_tensors = read_export(committed)
    assert MODELS[name][1] != "float32", "an uncompressed file differs: re-export it"
    assert {k: v for k, v in new_payload.items() if k != "data"} == {
        k: v for k, v in old_payload.items() if k != "data"
    }
    assert new_tensors.keys() == old_tensors.keys()
    for key in new_tensors:
        np.testing.assert_array_equal(new_tensors[key], old_tensors[key], err_msg=key)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_file_holds_the_checkpoints_weights(name):
    from transformer_intro.training import load_checkpoint

    payload, tensors = read_export(OUT_DIR / f"{name}.js")
    path = Path(__file__).resolve().parents[1] / payload["source"]
    model, _ = load_checkpoint(path)
    assert (OUT_DIR / f"{name}.js").stat().st_size <= MAX_BYTES
    assert payload["count"] == sum(a.size for a in tensors.values())
    for key, array in tensors.items():
        node = model
        for part in key.split("."):
            node = node[int(part)] if part.isdigit() else getattr(node, part)
        original = np.asarray(node, np.float32)
        if payload["encoding"] == "float32":
            np.testing.assert_array_equal(array, original, err_msg=key)
        else:  # half precision: the nearest float16
            np.testing.assert_array_equal(array, original.astype(np.float16), err_msg=key)
    if name == "lm":
        assert len(payload["extra"]["symbols"]) == model.config.vocab_size
    elif name == "dates":
        assert len(payload["extra"]["source_symbols"]) == model.config.source_vocab_size
        assert len(payload["extra"]["target_symbols"]) == model.config.target_vocab_size
    else:
        assert payload["extra"]["labels"] == list(range(10))


def test_infer_js_declares_what_it_supports():
    supported = supported_options(INFER_JS)
    assert set(supported) == {"block", *MODELS}
    assert set(supported["block"]) <= {f for f in BlockConfig.__dataclass_fields__}
    # the committed models are within it
    check_supported("lm", SHAKESPEARE_CONFIG, supported)
    check_supported("vit", CONFIGS["default"], supported)


@pytest.mark.parametrize(
    "kind, config, named",
    [
        ("lm", SHAKESPEARE_CONFIG.replace(tied_embeddings=True), "tied_embeddings=True"),
        (
            "lm",
            SHAKESPEARE_CONFIG.replace(block=SHAKESPEARE_CONFIG.block.replace(norm="rms")),
            "block.norm='rms'",
        ),
        ("vit", CONFIGS["reference"], "block.combine_heads='mean'"),
        (
            "dates",
            EncoderDecoderConfig(
                5,
                5,
                4,
                4,
                decoder=BlockConfig(dim=64, num_heads=4, mlp_hidden_dim=128, qk_norm=True),
            ),
            "decoder.qk_norm=True",
        ),
    ],
)
def test_export_refuses_what_infer_js_does_not_implement(kind, config, named):
    with pytest.raises(UnsupportedModel, match=re.escape(named)):
        check_supported(kind, config, supported_options(INFER_JS))


def test_export_refuses_an_unsupported_checkpoint_and_writes_nothing(tmp_path):
    from transformer_intro.training import save_checkpoint

    model = SHAKESPEARE_CONFIG.replace(
        vocab_size=5, block=SHAKESPEARE_CONFIG.block.replace(num_kv_heads=2)
    ).build(key=jax.random.PRNGKey(0))
    save_checkpoint(tmp_path / "shakespeare_lm.eqx", model, extra={"symbols": list("abcde")})
    with pytest.raises(UnsupportedModel, match="block.num_kv_heads=2"):
        export_model("lm", tmp_path / "out", checkpoints=tmp_path, infer_js=INFER_JS)
    assert not (tmp_path / "out" / "lm.js").exists()


def test_blank_drawing_is_blank():
    assert not prepare_drawing(np.zeros((50, 40))).any()


def test_drawing_fits_20_pixels_with_centre_of_mass_in_the_middle():
    ink = np.zeros((200, 300))
    ink[20:60, 30:230] = 1.0  # a wide bar: its longer side becomes 20 pixels, the other 4
    ink[60:120, 200:230] = 0.5
    image = prepare_drawing(ink)
    cols = np.flatnonzero(image.any(0))
    assert cols[-1] - cols[0] + 1 == 20
    assert 0 <= image.min() and image.max() <= 1
    centre = [
        (image.sum(1) * (np.arange(28) + 0.5)).sum() / image.sum(),
        (image.sum(0) * (np.arange(28) + 0.5)).sum() / image.sum(),
    ]
    assert np.allclose(centre, 14, atol=0.5)
    # area averaging keeps the mean grey level of the crop
    crop = ink[20:120, 30:230]
    assert image.sum() == pytest.approx(crop.sum() * 20 * 10 / crop.size, rel=1e-9)


def test_an_mnist_digit_drawn_ten_times_larger_comes_back():
    """MNIST's digits were prepared the same way: enlarged 10x, a digit whose longer side is 20
    pixels comes back as itself, at most a pixel off its place."""
    from transformer_intro.datasets import load_mnist

    images, _ = load_mnist("test")
    checked = 0
    for digit in images[:40].astype(np.float64) / 255:
        rows, cols = np.flatnonzero(digit.any(1)), np.flatnonzero(digit.any(0))
        if max(rows[-1] - rows[0], cols[-1] - cols[0]) + 1 != 20:
            continue
        image = prepare_drawing(np.kron(digit, np.ones((10, 10))))
        crop = digit[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]
        r, c = np.flatnonzero(image.any(1)), np.flatnonzero(image.any(0))
        np.testing.assert_allclose(image[r[0] : r[-1] + 1, c[0] : c[-1] + 1], crop, atol=1e-12)
        assert abs(r[0] - rows[0]) <= 1 and abs(c[0] - cols[0]) <= 1
        checked += 1
    assert checked >= 10
