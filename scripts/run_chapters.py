"""Run every chapter's code cells in plain Python processes (no Jupyter), for readers with a GPU.

Each chapter runs in a fresh process of its own, as in a new kernel: its code cells in order, in
one namespace, in the folder ``book/``. IPython magics and shell escapes (lines starting with
``%`` or ``!``) are skipped, figures are closed without being shown, and where IPython is not
installed its ``Markdown`` and ``HTML`` are stood in for by plain text. Prints, per chapter as it
finishes, how many cells passed and failed, the first failure in full and a line for each other.

    python scripts/run_chapters.py [--jobs N] [book/08_vision_transformer.ipynb ...]

With ``--jobs N`` chapters run N at a time, started in the order given. JAX is asked not to
reserve most of the GPU's memory up front, so that the processes can share one GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def code_cells(path: Path) -> list[str]:
    notebook = json.loads(path.read_text())
    cells = []
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
        cells.append("\n".join(lines))
    return cells


IPYTHON_DISPLAY_IMPORT = re.compile(r"^from IPython\.display import (.+)$", re.MULTILINE)


def without_ipython(source: str, namespace: dict) -> str:
    """The cell with its ``from IPython.display import ...`` replaced by plain-text stand-ins.

    Used where IPython is not installed. The stand-ins go into the namespace rather than into a
    module named IPython, since matplotlib takes any such module for a running IPython shell.
    """
    for names in IPYTHON_DISPLAY_IMPORT.findall(source):
        namespace.update({name.strip(): str for name in names.split(",")})
    return IPYTHON_DISPLAY_IMPORT.sub("", source)


def ipython_is_installed() -> bool:
    try:
        import IPython.display  # noqa: F401
    except ImportError:
        return False
    return True


def run_chapter(path: Path) -> tuple[int, list[str]]:
    """(cells passed, one report per failed cell) for one notebook, run in its own folder."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    has_ipython = ipython_is_installed()
    namespace: dict = {"__name__": "__main__", "display": print}
    passed, failures = 0, []
    os.chdir(path.parent)  # chapters read and write paths relative to book/
    for index, source in enumerate(code_cells(path)):
        if not has_ipython:
            source = without_ipython(source, namespace)
        try:
            exec(compile(source, f"{path.name}[cell {index}]", "exec"), namespace)
            passed += 1
        except Exception as error:  # a chapter's failure is reported, not raised
            if failures:  # the first in full, the others in a line each
                failures.append(f"cell {index}: {type(error).__name__}: {error}"[:300])
            else:
                failures.append(f"cell {index}: " + traceback.format_exc(limit=3).strip()[-1500:])
        finally:
            plt.close("all")
    return passed, failures


def run_in_subprocess(path: Path) -> tuple[str, int]:
    """One chapter in a fresh process: (its report, its number of failed cells)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, __file__, "--one", str(path)], env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    lines = done.stdout.strip().splitlines()
    try:
        passed, failures = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):  # the process itself died
        tail = done.stderr[-1500:]
        passed, failures = 0, [f"the process exited with {done.returncode}: {tail}"]
    failed = len(failures)
    report = f"{path.name}: {passed} cells passed, {failed} failed ({seconds:.0f} s)"
    for failure in failures:
        report += "\n  " + failure.replace("\n", "\n    ")
    return report, failed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--jobs", type=int, default=1, help="chapters run at a time")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print("\n" + json.dumps(run_chapter(args.one.resolve())))  # its own last line
        return 0
    paths = [p.resolve() for p in args.notebooks] or sorted((ROOT / "book").glob("*.ipynb"))
    total_failed = 0
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for done in as_completed([pool.submit(run_in_subprocess, path) for path in paths]):
            report, failed = done.result()
            print(report, flush=True)
            total_failed += failed
    return 1 if total_failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
