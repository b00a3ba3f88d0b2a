"""XLA's loop emitters are asked for only where the installed XLA knows their flag.

jaxlib 0.11 removed the flag, and an XLA given an unknown flag in ``XLA_FLAGS`` stops the process
(chapters 1 to 7, 11 and 12 stopped at their first computation, seen with jaxlib 0.11.2 on a GPU).
Quick compilation (LLVM's level 0) reaches the process that asks and the processes it starts.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from transformer_intro.xla_flags import (
    LOOP_EMITTERS_FLAG,
    ask_for_loop_emitters,
    ask_for_quick_compilation,
    has_loop_emitters,
    with_loop_emitters,
)


@pytest.mark.parametrize(
    "jaxlib_version, known",
    [
        ("0.4.38", True),
        ("0.10.2", True),
        ("0.10.3.dev20261120", True),
        ("0.11.0", False),
        ("0.11.2", False),
        ("1.0.0", False),
    ],
)
def test_the_flag_is_known_up_to_jaxlib_0_10(jaxlib_version, known):
    assert has_loop_emitters(jaxlib_version) is known


def test_an_unreadable_version_is_named():
    with pytest.raises(ValueError, match="'banana'"):
        has_loop_emitters("banana")


def test_the_flag_is_added_once_beside_the_flags_already_set():
    other = "--xla_cpu_max_isa=AVX2"
    assert with_loop_emitters("", "0.10.2") == LOOP_EMITTERS_FLAG
    assert with_loop_emitters(other, "0.10.2") == f"{other} {LOOP_EMITTERS_FLAG}"
    twice = with_loop_emitters(with_loop_emitters(other, "0.10.2"), "0.10.2")
    assert twice.split().count(LOOP_EMITTERS_FLAG) == 1
    assert with_loop_emitters(other, "0.11.2") == other  # a later XLA: left as it was


def test_asking_after_the_first_computation_is_refused():
    import jax.numpy as jnp

    jnp.zeros(1).block_until_ready()  # this session's backend has started
    before = os.environ.get("XLA_FLAGS")
    with pytest.raises(RuntimeError, match="before JAX's first computation"):
        ask_for_loop_emitters()
    assert os.environ.get("XLA_FLAGS") == before


QUICK = """
import os, sys
import jax
from jax._src import compiler
from transformer_intro.xla_flags import ask_for_quick_compilation
if sys.argv[1] == "ask":
    ask_for_quick_compilation()
options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
debug = options.executable_build_options.debug_options
print(debug.xla_backend_optimization_level, debug.xla_llvm_disable_expensive_passes,
      os.environ.get("JAX_DISABLE_MOST_OPTIMIZATIONS"), float(jax.numpy.arange(3.0).sum()))
"""


@pytest.mark.parametrize("ask", [True, False])
def test_quick_compilation_is_level_0_here_and_in_the_processes_started(ask):
    env = {k: v for k, v in os.environ.items() if k != "JAX_DISABLE_MOST_OPTIMIZATIONS"}
    run = subprocess.run(
        [sys.executable, "-c", QUICK, "ask" if ask else "leave"],
        env={**env, "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    level, cheap, inherited, total = run.stdout.split()
    assert total == "3.0"
    if ask:
        assert (level, cheap, inherited) == ("0", "True", "true")
    else:  # negative control: XLA's own default optimises
        assert int(level) > 0 and (cheap, inherited) == ("False", "None")


def test_asking_for_quick_compilation_after_the_first_computation_is_refused():
    import jax
    import jax.numpy as jnp

    jnp.zeros(1).block_until_ready()
    before = jax.config.values["jax_disable_most_optimizations"]
    with pytest.raises(RuntimeError, match="before JAX's first computation"):
        ask_for_quick_compilation()
    assert jax.config.values["jax_disable_most_optimizations"] == before


def _first_computation(xla_flags: str) -> subprocess.CompletedProcess:
    code = "import jax.numpy as jnp; print(float(jnp.arange(3.0).sum()))"
    env = {**os.environ, "XLA_FLAGS": xla_flags, "JAX_PLATFORMS": "cpu"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def test_the_installed_xla_accepts_what_is_asked_for():
    run = _first_computation(with_loop_emitters(""))
    assert run.returncode == 0 and run.stdout.strip() == "3.0", run.stderr[-2000:]


def test_an_unknown_flag_stops_xla():
    # Negative control: why the flag must not reach an XLA that lacks it.
    run = _first_computation("--xla_cpu_no_such_flag_in_any_version=false")
    assert run.returncode != 0 and "Unknown flag" in run.stderr
    if not has_loop_emitters():
        assert _first_computation(LOOP_EMITTERS_FLAG).returncode != 0
