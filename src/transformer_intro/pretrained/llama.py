"""The Llama architecture as Hugging Face publishes it, in the book's language model.

Against chapter 9's model a Llama-style model has RMSNorm for LayerNorm, a gated MLP with SiLU
(SwiGLU) and no biases, G < H key-value heads and rotary positions (:func:`llama_config`).
Hugging Face's ``transformers`` stores it as ``model.safetensors`` (tensors named
``model.layers.3.self_attn.q_proj.weight`` and so on, rotary coordinates in the half-split
layout), ``config.json`` and ``tokenizer.json``; :func:`model_from_hf_tensors` maps those names
and layouts to the book's :class:`~transformer_intro.models.LanguageModel`, and
:func:`tokeniser_from_hf` builds chapter 13's byte-pair tokeniser from the folder.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path

import jax
import numpy as np

from ..block import BlockConfig
from ..models.language_model import LanguageModel, LMConfig
from .state_dict import Checkpoint, LazyTensors, language_model_from_arrays
from .tokeniser import BYTE_LEVEL_PATTERN, ChatTokeniser, from_vocabulary

__all__ = [
    "config_from_hf",
    "hf_tensors_from_folder",
    "llama_config",
    "model_from_hf_tensors",
    "tokeniser_from_hf",
]


def llama_config(
    *,
    vocab_size: int,
    dim: int,
    num_blocks: int,
    num_heads: int,
    num_kv_heads: int,
    mlp_hidden_dim: int,
    rotary_base: float,
    norm_eps: float,
    context_length: int,
    tied_embeddings: bool = True,
) -> LMConfig:
    """A Llama-architecture model as an :class:`LMConfig`.

    Rotary positions in the half-split layout (Hugging Face's); with ``tied_embeddings`` the
    token table is also the read-out.
    """
    block = BlockConfig(
        dim=dim,
        num_heads=num_heads,
        mlp_hidden_dim=mlp_hidden_dim,
        value_dim=dim // num_heads,
        num_kv_heads=num_kv_heads,
        rotary=True,
        rotary_base=rotary_base,
        rotary_layout="half",
        norm="rms",
        norm_eps=norm_eps,
        mlp="gated",
        activation="silu",
        mlp_bias=False,
    )
    return LMConfig(
        vocab_size=vocab_size,
        window=context_length,
        block=block,
        num_blocks=num_blocks,
        tied_embeddings=tied_embeddings,
    )


def config_from_hf(config: dict) -> LMConfig:
    """From a Hugging Face Llama ``config.json`` (or ``transformers.LlamaConfig.to_dict()``)."""
    return llama_config(
        vocab_size=config["vocab_size"],
        dim=config["hidden_size"],
        num_blocks=config["num_hidden_layers"],
        num_heads=config["num_attention_heads"],
        num_kv_heads=config["num_key_value_heads"],
        mlp_hidden_dim=config["intermediate_size"],
        rotary_base=float(config.get("rope_theta", 10_000.0)),
        norm_eps=config["rms_norm_eps"],
        context_length=config["max_position_embeddings"],
        tied_embeddings=config.get("tie_word_embeddings", True),
    )


def hf_tensors_from_folder(folder: Path) -> LazyTensors:
    """The tensors of ``folder/model.safetensors``, each read when it is looked up."""
    from safetensors import safe_open

    weights = safe_open(Path(folder) / "model.safetensors", framework="numpy")
    return LazyTensors(
        {name: functools.partial(weights.get_tensor, name) for name in weights.keys()}
    )


def _block_arrays(checkpoint: Checkpoint, m: int, config: LMConfig) -> dict[str, jax.Array]:
    """Block ``m``'s weights, by their paths in the book's block."""
    h, k, d = config.block.num_heads, config.block.keys_dim, config.block.dim
    g = config.block.num_kv_heads or h
    p = f"model.layers.{m}."
    return {
        "attention_norm.weight": checkpoint[p + "input_layernorm.weight"],
        "mlp_norm.weight": checkpoint[p + "post_attention_layernorm.weight"],
        "attention.query_projections": checkpoint[p + "self_attn.q_proj.weight"].reshape(h, k, d),
        "attention.key_projections": checkpoint[p + "self_attn.k_proj.weight"].reshape(g, k, d),
        "attention.value_projections": checkpoint[p + "self_attn.v_proj.weight"].reshape(g, k, d),
        # W_O = [O_1 ... O_H] is (D, H Dv); O_h is its h-th block of columns.
        "attention.output_projections": checkpoint[p + "self_attn.o_proj.weight"]
        .reshape(d, h, k)
        .transpose(1, 0, 2),
        "mlp.gate.weight": checkpoint[p + "mlp.gate_proj.weight"],
        "mlp.up.weight": checkpoint[p + "mlp.up_proj.weight"],
        "mlp.down.weight": checkpoint[p + "mlp.down_proj.weight"],
    }


def model_from_hf_tensors(tensors: Mapping[str, np.ndarray], config: LMConfig) -> LanguageModel:
    """A :class:`LanguageModel` holding a Hugging Face Llama state dict (names as in transformers).

    ``config`` is a Llama-style configuration such as
    :data:`~transformer_intro.pretrained.SMOLLM2_135M`, with or without ``scan_blocks``.

    Raises:
        ValueError: when ``config`` is not Llama-style (RMS norm, gated MLP, rotary positions),
            when the checkpoint holds tensors the model does not use, or when the arrays do not
            fit the model (:func:`~transformer_intro.pretrained.state_dict.fill`).
        KeyError: when a tensor the model needs is missing.
    """
    if not (config.block.norm == "rms" and config.block.mlp == "gated" and config.block.rotary):
        raise ValueError(f"not a Llama-style configuration: {config}")
    checkpoint = Checkpoint(tensors)
    arrays = {
        "tokeniser.table": checkpoint["model.embed_tokens.weight"],
        "final_norm.weight": checkpoint["model.norm.weight"],
    }
    if not config.tied_embeddings:
        arrays["unembedding.weight"] = checkpoint["lm_head.weight"]
        arrays["unembedding.bias"] = np.zeros(config.vocab_size, np.float32)  # Llama has none
    for m in range(config.num_blocks):
        arrays.update(
            {f"blocks.{m}.{n}": a for n, a in _block_arrays(checkpoint, m, config).items()}
        )
    # A tied model's lm_head, when a checkpoint stores it, is the token table again.
    checkpoint.check_all_read(ignored=lambda name: name == "lm_head.weight")
    return language_model_from_arrays(config, arrays)


def tokeniser_from_hf(folder: Path) -> ChatTokeniser:
    """The tokeniser of a Hugging Face folder (``tokenizer.json``, ``tokenizer_config.json``)."""
    folder = Path(folder)
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
