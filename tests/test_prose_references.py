"""What the book cites in its prose exists: tests, modules, functions and source files.

A sentence that says "the package's tests check ``shard_map_step``" or names
``transformer_intro.training.retrace`` makes a promise the reader can follow; when the code moves
on and the sentence does not, nbval cannot notice (the prose runs nothing). This file scans every
chapter (``book/*.ipynb``: the Markdown cells, the figure captions, and the comments and strings
of the code cells) and every Markdown page (``book/*.md``) for four kinds of reference, and
resolves each one:

- ``tests/...py`` and ``tests/...py::name`` (``name`` may be ``Class::method`` or carry a
  parametrisation, ``name[id]``): the file exists, and the test is defined in it;
- ``src/transformer_intro/...py``: the file exists;
- ``transformer_intro.x.y``: the longest prefix that is a module imports, and the rest are its
  attributes (``getattr``); on a chapter, ```alias.name``` in the prose, where the chapter's own
  code imports ``alias`` from the package (``import transformer_intro.relations as rel``,
  ``from transformer_intro import MultiHeadAttention``), is resolved the same way;
- a sentence that says tests check something (a cited ``tests/`` file, "the package's tests",
  "the unit tests", "the test suite"): every code name in backticks in it occurs in that file,
  or in some file of ``tests/`` when the sentence names none.

A failure names the page, the cell (0-based, as nbval counts them) and the reference. The
``test_detector_*`` tests show that each kind of stale reference is caught, and that references
that resolve are not.
"""

from __future__ import annotations

import ast
import importlib
import io
import json
import re
import tokenize
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BOOK = REPO / "book"
TESTS = REPO / "tests"
PAGES = sorted(BOOK.glob("*.ipynb")) + sorted(BOOK.glob("*.md"))

_TEST_PATH = re.compile(r"(?<![\w/.])(tests/[\w/]+\.py)((?:::[\w]+(?:\[[^\]\s`]*\])?)*)")
_SRC_PATH = re.compile(r"(?<![\w/.])(src/transformer_intro/[\w/]+\.py)")
_MODULE = re.compile(r"(?<![\w./])(transformer_intro(?:\.[A-Za-z_]\w*)+)")
_BACKTICKED = re.compile(r"(?<![}`])`([^`\n]+)`")  # not a role's target, {doc}`page`
_DOTTED = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(.*\))?$")
_CODE_NAME = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?:\(.*\))?$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`*(])|\n\s*\n")
# A sentence that says the package's tests check something.
_TEST_CLAIM = re.compile(
    r"(?:\b(?:tests?|test suite)\b|tests/\S+\.py`?)[^.;]{0,40}?"
    r"\b(?:checks?|compares?|covers?|asserts?|confirms?)\b|\btested (?:in|by)\b",
    re.IGNORECASE,
)
_FILE_NAME = re.compile(r"\.(?:py|json|md|ipynb|txt|npz|eqx|cfg|toml|js)$")
THIS_FILE = Path(__file__).resolve()


# ---------------------------------------------------------------------------------------------
# What a page says


def texts_of_page(path: Path) -> list[tuple[int | None, str, str]]:
    """The citing text of a page, as ``(cell, kind, text)``; ``cell`` is None for a .md page.

    ``kind`` is ``"prose"`` (Markdown cells, figure captions, a .md page) or ``"code"`` (the
    comments and string literals of a code cell, where code cites what it follows).
    """
    if path.suffix == ".md":
        return [(None, "prose", path.read_text())]
    texts = []
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            texts.append((i, "prose", source))
        elif cell["cell_type"] == "code":
            texts.append((i, "code", _comments_and_strings(source)))
            caption = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
            if isinstance(caption, dict) and caption.get("caption"):
                texts.append((i, "prose", str(caption["caption"])))
    return texts


def _comments_and_strings(source: str) -> str:
    """The comments and string literals of a code cell, one a line (IPython magics dropped)."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline):
            if token.type in (tokenize.COMMENT, tokenize.STRING):
                found.append(token.string)
            elif getattr(tokenize, "FSTRING_MIDDLE", None) == token.type:
                found.append(token.string)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return "\n".join(lines)  # not Python: search the whole cell
    return "\n".join(found)


def package_aliases(path: Path) -> dict[str, str]:
    """The names a chapter's code binds to the package: ``rel``, ``MultiHeadAttention``."""
    if path.suffix != ".ipynb":
        return {}
    aliases = {}
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "\n".join(
            line
            for line in "".join(cell["source"]).splitlines()
            if not line.lstrip().startswith(("%", "!"))
        )
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for name in node.names:
                    if name.name.split(".")[0] == "transformer_intro":
                        if name.asname:
                            aliases[name.asname] = name.name
                        else:
                            aliases["transformer_intro"] = "transformer_intro"
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "transformer_intro"
            ):
                for name in node.names:
                    aliases[name.asname or name.name] = f"{node.module}.{name.name}"
    return aliases


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text) if s.strip()]


# ---------------------------------------------------------------------------------------------
# Resolving one reference


@cache
def _tests_text(relative: str | None = None) -> str:
    """The text of one tests/ file, or of every one (relative=None)."""
    if relative is not None:
        file = REPO / relative
        return file.read_text() if file.is_file() else ""
    files = sorted(p for p in TESTS.rglob("*.py") if p.resolve() != THIS_FILE)
    return "\n".join(p.read_text() for p in files)


def resolve_test(path: str, names: str = "") -> str | None:
    """None if ``path`` (and ``path::names``) exists, else what is missing."""
    file = REPO / path
    if not file.is_file():
        return f"no file {path}"
    if not names:
        return None
    parts = [re.sub(r"\[.*\]$", "", p) for p in names.strip(":").split("::")]
    body: list[ast.stmt] = ast.parse(file.read_text()).body
    for k, part in enumerate(parts):
        found = [
            node
            for node in body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and node.name == part
        ]
        if not found:
            where = path + "".join("::" + p for p in parts[:k])
            return f"{where} defines no {part}"
        body = found[0].body if isinstance(found[0], ast.ClassDef) else []
    return None


def resolve_source(path: str) -> str | None:
    """None if the source file exists."""
    return None if (REPO / path).is_file() else f"no file {path}"


def resolve_dotted(dotted: str) -> str | None:
    """None if ``a.b.c`` is a module of the package or an attribute of one, else what is missing."""
    parts = dotted.split(".")
    module, k = None, len(parts)
    while k > 0:
        try:
            module = importlib.import_module(".".join(parts[:k]))
            break
        except ModuleNotFoundError as error:
            if error.name is None or not ".".join(parts[:k]).startswith(error.name):
                raise  # a module that exists failed to import: that is not the prose's fault
            k -= 1
    if module is None:
        return f"no module {parts[0]}"
    value = module
    for j in range(k, len(parts)):
        if hasattr(value, parts[j]):
            value = getattr(value, parts[j])
        elif _is_field(value, parts[j]) and j == len(parts) - 1:
            return None  # a module's field (an array each instance holds)
        else:
            return f"{'.'.join(parts[:j])} has no attribute {parts[j]}"
    return None


def _is_field(cls, name: str) -> bool:
    """Whether a class declares ``name`` as a field (a dataclass or Equinox module's array)."""
    if not isinstance(cls, type):
        return False
    return name in getattr(cls, "__dataclass_fields__", {}) or any(
        name in getattr(c, "__annotations__", {}) for c in cls.__mro__
    )


def stale_test_claims(sentence: str) -> list[str]:
    """The code names a sentence says tests check but no cited test file (or none) mentions."""
    if not _TEST_CLAIM.search(sentence):
        return []
    cited = [m.group(1) for m in _TEST_PATH.finditer(sentence)]
    haystack = "\n".join(_tests_text(c) for c in cited) if cited else _tests_text()
    stale = []
    for content in _BACKTICKED.findall(sentence):
        content = content.strip()
        if content.startswith(("tests/", "src/", "benchmarks/", "scripts/", "book/", "make ")):
            continue
        name = _CODE_NAME.match(content)
        if not name or _FILE_NAME.search(content):
            continue
        last = name.group(1).split(".")[-1]
        if not re.search(rf"\b{re.escape(last)}\b", haystack):
            where = " or ".join(cited) if cited else "tests/"
            stale.append(f"`{content}`: the sentence says tests check it; {where} never names it")
    return stale


# ---------------------------------------------------------------------------------------------
# A page's stale references


def stale_references(path: Path) -> list[str]:
    """Every reference on a page that does not resolve, as 'page, cell i: reference: problem'."""
    aliases = package_aliases(path)
    problems = []
    for cell, kind, text in texts_of_page(path):
        where = path.name if cell is None else f"{path.name}, cell {cell}"
        for problem in stale_in_text(text, aliases, claims=kind == "prose"):
            problems.append(f"{where}: {problem}")
    return problems


def stale_in_text(text: str, aliases: dict[str, str] | None = None, claims: bool = True):
    """The stale references in one text, each with its problem."""
    problems = []
    for m in _TEST_PATH.finditer(text):
        problem = resolve_test(m.group(1), m.group(2))
        if problem:
            problems.append(f"{m.group(0)}: {problem}")
    for m in _SRC_PATH.finditer(text):
        problem = resolve_source(m.group(1))
        if problem:
            problems.append(f"{m.group(0)}: {problem}")
    for m in _MODULE.finditer(text):
        problem = resolve_dotted(m.group(1))
        if problem:
            problems.append(f"{m.group(0)}: {problem}")
    for content in _BACKTICKED.findall(text):
        dotted = _DOTTED.match(content.strip())
        head = dotted.group(1).split(".")[0] if dotted else None
        if head and head != "transformer_intro" and head in (aliases or {}):
            full = aliases[head] + dotted.group(1)[len(head) :]
            problem = resolve_dotted(full)
            if problem:
                problems.append(f"`{content}` ({full}): {problem}")
    if claims:
        for sentence in _sentences(text):
            problems += stale_test_claims(sentence)
    return problems


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_every_cited_test_module_and_file_exists(path):
    problems = stale_references(path)
    assert not problems, "stale references in the prose:\n" + "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# The detector can fail, and passes what resolves


def test_detector_catches_a_removed_test():
    assert stale_in_text("See `tests/test_training.py::test_no_such_test`.") == [
        "tests/test_training.py::test_no_such_test: tests/test_training.py defines no "
        "test_no_such_test"
    ]
    assert stale_in_text("See `tests/test_no_such_file.py`.") == [
        "tests/test_no_such_file.py: no file tests/test_no_such_file.py"
    ]


def test_detector_catches_a_missing_module_attribute_and_source_file():
    assert stale_in_text("`transformer_intro.training.no_such_function` does it.") == [
        "transformer_intro.training.no_such_function: transformer_intro.training has no "
        "attribute no_such_function"
    ]
    assert stale_in_text("`transformer_intro.no_such_module.f`") == [
        "transformer_intro.no_such_module.f: transformer_intro has no attribute no_such_module"
    ]
    assert stale_in_text("in `src/transformer_intro/no_such.py`") == [
        "src/transformer_intro/no_such.py: no file src/transformer_intro/no_such.py"
    ]


def test_detector_resolves_a_chapters_aliases():
    aliases = {"rel": "transformer_intro.relations", "MHA": "transformer_intro.MultiHeadAttention"}
    assert stale_in_text("`rel.fast_weight_memory(k, q, v)` and `MHA.batched`", aliases) == []
    assert stale_in_text("`rel.no_such_rule` and `MHA.no_such_path`", aliases) == [
        "`rel.no_such_rule` (transformer_intro.relations.no_such_rule): "
        "transformer_intro.relations has no attribute no_such_rule",
        "`MHA.no_such_path` (transformer_intro.MultiHeadAttention.no_such_path): "
        "transformer_intro.MultiHeadAttention has no attribute no_such_path",
    ]
    # a name the page does not import from the package is not the package's
    assert stale_in_text("`np.no_such_thing`", aliases) == []


def test_detector_catches_a_claim_about_tests_that_no_test_makes():
    claim = "The package's tests check that five `no_such_step_function`s end where one does."
    assert stale_in_text(claim) == [
        "`no_such_step_function`: the sentence says tests check it; tests/ never names it"
    ]
    cited = "`tests/test_attention.py` checks that `retrace` refuses another run."
    assert stale_in_text(cited) == [
        "`retrace`: the sentence says tests check it; tests/test_attention.py never names it"
    ]


def test_detector_passes_references_that_resolve():
    text = (
        "`tests/test_training.py` checks that `retrace` accepts the saved run. "
        "The functions `transformer_intro.training.retrace` and "
        "`transformer_intro.exercises.check` exist, as does "
        "`src/transformer_intro/training/loop.py`. Without a claim about tests, "
        "`no_such_name` is just code."
    )
    assert stale_in_text(text) == []
    assert not resolve_test("tests/test_exercises.py", "::test_reference_solution_passes[x]")


def test_code_cells_are_searched_in_their_comments_and_strings_only():
    source = 'x = 1  # see tests/test_no_such.py\ny = "transformer_intro.no_such"\nz = tests_py'
    text = _comments_and_strings(source)
    assert "tests/test_no_such.py" in text and "transformer_intro.no_such" in text
    assert "tests_py" not in text
