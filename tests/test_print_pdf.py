"""The PDF printer's front matter (scripts/print_pdf.py), without a browser: the title page's
lines come from the book's configuration files and the contents list parts, chapters and
sections in reading order. tests/browser/test_pdf.py prints them and checks the printed pages."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


def load_printer():
    spec = importlib.util.spec_from_file_location("print_pdf", REPO / "scripts" / "print_pdf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def heading(document, depth, title):
    return {"document": document, "depth": depth, "title": title, "pieces": [title], "html": title}


HEADINGS = [
    heading(None, 0, "Preface"),
    heading(None, 1, "Notation"),
    heading("book/01", 0, "1. One"),
    heading("book/01", 1, "1.1. A section"),
    heading("book/01", 2, "A subsection"),
    heading("book/02", 0, "2. Two"),
    heading("book/a", 0, "Appendix"),
]
PARTS = [("Chapters", ["book/01", "book/02"]), ("Appendices", ["book/a"])]


def test_the_title_page_and_parts_come_from_the_books_configuration():
    printer = load_printer()
    book = printer.read_book(REPO / "_config.yml", REPO / "_toc.yml", REPO / "pyproject.toml")
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    assert (book["title"], book["author"]) == (config["title"], config["author"])
    assert book["root"] == toc["root"]
    assert [caption for caption, _ in book["parts"]] == [p["caption"] for p in toc["parts"]]
    assert sum(len(docs) for _, docs in book["parts"]) == sum(
        len(p["chapters"]) for p in toc["parts"]
    )
    assert "Version" not in book["version"] and book["version"][0].isdigit()


def test_the_contents_list_parts_chapters_and_sections_in_reading_order():
    printer = load_printer()
    book = {"root": "book/intro", "parts": PARTS}
    entries = printer.contents_entries(book, HEADINGS)
    assert [(e["kind"], e["title"], e["heading"]) for e in entries] == [
        ("heading", "Preface", 0),  # the root belongs to no part
        ("heading", "Notation", 1),
        ("part", "Chapters", 2),  # a part points to its first chapter
        ("heading", "1. One", 2),
        ("heading", "1.1. A section", 3),  # no subsections
        ("heading", "2. Two", 5),  # the part is not repeated
        ("part", "Appendices", 6),
        ("heading", "Appendix", 6),
    ]
    assert entries[2]["shows"] == ["1. One"]


def test_the_front_matter_gives_each_entry_its_page_and_link():
    printer = load_printer()
    book = {
        "root": "book/intro",
        "parts": PARTS,
        "title": "A <b>book</b>",
        "subtitle": "sub",
        "author": "Someone",
        "version": "1.2.3",
    }
    entries = printer.contents_entries(book, HEADINGS)
    pages = [1, 2, 5, 5, 6, 9, 12]
    markup = printer.front_matter(book, entries, pages)
    assert "A &lt;b&gt;book&lt;/b&gt;" in markup and "Version 1.2.3" in markup
    assert markup.index('class="title-page"') < markup.index("<h1>Contents</h1>")
    for entry in entries:
        line = f'href="{printer.CONTENTS_LINK}{entry["heading"]}"'
        assert line in markup
        after = markup[markup.index(line) :]
        number = after[after.index('class="toc-page">') + len('class="toc-page">') :]
        assert number.startswith(f"{pages[entry['heading']]}</span>"), (entry, number[:20])


def test_a_configuration_without_an_author_is_refused_with_the_fix(tmp_path):
    printer = load_printer()
    config = tmp_path / "_config.yml"
    config.write_text('title: "A book"\n')
    with pytest.raises(SystemExit, match="has no author: .* add `author: ...`"):
        printer.read_book(config, REPO / "_toc.yml", REPO / "pyproject.toml")
