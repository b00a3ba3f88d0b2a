"""Reading the headers of format-2 checkpoints, whose model configurations were flat.

Format 2 (``"transformer_intro checkpoint 2"``) stored each model's configuration in the fields of
its time: the block's options beside the model's own (``dim``, ``num_heads``, ... in a ViT or a
language model; ``token_dim``, ``value_dim`` ... in an encoder-decoder), and the language model's
positions as ``positions="rotary"`` or ``"learned"``. Format 3 nests one
:class:`~transformer_intro.block.BlockConfig` per stack of blocks. :func:`lift_model_config`
turns a format-2 configuration into the format-3 one that builds the same model: the arrays of
the file are unchanged, so it is all an old file needs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["LIFTS", "lift_model_config"]

# The flat fields of format 2 that describe a block, by model class (each also had its own).
_VIT_BLOCK = (
    "dim", "num_heads", "head_dim", "value_dim", "mlp_hidden_dim", "mlp_num_layers", "scaled",
    "qk_activation", "combine_heads", "residual",
)  # fmt: skip
_LM_BLOCK = (
    "dim", "num_heads", "mlp_hidden_dim", "norm", "norm_eps", "mlp", "activation", "mlp_bias",
    "num_kv_heads", "qk_norm", "rotary_base", "rotary_layout", "attention_bias",
    "zero_init_residual",
)  # fmt: skip
# ViTConfig named its key and query activations apart from the MLP's: "gelu" was jax.nn.gelu's
# default, the tanh form.
_QK_ACTIVATIONS = {"identity": None, "gelu": "gelu_tanh", "relu": "relu"}


def _split(fields: dict[str, Any], names: tuple[str, ...]) -> tuple[dict, dict]:
    block = {name: fields[name] for name in names if name in fields}
    rest = {name: value for name, value in fields.items() if name not in names}
    return block, rest


def _vit(fields: dict[str, Any]) -> dict[str, Any]:
    block, rest = _split(fields, _VIT_BLOCK)
    # format 2's defaults, where a field was left out
    block = {"dim": 64, "num_heads": 4, "mlp_hidden_dim": 128} | block
    if "qk_activation" in block:
        block["qk_activation"] = _QK_ACTIVATIONS.get(block["qk_activation"], block["qk_activation"])
    return rest | {"block": block}


def _lm(fields: dict[str, Any]) -> dict[str, Any]:
    block, rest = _split(fields, _LM_BLOCK)
    block = {"dim": 128, "num_heads": 4, "mlp_hidden_dim": 512} | block
    # Format 2's language model always factored its values through D / H dimensions, and its
    # positions were rotary unless learned.
    block["value_dim"] = block["dim"] // block["num_heads"]
    positions = rest.pop("positions", "rotary")
    block["rotary"] = positions == "rotary"
    if positions == "learned":
        rest["learned_positions"] = True
    return rest | {"block": block}


def _encoder_decoder(fields: dict[str, Any]) -> dict[str, Any]:
    rest = dict(fields)
    block = {
        "dim": rest.pop("token_dim", 64),
        "num_heads": rest.pop("num_heads", 4),
        "mlp_hidden_dim": rest.pop("mlp_hidden_dim", 128),
        "value_dim": rest.pop("value_dim", None),
    }
    return rest | {"encoder": block, "decoder": dict(block)}


# model class -> the map from its format-2 configuration to its format-3 one
LIFTS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "VisionTransformer": _vit,
    "LanguageModel": _lm,
    "EncoderDecoder": _encoder_decoder,
}


def lift_model_config(model_class: str, fields: Any) -> Any:
    """The format-3 configuration (a JSON object) of a format-2 one of ``model_class``.

    A value that is not a JSON object, or a class format 2 did not know, is returned as it is,
    for the reader's own checks to name.
    """
    lift = LIFTS.get(model_class)
    if lift is None or not isinstance(fields, dict):
        return fields
    return lift(fields)
