"""GPT-2 (Radford et al. 2019) in the book's blocks, and a converter from its checkpoints.

GPT-2 is the book's language model with four details fixed: learned position embeddings, the
GELU in its tanh approximation, biases in every projection, and a read-out that reuses the token
embedding table (tied embeddings); its LayerNorms use epsilon 1e-5. The block is the book's
:class:`~transformer_intro.block.TransformerBlock` (pre-norm, residual from the input) with an
attention that has biases (``use_bias=True``: GPT-2's key bias drops out of the softmax and its
value bias becomes part of the output bias, see :class:`~transformer_intro.MultiHeadAttention`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

from ..attention import causal_mask
from ..block import TransformerBlock
from ..normalisation import LayerNorm


@dataclasses.dataclass(frozen=True)
class GPT2Config:
    """GPT-2's shape; the defaults are the smallest released model (124M parameters)."""

    vocab_size: int = 50_257
    context_length: int = 1024
    dim: int = 768
    num_heads: int = 12
    num_blocks: int = 12
    norm_eps: float = 1e-5

    @classmethod
    def from_hf(cls, config: dict) -> GPT2Config:
        """From a Hugging Face ``config.json`` (or ``GPT2Config.to_dict()``)."""
        return cls(
            vocab_size=config["vocab_size"],
            context_length=config["n_positions"],
            dim=config["n_embd"],
            num_heads=config["n_head"],
            num_blocks=config["n_layer"],
            norm_eps=config.get("layer_norm_epsilon", 1e-5),
        )


def gelu_tanh(x: Array) -> Array:
    """``0.5 x (1 + tanh(sqrt(2/π) (x + 0.044715 x³)))``, the GELU GPT-2 was trained with."""
    return jax.nn.gelu(x, approximate=True)


class GPT2(eqx.Module):
    """Token ids -> token + learned position embeddings -> M blocks -> LayerNorm -> ``E x̄_n``."""

    token_embedding: Float[Array, "V D"]
    position_embedding: Float[Array, "P D"]
    blocks: tuple[TransformerBlock, ...]
    final_norm: LayerNorm
    config: GPT2Config = eqx.field(static=True)

    def __init__(self, config: GPT2Config, *, key: PRNGKeyArray):
        token_key, position_key, block_key = jax.random.split(key, 3)
        d = config.dim
        self.token_embedding = 0.02 * jax.random.normal(token_key, (config.vocab_size, d))
        self.position_embedding = 0.01 * jax.random.normal(position_key, (config.context_length, d))
        self.blocks = tuple(
            TransformerBlock(
                d,
                config.num_heads,
                4 * d,
                value_dim=d // config.num_heads,
                mlp_activation=gelu_tanh,
                use_bias=True,
                key=k,
            )
            for k in jax.random.split(block_key, config.num_blocks)
        )
        self.final_norm = LayerNorm(d, eps=config.norm_eps)
        self.config = config

    def __call__(self, ids: Int[Array, " N"]) -> Float[Array, "N V"]:
        """Next-token logits at every position of one sequence of at most ``context_length``."""
        n = ids.shape[0]
        if ids.ndim != 1 or not 1 <= n <= self.config.context_length:
            raise ValueError(
                f"expected 1 to {self.config.context_length} token ids, got shape {ids.shape}"
            )
        x = self.token_embedding[ids] + self.position_embedding[:n]
        mask = causal_mask(n)
        for block in self.blocks:
            x = block.batched(x[None], mask)[0]
        return self.final_norm(x) @ self.token_embedding.T


def gpt2_from_state_dict(tensors: dict[str, np.ndarray], config: GPT2Config) -> GPT2:
    """A :class:`GPT2` holding a Hugging Face GPT-2 state dict (with or without the
    ``transformer.`` prefix). GPT-2's ``Conv1D`` layers store (in, out) matrices, the
    transpose of the book's (out, in) convention."""
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

    model = eqx.filter_eval_shape(GPT2, config, key=jax.random.PRNGKey(0))
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
            m.token_embedding,
            m.position_embedding,
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


def load_gpt2(path: str | os.PathLike) -> GPT2:
    """GPT-2 from a folder holding Hugging Face's ``model.safetensors`` and ``config.json``."""
    from safetensors.numpy import load_file

    folder = Path(path)
    config = GPT2Config.from_hf(json.loads((folder / "config.json").read_text()))
    return gpt2_from_state_dict(load_file(folder / "model.safetensors"), config)
