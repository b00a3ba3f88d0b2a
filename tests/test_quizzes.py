"""The chapters' self-check questions (_interactive/quizzes.js) are complete and well formed.

quizzes.js sets ``window.BOOK_QUIZZES`` to a plain JSON object, one key per numbered chapter
(``book/NN_name.ipynb`` -> ``"NN_name"``), which quiz.js renders where a chapter has
``<div class="book-quiz" data-quiz="NN_name"></div>``. This test parses the file with
``json.loads`` and checks, without a browser:

- every numbered chapter has at least five questions, and no key names a missing chapter;
- a multiple-choice question has at least three options, exactly one of them right, and every
  option (right or wrong) has its own non-empty explanation, distinct from the others';
- a numeric question has a finite answer, a tolerance that is not negative, an explanation, a
  hint for other wrong answers, and common mistakes that lie outside the tolerance, each with
  its own explanation;
- the strings hold only the inline tags quiz.js keeps, no TeX (the questions appear after
  MathJax has run) and none of the words that belong to the book's production;
- _config.yml loads quizzes.js before quiz.js, and quiz.css, on every page, and quiz.js fetches
  nothing;
- the page shows a question's options in an order drawn from the question's text (quiz.js's
  ``displayOrder``; ``transformer_intro.exercises.quiz.display_order`` computes the same, and
  tests/browser/test_quiz.py compares the two in Chromium). In that order, in every chapter, no
  position holds the right option in more than 40% of the chapter's multiple-choice questions,
  and the right option is the longest (or tied for it) in at most half of them, so neither the
  place nor the length of an option gives it away;
- no question repeats one of another chapter, word for word or nearly (the same question for
  another format or another number).

The browser test tests/browser/test_quiz.py clicks every option. ``test_detector_*`` shows that
the checks below can fail.
"""

from __future__ import annotations

import html
import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import yaml

from transformer_intro.exercises.quiz import display_order

REPO = Path(__file__).resolve().parents[1]
INTERACTIVE = REPO / "_interactive"
MIN_QUESTIONS = 5
ALLOWED_TAGS = {"i", "sub", "sup", "code", "b", "em", "br"}
# Words of the book's production, not of its subject (tests/test_book_text.py checks the
# chapters for them): none may reach a reader through a question.
BANNED = re.compile(
    r"\b(budget|anchors?|targets?|acceptance|the issue|not met|laptop|load average)\b",
    re.IGNORECASE,
)
TEX = re.compile(r"\$|\\[A-Za-z]|\{eq|\{numref|\{doc")
# A calendar date is the subject of chapter 10 only; elsewhere it would be lab-notebook history.
DATE = re.compile(
    r"\b(19|20)\d\d-\d\d-\d\d\b|\b(January|February|March|April|May|June|July|August|September"
    r"|October|November|December) (19|20)\d\d\b"
)


def load_quizzes(path: Path = INTERACTIVE / "quizzes.js") -> dict:
    text = path.read_text(encoding="utf8")
    match = re.search(r"^window\.BOOK_QUIZZES\s*=\s*", text, re.MULTILINE)
    assert match, f"{path.name} must contain a line starting 'window.BOOK_QUIZZES ='"
    body = text[match.end() :].strip()
    assert body.endswith(";"), "the object must end with ';'"
    return json.loads(body[:-1])


def chapters() -> list[str]:
    """The numbered chapters, 01_... to the last one (00_jax_and_equinox is a tour, not one)."""
    return sorted(
        p.stem for p in (REPO / "book").glob("[0-9][0-9]_*.ipynb") if not p.stem.startswith("00")
    )


def plain(markup: str) -> str:
    """The text a reader sees: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.problems: list[str] = []
        self.stack: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in ALLOWED_TAGS:
            self.problems.append(f"tag <{tag}> is not kept by quiz.js")
        if attrs:
            self.problems.append(f"<{tag}> has attributes")
        if tag != "br":
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack.pop() != tag:
            self.problems.append(f"</{tag}> does not close the open tag")


def string_problems(where: str, markup: str, chapter: str) -> list[str]:
    problems = []
    if not isinstance(markup, str) or not plain(markup).strip():
        return [f"{where}: empty"]
    parser = _Tags()
    parser.feed(markup)
    parser.close()
    if parser.stack:
        parser.problems.append(f"unclosed <{parser.stack[-1]}>")
    problems += [f"{where}: {p}" for p in parser.problems]
    text = plain(markup)
    if TEX.search(text):
        problems.append(f"{where}: TeX or MyST left in {text[:60]!r}")
    if match := BANNED.search(text):
        problems.append(f"{where}: banned word {match.group(0)!r}")
    if chapter != "10_encoder_decoder" and (match := DATE.search(text)):
        problems.append(f"{where}: a date, {match.group(0)!r}")
    if len(text) > 420:
        problems.append(f"{where}: {len(text)} characters; keep it to one or two sentences")
    return problems


def question_problems(chapter: str, i: int, q: dict) -> list[str]:
    where = f"{chapter} question {i + 1}"
    problems = string_problems(f"{where} text", q.get("question"), chapter)
    if q.get("type") == "choice":
        options = q.get("options") or []
        if len(options) < 3:
            problems.append(f"{where}: {len(options)} options, want at least 3")
        right = [o for o in options if o.get("correct") is True]
        if len(right) != 1:
            problems.append(f"{where}: {len(right)} right options, want exactly one")
        for j, option in enumerate(options):
            problems += string_problems(f"{where} option {j + 1}", option.get("text"), chapter)
            problems += string_problems(
                f"{where} option {j + 1} explanation", option.get("explanation"), chapter
            )
        explanations = [plain(o.get("explanation") or "").strip() for o in options]
        if len(set(explanations)) != len(explanations):
            problems.append(f"{where}: two options share an explanation")
        texts = [plain(o.get("text") or "").strip() for o in options]
        if len(set(texts)) != len(texts):
            problems.append(f"{where}: two options have the same text")
    elif q.get("type") == "numeric":
        answer, tolerance = q.get("answer"), q.get("tolerance", 0)
        if not isinstance(answer, (int, float)) or not math.isfinite(answer):
            problems.append(f"{where}: answer {answer!r} is not a finite number")
            return problems
        if not isinstance(tolerance, (int, float)) or tolerance < 0:
            problems.append(f"{where}: tolerance {tolerance!r}")
        for key in ("explanation", "hint"):
            problems += string_problems(f"{where} {key}", q.get(key), chapter)
        seen = {plain(q.get("explanation") or ""), plain(q.get("hint") or "")}
        for j, mistake in enumerate(q.get("mistakes", [])):
            value = mistake.get("value")
            if not isinstance(value, (int, float)) or abs(value - answer) <= tolerance:
                problems.append(f"{where} mistake {j + 1}: {value!r} counts as right")
            expl = mistake.get("explanation")
            problems += string_problems(f"{where} mistake {j + 1} explanation", expl, chapter)
            if plain(expl or "") in seen:
                problems.append(f"{where} mistake {j + 1}: explanation repeats another")
            seen.add(plain(expl or ""))
        for key in ("answer_text", "unit"):
            if key in q:
                problems += string_problems(f"{where} {key}", q[key], chapter)
    else:
        problems.append(f"{where}: unknown type {q.get('type')!r}")
    return problems


def quiz_problems(quizzes: dict, expected: list[str]) -> list[str]:
    problems = [f"no questions for {c}" for c in expected if c not in quizzes]
    problems += [f"{key}: no such chapter" for key in quizzes if key not in expected]
    for chapter, questions in quizzes.items():
        if len(questions) < MIN_QUESTIONS:
            problems.append(f"{chapter}: {len(questions)} questions, want {MIN_QUESTIONS}")
        for i, q in enumerate(questions):
            problems += question_problems(chapter, i, q)
        prompts = [plain(q.get("question") or "") for q in questions]
        if len(set(prompts)) != len(prompts):
            problems.append(f"{chapter}: a question is asked twice")
    return problems


# In a chapter's multiple-choice questions, the largest share of right options at one displayed
# position, and the largest share of questions whose right option is the longest.
MAX_SHARE_AT_ONE_POSITION = 0.4
MAX_SHARE_LONGEST = 0.5
# Two questions whose texts agree this much (difflib's ratio) ask the same thing: the chapter 15
# and chapter 16 questions on bits per weight, for Q4_1 and for Q8_0, reached 0.87.
MAX_SIMILARITY = 0.8


def right_position(q: dict, order=display_order) -> int:
    """Where the page shows the right option of a multiple-choice question (0 = first)."""
    shown = order(q["question"], len(q["options"]))
    return [q["options"][i]["correct"] for i in shown].index(True)


def right_is_longest(q: dict) -> bool:
    lengths = [len(plain(o["text"]).strip()) for o in q["options"]]
    right = [o["correct"] for o in q["options"]].index(True)
    return lengths[right] == max(lengths)


def spread_problems(chapter: str, questions: list[dict], order=display_order) -> list[str]:
    """What in a chapter's multiple-choice questions gives the right option away."""
    choice = [(i, q) for i, q in enumerate(questions) if q.get("type") == "choice"]
    if len(choice) < 3:
        return [
            f"{chapter}: {len(choice)} multiple-choice questions; at least 3 are needed for the "
            "right options to be spread over the positions"
        ]
    problems = []
    positions = [right_position(q, order) for _, q in choice]
    for p in sorted(set(positions)):
        at = [i + 1 for (i, _), where in zip(choice, positions, strict=True) if where == p]
        if len(at) > MAX_SHARE_AT_ONE_POSITION * len(choice):
            problems.append(
                f"{chapter}: the page shows the right option at position {p + 1} in questions "
                f"{at}, {len(at)} of {len(choice)}. The order is drawn from the question's text: "
                "store the right option of one of them in another slot (the stored slot "
                "order[p] is shown at position p, order = display_order(question, count))"
            )
    longest = [i + 1 for i, q in choice if right_is_longest(q)]
    if len(longest) > MAX_SHARE_LONGEST * len(choice):
        problems.append(
            f"{chapter}: the right option is the longest in questions {longest}, {len(longest)} "
            f"of {len(choice)}; shorten it or give the wrong ones their full reasons"
        )
    return problems


def duplicate_questions(quizzes: dict) -> list[str]:
    """Pairs of questions, in different chapters or in one, that ask the same thing."""
    import difflib

    asked = [
        (chapter, i + 1, " ".join(plain(q.get("question") or "").lower().split()))
        for chapter, questions in quizzes.items()
        for i, q in enumerate(questions)
    ]
    found = []
    for k, (chapter, i, text) in enumerate(asked):
        for other, j, other_text in asked[k + 1 :]:
            ratio = difflib.SequenceMatcher(None, text, other_text).ratio()
            if ratio > MAX_SIMILARITY:
                found.append(f"{chapter} question {i} and {other} question {j} ({ratio:.2f})")
    return found


def test_the_right_options_are_spread_and_not_the_longest():
    quizzes = load_quizzes()
    problems = [p for chapter, qs in quizzes.items() for p in spread_problems(chapter, qs)]
    assert not problems, "\n".join(problems)


def test_no_question_is_asked_twice():
    found = duplicate_questions(load_quizzes())
    assert not found, "questions that ask the same thing:\n" + "\n".join(found)


def test_display_order_is_a_permutation_fixed_by_the_text():
    for count in (1, 3, 4, 7):
        for text in ("", "What is <i>A</i>?", "ℝ<sup>𝒱</sup> 😀"):
            order = display_order(text, count)
            assert sorted(order) == list(range(count)), order
            assert display_order(text, count) == order
    # the order depends on the text: over many texts every stored option is shown first
    firsts = {display_order(f"question {k}", 4)[0] for k in range(40)}
    assert firsts == {0, 1, 2, 3}, firsts


def test_detector_catches_answers_given_away():
    def question(k, right_text="the right one"):
        return {
            "type": "choice",
            "question": f"Question {k}?",
            "options": [
                {"text": right_text, "correct": True, "explanation": "Yes."},
                {"text": "wrong a", "correct": False, "explanation": "No."},
                {"text": "wrong bb", "correct": False, "explanation": "Not this."},
            ],
        }

    def stored(text, count):
        return list(range(count))

    questions = [question(k) for k in range(5)]
    # shown in the stored order, right first everywhere, and the right option the longest
    found = "\n".join(spread_problems("01_x", questions, order=stored))
    assert "position 1 in questions [1, 2, 3, 4, 5], 5 of 5" in found, found
    assert "the longest in questions [1, 2, 3, 4, 5]" in found, found
    # short right options, at places spread by hand: accepted
    short = [question(k, "ok") for k in range(3)]
    for k, q in enumerate(short):
        q["options"] = q["options"][1:][:k] + q["options"][:1] + q["options"][1:][k:]
    assert spread_problems("01_x", short, order=stored) == []
    assert "at least 3 are needed" in spread_problems("01_x", short[:2], order=stored)[0]
    # the chapter 15 and chapter 16 questions that asked the same thing for two formats
    twins = {
        "15_x": [{"question": "A Q4_1 block stores 32 weights as 4-bit codes plus a 16-bit "
                  "scale and a 16-bit offset. How many bits does it spend per weight?"}],
        "16_x": [{"question": "A Q8_0 block stores 32 weights as 8-bit codes plus one 16-bit "
                  "scale. How many bits does it spend per weight?"},
                 {"question": "Why does <i>Z</i> start at zero?"}],
    }  # fmt: skip
    assert duplicate_questions(twins) == ["15_x question 1 and 16_x question 1 (0.87)"]


def test_twenty_chapters():
    assert len(chapters()) == 20, chapters()


def test_quizzes_are_complete_and_well_formed():
    problems = quiz_problems(load_quizzes(), chapters())
    assert not problems, "\n".join(problems)


def test_config_loads_the_quiz_on_every_page():
    config = yaml.safe_load((REPO / "_config.yml").read_text(encoding="utf8"))["sphinx"]["config"]
    scripts, styles = config["html_js_files"], config["html_css_files"]
    assert "quizzes.js" in scripts and "quiz.js" in scripts, scripts
    assert scripts.index("quizzes.js") < scripts.index("quiz.js"), "data first, then the widget"
    assert "quiz.css" in styles, styles
    assert "_interactive" in config["html_static_path"]
    for name in ("quiz.js", "quizzes.js", "quiz.css"):
        assert (INTERACTIVE / name).is_file(), name


def test_the_widget_fetches_nothing():
    for name in ("quiz.js", "quizzes.js", "quiz.css"):
        text = (INTERACTIVE / name).read_text(encoding="utf8")
        for pattern in (r"\bfetch\(", r"XMLHttpRequest", r"https?://", r"@import", r"url\("):
            assert not re.search(pattern, text), f"{name} contains {pattern}"


def test_detector_catches_bad_questions():
    good = {
        "type": "choice",
        "question": "What is <i>A</i>?",
        "options": [
            {"text": "one", "correct": True, "explanation": "Because."},
            {"text": "two", "correct": False, "explanation": "Not two."},
            {"text": "three", "correct": False, "explanation": "Not three."},
        ],
    }
    numeric = {
        "type": "numeric",
        "question": "How many?",
        "answer": 8,
        "explanation": "Eight.",
        "hint": "Count.",
        "mistakes": [{"value": 64, "explanation": "Squared."}],
    }
    assert quiz_problems({"01_x": [good] * 2 + [numeric] * 3}, ["01_x"]) == [
        "01_x: a question is asked twice"
    ]
    bad = json.loads(json.dumps(good))
    bad["options"][1]["correct"] = True
    bad["options"][2]["explanation"] = ""
    bad["question"] = "Is $A$ the target <span>here</span>?"
    found = "\n".join(question_problems("01_x", 0, bad))
    for expected in ("2 right options", "explanation: empty", "TeX", "banned word", "<span>"):
        assert expected in found, (expected, found)
    twin = json.loads(json.dumps(good))
    twin["options"][2]["explanation"] = "Not two."
    assert "share an explanation" in "\n".join(question_problems("01_x", 0, twin))
    wrong_mistake = dict(numeric, mistakes=[{"value": 8.0, "explanation": "Same."}])
    assert "counts as right" in "\n".join(question_problems("01_x", 0, wrong_mistake))
    assert "no questions for 02_y" in quiz_problems({"01_x": []}, ["01_x", "02_y"])
