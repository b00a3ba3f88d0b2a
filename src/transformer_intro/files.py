"""Files written whole or not at all: a temporary file beside the target, renamed into place.

Every file the package, its benchmarks and its scripts rewrite (a tokeniser, a benchmark's
result, a chapter's notebook, a picture) goes through :func:`write_atomically`. The new contents
go to a temporary file in the target's own folder, are flushed to the disk, and only then
replace the target with ``os.replace``: within one file system a rename is atomic, so the target
holds its old contents or the whole new ones, never a part, however the write is interrupted (a
full disk, an exception, Ctrl-C, a killed process).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["write_atomically"]


def write_atomically(
    path: str | os.PathLike, contents: bytes | str | Callable[[BinaryIO], object]
) -> Path:
    """Replace the file at ``path`` by ``contents``, all at once.

    Args:
        path: the file to write. Its folder must exist; the file need not.
        contents: the new bytes, text (written as UTF-8), or a function that writes them to
            the binary file it is given (for example ``lambda f: f.write(png)``).

    Returns:
        ``path``, as a ``Path``.

    Raises:
        FileNotFoundError: if ``path``'s folder does not exist.
        Whatever ``contents`` raises, or the disk: ``path`` is then as it was, and no
        temporary file is left behind.
    """
    path = Path(path)
    if isinstance(contents, str):
        contents = contents.encode("utf-8")
    write = (lambda file: file.write(contents)) if isinstance(contents, bytes) else contents
    if not path.parent.is_dir():
        raise FileNotFoundError(
            f"cannot write {path}: its folder {path.parent} does not exist; create it first"
        )
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            os.fchmod(file.fileno(), _permissions(path))
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise
    _sync_folder(path.parent)
    return path


def _permissions(path: Path) -> int:
    """The mode the new file gets: the old file's, or else the one ``open()`` would give.

    ``mkstemp`` creates its files readable by their owner only, a mode meant for secrets.
    """
    with contextlib.suppress(FileNotFoundError):
        return stat.S_IMODE(os.stat(path).st_mode)
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _sync_folder(folder: Path) -> None:
    """Flush the folder's entry for the renamed file too, where the system allows it."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    with contextlib.suppress(OSError):
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
