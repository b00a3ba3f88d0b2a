"""The PDF printer (scripts/print_pdf.py) on a small page shaped like Sphinx's single-page build.

`make pdf` prints the whole book; this checks what the printer does to a page, in seconds: each
exercise's solution leaves its dropdown for a "Solutions" section at the end of its chapter,
headed by the exercise's number, and the checks on the printed PDF reject a missing chapter and an
unresolved reference.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "print_pdf.py"

PAGE = """<!doctype html><html><head><meta charset="utf-8"></head><body>
<span id="document-book/01_first"></span><section><h1>1. First chapter</h1>
<p>Some prose.</p>
<h2>Exercises</h2>
<ol><li>Question one.</li></ol>
<details class="sd-dropdown"><summary>Solution</summary>
<div class="sd-summary-content"><p>ANSWER-ONE</p></div></details>
<ol start="2"><li>Question two.</li></ol>
<details class="sd-dropdown"><summary>Solution</summary>
<div class="sd-summary-content"><p>ANSWER-TWO</p></div></details>
<p>Last words of the first chapter.</p>
</section>
<span id="document-book/02_second"></span><section><h1>2. Second chapter</h1>
<p>{second}</p></section>
</body></html>"""


def load_printer():
    spec = importlib.util.spec_from_file_location("print_pdf", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def text_of(printer, pdf: Path) -> str:
    reader = printer.PdfReader(pdf)
    return re.sub(r"\s+", " ", " ".join(page.extract_text() or "" for page in reader.pages))


def printed(printer, folder: Path, second: str) -> tuple[Path, dict]:
    """The small page, its second chapter saying ``second``, printed to a PDF in ``folder``."""
    page = folder / "print.html"
    page.write_text(PAGE.format(second=second))
    data, report = printer.print_page(page)
    pdf = folder / "out.pdf"
    pdf.write_bytes(data)
    return pdf, report


def test_solutions_move_to_the_end_of_their_chapter(tmp_path):
    printer = load_printer()
    pdf, report = printed(printer, tmp_path, "More prose.")
    text = text_of(printer, pdf)
    assert report["moved"] == 2
    assert report["chapters"] == ["1. First chapter", "2. Second chapter"]
    # after the chapter's own last words, before the next chapter, numbered
    order = [
        text.index(s) for s in ("Last words", "Solutions", "Exercise 1", "ANSWER-ONE", "Exercise 2")
    ]
    assert order == sorted(order), text
    assert text.index("ANSWER-TWO") < text.index("2. Second chapter")
    assert printer.problems(pdf, report, min_pages=1) == []


def test_the_checks_reject_a_missing_chapter_and_an_unresolved_reference(tmp_path):
    printer = load_printer()
    pdf, report = printed(printer, tmp_path, "See section ??.")
    report = {**report, "chapters": report["chapters"] + ["3. A chapter never written"]}
    found = printer.problems(pdf, report, min_pages=50)
    assert any("A chapter never written" in p for p in found)
    assert any("??" in p for p in found)
    assert any("fewer than 50" in p for p in found)
