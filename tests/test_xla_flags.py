"""XLA's loop emitters are asked for only where the installed XLA knows their flag.

jaxlib 0.11 removed the flag, and an XLA given an unknown flag in ``XLA_FLAGS`` stops the process
(chapters 1 to 7, 11 and 12 stopped at their first computation, seen with jaxlib 0.11.2 on a GPU).
Quick compilation (LLVM's level 0) reaches the process that asks and the processes it starts;
a program compiled by ``optimised_jit`` keeps XLA's full optimisation there.
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
    full_optimisation,
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


def _run_fresh(script: str, argument: str) -> str:
    """The standard output of ``script`` in a new process on the CPU, which has not been asked
    for quick compilation (this session's setting is not inherited)."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_DISABLE_MOST_OPTIMIZATIONS"}
    run = subprocess.run(
        [sys.executable, "-c", script, argument],
        env={**env, "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


@pytest.mark.parametrize("ask", [True, False])
def test_quick_compilation_is_level_0_here_and_in_the_processes_started(ask):
    level, cheap, inherited, total = _run_fresh(QUICK, "ask" if ask else "leave").split()
    assert total == "3.0"
    if ask:
        assert (level, cheap, inherited) == ("0", "True", "true")
    else:  # negative control: XLA's own default optimises
        assert int(level) > 0 and (cheap, inherited) == ("False", "None")


# Each program's optimisation level as JAX hands it to XLA: the process's, and the program's own
# override (None when it has none), which XLA applies on top.
LEVELS = """
import sys
import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jax._src import compiler
from transformer_intro.xla_flags import ask_for_quick_compilation, optimised_jit

if sys.argv[1] != "leave":
    ask_for_quick_compilation(except_long_programs=sys.argv[1] == "ask")
levels = []
original = compiler.get_compile_options


def recording(*args, **kwargs):
    options = original(*args, **kwargs)
    override = dict(options.env_option_overrides).get("xla_backend_optimization_level")
    levels.append((options.executable_build_options.debug_options.xla_backend_optimization_level,
                   override))
    return options


compiler.get_compile_options = recording
x = np.ones(4, np.float32)
for name, jit in [("optimised", optimised_jit), ("plain", eqx.filter_jit)]:
    levels.clear()
    jit(lambda x: jnp.tanh(x).sum()).lower(x).compile()  # a new function: nothing cached
    print(name, *levels[0])
inner = optimised_jit(lambda x: x + 1)  # inside another program: compiled as part of it
print("nested", float(eqx.filter_jit(lambda x: inner(x).sum())(x)),
      eqx.filter_eval_shape(inner, x).shape)
"""


@pytest.mark.parametrize("ask", ["ask", "ask-all", "leave"])
def test_an_optimised_program_keeps_full_optimisation_under_quick_compilation(ask):
    lines = _run_fresh(LEVELS, ask).splitlines()
    levels = {line.split()[0]: line.split()[1:] for line in lines}
    assert levels["nested"] == ["8.0", "(4,)"]
    full = str(full_optimisation()["xla_backend_optimization_level"])
    if ask == "ask":
        assert levels["optimised"] == ["0", full]  # the process's level 0, overridden
        assert levels["plain"] == ["0", "None"]  # negative control: quick, not overridden
    elif ask == "ask-all":  # except_long_programs=False: every program quick
        assert levels["optimised"] == levels["plain"] == ["0", "None"]
    else:  # without quick compilation it is plain filter_jit: XLA's own level, no override
        assert levels["optimised"] == levels["plain"] == [full, "None"]


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
