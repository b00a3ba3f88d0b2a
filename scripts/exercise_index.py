"""Write book/exercise_index.md: every chapter's exercises and coding exercises, numbered.

The chapters number their exercises 1, 2, ... under "## Exercises" and their coding exercises
"Coding exercise C.Ck" under "## Coding exercises" (``scripts/renumber_exercises.py`` writes
those numbers); the index numbers the exercises C.k and the coding exercises C.Ck, so that the
two never share a number, and links each list to its section. The appendices' exercises follow,
numbered as each appendix numbers them. Run it after adding or renaming an exercise:

    python scripts/exercise_index.py          # rewrite the index
    python scripts/exercise_index.py --check  # exit 1 if the committed index is out of date

``tests/test_book_text.py`` runs the check.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from transformer_intro.files import write_atomically

REPO = Path(__file__).resolve().parents[1]
INDEX = REPO / "book" / "exercise_index.md"
ITEM = re.compile(r"^(\d+)\. (.*)$")
CODING = re.compile(r"^\*\*Coding exercise (\d+)\.C?(\d+): (.+?)\.?\*\*")
BOLD = re.compile(r"^\*\*(.+?)\.?\*\*")
MAX_WORDS = 12


def _title(text: str) -> str:
    """The exercise's bold title, or else its first sentence, at most MAX_WORDS words."""
    bold = BOLD.match(text)
    if bold:
        return bold.group(1)
    sentence = re.split(r"(?<=[.?])\s", text, maxsplit=1)[0].rstrip(".")
    words = sentence.split()
    if len(words) > MAX_WORDS:
        # never cut inside inline maths or code
        cut = MAX_WORDS
        while cut < len(words) and (
            " ".join(words[:cut]).count("$") % 2 or " ".join(words[:cut]).count("`") % 2
        ):
            cut += 1
        sentence = " ".join(words[:cut]) + (" …" if cut < len(words) else "")
    return sentence


def exercises(notebook: Path) -> tuple[str, list[str], list[str]]:
    """The chapter's title, its exercises' titles and its coding exercises' titles, in order."""
    cells = json.loads(notebook.read_text())["cells"]
    title, section = "", None
    items: list[list[str]] = []
    coding: list[str] = []
    for cell in cells:
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"])
        heading = next((line for line in text.splitlines() if line.startswith("# ")), None)
        if heading and not title:  # a page may open with its label, (appendix-compute)=
            title = heading[2:].strip()
        for line in text.splitlines():
            if line.startswith("## "):
                section = line[3:].strip()
                continue
            if section == "Exercises" and not text.startswith("```"):
                item = ITEM.match(line)
                if item:
                    items.append([item.group(2)])
                elif items and line.startswith("   ") and line.strip():
                    items[-1].append(line.strip())
                elif not line.strip() and items:
                    items.append([])  # a blank line ends an item
        found = CODING.match(text)
        if found:
            coding.append(found.group(3))
    return title, [_title(" ".join(i)) for i in items if i], coding


def chapters() -> list[Path]:
    """The numbered chapters, in order (their file names start with the number)."""
    return sorted(p for p in (REPO / "book").glob("[0-9][0-9]_*.ipynb") if int(p.name[:2]) > 0)


def appendices() -> list[Path]:
    """The appendices that are notebooks, in the order of the table of contents' names."""
    return sorted((REPO / "book").glob("appendix_*.ipynb"))


def index_text() -> str:
    lines = [
        "# Index of exercises",
        "",
        "Every chapter ends with exercises that ask for reasoning, each with a worked solution",
        "that stays folded until opened, and with coding exercises: a function to write, which",
        "the package's `check` runs against the chapter's own version, naming the usual mistakes.",
        "Exercise $C.k$ is the $k$-th exercise of chapter $C$, coding exercise $C$.C$k$ its",
        "$k$-th coding exercise: 8.2 and 8.C2 are two different exercises.",
        "",
    ]
    for notebook in chapters():
        number = int(notebook.name[:2])
        title, items, coding = exercises(notebook)
        if not items and not coding:
            continue
        lines += [f"## {number}. {title}", ""]
        if items:
            lines.append(f"[Exercises]({notebook.name}#exercises):")
            lines += [f"- {number}.{k} {t}" for k, t in enumerate(items, start=1)]
            lines.append("")
        if coding:
            lines.append(f"[Coding exercises]({notebook.name}#coding-exercises):")
            lines += [f"- {number}.C{k} {t}" for k, t in enumerate(coding, start=1)]
            lines.append("")
    for notebook in appendices():
        title, items, coding = exercises(notebook)
        if not items:
            continue
        lines += [f"## {title} (appendix)", "", f"[Exercises]({notebook.name}#exercises):"]
        lines += [f"- {k} {t}" for k, t in enumerate(items, start=1)]
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args()
    text = index_text()
    if args.check:
        if not INDEX.is_file() or INDEX.read_text() != text:
            sys.exit(f"{INDEX.relative_to(REPO)} is out of date: run scripts/exercise_index.py")
        return
    write_atomically(INDEX, text)
    print(f"wrote {INDEX.relative_to(REPO)}")


if __name__ == "__main__":
    main()
