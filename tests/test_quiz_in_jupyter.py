"""The chapters' self-check questions in Jupyter: ``transformer_intro.exercises.quiz``.

``quiz(key)`` reads the questions the HTML book shows (``_interactive/quizzes.js``) and shows
them as the page does. Checked here, against the data themselves:

- every multiple-choice option, pressed as its letter, gives the verdict and the explanation
  the data give that option (so the right one is accepted and each wrong one has its own
  reason), in the page's order (the same ``display_order`` the browser test compares with
  quiz.js);
- a numeric answer within the tolerance is right, each listed mistake gets its own explanation,
  any other number the hint, and text that is no number a request for a number;
- the text shown lists every question with its options lettered in the page's order, with no
  markup left in it; the HTML keeps the book's inline tags;
- bad input (an unknown chapter, a question number, a letter) gets an error that names the fix;
  a missing questions file names the file.
"""

from __future__ import annotations

import contextlib
import io
import re

import pytest
from test_quizzes import chapters, load_quizzes, plain

from transformer_intro.exercises import quiz as quiz_module
from transformer_intro.exercises.quiz import (
    LETTERS,
    display_order,
    parse_number,
    plain_text,
    quiz,
)

QUIZZES = load_quizzes()


def every_question():
    return [(key, n) for key in sorted(QUIZZES) for n in range(1, len(QUIZZES[key]) + 1)]


def test_every_chapter_has_its_quiz():
    assert sorted(QUIZZES) == chapters()
    for key in QUIZZES:
        assert quiz(key).questions == QUIZZES[key]
    assert quiz("08").key == "08_vision_transformer"


@pytest.mark.parametrize(("key", "number"), every_question())
def test_each_answer_gets_its_own_verdict(key, number):
    q = QUIZZES[key][number - 1]
    chapter = quiz(key)
    if q["type"] == "choice":
        order = display_order(q["question"], len(q["options"]))
        seen = []
        for letter, stored in zip(LETTERS, order, strict=False):
            option = q["options"][stored]
            got = chapter.feedback(number, letter)
            assert got.right is option["correct"], (letter, option["text"])
            assert got.verdict == ("Right." if option["correct"] else "Not quite.")
            assert got.explanation == plain_text(option["explanation"])
            seen.append(got.explanation)
        assert len(set(seen)) == len(seen)
        assert sum(chapter.feedback(number, x).right for x in LETTERS[: len(order)]) == 1
        assert chapter.feedback(number, " (B) ") == chapter.feedback(number, "b")
        return
    tolerance = q.get("tolerance") or 0
    right = chapter.feedback(number, q["answer"])
    assert right.right and right.explanation == plain_text(q["explanation"])
    assert chapter.feedback(number, str(q["answer"])).right
    if tolerance:
        assert chapter.feedback(number, q["answer"] + 0.9 * tolerance).right
        assert not chapter.feedback(number, q["answer"] + 1.1 * tolerance).right
    for mistake in q.get("mistakes", []):
        got = chapter.feedback(number, mistake["value"])
        assert not got.right and got.explanation == plain_text(mistake["explanation"])
    far = q["answer"] + 1000 * (1 + tolerance + max(abs(m["value"]) for m in q["mistakes"]))
    got = chapter.feedback(number, far)
    assert not got.right and got.explanation == plain_text(q["hint"])
    assert chapter.feedback(number, "twelve").verdict == "Not a number."


def test_the_text_shows_the_pages_order():
    for key, questions in QUIZZES.items():
        shown = repr(quiz(key))
        assert "<" not in re.sub(r"[<≤] ", "", shown.replace("&lt;", "")), key
        flat = " ".join(shown.split())
        for number, q in enumerate(questions, start=1):
            assert f"{number}. {' '.join(plain_text(q['question']).split())}" in flat
            if q["type"] == "choice":
                order = display_order(q["question"], len(q["options"]))
                for letter, stored in zip(LETTERS, order, strict=False):
                    text = " ".join(plain_text(q["options"][stored]["text"]).split())
                    assert f"({letter}) {text}" in flat, (key, number, letter)
        page = quiz(key)._repr_html_()
        assert page.count('<ol type="a">') == sum(q["type"] == "choice" for q in questions)


def test_answer_prints_the_verdict():
    key = "01_tokens"
    q = QUIZZES[key][0]
    order = display_order(q["question"], len(q["options"]))
    letter = LETTERS[[q["options"][i]["correct"] for i in order].index(True)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        quiz(key).answer(1, letter)
        quiz(key).reveal(1)
    lines = " ".join(out.getvalue().split())
    assert lines.startswith("Right.")
    assert f"The answer is ({letter})" in lines


def test_plain_text_and_numbers():
    assert plain_text("<i>X</i><sup>⊤</sup> ∈ ℝ<sup><i>D</i> × <i>N</i></sup>") == "X^⊤ ∈ ℝ^(D × N)"
    assert plain_text("<i>z</i><sub><i>s</i><sub><i>n</i></sub></sub>") == "z_(s_n)"
    assert plain_text("<code>a &lt; b</code>") == "a < b"
    assert plain("<i>a</i>") == "a"
    for text, value in [("0.25", 0.25), ("1/4", 0.25), ("1,536", 1536), ("1 536", 1536),
                        ("−3", -3), ("1e-3", 1e-3), (16, 16.0)]:  # fmt: skip
        assert parse_number(text) == value, text
    for text in ("twelve", "1/0", "", "1,53"):
        assert parse_number(text) != parse_number(text), text  # NaN


def test_bad_input_names_the_fix(tmp_path):
    with pytest.raises(ValueError, match="01_tokens, 02_attention") as error:
        quiz("no_such_chapter")
    assert "no quiz is called 'no_such_chapter'" in str(error.value)
    chapter = quiz("01_tokens")
    with pytest.raises(ValueError, match=f"questions 1 to {len(QUIZZES['01_tokens'])}"):
        chapter.answer(0, "a")
    with pytest.raises(ValueError, match="options a, b, c, d"):
        chapter.answer(1, "e")
    with pytest.raises(FileNotFoundError, match="not in the installed package"):
        quiz("01_tokens", path=tmp_path / "quizzes.js")
    (tmp_path / "broken.js").write_text("var x = 1;\n")
    with pytest.raises(ValueError, match="window.BOOK_QUIZZES"):
        quiz_module.load_quizzes(tmp_path / "broken.js")
