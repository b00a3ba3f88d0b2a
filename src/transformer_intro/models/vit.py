"""A Vision Transformer (Dosovitskiy et al. 2021), the model of chapter 8.

Patches become tokens, a class token goes in front, position embeddings are added, M transformer
blocks refine the tokens, and a classifier reads the class token's final state.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray

from ..block import BlockConfig, TransformerBlock
from ..config import ModelConfig, register_model, short_repr
from ..mlp import MLP
from ..normalisation import LayerNorm, RMSNorm
from ..positions import PositionEmbedding
from ..tokenisers import PatchTokeniser, check_patch_size

__all__ = [
    "CONFIGS",
    "SMALL_VIT",
    "ViTConfig",
    "VisionTransformer",
    "get_config",
]


@dataclasses.dataclass(frozen=True)
class ViTConfig(ModelConfig):
    """Every choice that shapes a :class:`VisionTransformer`. Plain values, so it saves as JSON.

    Attributes:
        image_size: the side of a square image, in pixels.
        channels: the number of colour channels (1 for MNIST).
        patch_size: P, the side of a square patch; it must divide ``image_size``.
        block: every block's configuration (D is ``block.dim``).
        num_blocks: M.
        head_hidden_dim: None for a linear classifier on the class token; else the width of the
            classifier's one hidden layer.
        num_classes: C.
        final_norm: a normalisation (the blocks' kind) on the class token before the classifier.
        position_init_scale: the standard deviation of the initial position embeddings.

    Raises:
        ValueError: on construction, if the patches do not tile the image or M < 1.
    """

    image_size: int = 28
    channels: int = 1
    patch_size: int = 4
    block: BlockConfig = BlockConfig(dim=64, num_heads=4, mlp_hidden_dim=128)
    num_blocks: int = 6
    head_hidden_dim: int | None = None
    num_classes: int = 10
    final_norm: bool = True
    position_init_scale: float = 0.02

    def __post_init__(self):
        """Check the choices together, so that a bad one fails here and not deep in the model."""
        check_patch_size(self.image_size, self.image_size, self.patch_size)
        if not isinstance(self.block, BlockConfig):
            raise TypeError(f"block must be a BlockConfig, got a {type(self.block).__name__}")
        if self.num_blocks < 1:
            raise ValueError(
                "a ViT needs at least one block for the class token to read the patches, "
                f"got num_blocks={self.num_blocks}"
            )

    def __repr__(self) -> str:
        return short_repr(self, 5)

    @property
    def num_patches(self) -> int:
        """N, the number of patch tokens (the class token not counted)."""
        return (self.image_size // self.patch_size) ** 2

    def build(self, *, key: PRNGKeyArray) -> VisionTransformer:
        """The :class:`VisionTransformer` of this configuration, its weights drawn with ``key``."""
        return VisionTransformer(self, key=key)


CONFIGS: dict[str, ViTConfig] = {
    # The reference text's tiny ViT, its quirks included: eight full-width heads (K = D) with a full
    # D x D value map each, averaged rather than summed; a GELU on keys and queries; no final
    # LayerNorm; an MLP classifier; position embeddings drawn from N(0, 1).
    "reference": ViTConfig(
        patch_size=4,
        block=BlockConfig(
            dim=128,
            num_heads=8,
            mlp_hidden_dim=128,
            head_dim=128,
            value_dim=None,
            qk_activation="gelu_tanh",
            combine_heads="mean",
        ),
        num_blocks=8,
        head_hidden_dim=128,
        final_norm=False,
        position_init_scale=1.0,
    ),
    # The model the book trains on a laptop CPU: 16 tokens of 7x7 patches, four narrow heads with
    # the usual factored value maps, three blocks. Measured on 2 cores at batch 64, 3, 4, 5 and 6
    # blocks train at about 6,000, 3,800, 2,950 and 2,250 images/s, and trained on shifted digits
    # for 10 epochs, 3 and 4 blocks reach 98.97% and 98.96% test accuracy: depth buys nothing here.
    "default": ViTConfig(
        patch_size=7,
        block=BlockConfig(dim=64, num_heads=4, mlp_hidden_dim=128, head_dim=16, value_dim=16),
        num_blocks=3,
    ),
}

# A quick model for tests and demonstrations (chapter 12's multi-process run): the default layout
# at half the width, with 2 blocks.
SMALL_VIT = ViTConfig(
    patch_size=7,
    block=BlockConfig(dim=32, num_heads=4, mlp_hidden_dim=64, head_dim=8, value_dim=8),
    num_blocks=2,
)
CONFIGS["small"] = SMALL_VIT


def get_config(name_or_config: str | ViTConfig) -> ViTConfig:
    """A configuration by its name in :data:`CONFIGS`; a :class:`ViTConfig` passes through.

    Raises:
        ValueError: if no configuration has that name.
    """
    if isinstance(name_or_config, ViTConfig):
        return name_or_config
    if name_or_config not in CONFIGS:
        raise ValueError(
            f"unknown configuration {name_or_config!r}; choose one of {sorted(CONFIGS)}"
        )
    return CONFIGS[name_or_config]


@register_model(ViTConfig)
class VisionTransformer(eqx.Module):
    """An image, (channels, height, width), to logits over the C classes.

    Patches become tokens (:class:`PatchTokeniser`), learned position embeddings are added, a
    learned class token ``x_0`` is put in front, M blocks refine all N + 1 tokens, and the class
    token's final state is mapped to logits. Only the class token reads the whole image: it starts
    the same for every input and gathers information by attending to the patches.
    """

    tokeniser: PatchTokeniser
    position_embedding: PositionEmbedding
    class_token: Float[Array, " D"]
    blocks: tuple[TransformerBlock, ...]
    final_norm: LayerNorm | RMSNorm | None
    head: MLP
    config: ViTConfig = eqx.field(static=True)

    def __init__(self, config: str | ViTConfig = "default", *, key: PRNGKeyArray):
        """Build the model; the class token starts at zero, the rest is drawn at random.

        Args:
            config: a :class:`ViTConfig`, or the name of one in :data:`CONFIGS`.
            key: a PRNG key.
        """
        config = get_config(config)
        d = config.block.dim
        keys = jax.random.split(key, config.num_blocks + 3)
        self.tokeniser = PatchTokeniser(config.patch_size, config.channels, d, key=keys[0])
        self.position_embedding = PositionEmbedding(
            config.num_patches, d, init_scale=config.position_init_scale, key=keys[1]
        )
        self.class_token = jnp.zeros(d)
        self.blocks = tuple(TransformerBlock(config.block, key=k) for k in keys[3:])
        self.final_norm = config.block.make_norm() if config.final_norm else None
        head_layers = 0 if config.head_hidden_dim is None else 1
        self.head = MLP(
            d, config.head_hidden_dim or d, head_layers, config.num_classes, key=keys[2]
        )
        self.config = config

    def _check_image(self, image_shape: tuple[int, ...]) -> None:
        c, s = self.config.channels, self.config.image_size
        if tuple(image_shape) != (c, s, s):
            raise ValueError(
                f"expected an image of shape ({c}, {s}, {s}), got {tuple(image_shape)}"
            )

    def tokens(self, image: Float[ArrayLike, "C H W"]) -> Float[Array, "T D"]:
        """The initial representation ``X^(0)``: the class token, then the N patches (T = N + 1)."""
        image = jnp.asarray(image)
        self._check_image(image.shape)
        patches = self.position_embedding(self.tokeniser(image))
        return jnp.concatenate([self.class_token[None], patches], axis=0)

    def classify(self, class_token: Float[Array, " D"]) -> Float[Array, " classes"]:
        """The C logits read off the class token's final state (final LayerNorm, then the head)."""
        if self.final_norm is not None:
            class_token = self.final_norm(class_token)
        return self.head(class_token)

    def __call__(self, image: Float[ArrayLike, "C H W"]) -> Float[Array, " classes"]:
        """The C class logits of one image, (channels, height, width).

        Raises:
            ValueError: if the image's shape is not the configuration's.
        """
        x = self.tokens(image)
        for block in self.blocks:
            x = block(x)
        return self.classify(x[0])

    def intermediates(self, image: Float[ArrayLike, "C H W"]) -> dict[str, Array]:
        """Logits plus what happened on the way: every block's input tokens and attention weights.

        Returns:
            A dict: ``block_inputs`` (M, N+1, D), the input ``X^(m)`` of each block;
            ``attention_weights`` (M, H, N+1, N+1) in the maths' orientation, column n of
            ``attention_weights[m, h]`` being how token n distributes its attention over the
            inputs n' in block m, head h; ``output_tokens`` (N+1, D); ``logits`` (C,). Token 0 is
            the class token.
        """
        x = self.tokens(image)
        inputs, weights = [], []
        for block in self.blocks:
            inputs.append(x)
            weights.append(block.attention.attention_weights(jax.vmap(block.attention_norm)(x)))
            x = block(x)
        return {
            "block_inputs": jnp.stack(inputs),
            "attention_weights": jnp.stack(weights),
            "output_tokens": x,
            "logits": self.classify(x[0]),
        }

    def batched(self, images: Float[ArrayLike, "B C H W"]) -> Float[Array, "B classes"]:
        """``jax.vmap(self)(images)`` through the fast batched paths; used for training.

        Raises:
            ValueError: if ``images`` is not a (B, channels, height, width) batch of the
                configuration's shape.
        """
        images = jnp.asarray(images)
        if images.ndim != 4:
            raise ValueError(f"expected a batch of images (B, C, H, W), got {images.shape}")
        self._check_image(images.shape[1:])
        # The convolution under vmap: as fast, forward and backward, as the patches taken out and
        # multiplied as one matrix (benchmarks/batched_paths.py).
        patches = jax.vmap(self.tokeniser)(images) + self.position_embedding.table()
        class_tokens = jnp.broadcast_to(
            self.class_token, (images.shape[0], 1, self.config.block.dim)
        )
        x = jnp.concatenate([class_tokens, patches], axis=1)
        for block in self.blocks[:-1]:
            x = block.batched(x)
        # Only the class token's final state is read, so the last block computes nothing else.
        cls = self.blocks[-1].batched(x, num_outputs=1)[:, 0]
        if self.final_norm is not None:
            cls = self.final_norm(cls)
        return self.head.batched(cls)
