"""Tests for transformer_intro.datasets.mnist.

IDX reading/validation, the TFDS fallback, batching.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from transformer_intro.datasets import mnist as data
from transformer_intro.datasets.mnist import (
    SPLIT_SIZES,
    MNISTChecksumError,
    MNISTError,
    MNISTFileNotFoundError,
    MNISTFormatError,
    load_idx_split,
    load_mnist,
    normalise_images,
    read_idx_images,
    read_idx_labels,
)

STEMS = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


# ---------------------------------------------------------------------------
# Helpers: write valid IDX files
# ---------------------------------------------------------------------------


def idx_images_bytes(images: np.ndarray) -> bytes:
    n, rows, cols = images.shape
    header = np.array([2051, n, rows, cols], dtype=">u4").tobytes()
    return header + images.astype(np.uint8).tobytes()


def idx_labels_bytes(labels: np.ndarray) -> bytes:
    header = np.array([2049, len(labels)], dtype=">u4").tobytes()
    return header + labels.astype(np.uint8).tobytes()


def write_file(path: Path, payload: bytes, gz: bool) -> Path:
    if gz:
        path = path.with_name(path.name + ".gz")
        payload = gzip.compress(payload)
    path.write_bytes(payload)
    return path


def make_split(
    folder: Path, split: str = "train", n: int = 50, gz: bool = False, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, Path, Path]:
    """Write a small valid split into `folder`; return the arrays and both paths."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n).astype(np.int32)
    image_stem, label_stem = STEMS[split]
    image_path = write_file(folder / image_stem, idx_images_bytes(images), gz)
    label_path = write_file(folder / label_stem, idx_labels_bytes(labels), gz)
    return images, labels, image_path, label_path


def write_md5sums(folder: Path, paths: list[Path]) -> None:
    lines = [f"{hashlib.md5(p.read_bytes()).hexdigest()}  {p.name}" for p in paths]
    (folder / "MD5SUMS").write_text("\n".join(lines) + "\n")


# ---------------------------------------------------------------------------
# Real MNIST files
# ---------------------------------------------------------------------------


def _real_mnist_dir() -> Path:
    env = os.environ.get("MNIST_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared/data/mnist"


@pytest.fixture(scope="module")
def real_dir() -> Path:
    folder = _real_mnist_dir()
    if not (folder / "MD5SUMS").exists() and not any(folder.glob("*idx*")):
        pytest.skip(
            f"real MNIST IDX files not found in {folder} (set MNIST_DIR to run these tests)"
        )
    return folder


@pytest.mark.parametrize("split", ["train", "test"])
def test_real_mnist_split(real_dir: Path, split: str) -> None:
    images, labels = load_mnist(split, data_dir=real_dir)
    n = SPLIT_SIZES[split]
    assert images.shape == (n, 28, 28) and images.dtype == np.uint8
    assert labels.shape == (n,) and labels.dtype == np.int32
    assert images.min() == 0 and images.max() == 255
    # Real digits are mostly background with some ink, not noise or blanks.
    ink = (images > 128).mean()
    assert 0.05 < ink < 0.3
    counts = np.bincount(labels, minlength=10)
    assert len(counts) == 10
    fractions = counts / n
    assert np.all((fractions > 0.05) & (fractions < 0.15)), fractions


def test_real_mnist_via_env_var_matches_data_dir(real_dir: Path, monkeypatch) -> None:
    monkeypatch.setenv("MNIST_DIR", str(real_dir))
    env_images, env_labels = load_mnist("test")
    images, labels = load_mnist("test", data_dir=real_dir)
    np.testing.assert_array_equal(env_images, images)
    np.testing.assert_array_equal(env_labels, labels)


def test_real_train_and_test_differ(real_dir: Path) -> None:
    train_images, _ = load_mnist("train", data_dir=real_dir)
    test_images, _ = load_mnist("test", data_dir=real_dir)
    assert not np.array_equal(train_images[: len(test_images)], test_images)


# ---------------------------------------------------------------------------
# Synthetic IDX files: reading and validation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("gz", [False, True], ids=["raw", "gz"])
@pytest.mark.parametrize("split", ["train", "test"])
def test_synthetic_split_roundtrip(tmp_path: Path, gz: bool, split: str) -> None:
    images, labels, _, _ = make_split(tmp_path, split=split, n=37, gz=gz)
    got_images, got_labels = load_idx_split(tmp_path, split, check_size=False)
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(got_labels, labels)
    assert got_images.dtype == np.uint8 and got_labels.dtype == np.int32
    assert got_images.flags.writeable


def test_load_mnist_requires_official_split_size(tmp_path: Path) -> None:
    make_split(tmp_path, split="train", n=12)
    with pytest.raises(MNISTFormatError, match=r"12 images, expected 60000"):
        load_mnist("train", data_dir=tmp_path)


def test_data_dir_overrides_env(tmp_path: Path, monkeypatch) -> None:
    make_split(tmp_path, n=5)
    monkeypatch.setenv("MNIST_DIR", str(tmp_path / "elsewhere"))
    # The error comes from tmp_path (wrong size), not from the missing env folder.
    with pytest.raises(MNISTFormatError, match="expected 60000"):
        load_mnist("train", data_dir=tmp_path)


@pytest.mark.parametrize("bad_split", ["validation", "TRAIN", ""])
def test_unknown_split(bad_split: str) -> None:
    with pytest.raises(ValueError, match=r"'train', 'test'"):
        load_mnist(bad_split, data_dir="/nonexistent")


@pytest.mark.parametrize("which", ["images", "labels"])
def test_truncated_raw_file(tmp_path: Path, which: str) -> None:
    _, _, image_path, label_path = make_split(tmp_path, n=20)
    path = image_path if which == "images" else label_path
    path.write_bytes(path.read_bytes()[:-7])
    with pytest.raises(MNISTFormatError, match="truncated") as err:
        load_idx_split(tmp_path, "train", check_size=False)
    assert path.name in str(err.value)


def test_truncated_header(tmp_path: Path) -> None:
    _, _, image_path, _ = make_split(tmp_path, n=3)
    image_path.write_bytes(image_path.read_bytes()[:10])
    with pytest.raises(MNISTFormatError, match="truncated.*header") as err:
        read_idx_images(image_path)
    assert image_path.name in str(err.value)


def test_overlong_file(tmp_path: Path) -> None:
    _, _, _, label_path = make_split(tmp_path, n=20)
    label_path.write_bytes(label_path.read_bytes() + b"\x00\x01\x02")
    with pytest.raises(MNISTFormatError, match="3 unexpected bytes") as err:
        load_idx_split(tmp_path, "train", check_size=False)
    assert label_path.name in str(err.value)


def test_truncated_gzip(tmp_path: Path) -> None:
    _, _, image_path, _ = make_split(tmp_path, n=20, gz=True)
    image_path.write_bytes(image_path.read_bytes()[:-30])
    with pytest.raises(MNISTFormatError, match="corrupt gzip") as err:
        load_idx_split(tmp_path, "train", check_size=False)
    assert image_path.name in str(err.value)


def test_garbage_gzip(tmp_path: Path) -> None:
    _, _, _, label_path = make_split(tmp_path, n=20, gz=True)
    label_path.write_bytes(b"this is not gzip data at all")
    with pytest.raises(MNISTFormatError, match="corrupt gzip") as err:
        load_idx_split(tmp_path, "train", check_size=False)
    assert label_path.name in str(err.value)


@pytest.mark.parametrize("which, expected_magic", [("images", 2051), ("labels", 2049)])
def test_bad_magic(tmp_path: Path, which: str, expected_magic: int) -> None:
    _, _, image_path, label_path = make_split(tmp_path, n=4)
    path = image_path if which == "images" else label_path
    # Give each file the other kind's magic number (2051 <-> 2049).
    wrong_magic = np.array([4100 - expected_magic], dtype=">u4").tobytes()
    path.write_bytes(wrong_magic + path.read_bytes()[4:])
    with pytest.raises(MNISTFormatError, match=f"magic number .*expected {expected_magic}") as err:
        load_idx_split(tmp_path, "train", check_size=False)
    assert path.name in str(err.value)


def test_gzipped_file_without_gz_suffix_gets_hint(tmp_path: Path) -> None:
    _, _, image_path, _ = make_split(tmp_path, n=4)
    image_path.write_bytes(gzip.compress(image_path.read_bytes()))
    with pytest.raises(MNISTFormatError, match="looks gzip-compressed"):
        read_idx_images(image_path)


def test_wrong_image_shape(tmp_path: Path) -> None:
    path = write_file(
        tmp_path / "imgs", idx_images_bytes(np.zeros((3, 27, 28), np.uint8)), gz=False
    )
    with pytest.raises(MNISTFormatError, match="27x28"):
        read_idx_images(path)


def test_header_count_must_match_expected(tmp_path: Path) -> None:
    _, _, image_path, label_path = make_split(tmp_path, n=9)
    with pytest.raises(MNISTFormatError, match="9 images, expected 10"):
        read_idx_images(image_path, expected_count=10)
    with pytest.raises(MNISTFormatError, match="9 labels, expected 8"):
        read_idx_labels(label_path, expected_count=8)


def test_label_out_of_range(tmp_path: Path) -> None:
    path = write_file(tmp_path / "labels", idx_labels_bytes(np.array([1, 2, 10])), gz=False)
    with pytest.raises(MNISTFormatError, match="label 10"):
        read_idx_labels(path)


def test_image_label_count_mismatch(tmp_path: Path) -> None:
    _, _, image_path, label_path = make_split(tmp_path, n=20)
    write_file(label_path, idx_labels_bytes(np.zeros(19, np.uint8)), gz=False)
    with pytest.raises(MNISTFormatError, match="20 images but .* 19 labels") as err:
        load_idx_split(tmp_path, "train", check_size=False)
    assert image_path.name in str(err.value) and label_path.name in str(err.value)


def test_missing_file_names_file_folder_and_env_var(tmp_path: Path, monkeypatch) -> None:
    _, _, _, label_path = make_split(tmp_path, split="test", n=5)
    label_path.unlink()
    monkeypatch.setenv("MNIST_DIR", str(tmp_path))
    with pytest.raises(MNISTFileNotFoundError) as err:
        load_mnist("test")
    message = str(err.value)
    assert "t10k-labels-idx1-ubyte" in message
    assert str(tmp_path) in message
    assert "MNIST_DIR" in message
    assert isinstance(err.value, FileNotFoundError) and isinstance(err.value, MNISTError)


def test_missing_folder(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder"
    with pytest.raises(MNISTFileNotFoundError, match="does not exist") as err:
        load_mnist("train", data_dir=missing)
    assert str(missing) in str(err.value)


@pytest.mark.parametrize("gz", [False, True], ids=["raw", "gz"])
def test_md5sums_verified(tmp_path: Path, gz: bool) -> None:
    images, _, image_path, label_path = make_split(tmp_path, n=15, gz=gz)
    write_md5sums(tmp_path, [image_path, label_path])
    got_images, _ = load_idx_split(tmp_path, "train", check_size=False)
    np.testing.assert_array_equal(got_images, images)

    # Same size, valid IDX, different content: only the checksum can notice.
    tampered = images.copy()
    tampered[0, 0, 0] ^= 0xFF
    write_file(tmp_path / STEMS["train"][0], idx_images_bytes(tampered), gz=gz)
    with pytest.raises(MNISTChecksumError, match="MD5") as err:
        load_idx_split(tmp_path, "train", check_size=False)
    assert image_path.name in str(err.value)
    assert label_path.name not in str(err.value)


def test_no_md5sums_means_no_check(tmp_path: Path) -> None:
    images, _, image_path, label_path = make_split(tmp_path, n=15)
    write_md5sums(tmp_path, [label_path])  # images not listed: nothing to check
    got_images, _ = load_idx_split(tmp_path, "train", check_size=False)
    np.testing.assert_array_equal(got_images, images)


def test_importing_data_does_not_import_tfds() -> None:
    code = (
        "import sys, transformer_intro.datasets.mnist; "
        "bad = [m for m in ('tensorflow_datasets', 'tensorflow') if m in sys.modules]; "
        "print(*bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# ---------------------------------------------------------------------------
# A copy prepared by tensorflow-datasets (mocked; never touches the network)
# ---------------------------------------------------------------------------


def _png(image: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    return buffer.getvalue()


class FakeArrayRecordSource:
    """Mimics TFDS's ArrayRecordDataSource with SkipDecoding: PNG bytes, batch access."""

    def __init__(self, images: np.ndarray, labels: np.ndarray) -> None:
        self.records = [{"image": _png(im), "label": int(lb)} for im, lb in zip(images, labels)]
        self.batch_calls = 0

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> dict:
        return self.records[i]

    def __getitems__(self, keys: list[int]) -> list[dict]:
        self.batch_calls += 1
        return [self.records[k] for k in keys]


@pytest.fixture
def tfds_offline_guard(monkeypatch, tmp_path: Path):
    """Unset MNIST_DIR, point the cache at tmp_path, and fail any download attempt."""
    tfds = pytest.importorskip("tensorflow_datasets")
    monkeypatch.delenv("MNIST_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def no_download(*args, **kwargs):
        # pytest.fail raises a BaseException, so `except Exception` in the code
        # under test cannot swallow it.
        pytest.fail("test tried to download MNIST")

    monkeypatch.setattr(data, "_fetch", no_download)
    monkeypatch.setattr(tfds.core.DatasetBuilder, "download_and_prepare", no_download)
    return tfds


@pytest.mark.parametrize("kind", ["png-batched", "array-list"])
def test_prepared_tfds_copy_is_read(
    tfds_offline_guard, monkeypatch, tmp_path: Path, kind: str
) -> None:
    tfds = tfds_offline_guard
    rng = np.random.default_rng(1)
    n = 23
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n)
    if kind == "png-batched":
        source = FakeArrayRecordSource(images, labels)
    else:  # a plain list without __getitems__, images already decoded (28, 28, 1)
        source = [{"image": im[..., None], "label": np.int64(lb)} for im, lb in zip(images, labels)]
    requested = []

    def as_data_source(self, split, decoders=None, deserialize_method=None, **kwargs):
        requested.append((self.name, split))
        return source

    monkeypatch.setattr(tfds.core.DatasetBuilder, "is_prepared", lambda self: True)
    (tmp_path / "tfds" / "mnist").mkdir(parents=True)
    with tfds.testing.mock_data(num_examples=n, as_data_source_fn=as_data_source):
        start = time.perf_counter()
        got_images, got_labels = load_mnist("test", tfds_data_dir=tmp_path / "tfds")
        elapsed = time.perf_counter() - start

    assert requested == [("mnist", "test")]
    assert got_images.shape == (n, 28, 28) and got_images.dtype == np.uint8
    assert got_labels.shape == (n,) and got_labels.dtype == np.int32
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(got_labels, labels)
    if kind == "png-batched":
        assert source.batch_calls >= 1
    assert "tensorflow" not in sys.modules
    assert elapsed < 10


def test_unprepared_tfds_is_never_prepared_and_the_download_comes_next(
    tfds_offline_guard, monkeypatch, tmp_path: Path
) -> None:
    """tensorflow-datasets would need TensorFlow to prepare MNIST: an unprepared copy is skipped
    without asking it to prepare one, and the download into the cache is the next source."""
    asked = []
    monkeypatch.setattr(
        data, "download_split", lambda split, **kw: asked.append(split) or (tmp_path / "none")
    )
    for folder in (tmp_path / "empty", tmp_path / "started"):
        (tmp_path / "started" / "mnist").mkdir(
            parents=True, exist_ok=True
        )  # a folder, nothing prepared
        with pytest.raises(MNISTFileNotFoundError, match="download cache"):
            load_mnist("test", tfds_data_dir=folder)
    assert asked == ["test", "test"]
    assert "tensorflow" not in sys.modules


# ---------------------------------------------------------------------------
# Preprocessing and batching
# ---------------------------------------------------------------------------


def test_normalise_images() -> None:
    images = np.array([[[0, 255], [51, 204]]], dtype=np.uint8)
    out = normalise_images(images)
    assert out.dtype == np.float32 and out.shape == images.shape
    np.testing.assert_allclose(out, 2 * images.astype(np.float64) / 255 - 1, atol=1e-6)
    assert out.min() == -1.0 and out.max() == 1.0
