"""A Llama-style decoder built from the book's layers: the architecture of SmolLM2 and Llama.

Against the book's language model (chapter 9) the block keeps its shape, pre-normalisation and
two residual branches, and swaps four parts, each an option of a layer the book already has:

============================  ===========================  =====================================
part                          the book's blocks             this model
============================  ===========================  =====================================
normalisation                 ``LayerNorm``                 ``RMSNorm`` (no centring, no shift)
token-wise network            ``MLP`` with a GELU           ``GatedMLP`` with SiLU (SwiGLU)
attention                     H key-value heads             G < H key-value heads (GQA)
positions                     rotary, base 10,000,          rotary, a larger base, half-split
                              interleaved pairs             pairs (Hugging Face's layout)
read-out                      its own matrix and bias       the embedding table, transposed (tied)
============================  ===========================  =====================================

``X ↦ Y = X + MHA(RMSNorm(X))``, ``X' = Y + GatedMLP(RMSNorm(Y))``, M times, then a final
RMSNorm and the logits ``E x̄_n`` with E the (|V|, D) embedding table.
"""

from __future__ import annotations

import dataclasses
import json

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray

from ..attention import MultiHeadAttention, causal_mask
from ..mlp import GatedMLP
from ..normalisation import RMSNorm


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    """Every number that shapes a :class:`LlamaModel` (defaults: SmolLM2-135M)."""

    vocab_size: int = 49_152
    dim: int = 576
    num_blocks: int = 30
    num_heads: int = 9
    num_kv_heads: int = 3
    mlp_hidden_dim: int = 1536
    rotary_base: float = 100_000.0
    rotary_layout: str = "half"
    norm_eps: float = 1e-5
    context_length: int = 8192
    tied_embeddings: bool = True

    def __post_init__(self):
        if self.dim % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"dim={self.dim} must be a multiple of num_heads={self.num_heads}, and that of "
                f"num_kv_heads={self.num_kv_heads}"
            )

    @property
    def head_dim(self) -> int:
        return self.dim // self.num_heads

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)


SMOLLM2_135M = LlamaConfig()


class LlamaBlock(eqx.Module):
    """One pre-norm block: RMSNorm, grouped-query attention, RMSNorm, SwiGLU, two residuals."""

    attention_norm: RMSNorm
    attention: MultiHeadAttention
    mlp_norm: RMSNorm
    mlp: GatedMLP

    def __init__(self, config: LlamaConfig, *, key: PRNGKeyArray):
        attention_key, mlp_key = jax.random.split(key)
        k = config.head_dim
        self.attention_norm = RMSNorm(config.dim, eps=config.norm_eps)
        self.attention = MultiHeadAttention(
            config.dim,
            config.num_heads,
            k,
            k,
            num_kv_heads=config.num_kv_heads,
            rotary=True,
            rotary_base=config.rotary_base,
            rotary_layout=config.rotary_layout,
            key=attention_key,
        )
        self.mlp_norm = RMSNorm(config.dim, eps=config.norm_eps)
        self.mlp = GatedMLP(config.dim, config.mlp_hidden_dim, key=mlp_key)

    def __call__(self, x: Float[Array, "N D"], mask) -> Float[Array, "N D"]:
        # The attention's batched path: the same function as its __call__, without forming the
        # H full D x D value maps O_h W_h.
        y = x + self.attention.batched(self.attention_norm(x)[None], mask)[0]
        return y + self.mlp.batched(self.mlp_norm(y))

    def extend(self, x: Float[Array, "T D"], cache, start):
        attended, cache = self.attention.extend(self.attention_norm(x), cache, start)
        y = x + attended
        return y + self.mlp.batched(self.mlp_norm(y)), cache


class LlamaModel(eqx.Module):
    """Token ids -> embeddings -> M :class:`LlamaBlock` s -> RMSNorm -> logits (tied read-out)."""

    embedding: Float[Array, "V D"]
    blocks: tuple[LlamaBlock, ...]
    final_norm: RMSNorm
    unembedding: Float[Array, "V D"] | None
    config: LlamaConfig = eqx.field(static=True)

    def __init__(self, config: LlamaConfig, *, key: PRNGKeyArray):
        embed_key, block_key, out_key = jax.random.split(key, 3)
        self.embedding = 0.02 * jax.random.normal(embed_key, (config.vocab_size, config.dim))
        self.blocks = tuple(
            LlamaBlock(config, key=k) for k in jax.random.split(block_key, config.num_blocks)
        )
        self.final_norm = RMSNorm(config.dim, eps=config.norm_eps)
        self.unembedding = (
            None
            if config.tied_embeddings
            else 0.02 * jax.random.normal(out_key, (config.vocab_size, config.dim))
        )
        self.config = config

    def _check(self, ids: Array, start: int = 0) -> None:
        if ids.ndim != 1 or ids.shape[0] == 0:
            raise ValueError(f"expected a non-empty sequence of token ids, got shape {ids.shape}")

    def readout(self, x: Float[Array, "... D"]) -> Float[Array, "... V"]:
        table = self.embedding if self.unembedding is None else self.unembedding
        return self.final_norm(x) @ table.T

    def __call__(self, ids: Int[Array, " N"]) -> Float[Array, "N V"]:
        """Next-token logits at every position of one sequence."""
        self._check(ids)
        x = self.embedding[ids]
        mask = causal_mask(ids.shape[0])
        for block in self.blocks:
            x = block(x, mask)
        return self.readout(x)

    def attention_maps(self, ids: Int[Array, " N"]) -> Float[Array, "M H N N"]:
        """``A_h[n', n]`` of every head of every block (columns sum to one)."""
        self._check(ids)
        x = self.embedding[ids]
        mask = causal_mask(ids.shape[0])
        maps = []
        for block in self.blocks:
            maps.append(block.attention.attention_weights(block.attention_norm(x), mask))
            x = block(x, mask)
        return jnp.stack(maps)

    def empty_cache(self, window: int, dtype=jnp.float32) -> tuple:
        """One (keys, values) pair per block, G key-value heads each: (G, window, K)."""
        return tuple(block.attention.empty_cache(window, dtype) for block in self.blocks)

    def extend(
        self, ids: Int[Array, " T"], cache: tuple, start: Int[Array, ""] | int
    ) -> tuple[Float[Array, "T V"], tuple]:
        """Logits for T new tokens at positions ``start, ...``, earlier ones read from the cache."""
        x = self.embedding[ids]
        new_cache = []
        for block, block_cache in zip(self.blocks, cache, strict=True):
            x, block_cache = block.extend(x, block_cache, start)
            new_cache.append(block_cache)
        return self.readout(x), tuple(new_cache)


def count_parameters(model: eqx.Module) -> int:
    return sum(x.size for x in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array)))
