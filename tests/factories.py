"""The tests' small models, built from one place.

Each returns a configuration (build the model with ``config.build(key=key)``); options change
the block (``block_options``, any :class:`~transformer_intro.block.BlockConfig` field) or the
model (any other keyword). The sizes are as small as a test of the model's behaviour allows, so
that most tests compile in a second or two.
"""

from __future__ import annotations

from transformer_intro.block import BlockConfig
from transformer_intro.models import EncoderDecoderConfig, LMConfig, ViTConfig

__all__ = ["lm_block", "tiny_encoder_decoder", "tiny_lm", "tiny_vit", "vit_block"]


def vit_block(
    dim: int = 16, num_heads: int = 2, mlp_hidden_dim: int = 32, **options
) -> BlockConfig:
    """A block of the text's kind (full D x D value maps, no rotary positions)."""
    return BlockConfig(dim=dim, num_heads=num_heads, mlp_hidden_dim=mlp_hidden_dim, **options)


def lm_block(dim: int = 16, num_heads: int = 2, mlp_hidden_dim: int = 32, **options) -> BlockConfig:
    """A block as chapter 9's language model has it: values through D / H, rotary positions."""
    fields = dict(value_dim=dim // num_heads, rotary=True) | options
    return BlockConfig(dim=dim, num_heads=num_heads, mlp_hidden_dim=mlp_hidden_dim, **fields)


def tiny_lm(
    vocab_size: int = 7,
    window: int = 8,
    num_blocks: int = 1,
    *,
    block: BlockConfig | None = None,
    **options,
) -> LMConfig:
    """A language model of width 16, two heads, an MLP of 32 (or ``block``), ``num_blocks``."""
    block = lm_block() if block is None else block
    return LMConfig(
        vocab_size=vocab_size, window=window, block=block, num_blocks=num_blocks, **options
    )


def tiny_vit(num_blocks: int = 1, *, block: BlockConfig | None = None, **options) -> ViTConfig:
    """A ViT of 8 x 8 images in four 4 x 4 patches, width 16, two heads, an MLP of 32."""
    block = vit_block() if block is None else block
    fields = dict(image_size=8, patch_size=4) | options
    return ViTConfig(block=block, num_blocks=num_blocks, **fields)


def tiny_encoder_decoder(
    source_vocab_size: int = 9,
    target_vocab_size: int = 8,
    max_source_length: int = 6,
    max_target_length: int = 5,
    *,
    block: BlockConfig | None = None,
    **options,
) -> EncoderDecoderConfig:
    """An encoder-decoder whose two stacks have ``block`` (width 16, two heads, an MLP of 32)."""
    block = vit_block() if block is None else block
    return EncoderDecoderConfig(
        source_vocab_size,
        target_vocab_size,
        max_source_length,
        max_target_length,
        encoder=block,
        decoder=block,
        **options,
    )
