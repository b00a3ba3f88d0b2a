"""The static pictures of the in-page models (scripts/infer_fallbacks.py, book/figures/).

The script runs from the committed checkpoints and writes three PNGs of the planned size, small
enough for the page; the committed pictures have the same sizes, and each chapter's widget cell
shows its picture with the alternative text the script writes for it. The bytes themselves are
not compared: they vary with the version of matplotlib.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "infer_fallbacks.py"
MAX_BYTES = 150_000
CHAPTERS = {
    "vit": "08_vision_transformer.ipynb",
    "lm": "09_language_model.ipynb",
    "dates": "10_encoder_decoder.ipynb",
}
PIXELS = {"vit": (600, 520), "lm": (600, 440), "dates": (600, 460)}


def load_script():
    spec = importlib.util.spec_from_file_location("infer_fallbacks", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's header."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def widget_cell(name: str) -> str:
    nb = json.loads((REPO / "book" / CHAPTERS[name]).read_text(encoding="utf-8"))
    [cell] = [
        "".join(c["source"])
        for c in nb["cells"]
        if c["cell_type"] == "markdown" and f'data-model="{name}"' in "".join(c["source"])
    ]
    return cell


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("fallbacks")
    return load_script().draw_all(out)


def test_the_script_writes_three_small_pngs_of_the_planned_size(written):
    script = load_script()
    assert sorted(written) == sorted(PIXELS)
    for name, (path, alt) in written.items():
        data = path.read_bytes()
        assert path.name == f"infer_{name}.png"
        assert png_size(data) == PIXELS[name] == script.pixel_size(name)
        assert len(data) < MAX_BYTES, f"{path.name}: {len(data)} bytes"
        assert alt.startswith("Static picture of the")


@pytest.mark.parametrize("name", sorted(PIXELS))
def test_the_committed_pictures_are_in_place(name):
    path = REPO / "book" / "figures" / f"infer_{name}.png"
    assert path.is_file(), "run python scripts/infer_fallbacks.py"
    data = path.read_bytes()
    assert png_size(data) == PIXELS[name]
    assert len(data) < MAX_BYTES


def test_each_widget_cell_shows_its_picture_with_the_scripts_alt_text(written):
    for name, (_, alt) in written.items():
        cell = widget_cell(name)
        div = cell.index(f'<div class="book-infer" data-model="{name}"><noscript>')
        image = cell.index(f"```{{image}} figures/infer_{name}.png\n")
        assert div < image, "the picture follows its widget"
        options = cell[image:].split("```", 2)[1]
        assert f":alt: {alt}\n" in options, f"{CHAPTERS[name]}: alt text differs from the script's"
        assert ":class: book-infer-static\n" in options
