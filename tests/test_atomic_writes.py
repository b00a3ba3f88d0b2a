"""Files are written to a temporary file and renamed into place (issue 68).

An interrupted write (here: the disk fills after half the bytes) must leave the previous file
whole, and no temporary file behind.
"""

from __future__ import annotations

import errno
import importlib.util
import io
import json
from pathlib import Path

import nbformat
import pytest

from transformer_intro.bpe import BytePairEncoding

TEXT = "to be or not to be, that is the question: whether 'tis nobler in the mind to suffer"


class HalfThenFull:
    """A file object that writes half of what it is given, then fails as a full disk does."""

    def __init__(self, file):
        self._file = file

    def write(self, data):
        self._file.write(data[: len(data) // 2])
        self._file.flush()
        raise OSError(errno.ENOSPC, "No space left on device")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._file.close()

    def __getattr__(self, name):
        return getattr(self._file, name)


@pytest.fixture
def fill_disk(monkeypatch):
    """Call it, and every file opened for writing (``open``, ``Path.open``, ``os.fdopen``) fills
    up midway; the test's end undoes it."""
    real_open = io.open

    def open_then_fill(file, mode="r", *args, **kwargs):
        opened = real_open(file, mode, *args, **kwargs)
        return HalfThenFull(opened) if any(m in mode for m in "wax+") else opened

    def fill():
        monkeypatch.setattr(io, "open", open_then_fill)
        monkeypatch.setattr("builtins.open", open_then_fill)

    return fill


def test_an_interrupted_save_of_a_tokeniser_leaves_the_previous_file(
    tmp_path, fill_disk, monkeypatch
):
    old, new = BytePairEncoding.train(TEXT, 256 + 3), BytePairEncoding.train(TEXT, 256 + 12)
    path = tmp_path / "bpe.json"
    old.save(path)
    assert BytePairEncoding.load(path) == old and old != new  # control: the two differ
    fill_disk()
    with pytest.raises(OSError, match="No space left"):
        new.save(path)
    monkeypatch.undo()
    assert BytePairEncoding.load(path) == old
    assert [p.name for p in tmp_path.iterdir()] == ["bpe.json"]  # no temporary file left
    # A save that completes replaces it.
    new.save(path)
    assert BytePairEncoding.load(path) == new


def script(name):
    """A module of scripts/, imported from its file."""
    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def a_notebook_with_a_progress_bar(path):
    cell = nbformat.v4.new_code_cell("run()")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stderr", text=f"\r{i}/3 ✓") for i in range(1, 4)
    ]
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
    return path


def test_tidying_writes_what_nbformat_writes_and_an_interrupted_tidy_leaves_the_notebook(
    tmp_path, fill_disk, monkeypatch
):
    tidy = script("tidy_outputs")
    path = a_notebook_with_a_progress_bar(tmp_path / "chapter.ipynb")
    before = path.read_bytes()
    fill_disk()
    with pytest.raises(OSError, match="No space left"):
        tidy.tidy_notebook(str(path))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["chapter.ipynb"]
    # Completed, the file is byte for byte what nbformat.write gives for the tidied notebook.
    assert tidy.tidy_notebook(str(path))
    reference = nbformat.read(io.BytesIO(before), as_version=4)
    reference.cells[0].outputs = [
        nbformat.from_dict(o)
        for o in tidy.tidy_outputs([dict(o) for o in reference.cells[0].outputs])
    ]
    nbformat.write(reference, tmp_path / "reference.ipynb")
    assert path.read_bytes() == (tmp_path / "reference.ipynb").read_bytes()
    assert path.read_bytes() != before  # control: tidying changed it (3 outputs became 1)


def test_an_interrupted_picture_leaves_the_committed_one(tmp_path, fill_disk, monkeypatch):
    write = script("infer_fallbacks")._write_atomically
    path = tmp_path / "picture.png"
    write(path, b"\x89PNG the old picture")
    fill_disk()
    with pytest.raises(OSError, match="No space left"):
        write(path, b"\x89PNG the new picture, longer")
    monkeypatch.undo()
    assert path.read_bytes() == b"\x89PNG the old picture"
    assert [p.name for p in tmp_path.iterdir()] == ["picture.png"]


def test_a_result_that_cannot_be_written_leaves_no_temporary_file(tmp_path):
    """benchmarks/report.py's write_json: JSON that fails midway leaves the old file, no .tmp."""

    spec = importlib.util.spec_from_file_location(
        "report", Path(__file__).resolve().parents[1] / "benchmarks" / "report.py"
    )
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    path = tmp_path / "result.json"
    report.write_json(path, {"a": 1})
    with pytest.raises(TypeError):
        report.write_json(path, {"a": 1, "b": object()})  # not JSON: fails after "a" is written
    assert json.loads(path.read_text()) == {"a": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]
