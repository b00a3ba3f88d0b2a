"""Files are written to a temporary file and renamed into place (issue 68).

An interrupted write (here: the disk fills after half the bytes) must leave the previous file
whole, and no temporary file behind.
"""

from __future__ import annotations

import errno
import io

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
