"""Checked coding exercises: write a function a chapter derives, then ``check`` it.

In a chapter, a cell gives the signature of a function with ``raise NotImplementedError`` as its
body, and ends with ``check(the_function)``; replace the ``raise`` with your code and run the cell.
The answer is one short paragraph::

    PASS: Scaled, masked attention weights (3 cases, properties: columns sum to one, ...).

or the first case your function gets wrong, with the usual mistake by name when it is one::

    FAIL on case 'self-attention, N = 5, K = 4': no 1/sqrt(K) scale: divide the scores ...

The exercise is found from the function's name (the name the cell gives it), or named
explicitly: ``check(my_function, "causal_mask_by_hand")``. Every exercise is also an object with
a ``check`` method: ``EXERCISES["causal_mask_by_hand"].check(my_function)``. ``check`` returns a
:class:`~.core.Result`; a notebook shows it, a script prints it (``print(check(f))``), and
``bool(result)`` says whether it passed. Nothing here needs IPython, so the same calls work in
Jupyter, in a plain Python process and in the book's live-code mode.

The reference solutions, written as the chapters write them, are in :mod:`.solutions`.
"""

from __future__ import annotations

from collections.abc import Callable

from . import (
    ch01,
    ch02,
    ch03,
    ch04,
    ch05,
    ch06,
    ch07,
    ch08,
    ch09,
    ch10,
    ch11,
    ch12,
    ch13,
    ch14,
    ch15,
    ch16,
    ch17,
    ch18,
    ch19,
    ch20,
)  # fmt: skip
from .core import NOT_WRITTEN, Case, Diagnosis, Exercise, Property, Result

__all__ = [
    "EXERCISES",
    "NOT_WRITTEN",
    "Case",
    "Diagnosis",
    "Exercise",
    "Property",
    "Result",
    "check",
    "exercises_for_chapter",
]

_MODULES = (ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08,
            ch09, ch10, ch11, ch12, ch13, ch14, ch15, ch16, ch17, ch18, ch19, ch20)  # fmt: skip

#: Every exercise of the book by name, in the order of the chapters.
EXERCISES: dict[str, Exercise] = {e.name: e for m in _MODULES for e in m.EXERCISES}


def exercises_for_chapter(chapter: int) -> list[Exercise]:
    """The exercises of one chapter, in the order the chapter poses them."""
    return [e for e in EXERCISES.values() if e.chapter == chapter]


def check(fn: Callable, exercise: str | Exercise | None = None) -> Result:
    """Check a function against its exercise and return the verdict.

    Args:
        fn: your function.
        exercise: the exercise, by name or as an object; by default the one named like ``fn``.

    Returns:
        A :class:`~.core.Result` whose text is ``PASS: ...``, ``FAIL on case ...: <what is
        wrong>`` or "Not written yet: ..." (for a function that still raises
        ``NotImplementedError``). Errors in ``fn`` are reported in the result, never raised.

    Raises:
        ValueError: if no exercise has that name.
    """
    if not isinstance(exercise, Exercise):
        name = exercise if exercise is not None else getattr(fn, "__name__", "")
        if name not in EXERCISES:
            raise ValueError(
                f"no exercise is called {name!r}: name it, e.g. check(my_function, "
                f"'column_softmax'); the names are in transformer_intro.exercises.EXERCISES"
            )
        exercise = EXERCISES[name]
    return exercise.check(fn)
