"""Data-parallel training in two processes on this machine, as on two machines.

    python scripts/two_processes.py --out two.npz [--processes 2] [--timeout 240]

Starts ``--processes`` Python processes (each with ``--devices-per-process`` CPU devices) that
find each other through ``jax.distributed.initialize`` on 127.0.0.1 (each runs
``python -m transformer_intro.demos.multi_process --report``), build one mesh over every
device of every process, and train the small ViT of the test suite for a few steps with
``training.fit`` on that mesh. Each process prints what it sees: its own devices, all devices,
the rows of each batch its devices hold, and the losses. Process 0 writes the losses and the final
parameters to ``--out`` (an .npz file) so that the run can be compared with one process (book
chapter 12 does).

The launcher waits at most ``--timeout`` seconds; if a process fails or the time runs out it
stops every process it started, prints the end of the failing process's error output, and exits
with status 1.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# What every process trains (chapter 12 trains the same in one process to compare).
STEPS, BATCH_SIZE = 3, 16


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reports(text: str) -> str:
    """The lines a worker printed itself, each beginning with "process", from its output.

    Gloo, the CPU collectives library, writes its connection reports to the same output, from
    several threads at once, so that one report can break into another mid-line: its lines are
    not told apart by how they begin, ours are.
    """
    return "".join(line for line in text.splitlines(True) if line.startswith("process "))


def launch(args: argparse.Namespace) -> int:
    """Start the workers, wait for them within the timeout, print what each printed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    env["JAX_PLATFORMS"] = "cpu"  # CPU devices, also on a machine with a GPU
    # The device count is set by each worker. A device's program that splits a matrix product
    # into tasks for the thread pool that the other device's program holds, waiting for it in a
    # collective, would wait forever: keep products on one thread. And on a busy machine one
    # device can reach a collective long after the other: XLA stops the program after 40 s.
    env["XLA_FLAGS"] = (
        "--xla_cpu_multi_thread_eigen=false "
        "--xla_cpu_collective_call_terminate_timeout_seconds=600 "
        "--xla_cpu_collective_call_warn_stuck_timeout_seconds=600"
    )
    port = free_port()
    with tempfile.TemporaryDirectory() as logs:
        workers = []
        for i in range(args.processes):
            out, err = open(Path(logs, f"{i}.out"), "w+"), open(Path(logs, f"{i}.err"), "w+")
            command = [
                sys.executable, "-m", "transformer_intro.demos.multi_process", "--report",
                "--num-processes", str(args.processes), "--process-id", str(i),
                "--port", str(port), "--devices-per-process", str(args.devices_per_process),
                "--steps", str(STEPS), "--batch-size", str(BATCH_SIZE),
                "--timeout", str(int(args.timeout)), "--out", args.out,
            ]  # fmt: skip
            workers.append((subprocess.Popen(command, stdout=out, stderr=err, env=env), out, err))
        deadline = time.monotonic() + args.timeout
        failed, timed_out = None, False
        try:
            while True:
                codes = [w.poll() for w, _, _ in workers]
                failed = next((i for i, code in enumerate(codes) if code), None)
                if failed is not None or all(code == 0 for code in codes):
                    break
                if time.monotonic() > deadline:
                    timed_out = True
                    break
                time.sleep(0.2)
        finally:
            for w, _, _ in workers:
                if w.poll() is None:
                    w.kill()
                w.wait()
        texts = []
        for _, out, err in workers:
            out.seek(0)
            err.seek(0)
            texts.append((out.read(), err.read()))
            out.close()
            err.close()
    for text, _ in texts:
        print(reports(text), end="")
    if timed_out:
        print(f"the {args.processes} processes did not finish within {args.timeout:g} s; "
              "all were stopped", file=sys.stderr)  # fmt: skip
        return 1
    if failed is not None:
        print(f"process {failed} failed (exit status {workers[failed][0].returncode}); all were "
              f"stopped. The end of its error output:\n{texts[failed][1][-3000:]}",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="the .npz file process 0 writes")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--devices-per-process", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=240, help="seconds, for the whole run")
    args = parser.parse_args(argv)
    if args.processes < 2:
        parser.error("--processes must be at least 2 (one process needs no launcher)")
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
