"""GPT-2 (Radford et al. 2019) as a configuration of the book's language model.

Also a converter from GPT-2's checkpoints.

GPT-2 is the book's :class:`~transformer_intro.models.LanguageModel` with five choices of its
:class:`~transformer_intro.models.LMConfig` fixed: learned position embeddings
(``positions="learned"``), the GELU in its tanh approximation (``activation="gelu_tanh"``),
biases in the attention (``attention_bias=True``: GPT-2's key bias drops out of the softmax and
its value bias becomes part of the output bias, see
:class:`~transformer_intro.attention.MultiHeadAttention`), a read-out that reuses the token
embedding table (``tied_embeddings=True``), and LayerNorms with epsilon 1e-5.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..models.language_model import LanguageModel, LMConfig

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
    return LMConfig(
        vocab_size=vocab_size,
        window=context_length,
        dim=dim,
        num_heads=num_heads,
        num_blocks=num_blocks,
        mlp_hidden_dim=4 * dim,
        positions="learned",
        norm="layer",
        norm_eps=norm_eps,
        mlp="mlp",
        activation="gelu_tanh",
        attention_bias=True,
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


def gpt2_from_state_dict(tensors: dict[str, np.ndarray], config: LMConfig) -> LanguageModel:
    """A :class:`LanguageModel` holding a Hugging Face GPT-2 state dict.

    The names may have the ``transformer.`` prefix or not. GPT-2's ``Conv1D`` layers store
    (in, out) matrices, the transpose of the book's (out, in) convention.

    Raises:
        ValueError: when ``config`` is not a GPT-2 configuration (learned positions, attention
            biases, tied embeddings).
    """
    if not (config.tied_embeddings and config.attention_bias and config.positions == "learned"):
        raise ValueError(f"not a GPT-2 configuration: {config}")
    tensors = {
        k.removeprefix("transformer."): np.asarray(v, np.float32) for k, v in tensors.items()
    }
    h, d = config.num_heads, config.dim
    k = d // h
    used = set()

    def take(name):
        if name not in tensors:
            raise KeyError(f"the checkpoint has no tensor {name!r}")
        used.add(name)
        return tensors[name]

    model = eqx.filter_eval_shape(LanguageModel, config, key=jax.random.PRNGKey(0))
    blocks = []
    for i, block in enumerate(model.blocks):
        p = f"h.{i}."
        w_qkv, b_qkv = take(p + "attn.c_attn.weight"), take(p + "attn.c_attn.bias")
        w_q, w_k, w_v = np.split(w_qkv, 3, axis=1)  # each (D, H K): x @ w_q = queries
        b_q, _, b_v = np.split(b_qkv, 3)  # the key bias cancels in the softmax
        w_o, b_o = take(p + "attn.c_proj.weight"), take(p + "attn.c_proj.bias")  # (H Dv, D)
        attention = block.attention
        values = {
            "query_projections": w_q.T.reshape(h, k, d),
            "key_projections": w_k.T.reshape(h, k, d),
            "value_projections": w_v.T.reshape(h, k, d),
            "output_projections": w_o.T.reshape(d, h, k).transpose(1, 0, 2),
            "query_bias": b_q.reshape(h, k),
            # Each head's values carry b_v; its weights sum to one, so O_h b_v joins the bias.
            "output_bias": b_o + b_v @ w_o,
        }
        attention = eqx.tree_at(
            lambda a, names=tuple(values): [getattr(a, n) for n in names],
            attention,
            [jnp.asarray(v) for v in values.values()],
        )
        arrays = [
            take(p + "ln_1.weight"),
            take(p + "ln_1.bias"),
            take(p + "ln_2.weight"),
            take(p + "ln_2.bias"),
            take(p + "mlp.c_fc.weight").T,
            take(p + "mlp.c_fc.bias"),
            take(p + "mlp.c_proj.weight").T,
            take(p + "mlp.c_proj.bias"),
        ]
        block = eqx.tree_at(
            lambda b: (
                b.attention,
                b.attention_norm.weight,
                b.attention_norm.bias,
                b.mlp_norm.weight,
                b.mlp_norm.bias,
                b.mlp.layers[0].weight,
                b.mlp.layers[0].bias,
                b.mlp.layers[1].weight,
                b.mlp.layers[1].bias,
            ),
            block,
            (attention, *[jnp.asarray(a) for a in arrays]),
        )
        blocks.append(block)
    model = eqx.tree_at(
        lambda m: (
            m.tokeniser.table,
            m.position_embedding.embeddings,
            m.blocks,
            m.final_norm.weight,
            m.final_norm.bias,
        ),
        model,
        (
            jnp.asarray(take("wte.weight")),
            jnp.asarray(take("wpe.weight")),
            tuple(blocks),
            jnp.asarray(take("ln_f.weight")),
            jnp.asarray(take("ln_f.bias")),
        ),
    )
    # lm_head is the token table itself (tied); causal-mask buffers carry no weights.
    ignored = {
        n for n in tensors if n == "lm_head.weight" or n.endswith(("attn.bias", "masked_bias"))
    }
    unused = set(tensors) - used - ignored
    if unused:
        raise ValueError(f"checkpoint tensors the model does not use: {sorted(unused)[:5]}")
    leaves = jax.tree_util.tree_leaves(model)
    if any(isinstance(x, jax.ShapeDtypeStruct) for x in leaves):
        raise ValueError("some of the model's weights were not in the checkpoint")
    return model


def load_gpt2(path: str | os.PathLike) -> LanguageModel:
    """GPT-2 from a folder holding Hugging Face's ``model.safetensors`` and ``config.json``."""
    from safetensors.numpy import load_file

    folder = Path(path)
    config = gpt2_config_from_hf(json.loads((folder / "config.json").read_text()))
    return gpt2_from_state_dict(load_file(folder / "model.safetensors"), config)
