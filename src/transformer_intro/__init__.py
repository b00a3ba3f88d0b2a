"""transformer_intro: the transformer from first principles, in JAX and Equinox.

Tokens are rows: a sequence is an (N, D) array, the transpose of the maths' D x N array X.
Every module's ``__call__`` acts on one example; batch with ``jax.vmap`` or the ``batched`` methods.
"""

from .attention import (
    MultiHeadAttention,
    MultiHeadSelfAttention,
    SelfAttention,
    SharedProjectionAttention,
    attend,
    attention_weights,
    causal_mask,
    dot_product_attention_weights,
    from_equinox,
    padding_mask,
    qkv_attention,
    qkv_weights,
    to_equinox,
)
from .block import BlockConfig, TransformerBlock
from .mlp import MLP
from .models import (
    CONFIGS,
    DecoderLayer,
    EncoderDecoder,
    EncoderDecoderConfig,
    LanguageModel,
    LMConfig,
    VisionTransformer,
    ViTConfig,
    get_config,
)
from .normalisation import LayerNorm
from .parameters import count_parameters
from .positions import PositionEmbedding, rotate_pairs, sinusoidal_embeddings
from .tokenisers import ContinuousTokeniser, DiscreteTokeniser, PatchTokeniser, Vocabulary, patchify

__all__ = [
    "MultiHeadAttention",
    "MultiHeadSelfAttention",
    "SelfAttention",
    "SharedProjectionAttention",
    "attend",
    "attention_weights",
    "causal_mask",
    "dot_product_attention_weights",
    "from_equinox",
    "padding_mask",
    "qkv_attention",
    "qkv_weights",
    "to_equinox",
    "BlockConfig",
    "TransformerBlock",
    "DecoderLayer",
    "EncoderDecoder",
    "EncoderDecoderConfig",
    "LanguageModel",
    "LMConfig",
    "MLP",
    "LayerNorm",
    "PositionEmbedding",
    "rotate_pairs",
    "sinusoidal_embeddings",
    "ContinuousTokeniser",
    "DiscreteTokeniser",
    "PatchTokeniser",
    "Vocabulary",
    "patchify",
    "CONFIGS",
    "ViTConfig",
    "VisionTransformer",
    "count_parameters",
    "get_config",
]
