"""Quick compilation for programs that compile much and run little; the loop emitters with it.

Chapters and tests that compile many small programs and run each once or twice ask XLA to optimise
little (:func:`ask_for_quick_compilation`) and XLA:CPU to emit its fusions with the older loop
emitters (``--xla_cpu_use_fusion_emitters=false``), which compile a small program about twice as
fast as the default MLIR emitters (tests/conftest.py gives the measurement). jaxlib 0.11 removed
the loop emitters and their flag, and an XLA given a flag it does not know in ``XLA_FLAGS`` stops
the whole process at its first computation. So the flag is added only for a jaxlib that has it,
0.10 or older.
"""

from __future__ import annotations

import os
from importlib.metadata import version

__all__ = [
    "LOOP_EMITTERS_FLAG",
    "LOOP_EMITTERS_OPTION",
    "ask_for_loop_emitters",
    "ask_for_quick_compilation",
    "has_loop_emitters",
    "with_loop_emitters",
]

LOOP_EMITTERS_FLAG = "--xla_cpu_use_fusion_emitters=false"
#: The same request as one program's compile option (``env_option_overrides``).
LOOP_EMITTERS_OPTION = ("xla_cpu_use_fusion_emitters", False)
LAST_JAXLIB_WITH_LOOP_EMITTERS = (0, 10)


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


def ask_for_quick_compilation() -> None:
    """Ask XLA to compile quickly rather than to optimise, for this process and those it starts.

    For a program that compiles many small programs and runs each once or twice, as most chapters
    do: LLVM's optimisation level 0 without its expensive passes (JAX's
    ``jax_disable_most_optimizations``, which the unit tests use too), and the loop emitters
    (:func:`ask_for_loop_emitters`). On two cores this halves the time of chapters 1 to 7; a
    program that trains for many steps runs slower, so the training chapters do not ask.
    Optimisation changes how fast the code runs, not what it computes in exact arithmetic; the
    last bits of a float may differ, as they do between processors.

    Raises:
        RuntimeError: if JAX has already started its backends (see :func:`ask_for_loop_emitters`).
    """
    ask_for_loop_emitters()
    import jax

    os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] = "true"  # read by the processes it starts
    jax.config.update("jax_disable_most_optimizations", True)
