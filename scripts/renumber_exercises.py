"""Number the chapters' coding exercises apart from their reasoning exercises: 8.C1, 8.C2, ...

A chapter's reasoning exercises are 1, 2, ... under "## Exercises" (exercise 8.1 in the index and
in references); its coding exercises were "Coding exercise 8.1", "8.2", ..., the same numbers.
This script rewrites every Markdown cell's coding-exercise headings, ``**Coding exercise C.k:
title.**``, as ``**Coding exercise C.Ck: title.**``, with C the chapter's number (from the file
name) and k the heading's place among the chapter's coding exercises, and every reference to one
in the prose ("coding exercise 9.3" becomes "coding exercise 9.C3"). The ``check(...)`` calls
need no change: an exercise is found by its function's name, never by its number.

It is idempotent (a heading already numbered C.Ck is rewritten to the same text) and touches
nothing but those Markdown cells' sources: outputs and metadata stay, so a notebook need not be
executed again afterwards. Run it on the chapters, then rewrite the index::

    python scripts/renumber_exercises.py book/[0-9][0-9]_*.ipynb
    python scripts/renumber_exercises.py --check book/[0-9][0-9]_*.ipynb   # exit 1 if not done
    python scripts/exercise_index.py
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from transformer_intro.files import write_atomically

HEADING = re.compile(r"^\*\*Coding exercise (\d+)\.C?(\d+):", re.MULTILINE)
REFERENCE = re.compile(r"\b([Cc]oding exercises?) (\d+)\.(\d+)\b")


def renumbered(text: str, chapter: int, start: int) -> tuple[str, int]:
    """One Markdown cell's text renumbered; ``start`` is how many headings came before."""
    count = start

    def heading(match: re.Match) -> str:
        nonlocal count
        count += 1
        return f"**Coding exercise {chapter}.C{count}:"

    text = HEADING.sub(heading, text)
    text = REFERENCE.sub(lambda m: f"{m.group(1)} {m.group(2)}.C{m.group(3)}", text)
    return text, count


def renumber_notebook(path: Path, write: bool = True) -> list[str]:
    """Renumber one notebook in place; the cells that changed, as 'name, cell i: old -> new'."""
    text = path.read_text()
    notebook = json.loads(text)
    chapter = int(path.name[:2])
    changes, count = [], 0
    for i, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        old = "".join(cell["source"])
        new, count = renumbered(old, chapter, count)
        if new != old:
            first = next(
                (a for a, b in zip(old.splitlines(), new.splitlines()) if a != b), old[:60]
            )
            changes.append(f"{path.name}, cell {i}: {first[:70]}")
            cell["source"] = new.splitlines(keepends=True)
    if changes and write:
        # the layout Jupyter writes (indent 1, UTF-8 kept), written whole or not at all
        out = json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"
        json.loads(out)
        write_atomically(path, out)
    return changes


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("notebooks", nargs="+", type=Path, help="chapters, NN_name.ipynb")
    parser.add_argument("--check", action="store_true", help="report, do not write")
    args = parser.parse_args()
    pending = []
    for path in args.notebooks:
        if not re.match(r"\d\d_", path.name):
            sys.exit(f"{path}: not a numbered chapter (NN_name.ipynb); appendices have none")
        changes = renumber_notebook(path, write=not args.check)
        pending += changes
        for change in changes:
            print(("to renumber: " if args.check else "renumbered: ") + change)
    if args.check and pending:
        sys.exit(f"{len(pending)} cells to renumber: run scripts/renumber_exercises.py")


if __name__ == "__main__":
    main()
