"""GPT-2 (Radford et al. 2019) as a configuration of the book's language model.

Also a converter from GPT-2's checkpoints.

GPT-2 is the book's :class:`~transformer_intro.models.LanguageModel` with five choices of its
:class:`~transformer_intro.models.LMConfig` fixed: learned position embeddings
(``learned_positions=True``), the GELU in its tanh approximation (``activation="gelu_tanh"``),
biases in the attention (``attention_bias=True``: GPT-2's key bias drops out of the softmax and
its value bias becomes part of the output bias, see
:class:`~transformer_intro.attention.MultiHeadAttention`), a read-out that reuses the token
embedding table (``tied_embeddings=True``), and LayerNorms with epsilon 1e-5.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ..block import BlockConfig
from ..models.language_model import LanguageModel, LMConfig
from .state_dict import Checkpoint, language_model_from_arrays

__all__ = [
    "GPT2_SMALL",
    "gpt2_config",
    "gpt2_config_from_hf",
    "gpt2_from_state_dict",
    "load_gpt2",
]


def gpt2_config(
    vocab_size: int = 50_257,
    context_length: int = 1024,
    dim: int = 768,
    num_heads: int = 12,
    num_blocks: int = 12,
    norm_eps: float = 1e-5,
) -> LMConfig:
    """GPT-2's architecture as an :class:`LMConfig`.

    The defaults are the smallest released model (124M parameters).
    """
    block = BlockConfig(
        dim=dim,
        num_heads=num_heads,
        mlp_hidden_dim=4 * dim,
        value_dim=dim // num_heads,
        attention_bias=True,
        norm="layer",
        norm_eps=norm_eps,
        mlp="mlp",
        activation="gelu_tanh",
    )
    return LMConfig(
        vocab_size=vocab_size,
        window=context_length,
        block=block,
        num_blocks=num_blocks,
        learned_positions=True,
        tied_embeddings=True,
    )


def gpt2_config_from_hf(config: dict) -> LMConfig:
    """From a Hugging Face ``config.json`` (or ``transformers.GPT2Config.to_dict()``)."""
    if config.get("activation_function", "gelu_new") not in ("gelu_new", "gelu_pytorch_tanh"):
        raise ValueError(
            f"GPT-2 uses the GELU's tanh form; this checkpoint uses "
            f"{config['activation_function']!r}"
        )
    inner = config.get("n_inner")
    if inner is not None and inner != 4 * config["n_embd"]:
        raise ValueError(f"GPT-2's MLP is 4 D wide; this checkpoint's is {inner}")
    return gpt2_config(
        vocab_size=config["vocab_size"],
        context_length=config["n_positions"],
        dim=config["n_embd"],
        num_heads=config["n_head"],
        num_blocks=config["n_layer"],
        norm_eps=config.get("layer_norm_epsilon", 1e-5),
    )


GPT2_SMALL = gpt2_config()


def _block_arrays(checkpoint: Checkpoint, m: int, config: LMConfig) -> dict[str, jax.Array]:
    """Block ``m``'s weights, by their paths in the book's block."""
    h, k, d = config.block.num_heads, config.block.keys_dim, config.block.dim
    p = f"h.{m}."
    w_q, w_k, w_v = jnp.split(checkpoint[p + "attn.c_attn.weight"], 3, axis=1)  # x @ w_q: queries
    b_q, _, b_v = jnp.split(checkpoint[p + "attn.c_attn.bias"], 3)  # the key bias cancels
    w_o, b_o = checkpoint[p + "attn.c_proj.weight"], checkpoint[p + "attn.c_proj.bias"]  # (H Dv, D)
    return {
        "attention_norm.weight": checkpoint[p + "ln_1.weight"],
        "attention_norm.bias": checkpoint[p + "ln_1.bias"],
        "attention.query_projections": w_q.T.reshape(h, k, d),
        "attention.key_projections": w_k.T.reshape(h, k, d),
        "attention.value_projections": w_v.T.reshape(h, k, d),
        "attention.output_projections": w_o.T.reshape(d, h, k).transpose(1, 0, 2),
        "attention.query_bias": b_q.reshape(h, k),
        # Each head's values carry b_v; its weights sum to one, so O_h b_v joins the bias.
        "attention.output_bias": b_o + jnp.dot(b_v, w_o, precision=jax.lax.Precision.HIGHEST),
        "mlp_norm.weight": checkpoint[p + "ln_2.weight"],
        "mlp_norm.bias": checkpoint[p + "ln_2.bias"],
        "mlp.layers.0.weight": checkpoint[p + "mlp.c_fc.weight"].T,
        "mlp.layers.0.bias": checkpoint[p + "mlp.c_fc.bias"],
        "mlp.layers.1.weight": checkpoint[p + "mlp.c_proj.weight"].T,
        "mlp.layers.1.bias": checkpoint[p + "mlp.c_proj.bias"],
    }


def gpt2_from_state_dict(tensors: Mapping[str, np.ndarray], config: LMConfig) -> LanguageModel:
    """A :class:`LanguageModel` holding a Hugging Face GPT-2 state dict.

    The names may have the ``transformer.`` prefix or not. GPT-2's ``Conv1D`` layers store
    (in, out) matrices, the transpose of the book's (out, in) convention. ``config`` may have
    ``scan_blocks``.

    Raises:
        ValueError: when ``config`` is not a GPT-2 configuration (learned positions, attention
            biases, tied embeddings), when the checkpoint holds tensors the model does not use,
            or when the arrays do not fit the model
            (:func:`~transformer_intro.pretrained.state_dict.fill`).
        KeyError: when a tensor the model needs is missing.
    """
    if not (
        config.tied_embeddings
        and config.block.attention_bias
        and config.learned_positions
        and not config.block.rotary
    ):
        raise ValueError(f"not a GPT-2 configuration: {config}")
    checkpoint = Checkpoint({name.removeprefix("transformer."): t for name, t in tensors.items()})
    arrays = {
        "tokeniser.table": checkpoint["wte.weight"],
        "position_embedding.embeddings": checkpoint["wpe.weight"],
        "final_norm.weight": checkpoint["ln_f.weight"],
        "final_norm.bias": checkpoint["ln_f.bias"],
    }
    for m in range(config.num_blocks):
        arrays.update(
            {f"blocks.{m}.{n}": a for n, a in _block_arrays(checkpoint, m, config).items()}
        )
    # lm_head is the token table itself (tied); causal-mask buffers carry no weights.
    checkpoint.check_all_read(
        ignored=lambda n: n == "lm_head.weight" or n.endswith(("attn.bias", "masked_bias"))
    )
    return language_model_from_arrays(config, arrays)


def load_gpt2(path: str | os.PathLike) -> LanguageModel:
    """GPT-2 from a folder holding Hugging Face's ``model.safetensors`` and ``config.json``."""
    from safetensors.numpy import load_file

    folder = Path(path)
    config = gpt2_config_from_hf(json.loads((folder / "config.json").read_text()))
    return gpt2_from_state_dict(load_file(folder / "model.safetensors"), config)
