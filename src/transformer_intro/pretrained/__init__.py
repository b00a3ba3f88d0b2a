"""Pretrained models run by the book's own code.

Each is a configuration of the book's :class:`~transformer_intro.models.LanguageModel`:
SmolLM2-135M-Instruct (a Llama-style model) and GPT-2, with their tokenisers as chapter 13's
:class:`~transformer_intro.bpe.BytePairEncoding`.

By concept: ``gguf`` reads llama.cpp's files, ``llama`` the Hugging Face Llama layout, ``gpt2``
GPT-2's, ``state_dict`` puts either converter's arrays into a model, ``smollm2`` finds, checks
and loads SmolLM2's file, and ``tokeniser`` builds the byte-level tokenisers.
"""

from ..models.generation import generate_ids
from ..parameters import count_parameters  # chapter 15 imports it from here, with the model
from .gguf import config_from_gguf, read_gguf, tokeniser_from_gguf
from .gpt2 import GPT2_SMALL, gpt2_config, gpt2_from_state_dict, load_gpt2
from .smollm2 import (
    SMOLLM2_135M,
    Chat,
    download_smollm2,
    find_smollm2,
    generate_text,
    load_smollm2,
    smollm2_config,
)
from .tokeniser import ChatTokeniser

__all__ = [
    "GPT2_SMALL",
    "SMOLLM2_135M",
    "Chat",
    "ChatTokeniser",
    "config_from_gguf",
    "count_parameters",
    "download_smollm2",
    "find_smollm2",
    "generate_ids",
    "generate_text",
    "gpt2_config",
    "gpt2_from_state_dict",
    "load_gpt2",
    "load_smollm2",
    "read_gguf",
    "smollm2_config",
    "tokeniser_from_gguf",
]
