"""One checkpoint format for every model: a JSON header line, then the arrays.

The header names the model's class and holds its configuration, so :func:`load_checkpoint` can
build a model of the right structure before reading the weights into it; it also holds the recipe,
the history and the step of the run that wrote it, and anything else the caller wants kept beside
the weights (``extra``: a tokeniser's vocabulary, a measured accuracy).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import equinox as eqx
import jax

from ..models import (
    EncoderDecoder,
    EncoderDecoderConfig,
    LanguageModel,
    LMConfig,
    VisionTransformer,
    ViTConfig,
)
from .history import History
from .recipe import Recipe

__all__ = ["CheckpointInfo", "FORMAT", "MODEL_CLASSES", "load_checkpoint", "save_checkpoint"]

FORMAT = "transformer_intro checkpoint 2"

# The models a checkpoint can rebuild, by class name: how to build one from its configuration.
MODEL_CLASSES = {
    "VisionTransformer": lambda config, key: VisionTransformer(ViTConfig(**config), key=key),
    "LanguageModel": lambda config, key: LanguageModel(LMConfig(**config), key=key),
    "EncoderDecoder": lambda config, key: EncoderDecoder.from_config(
        EncoderDecoderConfig(**config), key=key
    ),
}


@dataclasses.dataclass(frozen=True)
class CheckpointInfo:
    """Everything a checkpoint holds besides the model (also readable as ``info["step"]``)."""

    recipe: Recipe | None
    history: History | None
    step: int | None
    extra: dict[str, Any]
    opt_state: Any = None
    header: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __getitem__(self, name: str):
        return getattr(self, name)


def save_checkpoint(
    path: str | os.PathLike,
    model: eqx.Module,
    *,
    opt_state=None,
    recipe: Recipe | None = None,
    history: History | None = None,
    step: int | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write ``model`` (and, when given, the optimiser state, recipe, history and step) to ``path``.

    Written to a temporary file and renamed, so an interrupted save never leaves a half-written
    checkpoint behind. ``extra`` must be JSON-serialisable.
    """
    name = type(model).__name__
    if name not in MODEL_CLASSES:
        raise TypeError(
            f"cannot checkpoint a {name}; the models that can are {sorted(MODEL_CLASSES)}"
        )
    header = {
        "format": FORMAT,
        "model_class": name,
        "model_config": json.loads(model.config.to_json()),
        "has_opt_state": opt_state is not None,
        "recipe": None if recipe is None else json.loads(recipe.to_json()),
        "history": None if history is None else json.loads(history.to_json()),
        "step": step,
        "extra": extra or {},
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as f:
        f.write((json.dumps(header) + "\n").encode())
        eqx.tree_serialise_leaves(f, model if opt_state is None else (model, opt_state))
    os.replace(tmp, path)
    return path


def load_checkpoint(
    path: str | os.PathLike, *, opt_state_like=None
) -> tuple[eqx.Module, CheckpointInfo]:
    """Read a checkpoint written by :func:`save_checkpoint`: returns ``(model, info)``.

    The model is rebuilt from the header's class and configuration. The optimiser state, when the
    file has one, is restored into ``opt_state_like`` if given, else into a fresh state of the
    saved recipe's optimiser; ``info.opt_state`` is None when neither exists.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    with open(path, "rb") as f:
        header = json.loads(f.readline())
        if header.get("format") != FORMAT:
            raise ValueError(f"{path} is not a {FORMAT!r} file (its header: {sorted(header)})")
        build = MODEL_CLASSES[header["model_class"]]
        model = build(header["model_config"], jax.random.PRNGKey(0))  # weights overwritten below
        recipe = None if header["recipe"] is None else Recipe(**header["recipe"])
        if header["has_opt_state"] and opt_state_like is None and recipe is not None:
            opt_state_like = recipe.optimiser().init(eqx.filter(model, eqx.is_inexact_array))
        if header["has_opt_state"] and opt_state_like is not None:
            model, opt_state = eqx.tree_deserialise_leaves(f, (model, opt_state_like))
        else:
            # The model's arrays come first in the file; any optimiser state after them is skipped.
            model, opt_state = eqx.tree_deserialise_leaves(f, model), None
    history = None if header["history"] is None else History(**header["history"])
    info = CheckpointInfo(recipe, history, header["step"], header["extra"], opt_state, header)
    return model, info
