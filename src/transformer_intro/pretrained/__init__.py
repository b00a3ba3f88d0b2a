"""Pretrained models run by the book's own layers: SmolLM2-135M-Instruct (a Llama-style model)."""

from .llama import SMOLLM2_135M, LlamaBlock, LlamaConfig, LlamaModel, count_parameters
from .smollm2 import (
    download_smollm2,
    find_smollm2,
    generate_ids,
    generate_text,
    load_smollm2,
    read_gguf,
)
from .tokeniser import ByteLevelBPE

__all__ = [
    "SMOLLM2_135M",
    "ByteLevelBPE",
    "LlamaBlock",
    "LlamaConfig",
    "LlamaModel",
    "count_parameters",
    "download_smollm2",
    "find_smollm2",
    "generate_ids",
    "generate_text",
    "load_smollm2",
    "read_gguf",
]
