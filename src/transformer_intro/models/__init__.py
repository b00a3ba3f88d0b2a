"""The book's three models, each built from the layers below it and nothing above them.

The layers are attention, MLP, normalisation, the transformer block, positions and tokenisers.

* :mod:`.vit`: the Vision Transformer (chapter 8);
* :mod:`.language_model`: the decoder-only character language model and its sampling (chapter 9);
* :mod:`.encoder_decoder`: the encoder-decoder with cross-attention (chapter 10).

Training lives above the models, in :mod:`transformer_intro.tasks` and
:mod:`transformer_intro.training`.
"""

from .encoder_decoder import DecoderLayer, EncoderDecoder, EncoderDecoderConfig
from .language_model import SHAKESPEARE_CONFIG, LanguageModel, LMConfig
from .vit import CONFIGS, VisionTransformer, ViTConfig, count_parameters, get_config

__all__ = [
    "CONFIGS",
    "DecoderLayer",
    "EncoderDecoder",
    "EncoderDecoderConfig",
    "LMConfig",
    "LanguageModel",
    "SHAKESPEARE_CONFIG",
    "ViTConfig",
    "VisionTransformer",
    "count_parameters",
    "get_config",
]
