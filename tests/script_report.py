"""A checking script run in a subprocess, and the JSON object it prints on its last line.

Some checks need a process of their own: forced host devices, or an import hook, must be set up
before JAX or the package is first imported, which this test session has done already.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from transformer_intro.xla_flags import with_loop_emitters


def quick_compile(env: dict[str, str]) -> dict[str, str]:
    """``env`` with XLA asked to compile quickly (its own XLA_FLAGS kept).

    As in this process (tests/conftest.py): a checking script compiles many small programs and
    runs each a few times, so XLA is asked for little optimisation and for its quicker loop
    emitters, where it has them.
    """
    flags = with_loop_emitters(env.get("XLA_FLAGS", ""))
    return {**env, "JAX_DISABLE_MOST_OPTIMIZATIONS": "1", "XLA_FLAGS": flags}


def json_report(script: Path, env: dict[str, str], timeout: int = 600) -> dict:
    """Run ``script`` with ``env``; its last line of output, parsed as JSON."""
    result = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])
