"""The package's GGUF reader names a damaged file in one sentence (issue 68).

A tiny valid file is written with ``gguf``'s own writer, then copies of it are damaged one way
each: cut short, a wrong magic, a string that is not UTF-8, a string or a tensor running past the
end, an unknown tensor type. Each must give a ValueError naming the file and what is wrong, never
``struct.error``, an mmap error or ``UnicodeDecodeError``.
"""

from __future__ import annotations

import struct

import gguf
import numpy as np
import pytest

from transformer_intro.pretrained.gguf import GGUFFile

KEY = "a.text"
TEXT = "zwölf"
TENSOR = "floats"


@pytest.fixture(scope="module")
def valid(tmp_path_factory):
    """A valid file's bytes: one string value and one float32 tensor of 8 x 64."""
    path = tmp_path_factory.mktemp("gguf") / "valid.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_string(KEY, TEXT)
    writer.add_tensor(TENSOR, np.arange(8 * 64, dtype=np.float32).reshape(8, 64))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    data = path.read_bytes()
    # Control: the undamaged file reads, with its string and its tensor's bytes.
    file = GGUFFile(path)
    assert file.metadata[KEY] == TEXT
    assert file.tensors[0].name == TENSOR and file.tensors[0].n_bytes == 8 * 64 * 4
    return data


def damaged(tmp_path, data: bytes):
    path = tmp_path / "damaged.gguf"
    path.write_bytes(data)
    return path


def where(data: bytes, text: str) -> int:
    """The offset of a string's bytes in the file (its 8-byte length comes just before)."""
    at = data.index(text.encode())
    assert struct.unpack_from("<Q", data, at - 8)[0] == len(text.encode())
    return at


def refused(path, pattern):
    with pytest.raises(ValueError, match=pattern) as caught:
        GGUFFile(path)
    message = str(caught.value)
    assert str(path) in message
    assert "\n" not in message  # one sentence
    return message


@pytest.mark.parametrize("keep", [0, 3, 10, 30, 60])
def test_a_file_cut_short_in_its_header_is_named_damaged(tmp_path, valid, keep):
    # 0 bytes: mmap's "cannot mmap an empty file"; 3: shorter than the magic; later cuts fall in
    # the counts, the key, the tensor's description: struct.error without the checks.
    path = damaged(tmp_path, valid[:keep])
    if keep < 4:
        refused(path, "is empty|not a GGUF file")
    else:
        refused(path, r"is a damaged GGUF file \(at byte \d+\): .*ends before")


def test_a_wrong_magic_is_named(tmp_path, valid):
    refused(damaged(tmp_path, b"GGML" + valid[4:]), r"is not a GGUF file")


def test_a_string_that_is_not_utf8_is_named_damaged(tmp_path, valid):
    at = where(valid, TEXT)
    broken = valid[:at] + b"\xff" + valid[at + 1 :]  # UnicodeDecodeError without the checks
    message = refused(damaged(tmp_path, broken), r"is a damaged GGUF file .*not UTF-8")
    assert f"at byte {at}" in message


def test_a_string_longer_than_the_file_is_named_damaged(tmp_path, valid):
    at = where(valid, TEXT)
    broken = valid[: at - 8] + struct.pack("<Q", 1 << 40) + valid[at:]
    # Without the check, the slice stops at the file's end and the "string" reads on silently.
    refused(damaged(tmp_path, broken), r"is a damaged GGUF file .*string of 1099511627776 bytes")


def test_tensor_data_past_the_end_is_named_damaged(tmp_path, valid):
    cut = damaged(tmp_path, valid[:-100])  # the header whole, the tensor's last bytes gone
    message = refused(cut, rf"is a damaged GGUF file .*tensor '{TENSOR}'.*past the end")
    assert f"of {len(valid) - 100} bytes" in message


def test_an_unknown_tensor_type_is_named_damaged(tmp_path, valid):
    # The tensor's description: name, 4-byte dimension count, 8-byte sizes, 4-byte type.
    at = where(valid, TENSOR) + len(TENSOR) + 4 + 2 * 8
    assert struct.unpack_from("<I", valid, at)[0] == gguf.GGMLQuantizationType.F32
    broken = valid[:at] + struct.pack("<I", 999) + valid[at + 4 :]
    refused(damaged(tmp_path, broken), rf"is a damaged GGUF file .*type 999 of tensor '{TENSOR}'")
