"""The machinery of the checked exercises: an exercise, its cases and diagnoses, and ``check``.

An :class:`Exercise` names a function a chapter derives, the package's function that computes
the right answer (its *reference*), a list of :class:`Case` inputs (random ones and edge cases),
the :class:`Property` checks the maths promises, and a list of :class:`Diagnosis` entries, each a
known wrong way to write the function. Most diagnoses are a *transformed reference*: the output a
typical mistake gives (the softmax over the other axis, no ``1/sqrt(K)``, the mask shifted by
one), computed from the reference; a reader's output that equals it is named by that mistake.

:meth:`Exercise.check` runs a reader's function on every case and returns a :class:`Result`,
whose text is one short paragraph: ``PASS: ...``, or ``FAIL on case '...': <diagnosis>`` with
the expected and the returned shapes and their largest difference. A function that still raises
``NotImplementedError`` gives "Not written yet" rather than an exception, so that a notebook with
unsolved exercises runs from top to bottom. Nothing here needs IPython: a notebook shows the
result through its ``repr``, a script prints it.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import equinox as eqx
import jax
import numpy as np

__all__ = ["Case", "Diagnosis", "Exercise", "Property", "Result", "NOT_WRITTEN"]

NOT_WRITTEN = "Not written yet: replace `raise NotImplementedError` with your code"
OVERFLOW = "overflows for inputs near 100: subtract the maximum before exponentiating"


@dataclass(frozen=True)
class Case:
    """One input of an exercise.

    Attributes:
        name: what the case is, as the reader sees it in a failure ("causal, N = 5").
        args: the positional arguments.
        kwargs: the keyword arguments.
        large: the inputs are large (near 100), where a formula that is right on paper
            overflows in float32; NaN or inf on such a case only is diagnosed as overflow.
    """

    name: str
    args: tuple = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    large: bool = False


@dataclass(frozen=True)
class Diagnosis:
    """A known wrong implementation, recognised from its output.

    Build one with :meth:`like` (the reader's output equals a transformed reference) or
    :meth:`when` (a test on the reader's output).

    Attributes:
        key: a short identifier, e.g. ``"softmax_over_queries"``.
        message: what the reader is told: the mistake by name, and how to put it right.
        matches: ``matches(got, expected, case) -> bool``.
    """

    key: str
    message: str
    matches: Callable[[Any, Any, Case], bool]

    @classmethod
    def like(cls, key: str, message: str, wrong: Callable, *, rtol=1e-5, atol=1e-5) -> Diagnosis:
        """The mistake whose output is ``wrong(*case.args, **case.kwargs)``.

        Args:
            key: a short identifier.
            message: what the reader is told.
            wrong: the transformed reference; it takes the exercise's arguments.
            rtol: relative tolerance of the comparison.
            atol: absolute tolerance, relative to the size of the wrong output.
        """
        compiled = _compiled(wrong)

        def matches(got, expected, case):
            try:
                wrong_output = compiled(*case.args, **case.kwargs)
            except Exception:  # a transform that does not apply to this case
                return False
            return difference(got, wrong_output, rtol, atol) is None

        return cls(key, message, matches)

    @classmethod
    def when(cls, key: str, message: str, test: Callable[[Any, Any, Case], bool]) -> Diagnosis:
        """The mistake recognised by ``test(got, expected, case)``; an error in it is a no."""

        def matches(got, expected, case):
            try:
                return bool(test(got, expected, case))
            except Exception:
                return False

        return cls(key, message, matches)


@dataclass(frozen=True)
class Property:
    """A fact from the maths that every right output has (columns sum to one, ...).

    Attributes:
        name: the fact, short, as listed after a PASS ("columns sum to one").
        holds: ``holds(got, case) -> bool`` on the reader's output.
        message: what the reader is told when it fails.
    """

    name: str
    holds: Callable[[Any, Case], bool]
    message: str

    def check(self, got, case: Case) -> bool:
        """Whether the property holds of ``got``; an error in the test counts as no."""
        try:
            return bool(self.holds(got, case))
        except Exception:
            return False


@dataclass(frozen=True)
class Result:
    """The outcome of checking one function: its ``str`` and ``repr`` are one short paragraph.

    Attributes:
        exercise: the exercise checked.
        status: ``"pass"``, ``"fail"`` or ``"not written"``.
        case: the name of the first failing case, or None.
        diagnosis: the key of the diagnosis that matched (``"shape"``, ``"transposed"``,
            ``"exception"``, ``"overflow"``, ``"no_return"``, ``"property"``, ``"wrong"`` or
            one of the exercise's own), or None.
        message: the diagnosis as the reader reads it.
        detail: expected against returned: shapes and largest difference.
    """

    exercise: Exercise
    status: str
    case: str | None = None
    diagnosis: str | None = None
    message: str = ""
    detail: str = ""

    @property
    def passed(self) -> bool:
        """True when every case gave the right answer."""
        return self.status == "pass"

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        if self.status == "not written":
            return f"{NOT_WRITTEN} ({self.exercise.title})."
        if self.status == "pass":
            cases = len(self.exercise.all_cases())
            names = ", ".join(p.name for p in self.exercise.properties)
            extra = f", properties: {names}" if names else ""
            return f"PASS: {self.exercise.title} ({cases} cases{extra})."
        text = f"FAIL on case '{self.case}': {self.message}"
        return f"{text}. {self.detail}" if self.detail else f"{text}."

    __repr__ = __str__


def _leaves(value) -> list:
    """A result as a list of arrays (tuples and lists of arrays are several results)."""
    if isinstance(value, tuple) or (
        isinstance(value, list) and value and not np.isscalar(value[0])
    ):
        return [np.asarray(v) for v in value]
    return [np.asarray(value)]


def difference(got, expected, rtol: float = 1e-5, atol: float = 1e-5) -> str | None:
    """None if ``got`` equals ``expected`` within tolerance, else what differs, in words.

    Numbers are compared as ``|got - expected| <= atol * max(1, max |expected|) + rtol *
    |expected|``, never bit for bit, so that the answer is the same on every machine. Mappings
    (counts) must be equal as dictionaries.
    """
    if isinstance(expected, Mapping):
        if not isinstance(got, Mapping):
            return f"a mapping expected, got {type(got).__name__}"
        missing = [k for k in expected if k not in got]
        extra = [k for k in got if k not in expected]
        if missing or extra:
            parts = [f"missing {missing[:3]}"] if missing else []
            parts += [f"unexpected {extra[:3]}"] if extra else []
            return "; ".join(parts)
        for k in expected:
            gap = difference(got[k], expected[k], rtol, atol)
            if gap is not None:
                return f"at {k!r}: {gap}"
        return None
    try:
        got_leaves, expected_leaves = _leaves(got), _leaves(expected)
    except Exception:
        return f"returned {type(got).__name__}, not an array"
    if len(got_leaves) != len(expected_leaves):
        return f"{len(expected_leaves)} results expected, got {len(got_leaves)}"
    for i, (g, e) in enumerate(zip(got_leaves, expected_leaves)):
        which = f"result {i + 1}: " if len(expected_leaves) > 1 else ""
        if g.dtype == object:
            return f"{which}returned {type(got).__name__}, not an array"
        if g.shape != e.shape:
            return f"{which}expected shape {e.shape}, got {g.shape}"
        if e.dtype == bool or g.dtype == bool:
            if not np.array_equal(g.astype(bool), e.astype(bool)) or g.dtype != e.dtype:
                bad = int(np.sum(g != e))
                if g.dtype != e.dtype:
                    return f"{which}expected a {e.dtype} array, got {g.dtype}"
                return f"{which}shape {e.shape}; {bad} of {e.size} entries differ"
            continue
        g64, e64 = g.astype(np.float64), e.astype(np.float64)
        if not np.all(np.isfinite(g64) == np.isfinite(e64)):
            return f"{which}shape {e.shape}; NaN or inf where the expected values are finite"
        finite = np.isfinite(e64)
        if not np.array_equal(g64[~finite], e64[~finite]):
            return f"{which}shape {e.shape}; infinities in the wrong places"
        if not finite.any():
            continue
        gap = np.abs(g64[finite] - e64[finite])
        scale = max(1.0, float(np.max(np.abs(e64[finite]))))
        if np.any(gap > atol * scale + rtol * np.abs(e64[finite])):
            return f"{which}shape {e.shape}; largest difference {float(gap.max()):.3g}"
    return None


def _shape_of(value) -> str:
    try:
        leaves = _leaves(value)
    except Exception:
        return type(value).__name__
    shapes = [tuple(leaf.shape) for leaf in leaves]
    return str(shapes[0]) if len(shapes) == 1 else ", ".join(map(str, shapes))


def _nonfinite(value) -> bool:
    try:
        return any(
            leaf.dtype != object and not np.all(np.isfinite(leaf.astype(np.float64)))
            for leaf in _leaves(value)
        )
    except Exception:
        return False


@dataclass(frozen=True)
class Exercise:
    """A function to write, and how to check it.

    Attributes:
        name: the registry key, and the name of the function the reader writes.
        chapter: the chapter that derives it.
        title: what the function computes, for the reader ("Scaled, masked attention weights").
        reference: the package's answer: a function of the same arguments.
        cases: a function of no arguments that returns the list of :class:`Case` (built on
            first use, so importing the registry computes nothing).
        diagnoses: the known mistakes, tried in order on a wrong output.
        properties: facts of the maths that every right output has.
        output: the expected shape in the book's letters, e.g. ``"(N, D)"``, for messages.
        rtol: relative tolerance of the comparison with the reference.
        atol: absolute tolerance, relative to the size of the expected output.
        run: how a reader's function is called on a case, ``run(fn, *args, **kwargs)``; the
            default calls ``fn(*args, **kwargs)``. An exercise whose function must run inside a
            transformation (``jax.vmap`` with an axis name) sets it.
        overflow: the message for NaN or inf on a case of large inputs only.
    """

    name: str
    chapter: int
    title: str
    reference: Callable
    cases: Callable[[], Sequence[Case]]
    diagnoses: tuple[Diagnosis, ...] = ()
    properties: tuple[Property, ...] = ()
    output: str = ""
    rtol: float = 1e-5
    atol: float = 1e-5
    run: Callable | None = None
    overflow: str = OVERFLOW

    def all_cases(self) -> list[Case]:
        """The cases, built once and kept."""
        built = _CASES.get(self.name)
        if built is None:
            built = _CASES[self.name] = list(self.cases())
        return built

    def expected(self, case: Case):
        """The reference's output on ``case``."""
        compiled = _REFERENCES.get(self.name)
        if compiled is None:
            compiled = _REFERENCES[self.name] = _compiled(self.reference)
        return compiled(*case.args, **case.kwargs)

    def check(self, fn: Callable) -> Result:
        """Run ``fn`` on every case and say whether it is right, and if not, what is wrong.

        Args:
            fn: the reader's function, with the reference's arguments.

        Returns:
            A :class:`Result`: PASS, the first failing case with its diagnosis, or "not
            written yet" when ``fn`` raises ``NotImplementedError``. Exceptions from ``fn`` are
            reported, never raised.
        """
        call = fn if self.run is None else lambda *a, **k: self.run(fn, *a, **k)
        compiled = _compiled(call)
        for case in self.all_cases():
            try:
                got = compiled(*case.args, **case.kwargs)
            except NotImplementedError:
                return Result(self, "not written")
            except Exception as error:  # the reader's code failed: say where and how
                return Result(
                    self,
                    "fail",
                    case.name,
                    "exception",
                    f"your function raised {type(error).__name__}: {_first_line(error)}",
                    _where(error),
                )
            expected = self.expected(case)
            gap = difference(got, expected, self.rtol, self.atol)
            if gap is None:
                broken = [p for p in self.properties if not p.check(got, case)]
                if not broken:
                    continue
                return Result(self, "fail", case.name, "property", broken[0].message, "")
            key, message = self._diagnose(got, expected, case)
            return Result(self, "fail", case.name, key, message, self._detail(got, expected, gap))
        return Result(self, "pass")

    def _detail(self, got, expected, gap: str) -> str:
        """Expected against returned, in one sentence: values, shapes, largest difference."""
        if isinstance(expected, Mapping):
            return gap[0].upper() + gap[1:] + "."
        try:
            g, e = _leaves(got), _leaves(expected)
        except Exception:
            return f"Expected {self._shape_text(expected)}, got {type(got).__name__}."
        if len(g) == len(e) and all(a.shape == b.shape == () for a, b in zip(g, e)):
            show = lambda leaves: ", ".join(f"{leaf.item():.6g}" for leaf in leaves)
            return f"Expected {show(e)}, got {show(g)}."
        if len(g) == len(e) and all(a.shape == b.shape for a, b in zip(g, e)):
            text = f"{self._shape_text(expected)} as expected"
            text = text[0].upper() + text[1:]
            if "largest difference" in gap:
                text += "; largest difference " + gap.rsplit("largest difference ", 1)[1]
            elif "entries differ" in gap:
                text += "; " + gap.rsplit("; ", 1)[1]
            return text + "."
        return f"Expected {self._shape_text(expected)}, got {_shape_of(got)}."

    def _shape_text(self, expected) -> str:
        shape = _shape_of(expected)
        return f"shape {shape} = {self.output}" if self.output else f"shape {shape}"

    def _diagnose(self, got, expected, case: Case) -> tuple[str, str]:
        if got is None:
            return "no_return", "your function returned None: did you forget `return`?"
        for diagnosis in self.diagnoses:
            if diagnosis.matches(got, expected, case):
                return diagnosis.key, diagnosis.message
        if _nonfinite(got) and not _nonfinite(expected):
            if case.large:
                return "overflow", self.overflow
            return "nonfinite", "NaN or inf in your output where the answer is finite"
        try:
            g, e = _leaves(got), _leaves(expected)
        except Exception:
            g = e = None
        if g is not None and len(g) == len(e):
            for a, b in zip(g, e):
                if a.shape == b.shape:
                    continue
                if a.ndim == 2 and a.shape == b.shape[::-1]:
                    if difference(a.T, b, self.rtol, self.atol) is None:
                        return "transposed", (
                            f"shape {b.shape} expected, got {a.shape}: the transpose of the "
                            "answer (tokens are rows in the code, columns in the maths)"
                        )
                return "shape", f"shape {b.shape} expected, got {a.shape}"
        for p in self.properties:
            if not p.check(got, case):
                return "property", p.message
        return "wrong", "the values differ from the answer"


_CASES: dict[str, list[Case]] = {}
_REFERENCES: dict[str, Callable] = {}


def _compiled(fn: Callable) -> Callable:
    """``fn`` compiled once per shape when it can be, else run as it is.

    Many small eager operations each compile on their own, which is slow. Code that branches
    on values or calls NumPy on its arguments cannot be traced; an error raised while tracing
    is raised again, the same, by the plain call.
    """
    jitted = eqx.filter_jit(fn)

    def run(*args, **kwargs):
        with jax.default_matmul_precision("highest"):
            try:
                return jitted(*args, **kwargs)
            except NotImplementedError:
                raise
            except Exception:
                return fn(*args, **kwargs)

    return run


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    line = text[0] if text else ""
    return line if len(line) <= 160 else line[:157] + "..."


def _where(error: BaseException) -> str:
    """The reader's line that raised, when the traceback reaches it (a notebook cell or file)."""
    frames = traceback.extract_tb(error.__traceback__)
    own = [f for f in frames if "transformer_intro" not in f.filename and "jax" not in f.filename]
    if not own or not own[-1].line:
        return ""
    return f"At: {own[-1].line.strip()}"


def columns_sum_to_one(axis: int = 0, atol: float = 1e-5) -> Property:
    """The property of attention weights: each column sums to one over the inputs."""
    return Property(
        "columns sum to one",
        lambda got, case: np.allclose(np.asarray(got).sum(axis), 1.0, atol=atol),
        "the columns do not sum to one: normalise each column A[:, n] over the inputs n'",
    )


def finite() -> Property:
    """The property that the output has no NaN or inf."""
    return Property("finite", lambda got, case: not _nonfinite(got), "NaN or inf in your output")


def close(a, b, rtol: float = 1e-5, atol: float = 1e-5) -> bool:
    """Whether two outputs agree within the exercises' tolerance."""
    return difference(a, b, rtol, atol) is None
