"""scripts/quiz_cells.py: the cell that shows a chapter's questions in Jupyter.

On synthetic notebooks in a temporary folder (never on book/): the script rewrites the
placeholder's fallback sentence, inserts a code cell tagged ``remove-cell`` right after it with
the output ``quiz(KEY)`` gives, refreshes that output when the questions change, changes nothing
when run twice, and names an unknown key with the valid ones. nbval, run on such a notebook in a
fresh kernel, accepts the stored output, and rejects it once a question's text in it is changed
(the control). The new cells pass the book's own checks on notebooks (tests/test_book_text.py:
code lines that fit the page, no production words). A chapter whose notebook already has its quiz
cell must have it up to date (``python scripts/quiz_cells.py --check``).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from test_book_text import long_code_lines, project_words

from transformer_intro.exercises.quiz import load_quizzes

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "quiz_cells.py"


def load_script():
    spec = importlib.util.spec_from_file_location("quiz_cells", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


quiz_cells = load_script()


def chapter_notebook(path: Path, key: str = "01_tokens") -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    first = nbformat.v4.new_code_cell("x = 1\nx", execution_count=1)
    first.outputs = [
        nbformat.v4.new_output("execute_result", {"text/plain": "1"}, execution_count=1)
    ]
    nb.cells = [
        nbformat.v4.new_markdown_cell("# A chapter"),
        first,
        nbformat.v4.new_markdown_cell(
            f'## Check your understanding\n\n<div class="book-quiz" data-quiz="{key}">'
            '<p class="bq-fallback">The self-check questions of this chapter appear here in the '
            "HTML book, with JavaScript on.</p></div>"
        ),
        nbformat.v4.new_markdown_cell("## Exercises"),
    ]
    nbformat.write(nb, path)
    return path


def test_inserts_the_cell_once(tmp_path):
    path = chapter_notebook(tmp_path / "01_tokens.ipynb")
    assert quiz_cells.main([str(path)]) == 0
    nb = nbformat.read(path, as_version=4)
    assert [c.cell_type for c in nb.cells] == ["markdown", "code", "markdown", "code", "markdown"]
    placeholder, cell = nb.cells[2], nb.cells[3]
    assert quiz_cells.FALLBACK_TEXT in placeholder.source
    assert "appear here in the HTML book" not in placeholder.source
    assert cell.source == 'from transformer_intro.exercises.quiz import quiz\n\nquiz("01_tokens")'
    assert cell.metadata["tags"] == ["remove-cell"]
    assert cell.execution_count == 2
    (output,) = cell.outputs
    assert output.output_type == "execute_result"
    questions = load_quizzes()["01_tokens"]
    assert output.data["text/plain"].startswith(f"{len(questions)} questions.")
    assert f"{len(questions)}. " in output.data["text/plain"]
    assert output.data["text/html"].count("<li><p>") == len(questions)
    before = path.read_bytes()
    assert quiz_cells.main([str(path)]) == 0
    assert path.read_bytes() == before, "a second run changed the notebook"
    assert quiz_cells.main(["--check", str(path)]) == 0
    # the book's own checks on notebooks accept the new cells
    assert long_code_lines(nb) == []
    assert [
        hit for c in nb.cells if c.cell_type == "markdown" for hit in project_words(c.source)
    ] == []


def test_refreshes_a_stale_cell(tmp_path):
    path = chapter_notebook(tmp_path / "01_tokens.ipynb")
    quiz_cells.main([str(path)])
    quizzes = json.loads(json.dumps(load_quizzes()))
    quizzes["01_tokens"][0]["question"] = "A question reworded?"
    other = tmp_path / "quizzes.js"
    other.write_text("window.BOOK_QUIZZES = " + json.dumps(quizzes) + ";\n", encoding="utf8")
    assert quiz_cells.main(["--check", "--quizzes", str(other), str(path)]) == 1
    assert quiz_cells.main(["--quizzes", str(other), str(path)]) == 0
    nb = nbformat.read(path, as_version=4)
    assert len(nb.cells) == 5, "refreshed, not inserted again"
    assert "A question reworded?" in nb.cells[3].outputs[0].data["text/plain"]


def test_an_unknown_key_is_named(tmp_path, capsys):
    path = chapter_notebook(tmp_path / "99_x.ipynb", key="99_no_such_chapter")
    with pytest.raises(SystemExit):
        quiz_cells.main([str(path)])
    message = capsys.readouterr().err
    assert "'99_no_such_chapter'" in message and "01_tokens" in message


def nbval(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", *map(str, paths), "-q", "-p", "no:randomly",
         "-p", "no:cacheprovider", "--rootdir", str(paths[0].parent),
         "--nbval-sanitize-with", str(REPO / "book" / "sanitize.cfg")],
        cwd=paths[0].parent, capture_output=True, text=True, timeout=900,
    )  # fmt: skip


def test_nbval_accepts_the_stored_output(tmp_path):
    """One nbval run on two notebooks: one as the script writes it, which must pass, and the
    control, whose stored output differs from the kernel's in one character, which must fail."""
    pytest.importorskip("nbval")
    path = chapter_notebook(tmp_path / "08_vision_transformer.ipynb", "08_vision_transformer")
    quiz_cells.main([str(path)])
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if quiz_cells.is_quiz_cell(c))
    cell.outputs[0].data["text/plain"] = cell.outputs[0].data["text/plain"].replace("1.", "1 .", 1)
    control = tmp_path / "control.ipynb"
    nbformat.write(nb, control)
    run = nbval(path, control)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-2000:]
    assert "1 failed, 3 passed" in summary, run.stdout[-4000:]
    assert "control.ipynb::Cell 1" in run.stdout, run.stdout[-4000:]
    assert "08_vision_transformer.ipynb::" not in run.stdout.split("short test summary")[-1]


def test_the_books_quiz_cells_are_up_to_date():
    notebooks = sorted((REPO / "book").glob("*.ipynb"))
    quizzes = load_quizzes()
    stale = []
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        if "book-quiz" not in "".join(c.source for c in nb.cells if c.cell_type == "markdown"):
            continue
        if quiz_cells.update_notebook(nb, quizzes):
            stale.append(path.name)
    assert not stale, f"run python scripts/quiz_cells.py: {stale}"
