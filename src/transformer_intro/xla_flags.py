"""Quick compilation for programs that compile much and run little; the loop emitters with it.

Chapters and tests that compile many small programs and run each once or twice ask XLA to optimise
little (:func:`ask_for_quick_compilation`) and XLA:CPU to emit its fusions with the older loop
emitters (``--xla_cpu_use_fusion_emitters=false``), which compile a small program about twice as
fast as the default MLIR emitters (tests/conftest.py gives the measurement). jaxlib 0.11 removed
the loop emitters and their flag, and an XLA given a flag it does not know in ``XLA_FLAGS`` stops
the whole process at its first computation. So the flag is added only for a jaxlib that has it,
0.10 or older.

A program that runs long (a training loop of many steps, a decoding loop) is worth XLA's full
optimisation even in such a process: :func:`optimised_jit` compiles it so.
"""

from __future__ import annotations

import functools
import os
from importlib.metadata import version

import equinox as eqx
import jax

__all__ = [
    "LOOP_EMITTERS_FLAG",
    "LOOP_EMITTERS_OPTION",
    "ask_for_loop_emitters",
    "ask_for_quick_compilation",
    "full_optimisation",
    "has_loop_emitters",
    "optimised_jit",
    "with_loop_emitters",
]

LOOP_EMITTERS_FLAG = "--xla_cpu_use_fusion_emitters=false"
#: The same request as one program's compile option (``env_option_overrides``).
LOOP_EMITTERS_OPTION = ("xla_cpu_use_fusion_emitters", False)
LAST_JAXLIB_WITH_LOOP_EMITTERS = (0, 10)

_long_programs_optimised = False


def has_loop_emitters(jaxlib_version: str | None = None) -> bool:
    """Whether a jaxlib (by default the installed one) still knows the loop emitters' flag."""
    release = (jaxlib_version or version("jaxlib")).split(".")[:2]
    try:
        major, minor = int(release[0]), int(release[1])
    except (IndexError, ValueError):
        raise ValueError(f"cannot read a jaxlib version from {jaxlib_version!r}") from None
    return (major, minor) <= LAST_JAXLIB_WITH_LOOP_EMITTERS


def with_loop_emitters(xla_flags: str, jaxlib_version: str | None = None) -> str:
    """``xla_flags`` with the loop emitters asked for, where that jaxlib has them."""
    if not has_loop_emitters(jaxlib_version) or LOOP_EMITTERS_FLAG in xla_flags.split():
        return xla_flags
    return " ".join(filter(None, [xla_flags.strip(), LOOP_EMITTERS_FLAG]))


def ask_for_loop_emitters() -> None:
    """Add the loop emitters' flag to this process's ``XLA_FLAGS``, where XLA has them.

    Raises:
        RuntimeError: if JAX has already started its backends, which read ``XLA_FLAGS`` once:
            the flag would be ignored without a word.
    """
    from jax._src import xla_bridge  # JAX has no public question for this

    if xla_bridge.backends_are_initialized():
        raise RuntimeError(
            "ask_for_loop_emitters() must run before JAX's first computation, which has happened: "
            "call it at the top of the program (in a notebook, restart the kernel)"
        )
    os.environ["XLA_FLAGS"] = with_loop_emitters(os.environ.get("XLA_FLAGS", ""))


def ask_for_quick_compilation(*, except_long_programs: bool = True) -> None:
    """Ask XLA to compile quickly rather than to optimise, but for the programs that run long.

    For a program that compiles many small programs and runs each once or twice, as the chapters
    do: LLVM's optimisation level 0 without its expensive passes (JAX's
    ``jax_disable_most_optimizations``, which the unit tests use too), and the loop emitters
    (:func:`ask_for_loop_emitters`). The programs that run for long (a training loop, a decoding
    loop, an evaluation: those compiled by :func:`optimised_jit`) keep XLA's full optimisation,
    so that a chapter which trains for minutes trains at full speed. Processes started from
    this one compile every program quickly (the environment carries JAX's setting, not this
    exception). Optimisation changes how fast the code runs, not what it computes in exact
    arithmetic; the last bits of a float may differ, as they do between processors.

    Args:
        except_long_programs: False compiles the long programs quickly too, for a process whose
            training runs last a few steps, so that compiling them is still the cost (chapter
            12's, on eight devices).

    Raises:
        RuntimeError: if JAX has already started its backends (see :func:`ask_for_loop_emitters`).
    """
    global _long_programs_optimised
    ask_for_loop_emitters()
    os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] = "true"  # read by the processes it starts
    jax.config.update("jax_disable_most_optimizations", True)
    _long_programs_optimised = except_long_programs


def full_optimisation() -> dict[str, object]:
    """XLA's default compile options, as one program's ``compiler_options``.

    Given to ``jax.jit``, they override ``jax_disable_most_optimizations`` for that program.
    """
    options: dict[str, object] = {
        "xla_backend_optimization_level": 3,
        "xla_llvm_disable_expensive_passes": False,
    }
    if has_loop_emitters():
        options[LOOP_EMITTERS_OPTION[0]] = True  # XLA's default, the MLIR emitters
    return options


class _OptimisedJit:
    """Two compiled versions of one function; which runs is decided at each call."""

    def __init__(self, fun, jitkwargs):
        self.quick = eqx.filter_jit(fun, **jitkwargs)
        self.optimised = eqx.filter_jit(fun, compiler_options=full_optimisation(), **jitkwargs)
        functools.update_wrapper(self, fun)

    def _chosen(self, args, kwargs):
        # Called while an outer program is traced (inside jit, eval_shape or scan), it becomes
        # part of that program, which JAX compiles with the outer program's options: it refuses
        # options of its own there.
        traced = any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((args, kwargs)))
        return self.optimised if _long_programs_optimised and not traced else self.quick

    def __call__(self, *args, **kwargs):
        return self._chosen(args, kwargs)(*args, **kwargs)

    def lower(self, *args, **kwargs):
        """``eqx.filter_jit``'s ``lower``, for the version a call would run."""
        return self._chosen(args, kwargs).lower(*args, **kwargs)


def optimised_jit(fun=None, **jitkwargs):
    """``eqx.filter_jit`` for a program that runs long: optimised even under quick compilation.

    A training loop of many steps, a decoding loop or an evaluation over a whole split runs long
    enough for XLA's optimisation to pay for itself, so a process that asked for quick
    compilation (:func:`ask_for_quick_compilation`) compiles it with XLA's full optimisation
    (:func:`full_optimisation`). Elsewhere, as in the unit tests, which ask JAX directly, it is
    plain ``eqx.filter_jit``. Usable as ``@optimised_jit`` or ``@optimised_jit(donate="all")``.
    """
    if fun is None:
        return functools.partial(optimised_jit, **jitkwargs)
    return _OptimisedJit(fun, jitkwargs)
