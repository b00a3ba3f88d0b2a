"""The book's three models, each built from the layers below it and nothing above them.

The layers are attention, MLP, normalisation, the transformer block, positions and tokenisers.

* :mod:`.vit`: the Vision Transformer (chapter 8);
* :mod:`.language_model`: the decoder-only character language model and its sampling (chapter 9);
* :mod:`.encoder_decoder`: the encoder-decoder with cross-attention (chapter 10);
* :mod:`.quantised`: a language model with its matrices in GGUF's block formats (chapter 16).

Each model's configuration builds it (``config.build(key=key)``), and each model class is
registered under its name (:func:`transformer_intro.config.register_model`), which is how a
checkpoint finds the model it holds.

Training lives above the models, in :mod:`transformer_intro.tasks` and
:mod:`transformer_intro.training`.
"""

from .encoder_decoder import DecoderLayer, EncoderDecoder, EncoderDecoderConfig
from .language_model import SHAKESPEARE_CONFIG, LanguageModel, LMConfig
from .quantised import QuantisedSelfAttention, dequantise_model, quantise_model
from .vit import CONFIGS, SMALL_VIT, VisionTransformer, ViTConfig, get_config

__all__ = [
    "CONFIGS",
    "DecoderLayer",
    "EncoderDecoder",
    "EncoderDecoderConfig",
    "LMConfig",
    "LanguageModel",
    "QuantisedSelfAttention",
    "SHAKESPEARE_CONFIG",
    "SMALL_VIT",
    "ViTConfig",
    "VisionTransformer",
    "dequantise_model",
    "get_config",
    "quantise_model",
]
