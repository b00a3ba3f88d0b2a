"""One checkpoint format for every model: a JSON header line, then the arrays.

The header names the model's class and holds its configuration, so :func:`load_checkpoint` can
build a model of the right structure before reading the weights into it; it also holds the recipe,
the history and the step of the run that wrote it, and anything else the caller wants kept beside
the weights (``extra``: a tokeniser's vocabulary, a measured accuracy).

The class name finds the configuration class in :data:`transformer_intro.config.MODEL_CONFIGS`,
and the configuration builds the model (``config.build(key=key)``). A model class joins the
registry with :func:`~transformer_intro.config.register_model` and needs no edit here; one
defined outside :mod:`transformer_intro.models` must be imported before its checkpoint is loaded.

A low-rank adapter is saved alone in the same format (:func:`save_adapter`): the header names
the *base* model's class and configuration, and adds an ``adapter`` entry with the rank, the scale,
the adapted projections and the SHA-256 of the base's arrays; the arrays are the factors R and Z
only. :func:`load_adapter` puts them back onto a base model, and refuses one that is not the base
they were trained on.

A file that is not such a checkpoint, or that does not fit the run resuming from it, raises a
:class:`CheckpointError` that says what is wrong and what to do.

Format 3 saves a model's configuration as it nests (every stack of blocks as one
:class:`~transformer_intro.block.BlockConfig`). Files of format 2, whose configurations were
flat, still load: their headers are read as format 3 (:mod:`.format2`), their arrays as they are.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import numpy as np

from .. import models  # noqa: F401  (importing the book's models registers them)
from ..adapters import PROJECTIONS, LoRALanguageModel, projection_matrix
from ..config import MODEL_CONFIGS
from .format2 import lift_model_config
from .history import History
from .recipe import Recipe

__all__ = [
    "CheckpointError",
    "CheckpointInfo",
    "FORMAT",
    "READABLE_FORMATS",
    "check_resumable",
    "checkpoint_header",
    "upgrade_header",
    "load_adapter",
    "load_checkpoint",
    "save_adapter",
    "save_checkpoint",
    "weights_fingerprint",
]

FORMAT = "transformer_intro checkpoint 3"
# The formats this version reads (format 2's headers lifted by upgrade_header).
READABLE_FORMATS = ("transformer_intro checkpoint 2", FORMAT)

_HEADER_KEYS = (
    "model_class",
    "model_config",
    "has_opt_state",
    "recipe",
    "history",
    "step",
    "extra",
)

# What an adapter file's header adds, under "adapter" (a whole model's header has none).
_ADAPTER_KEYS = ("rank", "scale", "parts", "base_sha256")


class CheckpointError(ValueError):
    """A file that is not a readable checkpoint, or one that does not fit the run resuming it."""


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

    Written to a temporary file beside ``path`` and renamed over it, so an interrupted or failed
    save leaves the previous checkpoint as it was. ``extra`` must be JSON-serialisable.
    """
    name = type(model).__name__
    config_class = MODEL_CONFIGS.get(name)
    if config_class is None or config_class.model_class is not type(model):
        raise TypeError(
            f"cannot checkpoint a {name}; the models that can are {sorted(MODEL_CONFIGS)} "
            "(a model class joins them with transformer_intro.config.register_model)"
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

    def write(f):
        f.write((json.dumps(header) + "\n").encode())
        eqx.tree_serialise_leaves(f, model if opt_state is None else (model, opt_state))

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(path, write)
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_atomically(path: Path, write) -> None:
    """Call ``write(file)`` on a new temporary file beside ``path``, then rename it to ``path``.

    The temporary file sits in the same folder so that ``os.replace`` is a rename within one file
    system, which is atomic: ``path`` holds the old file or the whole new one, never a part. Its
    name is unique, so two runs saving at once do not write into each other's file.
    """
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as f:
            os.fchmod(f.fileno(), 0o666 & ~_umask())  # mkstemp's 0600 is for secrets, not weights
            write(f)
            f.flush()
            os.fsync(f.fileno())  # the bytes on disk before the rename makes them the checkpoint
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def load_checkpoint(
    path: str | os.PathLike, *, opt_state_like=None
) -> tuple[eqx.Module, CheckpointInfo]:
    """Read a checkpoint written by :func:`save_checkpoint`: returns ``(model, info)``.

    The model is rebuilt from the header's class and configuration. The optimiser state, when the
    file has one, is restored into ``opt_state_like`` if given, else into a fresh state of the
    saved recipe's optimiser; ``info.opt_state`` is None when neither exists.

    Raises:
        FileNotFoundError: if there is no file at ``path``.
        CheckpointError: if the file is not a checkpoint, was written by a newer version, or is
            damaged or truncated.
    """
    path = Path(path)
    with _open(path) as f:
        header = _read_header(f, path)
        if header.get("adapter") is not None:
            raise CheckpointError(
                f"{path} holds a low-rank adapter alone, not a whole model: read it with "
                "load_adapter(path, base), onto the model it was trained on."
            )
        config_class = MODEL_CONFIGS[header["model_class"]]
        config = _from_fields(config_class, header["model_config"], "model configuration", path)
        model = config.build(key=jax.random.PRNGKey(0))  # weights overwritten below
        recipe = _optional(Recipe, header["recipe"], "recipe", path)
        history = _optional(History, header["history"], "history", path)
        if header["has_opt_state"] and opt_state_like is None and recipe is not None:
            opt_state_like = recipe.optimiser().init(eqx.filter(model, eqx.is_inexact_array))
        if header["has_opt_state"] and opt_state_like is not None:
            like, what = (model, opt_state_like), "model and optimiser state"
            model, opt_state = _read_arrays(f, path, like, what)
        else:
            # The model's arrays come first in the file; any optimiser state after them is skipped.
            model, opt_state = _read_arrays(f, path, model, header["model_class"]), None
    info = CheckpointInfo(recipe, history, header["step"], header["extra"], opt_state, header)
    return model, info


def checkpoint_header(path: str | os.PathLike) -> CheckpointInfo:
    """What a checkpoint's header holds (recipe, history, step, extra), without reading an array.

    ``info.header`` holds the header itself: the model's class (``"model_class"``) and its
    configuration (``"model_config"``), as JSON values.

    Raises:
        FileNotFoundError: if there is no file at ``path``.
        CheckpointError: if the file is not a checkpoint, or its recipe or history is not valid.
    """
    path = Path(path)
    with _open(path) as f:
        header = _read_header(f, path)
    recipe = _optional(Recipe, header["recipe"], "recipe", path)
    history = _optional(History, header["history"], "history", path)
    return CheckpointInfo(recipe, history, header["step"], header["extra"], None, header)


def weights_fingerprint(model: eqx.Module) -> str:
    """The SHA-256, in hex, of every array of ``model``: its dtype, shape and bytes, in order.

    Two models with the same fingerprint hold the same numbers bit for bit.
    """
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(eqx.filter(model, eqx.is_array)):
        array = np.asarray(leaf)
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def _factors(lora: LoRALanguageModel) -> tuple[dict[str, tuple], ...]:
    """The trained arrays of the adapters, (R, Z) per projection per block: all that is saved."""
    return tuple({part: (a.R, a.Z) for part, a in block.items()} for block in lora.adapters)


def save_adapter(
    path: str | os.PathLike,
    lora: LoRALanguageModel,
    *,
    recipe: Recipe | None = None,
    history: History | None = None,
    step: int | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write the adapters of ``lora`` alone, R and Z, with the fingerprint of its base model.

    The header is :func:`save_checkpoint`'s, describing the base model (its class and
    configuration), plus ``adapter``: the rank r, the scale alpha / r, the adapted projections
    and :func:`weights_fingerprint` of the base. With the run's ``recipe`` and ``history`` (and
    ``step``) the adapter's training can be replayed (``retrace``, ``fit_or_replay``), as a
    whole model's can. Written atomically, as a checkpoint is.

    Raises:
        TypeError: if ``lora`` is not a :class:`~transformer_intro.adapters.LoRALanguageModel`.
        ValueError: if an adapter's frozen W is no longer the base's matrix (trained with weight
            decay on W?): the base model would not rebuild the adapted one.
    """
    if not isinstance(lora, LoRALanguageModel):
        raise TypeError(f"save_adapter saves a LoRALanguageModel, got a {type(lora).__name__}")
    base = lora.base
    adapters = [a for block in lora.adapters for a in block.values()]
    for i, block in enumerate(lora.adapters):
        for part, adapter in block.items():
            attention = base.blocks[i].attention
            from_base = projection_matrix(getattr(attention, PROJECTIONS[part]), part)
            if not np.array_equal(np.asarray(adapter.weight), np.asarray(from_base)):
                raise ValueError(
                    f"block {i}'s {part} adapter holds a W that differs from the base model's: "
                    "the base would not rebuild this model; train with W frozen (no weight decay)"
                )
    header = {
        "format": FORMAT,
        "model_class": type(base).__name__,
        "model_config": json.loads(base.config.to_json()),
        "has_opt_state": False,
        "recipe": None if recipe is None else json.loads(recipe.to_json()),
        "history": None if history is None else json.loads(history.to_json()),
        "step": step,
        "extra": extra or {},
        "adapter": {
            "rank": adapters[0].rank,
            "scale": adapters[0].scale,
            "parts": list(lora.adapters[0]),
            "base_sha256": weights_fingerprint(base),
        },
    }

    def write(f):
        f.write((json.dumps(header) + "\n").encode())
        eqx.tree_serialise_leaves(f, _factors(lora))

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(path, write)
    return path


def load_adapter(
    path: str | os.PathLike, base: eqx.Module
) -> tuple[LoRALanguageModel, CheckpointInfo]:
    """Put the adapters saved by :func:`save_adapter` onto ``base``: returns ``(lora, info)``.

    ``info`` holds the recipe, history and step saved with the adapter (None where none were).

    Raises:
        FileNotFoundError: if there is no file at ``path``.
        CheckpointError: if the file is not an adapter file, is damaged or truncated, or was
            trained on another base model: another class, configuration (the fields that differ
            are named) or weights (the fingerprints are given).
    """
    path = Path(path)
    with _open(path) as f:
        header = _read_header(f, path)
        adapter = header.get("adapter")
        if adapter is None:
            raise CheckpointError(
                f"{path} holds a whole model, not a low-rank adapter: read it with load_checkpoint."
            )
        if not isinstance(adapter, dict) or set(adapter) != set(_ADAPTER_KEYS):
            raise CheckpointError(
                f"{path}'s adapter entry is not {', '.join(_ADAPTER_KEYS)}: the file is "
                "damaged; save the adapter again."
            )
        name, saved_name = type(base).__name__, header["model_class"]
        if saved_name != name:
            raise CheckpointError(
                f"{path} is an adapter for a {saved_name}, not a {name}: load it onto the "
                "model it was trained on."
            )
        saved = _from_fields(
            MODEL_CONFIGS[name], header["model_config"], "model configuration", path
        )
        _require_same_base(path, saved, base.config)
        fingerprint = weights_fingerprint(base)
        if fingerprint != adapter["base_sha256"]:
            raise CheckpointError(
                f"{path} is an adapter for a base model with other weights (SHA-256 "
                f"{adapter['base_sha256'][:16]}... there, {fingerprint[:16]}... here; same "
                "configuration): load it onto the model it was trained on."
            )
        try:
            lora = LoRALanguageModel(
                base,
                adapter["rank"],
                alpha=adapter["scale"] * adapter["rank"],
                parts=tuple(adapter["parts"]),
                key=jax.random.PRNGKey(0),  # R and Z overwritten below
            )
        except (TypeError, ValueError) as error:
            raise CheckpointError(
                f"{path}'s adapter entry is not valid ({error}): the file is damaged; save the "
                "adapter again."
            ) from error
        scales = {a.scale for block in lora.adapters for a in block.values()}
        if scales != {adapter["scale"]}:  # alpha = scale r did not give the scale back exactly
            raise CheckpointError(
                f"{path}'s scale {adapter['scale']!r} cannot be rebuilt exactly at rank "
                f"{adapter['rank']}: save the adapter again."
            )
        factors = _read_arrays(f, path, _factors(lora), "low-rank adapter")
        if f.read(1):
            raise CheckpointError(
                f"{path} has bytes after the adapter its header describes: the file is damaged; "
                "save the adapter again."
            )
    lora = eqx.tree_at(
        lambda m: [x for block in _factors(m) for pair in block.values() for x in pair],
        lora,
        [x for block in factors for pair in block.values() for x in pair],
    )
    recipe = _optional(Recipe, header["recipe"], "recipe", path)
    history = _optional(History, header["history"], "history", path)
    info = CheckpointInfo(recipe, history, header["step"], header["extra"], None, header)
    return lora, info


def _require_same_base(path: Path, saved, given) -> None:
    """Raise naming each field of the base model's configuration that differs."""
    changed = _changed_fields(saved, given)
    if changed:
        raise CheckpointError(
            f"{path} is an adapter for a base model of another configuration "
            f"({'; '.join(changed)}): load it onto the model it was trained on."
        )


def check_resumable(path: str | os.PathLike, model: eqx.Module, recipe: Recipe) -> None:
    """Check that ``fit`` can resume ``model`` under ``recipe`` from the checkpoint at ``path``.

    Only the header is read: a checkpoint of another model class, configuration or recipe is
    refused before any array is, with the fields that differ.

    Raises:
        FileNotFoundError: if there is no file at ``path``.
        CheckpointError: if the file is not a checkpoint written by ``fit``, or was written for
            another model class, model configuration or recipe.
    """
    path = Path(path)
    with _open(path) as f:
        header = _read_header(f, path)
    name, saved_name = type(model).__name__, header["model_class"]
    if saved_name != name:
        raise CheckpointError(
            f"{path} holds a {saved_name}, not a {name}: resume with the model it was trained "
            "from, or start afresh with another checkpoint_path."
        )
    if header["recipe"] is None or not header["has_opt_state"] or header["step"] is None:
        raise CheckpointError(
            f"{path} lacks the recipe, optimiser state or step that a resume needs (fit did not "
            "write it): start afresh with another checkpoint_path."
        )
    saved = _from_fields(MODEL_CONFIGS[name], header["model_config"], "model configuration", path)
    _require_same(path, "model configuration", saved, model.config)
    _require_same(path, "recipe", _from_fields(Recipe, header["recipe"], "recipe", path), recipe)


def _require_same(path: Path, what: str, saved, given) -> None:
    """Raise naming each field of two dataclasses of one class that differs."""
    changed = _changed_fields(saved, given)
    if changed:
        raise CheckpointError(
            f"{path} was trained with a different {what} ({'; '.join(changed)}): resume with the "
            f"{what} it was trained with, or start afresh with another checkpoint_path."
        )


def _changed_fields(saved, given, prefix: str = "") -> list[str]:
    """``"name: saved there, given here"`` for each field of two dataclasses that differs.

    A nested configuration that differs (a model's ``block``) names its own fields that differ,
    ``block.norm: ...``.
    """
    changed = []
    for f in dataclasses.fields(given):
        old, new = getattr(saved, f.name), getattr(given, f.name)
        if old == new:
            continue
        if dataclasses.is_dataclass(old) and type(old) is type(new):
            changed += _changed_fields(old, new, f"{prefix}{f.name}.")
        else:
            changed.append(f"{prefix}{f.name}: {old!r} there, {new!r} here")
    return changed


def _open(path: Path):
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    return open(path, "rb")


def _read_header(f, path: Path) -> dict[str, Any]:
    """The header line, checked: a JSON object of this format, every key, a known model class."""
    try:
        header = json.loads(f.readline())
    except ValueError:  # not JSON, or not even text (UnicodeDecodeError is a ValueError)
        header = None
    if not isinstance(header, dict) or header.get("format") not in READABLE_FORMATS:
        found = (
            "its first line is not a JSON object"
            if not isinstance(header, dict)
            else f"its header's format is {header.get('format')!r}"
        )
        raise CheckpointError(
            f"{path} is not a {FORMAT!r} file ({found}; this version reads "
            f"{', '.join(map(repr, READABLE_FORMATS))}): check the path, or write the model with "
            "save_checkpoint."
        )
    missing = [key for key in _HEADER_KEYS if key not in header]
    if missing:
        raise CheckpointError(
            f"{path}'s header lacks {', '.join(missing)}: the file is damaged; save the model "
            "again."
        )
    if header["model_class"] not in MODEL_CONFIGS:
        raise CheckpointError(
            f"{path} holds a {header['model_class']!r}, which this version cannot build (it can "
            f"build {', '.join(sorted(MODEL_CONFIGS))}): import the module that defines that "
            "model first, or load it with the version that wrote it."
        )
    return upgrade_header(header)


def upgrade_header(header: dict[str, Any]) -> dict[str, Any]:
    """A readable header (of any of :data:`READABLE_FORMATS`) as this version's format writes it.

    Only the model's configuration differs between formats 2 and 3; the arrays that follow the
    header are the same.
    """
    if header.get("format") == FORMAT:
        return header
    config = lift_model_config(header.get("model_class"), header.get("model_config"))
    return header | {"format": FORMAT, "model_config": config}


def _from_fields(cls, fields, what: str, path: Path):
    """``cls(**fields)`` for a dataclass saved in the header, or a CheckpointError saying why."""
    if not isinstance(fields, dict):
        raise CheckpointError(
            f"{path}'s {what} is a JSON {type(fields).__name__}, not an object: the file is "
            "damaged; save the model again."
        )
    unknown = sorted(set(fields) - {f.name for f in dataclasses.fields(cls)})
    if unknown:
        raise CheckpointError(
            f"{path}'s {what} has fields this version does not know ({', '.join(unknown)}): it "
            "was written by a newer transformer_intro; upgrade to load it."
        )
    try:
        return cls.from_dict(fields) if hasattr(cls, "from_dict") else cls(**fields)
    except (TypeError, ValueError) as error:
        raise CheckpointError(
            f"{path}'s {what} is not valid in this version ({error}): load it with the version "
            "that wrote it, and save it again."
        ) from error


def _optional(cls, fields, what: str, path: Path):
    return None if fields is None else _from_fields(cls, fields, what, path)


def _read_arrays(f, path: Path, like, what: str):
    """The arrays that follow the header, into the structure of ``like`` (``what`` names it)."""
    try:
        return eqx.tree_deserialise_leaves(f, like)
    except (RuntimeError, ValueError, EOFError) as error:
        # Equinox reports a short file or an array of the wrong shape as a RuntimeError naming
        # the leaf; what the reader needs is that the file does not hold what its header says.
        raise CheckpointError(
            f"{path} is truncated or damaged: its arrays do not fit the {what} its header "
            "describes; save it again, or use an intact copy."
        ) from error
