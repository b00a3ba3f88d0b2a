"""The PDF printer (scripts/print_pdf.py) on a small page shaped like Sphinx's single-page build.

`make pdf` prints the whole book; this checks what the printer does to a page, in seconds: each
exercise's solution leaves its dropdown for a "Solutions" section at the end of its chapter,
headed by the exercise's number; the PDF opens with a title page and a contents page whose
numbers are the pages on which the headings are printed, has an outline of parts, chapters and
sections, and numbers its pages as their footers read; and the checks on the printed PDF reject
a missing chapter, an unresolved reference, a PDF without front matter or outline (the PDF
before the front matter was added) and a contents page or an outline whose page is off by one.
The last test reads the built book's PDF, when `make pdf` has made one.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import re
import unicodedata
from pathlib import Path

import pytest
import yaml
from pypdf import PdfReader, PdfWriter

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "print_pdf.py"
MATHJAX = REPO / "_mathjax" / "mathjax" / "tex-mml-chtml.js"
BUILT_PDF = REPO / "_build" / "pdf" / "book.pdf"

LINES = "".join(f"<p>Line {i} of a long section.</p>" for i in range(60))
PAGE = """<!doctype html><html><head><meta charset="utf-8">
<script>window.MathJax = {{tex: {{inlineMath: [["\\\\(", "\\\\)"]]}}}};</script>
<script src="{mathjax}"></script></head><body>
<article class="bd-article"><section id="preface">
<h1>Preface<a class="headerlink" href="#preface">#</a></h1>
<p>The preface's prose.</p>
<section id="notation"><h2>Notation<a class="headerlink" href="#notation">#</a></h2>
<p>One letter, one meaning.</p></section>
<div class="toctree-wrapper compound">
<span id="document-book/01_first"></span><section id="first">
<h2>1. First chapter<a class="headerlink" href="#first">#</a></h2>
<p>Some prose.</p>
<section id="long"><h3>1.1. What a full-width \\(V_h\\) costs</h3>{lines}</section>
<section id="exercises"><h3>1.2. Exercises</h3>
<ol><li>Question one.</li></ol>
<details class="sd-dropdown"><summary>Solution</summary>
<div class="sd-summary-content"><p>ANSWER-ONE</p></div></details>
<ol start="2"><li>Question two.</li></ol>
<details class="sd-dropdown"><summary>Solution</summary>
<div class="sd-summary-content"><p>ANSWER-TWO</p></div></details>
<p>Last words of the first chapter.</p></section>
</section>
<span id="document-book/02_second"></span><section id="second">
<h2>2. Second chapter<a class="headerlink" href="#second">#</a></h2>
<p>{second}</p>
<section id="second-summary"><h3>2.1. Summary</h3>{lines}
<section id="deeper"><h4>A subsection</h4><p>Deep.</p></section></section>
</section>
<span id="document-book/03_third"></span><section id="third">
<h2>3. Third chapter<a class="headerlink" href="#third">#</a></h2>
<section id="third-summary"><h3>3.1. Summary</h3><p>Short.</p></section>
</section>
</div></section></article></body></html>"""

TOC = {
    "format": "jb-book",
    "root": "book/intro",
    "parts": [
        {
            "caption": "Chapters",
            "chapters": [{"file": "book/01_first"}, {"file": "book/02_second"}],
        },
        {"caption": "Back matter", "chapters": [{"file": "book/03_third"}]},
    ],
}

# The outline the small page must get: (depth, title), in order.
OUTLINE = [
    (0, "Contents"),
    (0, "Preface"),
    (1, "Notation"),
    (0, "Chapters"),
    (1, "1. First chapter"),
    (2, "1.1. What a full-width V_h costs"),
    (2, "1.2. Exercises"),
    (2, "Solutions"),
    (1, "2. Second chapter"),
    (2, "2.1. Summary"),
    (3, "A subsection"),
    (0, "Back matter"),
    (1, "3. Third chapter"),
    (2, "3.1. Summary"),
]


def load_printer():
    spec = importlib.util.spec_from_file_location("print_pdf", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def flat(text: str) -> str:
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text))


def text_of(printer, pdf: Path) -> str:
    reader = PdfReader(pdf)
    return re.sub(r"\s+", " ", " ".join(page.extract_text() or "" for page in reader.pages))


def write_page(folder: Path, second: str) -> Path:
    page = folder / "print.html"
    page.write_text(PAGE.format(mathjax=MATHJAX.as_uri(), lines=LINES, second=second))
    return page


def small_book(printer, folder: Path) -> dict:
    toc = folder / "_toc.yml"
    toc.write_text(yaml.safe_dump(TOC))
    return printer.read_book(REPO / "_config.yml", toc, REPO / "pyproject.toml")


def printed(printer, folder: Path, second: str) -> tuple[Path, dict]:
    """The small page's body, its second chapter saying ``second``, printed to a PDF."""
    data, report = printer.print_page(write_page(folder, second))
    pdf = folder / "body.pdf"
    pdf.write_bytes(data)
    return pdf, report


def printed_book(printer, folder: Path) -> tuple[Path, dict]:
    """The small page printed as a book: title page, contents, body, outline."""
    data, report = printer.print_book(
        write_page(folder, "More prose."), small_book(printer, folder)
    )
    pdf = folder / "book.pdf"
    pdf.write_bytes(data)
    return pdf, report


def contents_numbers(contents: str, titles: list[str]) -> list[str]:
    """The page number at the end of the contents' line of each title, read in order; "..."
    in a title stands for mathematics (whose text the PDF holds elsewhere)."""
    numbers, at = [], 0
    for title in titles:
        pieces = [r"\s*".join(map(re.escape, piece.split())) for piece in title.split("...")]
        match = re.compile(r"[^\n]*?".join(pieces) + r"\s*(\d+)[ \t]*$", re.M).search(contents, at)
        assert match, (title, contents)
        numbers.append(match.group(1))
        at = match.end()
    return numbers


def test_solutions_move_to_the_end_of_their_chapter(tmp_path):
    printer = load_printer()
    pdf, report = printed(printer, tmp_path, "More prose.")
    text = text_of(printer, pdf)
    assert report["moved"] == 2
    assert report["chapters"] == ["1. First chapter", "2. Second chapter", "3. Third chapter"]
    # after the chapter's own last words, before the next chapter, numbered
    order = [
        text.index(s) for s in ("Last words", "Solutions", "Exercise 1", "ANSWER-ONE", "Exercise 2")
    ]
    assert order == sorted(order), text
    assert text.index("ANSWER-TWO") < text.index("2. Second chapter")
    # a section of its chapter, as deep as the chapter's other sections
    solutions = next(h for h in report["headings"] if h["title"] == "Solutions")
    assert (solutions["document"], solutions["depth"]) == ("book/01_first", 1)
    assert printer.problems(pdf, report, min_pages=1) == []


def test_the_pdf_opens_with_a_title_page_and_contents_with_the_pages_of_the_headings(tmp_path):
    printer = load_printer()
    pdf, report = printed_book(printer, tmp_path)
    assert printer.problems(pdf, report, min_pages=1) == []
    reader = PdfReader(pdf)
    texts = [page.extract_text() for page in reader.pages]
    labels = reader.page_labels
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    assert flat(config["title"]) in flat(texts[0]) and flat(config["author"]) in flat(texts[0])
    assert labels[:3] == ["i", "ii", "1"] and texts[1].startswith("Contents")
    # The contents' numbers, read from the printed contents, and the pages that show the titles:
    # every chapter starts a page (its title is the page's first line), a section's title is on
    # its page, and each page's footer (its last line) reads its label.
    chapters = ["Preface", "1. First chapter", "2. Second chapter", "3. Third chapter"]
    sections = ["Notation", "1.2. Exercises", "Solutions", "2.1. Summary", "3.1. Summary"]
    for title, number in zip(chapters, contents_numbers(texts[1], chapters), strict=True):
        page = texts[labels.index(number)]
        assert flat(page).startswith(flat(title)), (title, number, page)
    for title, number in zip(sections, contents_numbers(texts[1], sections), strict=True):
        assert flat(title) in flat(texts[labels.index(number)]), (title, number)
    assert "A subsection" not in texts[1]  # the contents stop at sections
    for text, label in zip(texts[2:], labels[2:], strict=True):
        assert text.rstrip().rsplit("\n", 1)[-1].strip() == label
    # The outline: parts, chapters, sections, subsections, each pointing to a page showing it
    # (a part, its first chapter).
    outline = printer.outline_entries(reader)
    assert [(depth, title) for depth, title, _ in outline] == OUTLINE
    for (_, title, dest), (_, below) in zip(outline, OUTLINE[1:] + [(0, "")], strict=True):
        shows = below if title in ("Chapters", "Back matter") else title
        page = reader.get_destination_page_number(dest)
        if title == "Contents":
            assert page == 1
        elif "V_h" in title:
            assert flat("1.1. What a full-width") in flat(texts[page])
        else:
            assert flat(shows) in flat(texts[page]), (title, labels[page])
    # Each contents entry links to its heading's page, in the contents' order.
    index = {page.indirect_reference.idnum: i for i, page in enumerate(reader.pages)}
    links = [ref.get_object() for ref in reader.pages[1].get("/Annots", [])]
    targets = [labels[index[link["/Dest"][0].idnum]] for link in links if "/Dest" in link]
    entries = ["Preface", "Notation", "Chapters", "1. First chapter"]
    entries += ["1.1. What a full-width ... costs", "1.2. Exercises", "Solutions"]
    entries += ["2. Second chapter", "2.1. Summary", "Back matter", "3. Third chapter"]
    entries += ["3.1. Summary"]
    assert len(report["contents"]) == len(entries)
    assert targets == contents_numbers(texts[1], entries)


def test_the_checks_reject_a_pdf_without_title_page_contents_or_outline(tmp_path):
    # The body alone is what `make pdf` printed before the front matter and outline existed.
    printer = load_printer()
    _, report = printed_book(printer, tmp_path)
    body, _ = printed(printer, tmp_path, "More prose.")
    found = printer.problems(body, report, min_pages=1)
    assert any("page 1 is not the title page" in p for p in found), found
    assert any("no contents page" in p for p in found), found
    assert any("no outline" in p for p in found), found


def test_the_checks_reject_pages_off_by_one(tmp_path):
    printer = load_printer()
    book = small_book(printer, tmp_path)
    with printer.browser() as driver:
        report = printer.prepare(driver, write_page(tmp_path, "More prose."))
        body = printer.print_to_pdf(driver, numbered=True)
        places = printer.heading_places(PdfReader(io.BytesIO(body)), report["headings"])
        # the second chapter's heading one page late, in the contents and in the outline
        second = [h["title"] for h in report["headings"]].index("2. Second chapter")
        page, left, top = places[second]
        places[second] = (page + 1, left, top)
        entries = printer.contents_entries(book, report["headings"])
        pages = [page + 1 for page, _, _ in places]
        front = printer.print_front_matter(driver, printer.front_matter(book, entries, pages))
    pdf = tmp_path / "late.pdf"
    pdf.write_bytes(printer.bind(front, body, book, report["headings"], places))
    found = printer.problems(pdf, {**report, "book": book, "contents": entries}, min_pages=1)
    assert len(found) == 2, found
    assert "1 of 12 contents entries" in found[0] and "'2. Second chapter'" in found[0]
    assert "1 of 13 headings" in found[1] and "2. Second chapter" in found[1]

    # page labels that do not follow the footers
    writer = PdfWriter(clone_from=pdf)
    writer.set_page_label(2, len(writer.pages) - 1, style="/D", start=2)
    relabelled = tmp_path / "relabelled.pdf"
    writer.write(relabelled)
    _, report = printed_book(printer, tmp_path)
    found = printer.problems(relabelled, report, min_pages=1)
    assert any("whose footer does not read their page number" in p for p in found), found


def test_the_checks_reject_a_missing_chapter_and_an_unresolved_reference(tmp_path):
    printer = load_printer()
    pdf, report = printed(printer, tmp_path, "See section ??.")
    report = {**report, "chapters": report["chapters"] + ["3. A chapter never written"]}
    found = printer.problems(pdf, report, min_pages=50)
    assert any("A chapter never written" in p for p in found)
    assert any("??" in p for p in found)
    assert any("fewer than 50" in p for p in found)


def test_the_built_pdf_reads_as_a_book():
    """The book's own PDF, read without the printer's report: a title page from _config.yml,
    then the contents; an outline holding every part of _toc.yml with one entry per chapter,
    each pointing to a page that shows the chapter's title, the page the contents give. (Every
    section's page is checked by the printer before it moves the PDF into place, and above on
    the small page; this reads only the pages it needs.)"""
    if not BUILT_PDF.is_file():
        pytest.skip(f"no PDF at {BUILT_PDF}: `make pdf` makes it")
    printer = load_printer()
    reader = PdfReader(BUILT_PDF)

    @functools.cache
    def text(index: int) -> str:
        return unicodedata.normalize("NFKC", reader.pages[index].extract_text() or "")

    labels = reader.page_labels
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    assert flat(config["title"]) in flat(text(0)), "page 1 is not the title page"
    assert flat(config["author"]) in flat(text(0))
    assert "1" in labels and text(1).startswith("Contents"), "no contents page after the title"
    contents = "\n".join(text(i) for i in range(1, labels.index("1")))

    outline = printer.outline_entries(reader)
    assert len(outline) > 250, len(outline)
    captions = [part["caption"] for part in toc["parts"]]
    assert [t for d, t, _ in outline if d == 0 and t in captions] == captions
    chapters, part = [], None  # (part, title, page index) in reading order
    for depth, title, dest in outline:
        if depth == 0:
            part = title if title in captions else None
        if (depth == 1 and part) or (depth == 0 and not part and title != "Contents"):
            chapters.append((part, title, reader.get_destination_page_number(dest)))
    for part in toc["parts"]:
        found = [title for p, title, _ in chapters if p == part["caption"]]
        assert len(found) == len(part["chapters"]), (part["caption"], found)
    numbers = contents_numbers(contents, [title for _, title, _ in chapters])
    for (_, title, page), number in zip(chapters, numbers, strict=True):
        assert labels[page] == number, (title, labels[page], number)
        assert flat(title) in flat(text(page)), (title, text(page)[:200])
