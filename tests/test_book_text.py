"""The book speaks to its readers: no project words in its prose, and code that fits the page.

For every chapter (``book/*.ipynb``) and every Markdown page (``book/*.md``):

- the prose, meaning the Markdown cells of a notebook, the figure captions stored in the code
  cells' metadata (``mystnb.figure.caption``) and the text of a ``.md`` page, must not contain
  words that belong to the book's production rather than to its subject: "anchor(s)", "target
  set", "not met", "earlier version(s) of the package", "host pipeline", "benchmark accounting",
  "the issue", "acceptance", "target of 1.75"-style phrasing. Code (fenced blocks and inline
  ``code``), link targets and MyST labels are ignored, so an identifier may contain such a word. A
  short allow-list keeps legitimate uses (a language model's "targets" never match; the
  allow-list covers phrases such as "the target set of symbols");
- every line of a notebook's code cells must be at most 88 characters long, so that it is not
  cut off in the HTML book;
- every repository file the prose cites (``benchmarks/...``, ``book/...``, ``scripts/...``,
  ``src/...``, ``tests/...``), in a chapter, an appendix or the README, is tracked by git, so
  that a reader who follows the citation finds the file (``benchmarks/results/`` is git-ignored:
  a result file there is in the repository only once it has been added by force).

The ``test_detector_*`` tests show that both checks can fail, on synthetic pages.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")  # absent where only the chapters' code runs

REPO = Path(__file__).resolve().parents[1]
BOOK = REPO / "book"
MAX_CODE_LINE = 88

# Words and phrases that describe how the book was produced, not what it teaches.
PROJECT_WORDS = [
    r"\banchors?\b",
    r"\btarget sets?\b",
    r"\bnot met\b",
    r"\bearlier versions? of the package\b",
    r"\bhost pipeline\b",
    r"\bbenchmark accounting\b",
    r"\bthe issue\b",
    r"\bacceptance\b",
    r"\btarget of \d",
]
_PROJECT = re.compile("|".join(f"(?:{p})" for p in PROJECT_WORDS), re.IGNORECASE)

# Legitimate uses of a flagged word: a hit that lies inside a match of one of these is kept.
# Keep this list short; each entry says where the phrase is meant.
ALLOWED = [
    # a sequence model's target alphabet ("the target set of symbols / characters / tokens")
    r"\btarget sets? of (?:symbols|characters|tokens)\b",
]
_ALLOWED = re.compile("|".join(f"(?:{p})" for p in ALLOWED), re.IGNORECASE)

_FENCED = re.compile(r"^(`{3,}|~{3,})[^\n]*\n.*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
_DIRECTIVE_FENCE = re.compile(r"^(`{3,}|:{3,})\{[\w-]+\}[^\n]*$", re.MULTILINE)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK_TARGET = re.compile(r"\]\([^)\s]*\)")
_LABEL = re.compile(r"^\([\w:-]+\)=\s*$", re.MULTILINE)
_OPTION = re.compile(r"^:[\w-]+:.*$", re.MULTILINE)


def prose_only(markdown: str) -> str:
    """Markdown (plain code blocks already removed) without fences, inline code, links, labels.

    A directive such as a dropdown or margin note is written as a fenced block whose opening
    line names the directive (```` ```{dropdown} ````); its body is prose and stays.
    """
    # keep the bodies of directives: drop only their fence lines and option lines
    text = _DIRECTIVE_FENCE.sub("", markdown)
    text = re.sub(r"^(`{3,}|:{3,})[ \t]*$", "", text, flags=re.MULTILINE)
    text = _OPTION.sub("", text)
    text = _INLINE_CODE.sub("", text)
    text = _LINK_TARGET.sub("]", text)
    return _LABEL.sub("", text)


def _code_blocks_removed(markdown: str) -> str:
    """Remove plain fenced code blocks (not directives) before the directive fences go."""
    out, pos = [], 0
    for match in _FENCED.finditer(markdown):
        opening = match.group(0).split("\n", 1)[0]
        if re.match(r"^(`{3,}|~{3,})\{", opening):  # a directive: keep it
            continue
        out.append(markdown[pos : match.start()])
        pos = match.end()
    out.append(markdown[pos:])
    return "".join(out)


def project_words(text: str) -> list[str]:
    """Every project word in ``text`` with some context, allowed uses excepted."""
    prose = prose_only(_code_blocks_removed(text))
    allowed = [m.span() for m in _ALLOWED.finditer(prose)]
    hits = []
    for match in _PROJECT.finditer(prose):
        start, end = match.span()
        if any(a <= start and end <= b for a, b in allowed):
            continue
        context = " ".join(prose[max(0, start - 40) : end + 40].split())
        hits.append(f"{match.group(0)!r} in '...{context}...'")
    return hits


def prose_of_notebook(nb) -> list[tuple[str, str]]:
    """(where, text) for every Markdown cell and every figure caption of a notebook."""
    parts = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            parts.append((f"cell {i} (markdown)", cell.source))
        figure = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
        if isinstance(figure, dict) and figure.get("caption"):
            parts.append((f"cell {i} (figure caption)", figure["caption"]))
    return parts


def long_code_lines(nb, limit: int = MAX_CODE_LINE) -> list[str]:
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for j, line in enumerate(cell.source.splitlines(), start=1):
            if len(line) > limit:
                found.append(f"cell {i}, line {j}: {len(line)} characters")
    return found


def problems_in_page(path: Path) -> list[str]:
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        problems = [
            f"{where}: {hit}"
            for where, text in prose_of_notebook(nb)
            for hit in project_words(text)
        ]
        return problems
    return [f"text: {hit}" for hit in project_words(path.read_text(encoding="utf8"))]


# A repository path as prose cites it: a top-level folder of the repository, then a file or a
# folder. Not part of a longer path or a URL (no word character, dot, slash or hyphen before it);
# a leading ``../`` (a chapter's path relative to book/) is dropped.
_REPO_PATH = re.compile(
    r"(?<![\w./-])(?:\.\./)?((?:benchmarks|book|scripts|src|tests)/[\w./-]*\w/?)"
)


def cited_paths(text: str) -> list[str]:
    """Repository paths cited in ``text`` (Markdown, code spans included); globs are skipped."""
    return [m.group(1) for m in _REPO_PATH.finditer(text) if "*" not in m.group(1)]


def untracked_citations(text: str, tracked: set[str]) -> list[str]:
    """Cited paths that are neither a tracked file nor a folder holding a tracked file."""
    folders = {"/".join(f.split("/")[:i]) for f in tracked for i in range(1, f.count("/") + 1)}
    return [p for p in cited_paths(text) if p.rstrip("/") not in tracked | folders]


def tracked_files() -> set[str]:
    out = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    return set(out.splitlines())


def text_of_page(path: Path) -> str:
    """The prose of a page: a notebook's Markdown cells and figure captions, or a page's text."""
    if path.suffix == ".ipynb":
        return "\n".join(text for _, text in prose_of_notebook(nbformat.read(path, as_version=4)))
    return path.read_text(encoding="utf8")


NOTEBOOKS = sorted(BOOK.glob("*.ipynb"))
PAGES = sorted(BOOK.glob("*.ipynb")) + sorted(BOOK.glob("*.md"))


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_no_project_words(path):
    problems = problems_in_page(path)
    assert not problems, f"{path.name} speaks of the project, not to the reader:\n" + "\n".join(
        problems
    )


@pytest.mark.parametrize("path", PAGES + [REPO / "README.md"], ids=lambda p: p.name)
def test_cited_files_are_in_the_repository(path):
    try:
        tracked = tracked_files()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    missing = untracked_citations(text_of_page(path), tracked)
    assert not missing, f"{path.name} cites files that git does not track:\n" + "\n".join(missing)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_code_lines_fit_the_page(path):
    found = long_code_lines(nbformat.read(path, as_version=4))
    assert not found, f"{path.name}: code lines over {MAX_CODE_LINE} characters:\n" + "\n".join(
        found
    )


# ---------------------------------------------------------------------------------------------
# The checks can fail


def _synthetic_notebook(markdown: str, caption: str = "What to see: a line.", code: str = "x = 1"):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(code)
    cell.metadata["mystnb"] = {"figure": {"name": "fig-x", "caption": caption}}
    nb.cells = [nbformat.v4.new_markdown_cell(markdown), cell]
    return nb


def _notebook_problems(nb) -> list[str]:
    return [hit for _, text in prose_of_notebook(nb) for hit in project_words(text)]


def test_detector_catches_project_words_in_markdown():
    for sentence in [
        "## Against the anchors",
        "The target set for this chapter is 98.5%.",
        "Twice the speed: it is not met.",
        "The accuracies come from earlier versions of the package.",
        "The host pipeline feeds the device.",
        "This closes the issue.",
        "A plot line labelled target of 1.75.",
    ]:
        assert _notebook_problems(_synthetic_notebook(sentence)), sentence


def test_detector_catches_project_words_in_a_caption_and_in_a_dropdown():
    nb = _synthetic_notebook("Plain prose.", caption="What to see: the anchor is passed at 30 s.")
    assert _notebook_problems(nb)
    dropdown = "```{dropdown} Solution\nThe target set was met.\n```"
    assert _notebook_problems(_synthetic_notebook(dropdown))


def test_detector_passes_legitimate_text():
    fine = (
        "The language model predicts its targets, the next characters.\n\n"
        "```python\nmyst_heading_anchors = 3  # code is not prose\n```\n\n"
        "The option `anchor_box` is code too, and the decoder's target set of symbols is allowed."
    )
    assert _notebook_problems(_synthetic_notebook(fine)) == []


def test_detector_catches_long_code_lines():
    nb = _synthetic_notebook("Plain prose.", code="y = 1\n" + "x = " + "1 + " * 30 + "1")
    assert long_code_lines(nb) == ["cell 1, line 2: 125 characters"]
    assert long_code_lines(_synthetic_notebook("Plain prose.")) == []


def test_detector_catches_a_cited_file_that_is_not_tracked():
    tracked = {"benchmarks/lm_ablation.py", "benchmarks/results/lm_ablation.json", "book/intro.md"}
    text = (
        "Written by `benchmarks/lm_ablation.py` to `benchmarks/results/lm_ablation.json`; "
        "an older run is in `benchmarks/results/lm_ablation_2026-11-27.json`, the scripts in "
        "benchmarks/ and the chapter read `../benchmarks/results/lm_ablation.json`. "
        "See https://example.org/src/not_here.py and `book/*.ipynb`."
    )
    assert untracked_citations(text, tracked) == ["benchmarks/results/lm_ablation_2026-11-27.json"]
    assert untracked_citations("See scripts/serve.py.", tracked) == ["scripts/serve.py"]


def _exercise_index():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "exercise_index", REPO / "scripts/exercise_index.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_exercise_index_lists_every_chapters_exercises():
    index = _exercise_index()
    assert (BOOK / "exercise_index.md").read_text() == index.index_text(), (
        "book/exercise_index.md is out of date: run python scripts/exercise_index.py"
    )
    # Every numbered chapter's exercises are there, numbered 1, 2, ... without a gap.
    for notebook in index.chapters():
        _, items, coding = index.exercises(notebook)
        assert len(items) >= 3 and len(coding) >= 3, (notebook.name, items, coding)


def test_the_exercise_index_reads_items_as_the_chapters_write_them(tmp_path):
    cell = {
        "cell_type": "markdown",
        "source": "## Exercises\n\n1. **Bold title.** Then text\n   that wraps.\n"
        "2. A question with\n   no title that runs on for many words, more than twelve, "
        "before its end. More.",
    }
    coding = {"cell_type": "markdown", "source": "**Coding exercise 3.2: the softmax.**"}
    heading = {"cell_type": "markdown", "source": "# A chapter\n"}
    notebook = tmp_path / "03_x.ipynb"
    notebook.write_text(__import__("json").dumps({"cells": [heading, cell, coding]}))
    title, items, found = _exercise_index().exercises(notebook)
    assert title == "A chapter" and found == ["the softmax"]
    assert items == ["Bold title", "A question with no title that runs on for many words, more …"]
