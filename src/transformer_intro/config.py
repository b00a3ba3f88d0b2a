"""Configurations as plain values: JSON in and out, and the registry of the models they build.

Every model's configuration, and the training recipe, is a frozen dataclass of plain values, so
that it prints, compares and saves as JSON. :class:`JsonConfig` gives them one ``replace``,
``to_json`` and ``from_json``, which refuse a field the class does not have by name (a file
written by a newer version, or a misspelt option) instead of a ``TypeError`` from ``__init__``.
A configuration may nest another (a model's configuration nests its blocks'
:class:`~transformer_intro.block.BlockConfig`): the JSON then nests the same way, and
``from_json`` builds the inner configuration from its object.

A model's configuration is a :class:`ModelConfig`: ``config.build(key=key)`` returns the model.
The model class is registered under its own name with :func:`register_model`, so a checkpoint
that names its class can find the configuration to read and the model to build, and a new model
needs no edit anywhere else.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

__all__ = ["MODEL_CONFIGS", "JsonConfig", "ModelConfig", "register_model", "short_repr"]

T = TypeVar("T", bound="JsonConfig")
M = TypeVar("M", bound=type)


class JsonConfig:
    """``replace``, ``to_json`` and ``from_json`` for a dataclass of plain values (a mixin)."""

    def replace(self: T, **changes: Any) -> T:
        """A copy with the fields named in ``changes`` replaced (and checked again).

        Raises:
            ValueError: if a name in ``changes`` is not a field (the message names it).
        """
        type(self)._check_names(changes)
        return dataclasses.replace(self, **changes)

    # Options added after files were written with the class: left out of the JSON while they
    # keep their default, so that what does not use them saves byte for byte as before.
    WRITTEN_ONLY_WHEN_SET: ClassVar[tuple[str, ...]] = ()

    def to_json(self) -> str:
        """The fields as a JSON object, keys sorted (read back by :meth:`from_json`)."""
        fields = dataclasses.asdict(self)
        for f in dataclasses.fields(self):
            if f.name in self.WRITTEN_ONLY_WHEN_SET and fields[f.name] == f.default:
                del fields[f.name]
        return json.dumps(fields, sort_keys=True)

    @classmethod
    def from_json(cls: type[T], text: str) -> T:
        """The configuration that :meth:`to_json` wrote.

        Raises:
            ValueError: if the text is not a JSON object, or names a field the class does not
                have (the message names each), or a field's value is out of its range.
        """
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls: type[T], fields: Mapping[str, Any]) -> T:
        """The configuration with these fields (those left out keep their defaults).

        Raises:
            ValueError: if ``fields`` is not a mapping or names a field the class does not have.
        """
        if not isinstance(fields, Mapping):
            raise ValueError(
                f"a {cls.__name__} is read from a JSON object, got a {type(fields).__name__}"
            )
        cls._check_names(fields)
        nested = _nested_fields(cls)
        return cls(
            **{
                name: nested[name].from_dict(value)
                if name in nested and isinstance(value, Mapping)
                else value
                for name, value in fields.items()
            }
        )

    @classmethod
    def _check_names(cls, names) -> None:
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(names) - set(known))
        if unknown:
            raise ValueError(
                f"{cls.__name__} has no field {', '.join(map(repr, unknown))}; "
                f"its fields are {', '.join(known)}"
            )


@functools.cache
def _nested_fields(cls: type) -> dict[str, type[JsonConfig]]:
    """The fields of ``cls`` that hold a configuration of their own: name -> its class."""
    hints = typing.get_type_hints(cls)
    nested = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        for option in options:
            if isinstance(option, type) and issubclass(option, JsonConfig):
                nested[f.name] = option
    return nested


def short_repr(config, always: int) -> str:
    """``Name(field=value, ...)``: the first ``always`` fields, then those off their default.

    A configuration with many options reads as its sizes and what it changes.
    """
    shown = [
        f"{f.name}={getattr(config, f.name)!r}"
        for i, f in enumerate(dataclasses.fields(config))
        if i < always or getattr(config, f.name) != f.default
    ]
    return f"{type(config).__name__}({', '.join(shown)})"


class ModelConfig(JsonConfig):
    """A model's configuration: it builds the model it describes.

    The model class is attached by :func:`register_model`; ``build`` calls it with the
    configuration. A model whose constructor takes something else overrides ``build``.
    """

    model_class: ClassVar[type]

    def build(self, *, key) -> Any:
        """A new model of this configuration, its weights drawn with ``key`` (a PRNG key).

        Raises:
            TypeError: if no model class is registered with this configuration.
        """
        model_class = getattr(type(self), "model_class", None)
        if model_class is None:
            name = type(self).__name__
            raise TypeError(
                f"{name} builds no model: decorate the model class with @register_model({name})"
            )
        return model_class(self, key=key)


# Model class name -> the configuration class that builds it; filled by register_model.
MODEL_CONFIGS: dict[str, type[ModelConfig]] = {}


def _full_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def register_model(config_class: type[ModelConfig]) -> Callable[[M], M]:
    """A class decorator: the model is built by ``config_class`` and known by its class name.

    Example::

        @register_model(ViTConfig)
        class VisionTransformer(eqx.Module): ...

    Raises:
        ValueError: if another model class of the same name is registered already (a checkpoint
            names the class only, so two would be ambiguous).
    """

    def register(model_class: M) -> M:
        name = model_class.__name__
        known = MODEL_CONFIGS.get(name)
        # A module imported again (importlib.reload) registers its classes anew: allowed.
        if known is not None and _full_name(known.model_class) != _full_name(model_class):
            raise ValueError(
                f"a model class named {name!r} is registered already "
                f"({_full_name(known.model_class)}); give the new model another name"
            )
        config_class.model_class = model_class
        MODEL_CONFIGS[name] = config_class
        return model_class

    return register
