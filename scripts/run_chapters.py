"""Run every chapter's code cells in a plain Python process (no Jupyter), for readers with a GPU.

Each notebook's code cells run in order in one namespace, as a kernel would run them; IPython
magics and shell escapes (lines starting with ``%`` or ``!``) are skipped, and figures are closed
without being shown. Prints, per chapter, how many cells passed and failed and the first failure.

    python scripts/run_chapters.py [book/08_vision_transformer.ipynb ...]
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
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


def run_chapter(path: Path) -> tuple[int, int, str | None]:
    """(passed, failed, first failure) for one notebook, run in its own folder."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    namespace: dict = {"__name__": "__main__", "display": print}
    passed, failed, first = 0, 0, None
    cwd = os.getcwd()
    os.chdir(path.parent)  # chapters read and write paths relative to book/
    try:
        for index, source in enumerate(code_cells(path)):
            try:
                exec(compile(source, f"{path.name}[cell {index}]", "exec"), namespace)
                passed += 1
            except Exception:  # a chapter's failure is reported, not raised
                failed += 1
                if first is None:
                    first = f"cell {index}: " + traceback.format_exc(limit=3).strip()[-1500:]
            finally:
                plt.close("all")
    finally:
        os.chdir(cwd)
    return passed, failed, first


def main(argv: list[str]) -> int:
    paths = [Path(p) for p in argv] or sorted((ROOT / "book").glob("*.ipynb"))
    total_failed = 0
    for path in paths:
        start = time.perf_counter()
        passed, failed, first = run_chapter(path.resolve())
        total_failed += failed
        print(
            f"{path.name}: {passed} cells passed, {failed} failed "
            f"({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
        if first:
            print("  first failure: " + first.replace("\n", "\n    "), flush=True)
    return 1 if total_failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
