"""Give every chapter's self-check questions a cell that shows them in Jupyter.

The HTML book shows a chapter's questions where its Markdown has
``<div class="book-quiz" data-quiz="KEY">`` (quiz.js replaces the placeholder). In Jupyter that
placeholder is only its fallback sentence. For every notebook with such a placeholder this
script

- rewrites the fallback sentence (``<p class="bq-fallback">``) to send a Jupyter reader to the
  next cell; the HTML book, with JavaScript on, shows the questions in its place;
- inserts right after that Markdown cell, or refreshes if it is there, a code cell tagged
  ``remove-cell`` (the HTML book, which has the interactive questions, leaves it out) that calls
  ``transformer_intro.exercises.quiz.quiz(KEY)``, with the output stored as the kernel
  produces it: the ``repr`` of the chapter's questions as text, and their HTML. It computes them
  in this process with the same function, so nbval's comparison of a fresh run passes.

Running it twice changes nothing. A notebook is written to a temporary file beside it and moved
into place, and only when it changed.

Usage::

    python scripts/quiz_cells.py                 # every book/*.ipynb
    python scripts/quiz_cells.py book/08_vision_transformer.ipynb
    python scripts/quiz_cells.py --check         # exit 1, naming them, if any would change
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

from transformer_intro import files
from transformer_intro.exercises.quiz import Quiz, load_quizzes

REPO = Path(__file__).resolve().parents[1]
PLACEHOLDER = re.compile(r'<div class="book-quiz" data-quiz="([^"]+)">')
FALLBACK = re.compile(r'<p class="bq-fallback">.*?</p>', re.DOTALL)
FALLBACK_TEXT = (
    '<p class="bq-fallback">In Jupyter, run the next cell to see these questions, and check '
    "your answers there. The HTML book shows them here, with JavaScript on.</p>"
)
IMPORT = "from transformer_intro.exercises.quiz import quiz"
TAG = "remove-cell"


def cell_source(key: str) -> str:
    return f'{IMPORT}\n\nquiz("{key}")'


def is_quiz_cell(cell) -> bool:
    return cell.cell_type == "code" and cell.source.lstrip().startswith(IMPORT)


def quiz_outputs(chapter: Quiz, execution_count: int) -> list:
    """The outputs a kernel stores for ``quiz(key)`` as a cell's last line."""
    return [
        nbformat.v4.new_output(
            "execute_result",
            data={"text/html": chapter._repr_html_(), "text/plain": repr(chapter)},
            execution_count=execution_count,
        )
    ]


def previous_count(cells: list, index: int) -> int:
    for cell in reversed(cells[:index]):
        if cell.cell_type == "code" and cell.get("execution_count"):
            return cell.execution_count
    return 0


def update_notebook(nb, quizzes: dict) -> list[str]:
    """Put the quiz cells in ``nb`` in place; return what changed, one line each."""
    changes = []
    index = 0
    while index < len(nb.cells):
        cell = nb.cells[index]
        match = PLACEHOLDER.search(cell.source) if cell.cell_type == "markdown" else None
        if not match:
            index += 1
            continue
        key = match.group(1)
        if key not in quizzes:
            raise ValueError(
                f"cell {index} asks for the quiz {key!r}, which _interactive/quizzes.js does not "
                f"have; its keys are {', '.join(sorted(quizzes))}"
            )
        source = FALLBACK.sub(lambda _: FALLBACK_TEXT, cell.source)
        if source == cell.source and FALLBACK_TEXT not in source:
            source = PLACEHOLDER.sub(lambda m: m.group(0) + FALLBACK_TEXT, source, count=1)
        if source != cell.source:
            cell.source = source
            changes.append(f"cell {index}: fallback sentence")
        following = nb.cells[index + 1] if index + 1 < len(nb.cells) else None
        if following is None or not is_quiz_cell(following):
            following = nbformat.v4.new_code_cell(id=f"quiz-{key}"[:64])
            nb.cells.insert(index + 1, following)
            changes.append(f"cell {index + 1}: quiz cell inserted")
        count = following.get("execution_count") or previous_count(nb.cells, index + 1) + 1
        wanted = {
            "source": cell_source(key),
            "tags": [*(t for t in following.metadata.get("tags", []) if t != TAG), TAG],
            "outputs": quiz_outputs(Quiz(key, quizzes[key]), count),
        }
        if (
            following.source != wanted["source"]
            or following.metadata.get("tags") != wanted["tags"]
            or following.outputs != wanted["outputs"]
            or following.execution_count != count
        ):
            following.source = wanted["source"]
            following.metadata["tags"] = wanted["tags"]
            following.outputs = wanted["outputs"]
            following.execution_count = count
            changes.append(f"cell {index + 1}: quiz cell refreshed")
        index += 2
    return changes


def write_atomically(nb, path: Path) -> None:
    """The notebook, validated, written whole or not at all (transformer_intro.files)."""
    text = nbformat.writes(nb) + "\n"
    nbformat.validate(nbformat.reads(text, as_version=4))
    files.write_atomically(path, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: book/*.ipynb")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if needed")
    parser.add_argument("--quizzes", type=Path, default=None, help="the questions' file")
    args = parser.parse_args(argv)
    quizzes = load_quizzes(args.quizzes)
    paths = args.notebooks or sorted((REPO / "book").glob("*.ipynb"))
    stale = []
    for path in paths:
        if not path.is_file():
            parser.error(f"{path}: no such notebook")
        nb = nbformat.read(path, as_version=4)
        try:
            changes = update_notebook(nb, quizzes)
        except ValueError as error:
            parser.error(f"{path}: {error}")
        if not changes:
            continue
        stale.append(path)
        print(f"{path}: " + "; ".join(changes))
        if not args.check:
            write_atomically(nb, path)
    if args.check and stale:
        print(f"{len(stale)} notebooks need scripts/quiz_cells.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
