"""scripts/two_processes.py, the launcher chapter 12 runs: it stops every process it started and
says why when the run fails. (A whole two-process run, compared with one process, is chapter 12's
cell, under nbval.)"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "two_processes.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120
    )


def test_a_run_out_of_time_stops_and_says_so(tmp_path):
    result = run("--out", str(tmp_path / "two.npz"), "--timeout", "0.5")
    assert result.returncode == 1
    assert "did not finish within 0.5 s; all were stopped" in result.stderr
    assert not (tmp_path / "two.npz").exists()


def test_a_failing_process_is_reported_with_its_error(tmp_path):
    # Process 0 refuses to start without a directory to write to; process 1, left waiting for
    # it, is stopped.
    result = run("--out", str(tmp_path / "missing" / "two.npz"), "--timeout", "100")
    assert result.returncode == 1
    assert "process 0 failed (exit status 1)" in result.stderr
    assert "its directory does not exist" in result.stderr


def test_one_process_is_refused():
    result = run("--out", "x.npz", "--processes", "1")
    assert result.returncode == 2 and "at least 2" in result.stderr


def test_only_the_workers_own_lines_are_shown():
    spec = importlib.util.spec_from_file_location("two_processes", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    gloo = "is connected to 1 peer ranks. Expected number of connected peer ranks is : 1\n"
    # a worker's output as one run left it: two of Gloo's threads broke into each other's line
    text = (
        "process 1 of 2: my devices cpu:2048, cpu:2049\n"
        f"[Gloo] Rank [Gloo] Rank 1 {gloo}"
        f"1 {gloo}"
        "3\n"
        "process 1: losses 2.7407 2.3222 2.4006; sum of all parameters 117.9775\n"
    )
    assert script.reports(text) == (
        "process 1 of 2: my devices cpu:2048, cpu:2049\n"
        "process 1: losses 2.7407 2.3222 2.4006; sum of all parameters 117.9775\n"
    )
    # the fragments do not begin as Gloo's lines do: dropping those alone would leave them
    kept = [line for line in text.splitlines() if not line.startswith("[Gloo]")]
    assert len(kept) == 4
