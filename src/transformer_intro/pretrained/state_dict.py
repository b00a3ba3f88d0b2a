"""A checkpoint's tensors put into the book's models, by the dotted path of each weight.

A converter (GPT-2's, Llama's) reads a checkpoint's tensors by their names (:class:`Checkpoint`
records which it read), renames and reshapes them into the book's layout and keys each array by
the path of the weight it becomes in the model, such as ``"blocks.3.attention.query_projections"``.
:func:`fill` puts the arrays into a skeleton of the model (``eqx.filter_eval_shape``: shapes, no
memory), so that one place checks every shape and names what is missing and what is left over,
whatever the checkpoint. With ``scan_blocks`` the M blocks are one block of stacked arrays
(:func:`stack_blocks`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike

from ..models.language_model import LanguageModel, LMConfig

__all__ = [
    "Checkpoint",
    "LazyTensors",
    "fill",
    "language_model_from_arrays",
    "leaf_paths",
    "stack_blocks",
]

Skeleton = TypeVar("Skeleton")

_SHOWN = 10  # names listed in an error message; a wrong model would otherwise list hundreds


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


class LazyTensors(Mapping):
    """Named tensors, each computed when it is looked up and not kept.

    A loader then holds one float32 tensor at a time beside the model it fills, not a second
    copy of the whole checkpoint (540 MB for SmolLM2-135M).
    """

    def __init__(self, readers: dict[str, Callable[[], np.ndarray]]):
        """Wrap ``readers``: name -> a function of no arguments returning that tensor."""
        self._readers = readers

    def __getitem__(self, name: str) -> np.ndarray:
        """The tensor ``name``, computed now."""
        return self._readers[name]()

    def __contains__(self, name: object) -> bool:
        """Whether there is a tensor ``name`` (without computing it)."""
        return name in self._readers

    def __iter__(self) -> Iterator[str]:
        """The tensors' names."""
        return iter(self._readers)

    def __len__(self) -> int:
        """How many tensors there are."""
        return len(self._readers)


class Checkpoint:
    """A checkpoint's tensors by name, as float32, remembering which were read."""

    def __init__(self, tensors: Mapping[str, ArrayLike]):
        """Wrap ``tensors``: name -> array (a :class:`LazyTensors` is read only when asked)."""
        self.tensors = tensors
        self.read: set[str] = set()

    def __getitem__(self, name: str) -> jax.Array:
        """The tensor ``name`` as a float32 JAX array.

        Converted at once, so that the float32 copy a lazy reader made is let go before the
        next tensor is read: the converter then holds the checkpoint once, in JAX's memory.

        Raises:
            KeyError: when the checkpoint has no tensor ``name``.
        """
        if name not in self.tensors:
            raise KeyError(f"the checkpoint has no tensor {name!r}")
        self.read.add(name)
        return jnp.asarray(self.tensors[name], jnp.float32)

    def check_all_read(self, ignored: Callable[[str], bool] = lambda name: False) -> None:
        """Raise if a tensor was never read, unless ``ignored(name)``.

        A tensor that no weight of the model came from is a converter's oversight or a
        checkpoint of another architecture; either way the model would silently differ.

        Raises:
            ValueError: naming the unread tensors.
        """
        unread = sorted(n for n in self.tensors if n not in self.read and not ignored(n))
        if unread:
            raise ValueError(f"checkpoint tensors the model does not use: {_listed(unread)}")


def _path_name(path) -> str:
    return jax.tree_util.keystr(path, simple=True, separator=".")


def leaf_paths(skeleton) -> dict[str, jax.ShapeDtypeStruct]:
    """The skeleton's weights to fill, by dotted path (``"blocks.0.mlp.up.weight"``)."""
    flat = jax.tree_util.tree_flatten_with_path(skeleton)[0]
    return {_path_name(p): leaf for p, leaf in flat if isinstance(leaf, jax.ShapeDtypeStruct)}


def fill(skeleton: Skeleton, arrays: Mapping[str, ArrayLike]) -> Skeleton:
    """The skeleton with each of its weights taken from ``arrays`` at the weight's dotted path.

    Args:
        skeleton: a model from ``eqx.filter_eval_shape``: its weights are
            ``jax.ShapeDtypeStruct``; its other leaves (functions, say) are kept as they are.
        arrays: dotted path -> array, each of the shape of the weight at that path; it is
            converted to that weight's dtype. A ``dict`` is emptied as its arrays are placed,
            so that a large model is not held twice, once as the checkpoint's arrays and once
            as the model's (for SmolLM2, 540 MB more at the peak).

    Raises:
        ValueError: when anything does not fit; the message names every path whose array has
            another shape than the weight (with both shapes), every array at a path that is no
            weight of the model, and every weight left without an array.
    """
    remaining = arrays if isinstance(arrays, dict) else dict(arrays)
    mismatched, unfilled = [], []

    def put(path, leaf):
        if not isinstance(leaf, jax.ShapeDtypeStruct):
            return leaf
        name = _path_name(path)
        if name not in remaining:
            unfilled.append(name)
            return leaf
        value = remaining.pop(name)
        if tuple(np.shape(value)) != leaf.shape:
            mismatched.append(f"{name} (array {tuple(np.shape(value))}, model {leaf.shape})")
            return leaf
        return jnp.asarray(value, leaf.dtype)

    model = jax.tree_util.tree_map_with_path(put, skeleton)
    left_over = sorted(remaining)
    problems = []
    if mismatched:
        problems.append(f"shapes differ at {_listed(mismatched)}")
    if left_over:
        problems.append(f"arrays with no place in the model: {_listed(left_over)}")
    if unfilled:
        problems.append(f"weights of the model with no array: {_listed(unfilled)}")
    if problems:
        raise ValueError("the arrays do not fill the model: " + "; ".join(problems))
    return model


def stack_blocks(arrays: Mapping[str, ArrayLike], num_blocks: int) -> dict[str, ArrayLike]:
    """The blocks' arrays (``"blocks.<m>.<rest>"``) stacked along a new leading axis of M.

    That is the layout of a model with ``scan_blocks=True`` (``"blocks.<rest>"``). Arrays outside
    the blocks are kept; a part not given for every block, or with different shapes in different
    blocks, is kept per block, so that :func:`fill` names it.
    """
    out, per_part = {}, {}
    for name, value in arrays.items():
        match = re.fullmatch(r"blocks\.(\d+)\.(.+)", name)
        if match is None:
            out[name] = value
        else:
            per_part.setdefault(match[2], {})[int(match[1])] = value
    for part, by_block in per_part.items():
        values = [by_block.get(m) for m in range(num_blocks)]
        if len(by_block) == num_blocks and all(v is not None for v in values):
            if len({np.shape(v) for v in values}) == 1:
                out[f"blocks.{part}"] = np.stack([np.asarray(v) for v in values])
                continue
        out.update({f"blocks.{m}.{part}": v for m, v in by_block.items()})
    return out


def language_model_from_arrays(config: LMConfig, arrays: Mapping[str, ArrayLike]) -> LanguageModel:
    """A :class:`LanguageModel` of ``config`` holding ``arrays`` (paths of the loop's layout).

    ``arrays`` name each block's weights ``"blocks.<m>.<rest>"`` whether or not
    ``config.scan_blocks`` is set; they are stacked when it is.

    Raises:
        ValueError: from :func:`fill`, when the arrays do not fill the model.
    """
    skeleton = eqx.filter_eval_shape(LanguageModel, config, key=jax.random.PRNGKey(0))
    if config.scan_blocks:
        arrays = stack_blocks(arrays, config.num_blocks)
    return fill(skeleton, arrays)
