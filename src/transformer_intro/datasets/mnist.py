"""MNIST: where it comes from, how it is checked, how it becomes arrays.

:func:`load_mnist` returns a split as two NumPy arrays, ``images`` (S, 28, 28) uint8 and
``labels`` (S,) int32, for the S examples of the split. It takes the first of these sources that
has the data:

1. **IDX files in a folder**: the ``data_dir`` argument, or else the folder named by the
   ``MNIST_DIR`` environment variable. The folder must contain the four official files
   ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte`` and
   ``t10k-labels-idx1-ubyte``, each raw or gzipped (``.gz`` suffix). Every file is validated
   (magic number, header shape, payload size, gzip integrity, label range, image/label count
   agreement, and, if an ``MD5SUMS`` file sits beside them, its checksum).
2. **A copy already prepared by tensorflow-datasets**, read through its TensorFlow-free
   ``array_record`` data-source API. Only read, never prepared: preparing MNIST needs
   TensorFlow, which the book does not use.
3. **The per-user cache**, ``$XDG_CACHE_HOME/transformer_intro/mnist``
   (``~/.cache/transformer_intro/mnist`` by default), filled on first use by downloading the
   split's two official ``.gz`` files from the mirrors in :data:`MIRRORS` (or the
   space-separated base URLs in ``MNIST_MIRRORS``), tried in turn. Each download lands in a
   temporary file beside its final place and is moved there only once the MD5 of its content
   matches :data:`CONTENT_MD5`, so an interrupted or corrupt download leaves nothing that a later
   run would trust.

Errors. Everything this module raises about the data itself derives from :class:`MNISTError`:

* :class:`MNISTFileNotFoundError` (also a ``FileNotFoundError``): an IDX file or the folder is
  missing.
* :class:`MNISTFormatError` (also a ``ValueError``): bad magic number, wrong header shape or
  count, truncated or over-long payload, corrupt gzip, labels out of range, image and label
  counts disagreeing.
* :class:`MNISTChecksumError` (a :class:`MNISTFormatError`): MD5 mismatch, against ``MD5SUMS``
  or, for a download, against :data:`CONTENT_MD5`.
* :class:`MNISTDownloadError`: no mirror delivered a file (offline, refused, timed out, cut off,
  HTTP error).
* :class:`MNISTUnavailableError`: the parent of :class:`MNISTDownloadError`, for "no source could
  provide MNIST".

An unknown split name raises a plain ``ValueError``.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import socket
import tempfile
import urllib.error
import urllib.request
import zlib
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "SPLIT_SIZES",
    "MNISTError",
    "MNISTFileNotFoundError",
    "MNISTFormatError",
    "MNISTChecksumError",
    "MNISTUnavailableError",
    "MNISTDownloadError",
    "MIRRORS",
    "CONTENT_MD5",
    "cache_dir",
    "download_split",
    "load_mnist",
    "load_idx_split",
    "read_idx_images",
    "read_idx_labels",
    "normalise_images",
]

SPLIT_SIZES: dict[str, int] = {"train": 60_000, "test": 10_000}
IMAGE_SIZE = 28
NUM_CLASSES = 10

IMAGES_MAGIC = 2051  # 0x00000803: unsigned byte, 3 dimensions
LABELS_MAGIC = 2049  # 0x00000801: unsigned byte, 1 dimension
_IMAGES_HEADER_BYTES = 16
_LABELS_HEADER_BYTES = 8
_GZIP_MAGIC = b"\x1f\x8b"

_IDX_STEMS: dict[str, tuple[str, str]] = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_ALL_STEMS = [stem for pair in _IDX_STEMS.values() for stem in pair]

MNIST_DIR_ENV = "MNIST_DIR"
MIRRORS_ENV = "MNIST_MIRRORS"
# Base URLs that serve the four official .gz files under their official names, tried in turn
# (the original site, yann.lecun.com, now often refuses downloads).
MIRRORS: tuple[str, ...] = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)
# MD5 of each official file's *content*, the IDX bytes after gunzip. The official .gz files also
# have fixed MD5s, but a mirror that re-compresses the same bytes would fail those for no reason;
# the content is what the book trains on.
CONTENT_MD5: dict[str, str] = {
    "train-images-idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels-idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
    "t10k-images-idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels-idx1-ubyte": "27ae3e4e09519cfbb04c329615203637",
}
# Seconds to wait for a connection and the response headers, then for each chunk of the body:
# offline, a reader hears why within seconds instead of waiting on the system's own timeouts.
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 10.0
_DOWNLOAD_CHUNK = 1 << 16
# Batch size for reading TFDS records: large enough to amortise per-call overhead, small enough
# that the list of decoded records stays modest.
_TFDS_CHUNK = 10_000


class MNISTError(Exception):
    """Base class for every MNIST data problem raised by this module."""


class MNISTFileNotFoundError(MNISTError, FileNotFoundError):
    """An IDX file (or the folder that should hold it) does not exist."""


class MNISTFormatError(MNISTError, ValueError):
    """An IDX file exists but its content is not valid MNIST."""


class MNISTChecksumError(MNISTFormatError):
    """A file's MD5 does not match the entry in the ``MD5SUMS`` file beside it."""


class MNISTUnavailableError(MNISTError):
    """No source could provide MNIST."""


class MNISTDownloadError(MNISTUnavailableError):
    """No mirror delivered a file: offline, refused, timed out, cut off, or an HTTP error."""


# ---------------------------------------------------------------------------
# Public entry point
# ---------------------------------------------------------------------------


def load_mnist(
    split: str,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    tfds_data_dir: str | os.PathLike[str] | None = None,
    timeout: tuple[float, float] = (CONNECT_TIMEOUT_S, READ_TIMEOUT_S),
    progress: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Load one MNIST split as ``(images, labels)`` from the first source that has it.

    The sources, in order (see the module's docstring): ``data_dir`` or ``MNIST_DIR``, a prepared
    tensorflow-datasets copy, the per-user cache, a download into that cache.

    Args:
        split: ``"train"`` (60,000 examples) or ``"test"`` (10,000 examples).
        data_dir: a folder with the four IDX files; overrides ``MNIST_DIR``.
        tfds_data_dir: where tensorflow-datasets keeps prepared data sets (default: TFDS's own
            default).
        timeout: seconds to wait for a mirror's connection and headers, and then for each chunk
            of a file, before trying the next mirror.
        progress: show a progress bar (bytes) while downloading.

    Returns:
        ``images``, uint8 of shape (S, 28, 28) with values 0..255, and ``labels``, int32 of
        shape (S,) with values 0..9.

    Raises:
        ValueError: if ``split`` is not ``"train"`` or ``"test"``.
        MNISTError: a subclass describing what is wrong with the data.
    """
    _check_split(split)
    if data_dir is not None:
        return load_idx_split(data_dir, split, origin="the data_dir argument")
    env_dir = os.environ.get(MNIST_DIR_ENV, "").strip()
    if env_dir:
        return load_idx_split(env_dir, split, origin=f"${MNIST_DIR_ENV}")
    prepared = _load_prepared_tfds(split, tfds_data_dir)
    if prepared is not None:
        return prepared
    folder = download_split(split, timeout=timeout, progress=progress)
    return load_idx_split(folder, split, origin="the download cache")


def _check_split(split: str) -> None:
    if split not in SPLIT_SIZES:
        allowed = ", ".join(repr(s) for s in SPLIT_SIZES)
        raise ValueError(f"Unknown MNIST split {split!r}; allowed splits are {allowed}.")


# ---------------------------------------------------------------------------
# IDX source
# ---------------------------------------------------------------------------


def load_idx_split(
    folder: str | os.PathLike[str],
    split: str,
    *,
    check_size: bool = True,
    origin: str = "the given folder",
) -> tuple[np.ndarray, np.ndarray]:
    """Read and validate one split from a folder of IDX files.

    Args:
        folder: the folder holding the IDX files (raw or ``.gz``).
        split: ``"train"`` or ``"test"``.
        check_size: require the official split size (60,000 or 10,000). Turn it off only for
            small synthetic files, e.g. in tests.
        origin: how the folder was chosen, quoted in "file missing" errors so that the reader
            knows which setting to fix.

    Returns:
        ``(images, labels)``, as :func:`load_mnist` returns them.

    Raises:
        ValueError: if ``split`` is not ``"train"`` or ``"test"``.
        MNISTFileNotFoundError: if a file or the folder is missing.
        MNISTFormatError: if a file is not valid MNIST, or the two files disagree in count.
    """
    _check_split(split)
    folder = Path(folder)
    images_stem, labels_stem = _IDX_STEMS[split]
    images_path = _find_idx_file(folder, images_stem, origin)
    labels_path = _find_idx_file(folder, labels_stem, origin)
    checksums = _read_md5sums(folder)

    expected = SPLIT_SIZES[split] if check_size else None
    images = read_idx_images(images_path, expected_count=expected, checksums=checksums)
    labels = read_idx_labels(labels_path, expected_count=expected, checksums=checksums)
    if len(images) != len(labels):
        raise MNISTFormatError(
            f"{images_path.name} holds {len(images)} images but {labels_path.name} "
            f"holds {len(labels)} labels (in {folder}); the two files must come "
            "from the same MNIST split."
        )
    return images, labels


def read_idx_images(
    path: str | os.PathLike[str],
    *,
    expected_count: int | None = None,
    checksums: dict[str, str] | None = None,
) -> np.ndarray:
    """Read an IDX image file into a uint8 array of shape (S, 28, 28).

    Args:
        path: the file, raw or gzipped (``.gz``).
        expected_count: if given, the header's S must equal it.
        checksums: file names to MD5 hex digests; a listed file must match.

    Raises:
        MNISTFormatError: if the file is not a valid IDX file of 28 x 28 images (a
            :class:`MNISTChecksumError` if its MD5 does not match).
    """
    path = Path(path)
    data = _read_idx_bytes(path, checksums)
    header = _parse_header(path, data, IMAGES_MAGIC, _IMAGES_HEADER_BYTES, "image")
    count, rows, cols = header
    if (rows, cols) != (IMAGE_SIZE, IMAGE_SIZE):
        raise MNISTFormatError(
            f"{path}: header says images are {rows}x{cols}, expected {IMAGE_SIZE}x{IMAGE_SIZE}."
        )
    _check_count(path, count, expected_count, "images")
    _check_payload_size(path, data, _IMAGES_HEADER_BYTES, count * rows * cols, count, "images")
    flat = np.frombuffer(data, dtype=np.uint8, offset=_IMAGES_HEADER_BYTES)
    # frombuffer views immutable bytes; copy so callers get a normal writable array.
    return flat.reshape(count, rows, cols).copy()


def read_idx_labels(
    path: str | os.PathLike[str],
    *,
    expected_count: int | None = None,
    checksums: dict[str, str] | None = None,
) -> np.ndarray:
    """Read an IDX label file into an int32 array of shape (S,), values 0..9.

    ``expected_count`` and ``checksums`` are as in :func:`read_idx_images`.

    Raises:
        MNISTFormatError: if the file is not a valid IDX label file or holds a label above 9.
    """
    path = Path(path)
    data = _read_idx_bytes(path, checksums)
    (count,) = _parse_header(path, data, LABELS_MAGIC, _LABELS_HEADER_BYTES, "label")
    _check_count(path, count, expected_count, "labels")
    _check_payload_size(path, data, _LABELS_HEADER_BYTES, count, count, "labels")
    labels = np.frombuffer(data, dtype=np.uint8, offset=_LABELS_HEADER_BYTES).astype(np.int32)
    if count and labels.max() >= NUM_CLASSES:
        raise MNISTFormatError(
            f"{path}: found label {int(labels.max())}, but MNIST labels are 0..{NUM_CLASSES - 1}."
        )
    return labels


def _find_idx_file(folder: Path, stem: str, origin: str) -> Path:
    for candidate in (folder / stem, folder / f"{stem}.gz"):
        if candidate.is_file():
            return candidate
    where = (
        f"folder {folder} does not exist"
        if not folder.is_dir()
        else f"it is not in folder {folder}"
    )
    raise MNISTFileNotFoundError(
        f"MNIST file {stem} (or {stem}.gz) not found: {where}. That folder comes "
        f"from {origin}; point {MNIST_DIR_ENV} (or data_dir) at a folder containing "
        f"the four IDX files: {', '.join(_ALL_STEMS)} (raw or .gz)."
    )


def _read_md5sums(folder: Path) -> dict[str, str]:
    """Parse ``MD5SUMS`` (``md5sum`` output format) if present; else empty."""
    sums_path = folder / "MD5SUMS"
    if not sums_path.is_file():
        return {}
    sums: dict[str, str] = {}
    for line in sums_path.read_text().splitlines():
        parts = line.split(maxsplit=1)
        if len(parts) == 2:
            # md5sum marks binary-mode entries with a leading '*'.
            sums[parts[1].strip().lstrip("*")] = parts[0].lower()
    return sums


def _read_idx_bytes(path: Path, checksums: dict[str, str] | None) -> bytes:
    stored = path.read_bytes()
    expected_md5 = (checksums or {}).get(path.name)
    if expected_md5 is not None:
        actual_md5 = hashlib.md5(stored).hexdigest()
        if actual_md5 != expected_md5:
            raise MNISTChecksumError(
                f"{path}: MD5 checksum mismatch (file has {actual_md5}, MD5SUMS "
                f"says {expected_md5}); the file is corrupt or not the official one."
            )
    if path.suffix != ".gz":
        return stored
    try:
        return gzip.decompress(stored)
    except (OSError, EOFError, zlib.error) as exc:
        # EOFError = cut-off download; OSError/zlib.error = garbage bytes.
        raise MNISTFormatError(f"{path}: corrupt gzip data ({exc}).") from None


def _parse_header(
    path: Path, data: bytes, magic: int, header_bytes: int, kind: str
) -> tuple[int, ...]:
    if len(data) < header_bytes:
        raise MNISTFormatError(
            f"{path}: truncated IDX {kind} file: only {len(data)} bytes, shorter "
            f"than the {header_bytes}-byte header."
        )
    fields = np.frombuffer(data, dtype=">u4", count=header_bytes // 4)
    found = int(fields[0])
    if found != magic:
        hint = (
            " The file looks gzip-compressed; give it a .gz suffix."
            if data[:2] == _GZIP_MAGIC
            else ""
        )
        raise MNISTFormatError(
            f"{path}: bad magic number {found}, expected {magic} for an IDX {kind} file.{hint}"
        )
    return tuple(int(v) for v in fields[1:])


def _check_count(path: Path, count: int, expected: int | None, what: str) -> None:
    if expected is not None and count != expected:
        raise MNISTFormatError(
            f"{path}: header says {count} {what}, expected {expected} for this split."
        )


def _check_payload_size(
    path: Path, data: bytes, header_bytes: int, payload_bytes: int, count: int, what: str
) -> None:
    actual = len(data) - header_bytes
    if actual < payload_bytes:
        raise MNISTFormatError(
            f"{path}: truncated: header says {count} {what} ({payload_bytes} bytes "
            f"of data) but only {actual} bytes follow the header."
        )
    if actual > payload_bytes:
        raise MNISTFormatError(
            f"{path}: too long: {actual - payload_bytes} unexpected bytes after the "
            f"{count} {what} announced by the header."
        )


# ---------------------------------------------------------------------------
# tensorflow-datasets source
# ---------------------------------------------------------------------------


def _load_prepared_tfds(
    split: str, tfds_data_dir: str | os.PathLike[str] | None
) -> tuple[np.ndarray, np.ndarray] | None:
    """The split from a copy tensorflow-datasets has already prepared, or None if there is none."""
    folder = (
        Path(tfds_data_dir)
        if tfds_data_dir is not None
        else Path(
            os.environ.get("TFDS_DATA_DIR", "").strip() or Path.home() / "tensorflow_datasets"
        )
    )
    if not (folder / "mnist").is_dir():
        # Nothing prepared there: skip importing tensorflow-datasets (a second or two, and a
        # logged warning about the empty folder).
        return None
    try:
        # Imported here: tensorflow_datasets takes ~1 s to import.
        import tensorflow_datasets as tfds
    except ImportError:
        return None
    data_dir = os.fspath(tfds_data_dir) if tfds_data_dir is not None else None
    builder = tfds.builder("mnist", data_dir=data_dir, file_format="array_record")
    if not builder.is_prepared():
        return None
    # SkipDecoding hands us the stored PNG bytes; decoding them ourselves with PIL skips TFDS's
    # generic per-feature decoding (~1.5x faster overall).
    source = builder.as_data_source(split=split, decoders={"image": tfds.decode.SkipDecoding()})
    return _records_to_arrays(source)


# ---------------------------------------------------------------------------
# Download into the per-user cache
# ---------------------------------------------------------------------------


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/transformer_intro/mnist``, by default under ``~/.cache``."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or Path.home() / ".cache"
    return Path(base) / "transformer_intro" / "mnist"


def mirrors() -> list[str]:
    """The base URLs to try in turn: ``MNIST_MIRRORS`` (space-separated) if set, else MIRRORS."""
    listed = os.environ.get(MIRRORS_ENV, "").split() or list(MIRRORS)
    return [url if url.endswith("/") else url + "/" for url in listed]


def download_split(
    split: str,
    *,
    timeout: tuple[float, float] = (CONNECT_TIMEOUT_S, READ_TIMEOUT_S),
    progress: bool = True,
) -> Path:
    """Make sure the split's two ``.gz`` files are in :func:`cache_dir`, downloading any missing.

    A file already in the cache was checked when it arrived. ``timeout`` and ``progress`` are as
    in :func:`load_mnist`.

    Returns:
        The cache folder.

    Raises:
        ValueError: if ``split`` is not ``"train"`` or ``"test"``.
        MNISTDownloadError: if no mirror delivered a file (a :class:`MNISTChecksumError` if one
            delivered the wrong bytes).
    """
    _check_split(split)
    folder = cache_dir()
    for stem in _IDX_STEMS[split]:
        if not (folder / f"{stem}.gz").is_file():
            folder.mkdir(parents=True, exist_ok=True)
            _download_file(stem, folder, mirrors(), timeout, progress)
    return folder


def _download_file(
    stem: str, folder: Path, bases: list[str], timeout: tuple[float, float], progress: bool
) -> None:
    name = f"{stem}.gz"
    failures: list[str] = []
    checksum_failed = False
    answered = False  # did any mirror answer at all (wrong bytes, an HTTP error)?
    for base in bases:
        # The temporary file sits in the cache folder itself, so that os.replace is a rename
        # within one file system, which is atomic: the final name holds a whole, checked file or
        # nothing.
        handle, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=folder)
        try:
            with os.fdopen(handle, "wb") as out:
                _fetch(base + name, out, timeout, progress)
            _check_content(Path(temporary), stem)
            os.replace(temporary, folder / name)
            return
        except MNISTChecksumError as exc:
            checksum_failed = answered = True
            failures.append(f"{base}: {exc}")
        except (OSError, http.client.HTTPException, ValueError) as exc:
            answered = answered or not _is_unreachable(exc)
            failures.append(f"{base}: {_describe(exc)}")
        finally:
            if os.path.exists(temporary):
                os.remove(temporary)
    error = MNISTChecksumError if checksum_failed else MNISTDownloadError
    # Advice that fits: "connect" only when no mirror could be reached; a mirror that answered
    # with the wrong bytes or an error needs replacing, not a connection.
    advice = "" if answered or not failures else "connect to the internet, "
    raise error(
        f"MNIST could not be downloaded: no mirror delivered a valid {name} "
        f"({'; '.join(failures) or f'no mirrors: {MIRRORS_ENV} is empty'}); {advice}"
        f"set {MIRRORS_ENV} to mirrors that serve the official files, or set "
        f"{MNIST_DIR_ENV} to a folder holding the four IDX files."
    ) from None


def _is_unreachable(exc: BaseException) -> bool:
    """True when the mirror could not be reached (no answer).

    False when it answered, with an error or with bad bytes.
    """
    if isinstance(exc, urllib.error.HTTPError | http.client.HTTPException | ValueError):
        return False
    return isinstance(exc, OSError)


def _fetch(url: str, out: Any, timeout: tuple[float, float], progress: bool) -> None:
    """Stream ``url`` into the open file ``out``, with a progress bar in bytes."""
    from tqdm import tqdm  # plain text bar, as in training

    connect_timeout, read_timeout = timeout
    with urllib.request.urlopen(url, timeout=connect_timeout) as response:
        _set_read_timeout(response, read_timeout)
        expected = response.headers.get("Content-Length")
        total = int(expected) if expected is not None else None
        received = 0
        name = url.rsplit("/", 1)[-1]
        with tqdm(
            total=total,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc=name,
            disable=not progress,
            leave=False,
        ) as bar:
            while chunk := response.read(_DOWNLOAD_CHUNK):
                out.write(chunk)
                received += len(chunk)
                bar.update(len(chunk))
    if total is not None and received != total:
        raise http.client.IncompleteRead(b"", total - received)


def _set_read_timeout(response: Any, seconds: float) -> None:
    # urlopen has one timeout for the connection and every read. Once the headers are in, a
    # server that still answers gets the longer read timeout for each chunk of the body.
    sock = getattr(getattr(getattr(response, "fp", None), "raw", None), "_sock", None)
    if sock is not None:
        sock.settimeout(seconds)


def _check_content(path: Path, stem: str) -> None:
    try:
        content = gzip.decompress(path.read_bytes())
    except (OSError, EOFError, zlib.error):
        raise MNISTChecksumError(f"{stem}.gz is not valid gzip data") from None
    digest = hashlib.md5(content).hexdigest()
    if digest != CONTENT_MD5[stem]:
        raise MNISTChecksumError(
            f"the content of {stem}.gz has MD5 {digest}, not the official {CONTENT_MD5[stem]}"
        )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return _describe(exc.reason) if isinstance(exc.reason, BaseException) else str(exc.reason)
    if isinstance(exc, socket.gaierror):
        return "host name not found (offline?)"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, http.client.IncompleteRead):
        return "connection closed before the end of the file"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, (http.client.RemoteDisconnected, ConnectionError)):
        return "connection closed by the server"
    return f"{type(exc).__name__}: {exc}".rstrip(": ")


def _records_to_arrays(source: Any) -> tuple[np.ndarray, np.ndarray]:
    """Convert a TFDS data source (or any sequence of records) to arrays.

    Each record is a dict with "image" (PNG bytes, or an array of shape (28, 28, 1) or (28, 28))
    and "label" (int).
    """
    n = len(source)
    images = np.empty((n, IMAGE_SIZE, IMAGE_SIZE), dtype=np.uint8)
    labels = np.empty((n,), dtype=np.int32)
    for start in range(0, n, _TFDS_CHUNK):
        indices = list(range(start, min(start + _TFDS_CHUNK, n)))
        for i, record in zip(indices, _get_records(source, indices)):
            images[i] = _decode_image(record["image"])
            labels[i] = int(record["label"])
    return images, labels


def _get_records(source: Any, indices: list[int]) -> list[Any]:
    # __getitems__ reads a whole batch from array_record in one call; record by record indexing
    # is ~3x slower. Plain sequences (lists) lack it.
    get_many = getattr(source, "__getitems__", None)
    if get_many is not None:
        return list(get_many(indices))
    return [source[i] for i in indices]


def _decode_image(image: Any) -> np.ndarray:
    if isinstance(image, (bytes, bytearray)):
        import io

        from PIL import Image  # installed with tensorflow-datasets

        with Image.open(io.BytesIO(image)) as pil_image:
            image = np.asarray(pil_image)
    return np.asarray(image, dtype=np.uint8).reshape(IMAGE_SIZE, IMAGE_SIZE)


# ---------------------------------------------------------------------------
# Preprocessing
# ---------------------------------------------------------------------------


def normalise_images(images: np.ndarray) -> np.ndarray:
    """Scale uint8 pixels 0..255 to float32 in [-1, 1] via ``2 * x / 255 - 1``.

    The shape is unchanged: (S, 28, 28) in, (S, 28, 28) out. Centring pixel values on zero is the
    preprocessing used in the reference text.
    """
    return images.astype(np.float32) * np.float32(2.0 / 255.0) - np.float32(1.0)
