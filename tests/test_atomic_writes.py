"""Files are written to a temporary file and renamed into place (issue 68).

An interrupted write (here: the disk fills after half the bytes) must leave the previous file
whole, and no temporary file behind.
"""

from __future__ import annotations

import errno
import importlib.util
import io
import json
import stat
from pathlib import Path

import nbformat
import pytest

from transformer_intro.bpe import BytePairEncoding
from transformer_intro.files import write_atomically

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
    fallbacks = script("infer_fallbacks")
    pictures = {name: b"\x89PNG the old picture of " + name.encode() for name in fallbacks.DRAW}
    for name, png in pictures.items():
        (tmp_path / fallbacks.FILES[name]).write_bytes(png)
    # Drawing needs the trained models; what is tested here is how the drawings are written.
    draws = {name: (lambda n=name: (b"\x89PNG a new, longer picture of " + n.encode(), n))
             for name in fallbacks.DRAW}  # fmt: skip
    monkeypatch.setattr(fallbacks, "DRAW", draws)
    fill_disk()
    with pytest.raises(OSError, match="No space left"):
        fallbacks.draw_all(tmp_path)
    monkeypatch.undo()
    for name, png in pictures.items():
        assert (tmp_path / fallbacks.FILES[name]).read_bytes() == png
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(fallbacks.FILES.values())
    monkeypatch.setattr(fallbacks, "DRAW", draws)  # control: a completed run replaces them
    fallbacks.draw_all(tmp_path)
    assert (
        tmp_path / fallbacks.FILES["vit"]
    ).read_bytes() == b"\x89PNG a new, longer picture of vit"


def test_an_interrupted_exercise_index_leaves_the_committed_one(tmp_path, fill_disk, monkeypatch):
    index = script("exercise_index")
    path = tmp_path / "exercise_index.md"
    path.write_text("# Exercises\n\nthe committed index\n")
    monkeypatch.setattr(index, "INDEX", path)
    monkeypatch.setattr(index, "REPO", tmp_path)
    monkeypatch.setattr(index, "index_text", lambda: "# Exercises\n\na new index, longer\n")
    monkeypatch.setattr("sys.argv", ["exercise_index.py"])
    fill_disk()
    with pytest.raises(OSError, match="No space left"):
        index.main()
    monkeypatch.undo()
    assert path.read_text() == "# Exercises\n\nthe committed index\n"
    assert [p.name for p in tmp_path.iterdir()] == ["exercise_index.md"]


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


# -- the one writer: transformer_intro.files.write_atomically -----------------------------------


def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "result.json"
    write_atomically(path, '{"old": 1}\n')

    def half_then_fail(file):
        file.write(b'{"new": ')
        raise ValueError("the result cannot be written")

    with pytest.raises(ValueError, match="cannot be written"):
        write_atomically(path, half_then_fail)
    assert path.read_text() == '{"old": 1}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_a_full_disk_or_an_interrupt_leaves_the_old_file_and_no_temporary(
    tmp_path, fill_disk, monkeypatch
):
    path = tmp_path / "picture.png"
    write_atomically(path, b"\x89PNG the old picture")
    fill_disk()
    with pytest.raises(OSError, match="No space left"):
        write_atomically(path, b"\x89PNG the new picture, longer")
    monkeypatch.undo()
    assert path.read_bytes() == b"\x89PNG the old picture"

    def interrupted(file):
        file.write(b"\x89PNG half")
        raise KeyboardInterrupt  # Ctrl-C while writing

    with pytest.raises(KeyboardInterrupt):
        write_atomically(path, interrupted)
    assert path.read_bytes() == b"\x89PNG the old picture"
    assert [p.name for p in tmp_path.iterdir()] == ["picture.png"]


def test_the_full_disk_does_cut_a_file_written_in_place(tmp_path, fill_disk, monkeypatch):
    """The control: the same full disk leaves half a file where a file is written in place."""
    path = tmp_path / "picture.png"
    path.write_bytes(b"\x89PNG the old picture")
    fill_disk()
    new = b"\x89PNG the new picture, longer"
    with pytest.raises(OSError, match="No space left"), open(path, "wb") as file:
        file.write(new)
    monkeypatch.undo()
    assert path.read_bytes() == new[: len(new) // 2]  # neither the old file nor the new one


def test_a_completed_write_replaces_the_file_with_text_bytes_or_a_writer(tmp_path):
    path = tmp_path / "page.md"
    assert write_atomically(str(path), "Zürich\n") == path
    assert path.read_bytes() == "Zürich\n".encode()
    write_atomically(path, b"bytes\n")
    assert path.read_bytes() == b"bytes\n"
    write_atomically(path, lambda file: file.write(b"written by a function\n"))
    assert path.read_bytes() == b"written by a function\n"
    assert [p.name for p in tmp_path.iterdir()] == ["page.md"]


def test_permissions_are_kept_or_those_open_gives(tmp_path):
    kept = tmp_path / "script.sh"
    kept.write_text("echo old\n")
    kept.chmod(0o751)
    write_atomically(kept, "echo new\n")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o751
    fresh, by_open = tmp_path / "new.txt", tmp_path / "by_open.txt"
    write_atomically(fresh, "new\n")
    by_open.write_text("new\n")
    assert stat.S_IMODE(fresh.stat().st_mode) == stat.S_IMODE(by_open.stat().st_mode)
    assert stat.S_IMODE(fresh.stat().st_mode) != 0o600  # not mkstemp's mode, meant for secrets


def test_a_missing_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="its folder .*missing.* does not exist"):
        write_atomically(tmp_path / "missing" / "result.json", "{}")
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_renumbering_or_quiz_refresh_leaves_the_notebook(
    tmp_path, fill_disk, monkeypatch
):
    """scripts/renumber_exercises.py and scripts/quiz_cells.py rewrite committed chapters."""
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["## Coding exercises\n"]},
        {"cell_type": "markdown", "metadata": {}, "source": ["**Coding exercise 3.7: the mask.**"]},
    ]
    path = tmp_path / "03_x.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}}, indent=1) + "\n")
    before = path.read_bytes()
    renumber, quiz_cells = script("renumber_exercises"), script("quiz_cells")
    fill_disk()
    with pytest.raises(OSError, match="No space left"):
        renumber.renumber_notebook(path)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A chapter")])
    with pytest.raises(OSError, match="No space left"):
        quiz_cells.write_atomically(notebook, path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["03_x.ipynb"]
    assert renumber.renumber_notebook(path)  # control: completed, the renumbering lands
    assert "Coding exercise 3.C1: the mask." in path.read_text()
