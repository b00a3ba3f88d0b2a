"""A chapter's first run with the book's quick compilation and without it.

Every chapter's first cell calls ``ask_for_quick_compilation()``
(:mod:`transformer_intro.xla_flags`): XLA compiles most programs at LLVM's level 0 with its older
loop emitters, and only the long loops (training, decoding, evaluation, marked ``optimised_jit``)
with its full optimisation. This measures what that buys a reader: each chapter is executed top
to bottom in a fresh kernel, as committed and with that one call removed (XLA's defaults for
every program), the two alternating, ``--repeats`` times. Each run gets an empty persistent
compilation cache, as a reader's first run has.

    python benchmarks/quick_compilation.py [--chapters 03 06 09 14] [--repeats 2]
        [--out benchmarks/results/quick_compilation.json]

Prints each chapter's median wall time per variant and their ratio, and writes every run with
the machine and the load average before it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from report import machine, write_json

REPO = Path(__file__).resolve().parents[1]
BOOK = REPO / "book"
CALL = "ask_for_quick_compilation()"


def chapter(prefix: str) -> Path:
    """The notebook whose name starts with ``prefix`` (``09`` -> book/09_language_model.ipynb)."""
    found = sorted(BOOK.glob(f"{prefix}*.ipynb"))
    if len(found) != 1:
        raise SystemExit(f"--chapters {prefix}: expected one notebook, found {len(found)}")
    return found[0]


def variant(notebook: Path, quick: bool) -> dict:
    """The notebook as committed (quick), or without its call for quick compilation."""
    nb = json.loads(notebook.read_text())
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and CALL in source:
            if not quick:
                cell["source"] = source.replace(CALL, "pass  # XLA's defaults, for this benchmark")
            return nb
    raise SystemExit(f"{notebook.name} does not call {CALL}")


def execute(notebook: Path, quick: bool) -> dict:
    """Wall seconds to execute one variant of the notebook in a fresh kernel and cache."""
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as cache:
        copy = BOOK / f".bench_{notebook.stem}_{'quick' if quick else 'default'}.ipynb"
        copy.write_text(json.dumps(variant(notebook, quick)))
        env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": cache}
        try:
            tic = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "jupyter", "execute", "--timeout=1800", copy.name],
                cwd=BOOK, env=env, check=True, capture_output=True,
            )  # fmt: skip
            seconds = time.perf_counter() - tic
        finally:
            copy.unlink(missing_ok=True)
    return {"notebook": notebook.name, "quick": quick, "seconds": seconds, "load": load}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chapters", nargs="+", default=["03", "06", "09", "14"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    notebooks = [chapter(p) for p in args.chapters]
    runs = []
    for r in range(args.repeats):
        for notebook in notebooks:
            for quick in (True, False) if r % 2 == 0 else (False, True):
                runs.append(execute(notebook, quick))
                row = runs[-1]
                print(f"{row['notebook']:40s} quick={row['quick']!s:5s} {row['seconds']:7.1f} s")
    summary = {}
    for notebook in notebooks:
        times = {
            q: statistics.median(r["seconds"] for r in runs if r["notebook"] == notebook.name
                                 and r["quick"] == q)
            for q in (True, False)
        }  # fmt: skip
        summary[notebook.name] = {
            "quick_s": times[True],
            "default_s": times[False],
            "default_over_quick": times[False] / times[True],
        }
        print(f"{notebook.name:40s} quick {times[True]:6.1f} s, XLA's defaults "
              f"{times[False]:6.1f} s: x{times[False] / times[True]:.2f}")  # fmt: skip
    if args.out:
        result = {"machine": machine(), "repeats": args.repeats, "runs": runs, "summary": summary}
        print("wrote", write_json(args.out, result))


if __name__ == "__main__":
    main()
