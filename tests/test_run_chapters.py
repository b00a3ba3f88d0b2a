"""scripts/run_chapters.py, the GPU check's chapter runner, on small notebooks of its own.

Each notebook runs in a fresh process; a failing cell is counted and named, and the cells after it
still run. Where IPython is absent, ``from IPython.display import ...`` gets plain-text stand-ins,
and matplotlib must still draw (it takes any module named IPython for a running IPython shell).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "run_chapters.py"


def runner():
    spec = importlib.util.spec_from_file_location("run_chapters", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def notebook(folder: Path, name: str, cells: list[str]) -> Path:
    path = folder / name
    path.write_text(
        json.dumps(
            {
                "cells": [{"cell_type": "code", "source": source} for source in cells]
                + [{"cell_type": "markdown", "source": "not code"}],
                "metadata": {},
                "nbformat": 4,
                "nbformat_minor": 5,
            }
        )
    )
    return path


def run(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120
    )


def test_passing_and_failing_cells_are_counted_and_named(tmp_path):
    good = notebook(tmp_path, "good.ipynb", ["x = 2", "%matplotlib inline\nassert x == 2"])
    bad = notebook(
        tmp_path,
        "bad.ipynb",
        ["y = 1", "assert y == 2, 'y is not two'", "z = y + 1", "raise KeyError('w')", "y"],
    )
    done = run("--jobs", 2, good, bad)
    assert done.returncode == 1, done.stderr
    assert "good.ipynb: 2 cells passed, 0 failed" in done.stdout
    assert "bad.ipynb: 3 cells passed, 2 failed" in done.stdout
    assert "AssertionError: y is not two" in done.stdout  # the first failure, in full
    assert "cell 3: KeyError: 'w'" in done.stdout  # the others, a line each


def test_all_passing_exits_zero(tmp_path):
    done = run(notebook(tmp_path, "good.ipynb", ["import math", "assert math.pi > 3"]))
    assert done.returncode == 0, done.stdout + done.stderr


def test_without_ipython_its_display_names_become_text():
    namespace: dict = {}
    source = "import math\nfrom IPython.display import HTML, Markdown\nMarkdown('**a**')\n"
    rewritten = runner().without_ipython(source, namespace)
    assert "IPython" not in rewritten and "import math" in rewritten
    assert namespace["Markdown"]("**a**") == "**a**" and namespace["HTML"]("<b>") == "<b>"


def test_a_figure_is_drawn_where_ipython_is_absent(tmp_path):
    # A process where importing IPython fails, as on a machine without Jupyter.
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "IPython.py").write_text("raise ModuleNotFoundError('no IPython here')\n")
    path = notebook(
        tmp_path,
        "figure.ipynb",
        [
            "from IPython.display import Markdown\nimport matplotlib.pyplot as plt",
            "fig, ax = plt.subplots()\nax.plot([0, 1])\nMarkdown('done')",
        ],
    )
    code = (
        "import importlib.util, sys, runpy\n"
        "assert importlib.util.find_spec('IPython').origin.endswith('blocker/IPython.py')\n"
        f"sys.argv = ['run_chapters.py', {str(path)!r}]\n"
        f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(blocker)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert "figure.ipynb: 2 cells passed, 0 failed" in done.stdout, done.stdout + done.stderr
