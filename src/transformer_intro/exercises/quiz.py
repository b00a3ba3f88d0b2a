"""A chapter's self-check questions in Jupyter or a terminal, no server and no JavaScript.

The HTML book shows each chapter's questions with ``_interactive/quiz.js``, which reads them
from ``_interactive/quizzes.js``. This module reads the same file and shows the same questions,
with the options of each in the order the page shows them::

    from transformer_intro.exercises.quiz import quiz

    quiz("08_vision_transformer")               # the questions, numbered, options lettered
    quiz("08_vision_transformer").answer(1, "b")  # Right. / Not quite. and that option's reason
    quiz("08_vision_transformer").answer(4, 16)   # a numeric question: a number

The page draws the order of a question's options from the question's text
(:func:`display_order`, the same arithmetic as ``shuffleOrder`` in ``quiz.js``): the same
question is shown in the same order on every visit and in every browser, and an author who
writes the right option first does not give it away. The questions live in the repository,
beside the book, not in the installed package: this works in a clone of the repository
(``pip install -e .``), and names the file it looked for otherwise.
"""

from __future__ import annotations

import html
import json
import math
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "QUIZZES_PATH",
    "Feedback",
    "Quiz",
    "display_order",
    "load_quizzes",
    "parse_number",
    "plain_text",
    "question_seed",
    "quiz",
]

#: Where the questions are: ``_interactive/quizzes.js`` at the repository's root.
QUIZZES_PATH = Path(__file__).resolve().parents[3] / "_interactive" / "quizzes.js"
_START = re.compile(r"^window\.BOOK_QUIZZES\s*=\s*", re.MULTILINE)
LETTERS = "abcdefghijklmnopqrstuvwxyz"
_WIDTH = 88


def load_quizzes(path: Path | str | None = None) -> dict[str, list[dict]]:
    """Every chapter's questions: the JSON object after ``window.BOOK_QUIZZES =``.

    Args:
        path: the file; by default ``_interactive/quizzes.js`` of the repository this package
            was installed from.

    Raises:
        FileNotFoundError: if the file is not there (the package was installed without the
            repository beside it).
        ValueError: if the file does not hold ``window.BOOK_QUIZZES = {...};``.
    """
    path = Path(path) if path is not None else QUIZZES_PATH
    if not path.is_file():
        raise FileNotFoundError(
            f"no quiz questions at {path}: they are in _interactive/quizzes.js of the book's "
            "repository, not in the installed package; install the package from a clone "
            "(pip install -e .) or pass the file, load_quizzes(path=...)"
        )
    text = path.read_text(encoding="utf8")
    match = _START.search(text)
    body = text[match.end() :].strip() if match else ""
    if not body.endswith(";"):
        raise ValueError(f"{path} must hold 'window.BOOK_QUIZZES = {{...}};' (plain JSON)")
    return json.loads(body[:-1])


def question_seed(text: str) -> int:
    """The 32-bit FNV-1a hash of a question's text, as ``quiz.js`` computes it.

    The hash runs over the text's UTF-16 code units, as JavaScript's ``charCodeAt`` reads a
    string, so that both sides get the same number for any text.
    """
    units = text.encode("utf-16-le")
    h = 0x811C9DC5
    for i in range(0, len(units), 2):
        h ^= units[i] | units[i + 1] << 8
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def _mulberry32(seed: int):
    """The Mulberry32 generator: uniform numbers in [0, 1), each one a 32-bit integer / 2**32.

    Every step is 32-bit integer arithmetic, so JavaScript (``Math.imul``, ``>>>``) and Python
    produce the same sequence exactly.
    """
    state = seed & 0xFFFFFFFF
    mask = 0xFFFFFFFF
    while True:
        state = (state + 0x6D2B79F5) & mask
        t = state
        t = ((t ^ (t >> 15)) * (t | 1)) & mask
        t = (t ^ ((t + ((t ^ (t >> 7)) * (t | 61))) & mask)) & mask
        yield (t ^ (t >> 14)) / 4294967296


def display_order(question: str, count: int) -> list[int]:
    """The stored indices of a question's options in the order the page shows them.

    A Fisher-Yates shuffle driven by Mulberry32 seeded with :func:`question_seed` of the
    question's text (its markup, as stored): entry ``k`` is the option shown ``k``-th.
    """
    order = list(range(count))
    draws = _mulberry32(question_seed(question))
    for i in range(count - 1, 0, -1):
        j = math.floor(next(draws) * (i + 1))
        order[i], order[j] = order[j], order[i]
    return order


def _script(tag: str, inner: str) -> str:
    mark = "^" if tag == "sup" else "_"
    # a short index stays bare (x_n, X^⊤); a longer one, a sum or one with an index of its own
    # is bracketed (ℝ^(D × N), J_(m+1), z_(s_n)) so that it reads unambiguously
    simple = re.fullmatch(r"(?:[^\W_]|[⊤′'*]){1,3}", inner)
    return mark + (inner if simple else f"({inner})")


def plain_text(markup: str) -> str:
    """The text of a question's markup for a terminal or a notebook's text output.

    ``<sup>2</sup>`` becomes ``^2`` and ``<sub>k</sub>`` ``_k`` (longer ones in brackets,
    ``^(D × N)``), other tags are dropped and entities decoded.
    """
    text = markup.replace("<br>", "\n").replace("<br/>", "\n")
    pattern = re.compile(r"<(sup|sub)>((?:(?!<su[pb]>).)*?)</\1>", re.DOTALL)
    while True:  # innermost first: a subscript inside a superscript
        new = pattern.sub(lambda m: _script(m.group(1), re.sub(r"<[^>]+>", "", m.group(2))), text)
        if new == text:
            break
        text = new
    return html.unescape(re.sub(r"<[^>]+>", "", text))


def parse_number(text: str | float | int) -> float:
    """A reader's number, as ``quiz.js`` reads it: "0.25", "-3", "1e-3", "1/4", "1,536", "1 536".

    Returns NaN for anything else.
    """
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    s = re.sub(r"[\s\u00a0\u202f_]", "", str(text)).replace("\u2212", "-")
    if re.fullmatch(r"[-+]?\d{1,3}(,\d{3})+(\.\d*)?", s):
        s = s.replace(",", "")
    fraction = re.fullmatch(r"([-+]?\d+(?:\.\d*)?)/(\d+(?:\.\d*)?)", s)
    if fraction:
        denominator = float(fraction.group(2))
        return float(fraction.group(1)) / denominator if denominator else math.nan
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?", s, re.IGNORECASE):
        return math.nan
    return float(s)


def _near(x: float, value: float, tolerance: float | None) -> bool:
    tol = tolerance if tolerance is not None else 1e-9 * max(1.0, abs(value))
    return abs(x - value) <= tol


@dataclass(frozen=True)
class Feedback:
    """The verdict on one answer: right or not, and the reason the book gives for it."""

    right: bool
    verdict: str
    explanation: str

    def __str__(self) -> str:
        return textwrap.fill(f"{self.verdict} {self.explanation}", _WIDTH)

    __repr__ = __str__


class Quiz:
    """One chapter's questions, shown as the page shows them, and their checks.

    Its ``repr`` is the questions as plain text (a terminal, a notebook's text output); in
    Jupyter they are shown as HTML with the book's inline markup.
    """

    def __init__(self, key: str, questions: Sequence[dict]):
        """A chapter's key ("08_vision_transformer") and its questions, as quizzes.js holds them."""
        self.key = key
        self.questions = list(questions)

    def options(self, number: int) -> list[dict]:
        """Question ``number``'s options (1-based), in the order the page shows them."""
        q = self._question(number)
        if q["type"] != "choice":
            return []
        return [q["options"][i] for i in display_order(q["question"], len(q["options"]))]

    def _question(self, number: int) -> dict:
        if not isinstance(number, int) or not 1 <= number <= len(self.questions):
            raise ValueError(f"{self.key} has questions 1 to {len(self.questions)}; got {number!r}")
        return self.questions[number - 1]

    def feedback(self, number: int, given: str | float | int) -> Feedback:
        """The verdict on ``given`` for question ``number`` (1-based), without printing it.

        Args:
            number: the question's number as shown.
            given: a letter ("b") for a multiple-choice question; a number, or a string such
                as "1/4" or "1,536", for a numeric one.

        Raises:
            ValueError: if the number names no question, or the letter no option.
        """
        q = self._question(number)
        if q["type"] == "choice":
            options = self.options(number)
            letters = LETTERS[: len(options)]
            letter = str(given).strip().strip("()").lower()
            if len(letter) != 1 or letter not in letters:
                raise ValueError(
                    f"question {number} has options {', '.join(letters)}: answer with one "
                    f"letter, e.g. .answer({number}, {letters[0]!r}); got {given!r}"
                )
            option = options[letters.index(letter)]
            right = bool(option["correct"])
            return Feedback(
                right, "Right." if right else "Not quite.", plain_text(option["explanation"])
            )
        x = parse_number(given)
        if not math.isfinite(x):
            return Feedback(
                False, "Not a number.", "Type a number, for example 16, 0.25, '1/4' or 1e-3."
            )
        tolerance = q.get("tolerance")
        if _near(x, q["answer"], tolerance):
            return Feedback(True, "Right.", plain_text(q["explanation"]))
        for mistake in q.get("mistakes", []):
            if _near(x, mistake["value"], mistake.get("tolerance", tolerance)):
                return Feedback(False, "Not quite.", plain_text(mistake["explanation"]))
        return Feedback(False, "Not quite.", plain_text(q["hint"]))

    def answer(self, number: int, given: str | float | int) -> None:
        """Print whether ``given`` answers question ``number`` and the book's reason for it."""
        print(self.feedback(number, given))

    def reveal(self, number: int) -> None:
        """Print question ``number``'s answer and its explanation."""
        q = self._question(number)
        if q["type"] == "choice":
            options = self.options(number)
            k = next(k for k, o in enumerate(options) if o["correct"])
            answer = f"({LETTERS[k]}) {plain_text(options[k]['text'])}"
            explanation = options[k]["explanation"]
        else:
            answer = q.get("answer_text") or f"{q['answer']:g}"
            explanation = q["explanation"]
        print(textwrap.fill(f"The answer is {answer}. {plain_text(explanation)}", _WIDTH))

    def _call(self) -> str:
        return f'quiz("{self.key}")'

    def __repr__(self) -> str:
        lines = [
            f'{len(self.questions)} questions. Answer with {self._call()}.answer(1, "b") '
            f"(a letter), or a number for a numeric question; every option has its own "
            f"explanation, so try the others too. {self._call()}.reveal(1) shows an answer."
        ]
        lines = textwrap.wrap(lines[0], _WIDTH)
        for number, q in enumerate(self.questions, start=1):
            lines.append("")
            lines += textwrap.wrap(
                f"{number}. {plain_text(q['question'])}", _WIDTH, subsequent_indent="   "
            )
            if q["type"] == "choice":
                for letter, option in zip(LETTERS, self.options(number), strict=False):
                    lines += textwrap.wrap(
                        f"({letter}) {plain_text(option['text'])}",
                        _WIDTH,
                        initial_indent="   ",
                        subsequent_indent="       ",
                    )
            else:
                unit = f", in {plain_text(q['unit'])}" if q.get("unit") else ""
                lines.append(f"   (a number{unit})")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        call = html.escape(self._call())
        parts = [
            f"<p>{len(self.questions)} questions. Answer with <code>{call}.answer(1, "
            f"&quot;b&quot;)</code> (a letter), or a number for a numeric question; every option "
            f"has its own explanation, so try the others too. <code>{call}.reveal(1)</code> "
            "shows an answer.</p>",
            "<ol>",
        ]
        for number, q in enumerate(self.questions, start=1):
            parts.append(f"<li><p>{q['question']}</p>")
            if q["type"] == "choice":
                parts.append('<ol type="a">')
                parts += [f"<li>{o['text']}</li>" for o in self.options(number)]
                parts.append("</ol>")
            else:
                unit = f", in {q['unit']}" if q.get("unit") else ""
                parts.append(f"<p>(a number{unit})</p>")
            parts.append("</li>")
        parts.append("</ol>")
        return "\n".join(parts)


def quiz(chapter: str, path: Path | str | None = None) -> Quiz:
    """A chapter's self-check questions, as the HTML book shows them.

    Args:
        chapter: the chapter's file name without ``.ipynb`` ("08_vision_transformer"), or its
            number's two digits ("08") when that names one chapter.
        path: the questions' file; by default ``_interactive/quizzes.js`` of the repository.

    Raises:
        ValueError: if no chapter has that key; the message lists the keys.
    """
    quizzes = load_quizzes(path)
    key = str(chapter)
    if key not in quizzes:
        matches = [k for k in quizzes if k.split("_", 1)[0] == key]
        if len(matches) != 1:
            raise ValueError(
                f"no quiz is called {chapter!r}: the chapters' keys are "
                + ", ".join(sorted(quizzes))
            )
        key = matches[0]
    return Quiz(key, quizzes[key])
