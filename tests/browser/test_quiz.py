"""The self-check questions work in a browser, offline, from file://, at 1280 px and at 400 px.

Build-independent: each test writes a small HTML page into a temporary folder that loads
_interactive/quiz.css, quizzes.js and quiz.js straight from the repository by file:// URLs and
holds one placeholder ``<div class="book-quiz" data-quiz="...">`` per chapter. Requests that
leave file:// are blocked (Network.setBlockedURLs) and, as in test_offline.py, every request
Chromium sends is read back from its performance log and must be local.

``test_the_page_shows_the_options_in_the_predicted_order`` reads the buttons of every question
and compares their order with ``transformer_intro.exercises.quiz.display_order``, the order the
position checks of tests/test_quizzes.py and the notebooks' ``quiz()`` use.
``test_every_option_explains_itself`` presses every option of every multiple-choice question
and checks that the feedback shown is that option's own explanation, that the option is marked
right or wrong as the data say, and that the feedback sits in an aria-live region; for every
numeric question it gives the right answer, an answer within the tolerance, every listed common
mistake, a wrong number and text that is no number. In each chapter, the first question of each
kind is answered as a reader would (mouse clicks, Enter on the focused first option, typed
keys); the page's own script presses and types the rest, one round trip per question. The
layout test checks that nothing in the quiz runs past its box at either width, with every
explanation open. Run with
``.venv/bin/python -m pytest tests/browser -q -p no:randomly --run-browser -m browser -k quiz``.
"""

from __future__ import annotations

import html
import json
import sys
from pathlib import Path

import pytest
from test_layout import set_width
from test_offline import LOCAL_SCHEMES

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_quizzes import INTERACTIVE, MIN_QUESTIONS, chapters, load_quizzes, plain  # noqa: E402

from transformer_intro.exercises.quiz import display_order, question_seed  # noqa: E402

QUIZZES = load_quizzes()


def quiz_page(tmp_path: Path, keys: list[str], scripts: bool = True) -> str:
    """Write a page with one placeholder per key and return its file:// URL."""
    head = f'<link rel="stylesheet" href="{(INTERACTIVE / "quiz.css").as_uri()}">'
    if scripts:
        for name in ("quizzes.js", "quiz.js"):
            head += f'<script src="{(INTERACTIVE / name).as_uri()}"></script>'
    body = "".join(
        f'<h2>{html.escape(k)}</h2><div class="book-quiz" data-quiz="{html.escape(k)}"></div>'
        for k in keys
    )
    page = tmp_path / ("quiz.html" if scripts else "quiz-static.html")
    page.write_text(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"{head}</head><body><main style='max-width: 48rem; margin: 0 auto; padding: 0 0.5rem'>"
        f"{body}</main></body></html>",
        encoding="utf8",
    )
    return page.as_uri()


@pytest.fixture
def driver(driver):
    """The session's browser, with the blocking that :func:`load` sets lifted afterwards.

    The browser is shared by the test files a process runs: left on, the blocking kept the next
    files' figures from loading their data over http (each waited 20 s and failed).
    """
    yield driver
    driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})


def load(driver, url: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["http://*", "https://*"]})
    driver.get_log("browser")
    driver.get_log("performance")
    driver.get(url)
    WebDriverWait(driver, 30).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )


def requests_and_errors(driver) -> tuple[list[str], list[str]]:
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    errors = [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    return urls, errors


READ = """
function question(chapter, index) {
  return document.querySelector(
    `div.book-quiz[data-quiz="${chapter}"] li.bq-question[data-index="${index}"]`);
}
function read(item) {
const box = item.querySelector('.bq-feedback');
const expl = box.querySelector('.bq-explanation');
const buttons = [...item.querySelectorAll('button.bq-option')];
return {
  option: box.getAttribute('data-option'),
  verdictAttr: box.getAttribute('data-verdict'),
  verdict: (box.querySelector('.bq-verdict') || {}).textContent || '',
  explanation: expl ? expl.textContent : box.textContent,
  live: box.getAttribute('aria-live'),
  visible: box.offsetParent !== null,
  states: buttons.map(b => b.getAttribute('data-state')),
  pressed: buttons.map(b => b.getAttribute('aria-pressed')),
  reveal: !!item.querySelector('button.bq-reveal') &&
          !item.querySelector('button.bq-reveal').hidden,
};
}
"""
READ_FEEDBACK = READ + "return read(question(arguments[0], arguments[1]));"
# Every option pressed from the page's script, the feedback read after each: one round trip.
PRESS_EVERY_OPTION = (
    READ
    + """
const item = question(arguments[0], arguments[1]);
return [...item.querySelectorAll('button.bq-option')].map(b => { b.click(); return read(item); });
"""
)
# Every typed answer given from the page's script (Enter as a keydown, or the Check button).
TYPE_EVERY_ANSWER = (
    READ
    + """
const item = question(arguments[0], arguments[1]);
const field = item.querySelector('input.bq-input');
return arguments[2].map(([text, enter]) => {
  field.value = text;
  if (enter) field.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true}));
  else item.querySelector('button.bq-check').click();
  return read(item);
});
"""
)


def question_element(driver, chapter: str, index: int):
    from selenium.webdriver.common.by import By

    return driver.find_element(
        By.CSS_SELECTOR,
        f'div.book-quiz[data-quiz="{chapter}"] li.bq-question[data-index="{index}"]',
    )


def press_options(driver, chapter: str, index: int, real_input: bool) -> list[dict] | str:
    """The feedback after pressing each option in turn, or what is wrong with the buttons.

    With ``real_input`` the options are pressed as a reader does (Enter on the first, focused;
    mouse clicks on the others), one WebDriver round trip each; otherwise by the page's script.
    """
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    if not real_input:
        return driver.execute_script(PRESS_EVERY_OPTION, chapter, index)
    seen = []
    buttons = question_element(driver, chapter, index).find_elements(
        By.CSS_SELECTOR, "button.bq-option"
    )
    for j, button in enumerate(buttons):
        if j == 0:  # the keyboard: focus the option and press Enter
            driver.execute_script(
                "arguments[0].scrollIntoView({block: 'center'}); arguments[0].focus()", button
            )
            button.send_keys(Keys.ENTER)
        else:
            button.click()  # WebDriver scrolls the button into view first
        seen.append(driver.execute_script(READ_FEEDBACK, chapter, index))
    return seen


def check_choice(driver, chapter: str, index: int, q: dict, real_input: bool) -> list[str]:
    problems = []
    where = f"{chapter} question {index + 1}"
    seen = press_options(driver, chapter, index, real_input)
    if len(seen) != len(q["options"]):
        return [f"{where}: {len(seen)} buttons for {len(q['options'])} options"]
    shown = []
    # the j-th button shows stored option order[j], the order the Python side predicts
    order = display_order(q["question"], len(q["options"]))
    for j, got in enumerate(seen):
        option = q["options"][order[j]]
        right = option["correct"]
        if got["option"] != str(order[j]):
            problems.append(
                f"{where} button {j + 1}: feedback is for option {got['option']}, "
                f"want stored option {order[j]}"
            )
        if got["explanation"].strip() != plain(option["explanation"]).strip():
            problems.append(f"{where} option {j + 1}: shows {got['explanation'][:60]!r}")
        if got["states"][j] != ("right" if right else "wrong"):
            problems.append(f"{where} option {j + 1}: marked {got['states'][j]!r}")
        if got["verdict"] != ("Right." if right else "Not quite."):
            problems.append(f"{where} option {j + 1}: verdict {got['verdict']!r}")
        if got["pressed"].count("true") != 1 or got["pressed"][j] != "true":
            problems.append(f"{where} option {j + 1}: aria-pressed {got['pressed']}")
        if got["live"] != "polite" or not got["visible"]:
            problems.append(f"{where}: feedback not visible in an aria-live region")
        if not right and not got["explanation"].strip():
            problems.append(f"{where} option {j + 1}: empty explanation")
        shown.append(got["explanation"].strip())
    if len(set(shown)) != len(shown):
        problems.append(f"{where}: two options showed the same explanation")
    return problems


def _typed(value: float) -> str:
    return f"{value:.10g}"


def check_numeric(driver, chapter: str, index: int, q: dict, real_input: bool) -> list[str]:
    """Typed answers: with ``real_input`` keystrokes and clicks, one round trip each; otherwise
    all of them given by the page's script in one."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    where = f"{chapter} question {index + 1}"
    item = question_element(driver, chapter, index)
    field = item.find_element(By.CSS_SELECTOR, "input.bq-input")
    check = item.find_element(By.CSS_SELECTOR, "button.bq-check")
    if real_input:
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", field)
    answer, tolerance = q["answer"], q.get("tolerance", 0)
    values = [q["mistakes"][k]["value"] for k in range(len(q["mistakes"]))]
    wrong = answer + 1000 * (1 + tolerance + max([abs(v) for v in values] + [abs(answer)]))
    problems = []

    def attempt(text: str, press_enter: bool) -> dict:
        field.clear()
        field.send_keys(text)
        if press_enter:
            field.send_keys(Keys.ENTER)
        else:
            check.click()
        return driver.execute_script(READ_FEEDBACK, chapter, index)

    cases = [("not a number", "invalid", None, True), (_typed(wrong), "wrong", q["hint"], False)]
    cases += [(_typed(m["value"]), "mistake", m["explanation"], True) for m in q["mistakes"]]
    if tolerance:
        cases.append((_typed(answer + 0.9 * tolerance), "right", q["explanation"], False))
    cases.append((_typed(answer), "right", q["explanation"], True))
    if real_input:
        seen = [attempt(text, enter) for text, _, _, enter in cases]
    else:
        typed = [[text, enter] for text, _, _, enter in cases]
        seen = driver.execute_script(TYPE_EVERY_ANSWER, chapter, index, typed)
    for (text, verdict, explanation, _), got in zip(cases, seen, strict=True):
        if got["verdictAttr"] != verdict:
            problems.append(f"{where}: typed {text!r}, verdict {got['verdictAttr']!r}")
            continue
        if explanation is not None and got["explanation"].strip() != plain(explanation).strip():
            problems.append(f"{where}: typed {text!r}, shows {got['explanation'][:60]!r}")
        if verdict in ("wrong", "mistake") and not got["reveal"]:
            problems.append(f"{where}: no 'Show the answer' button after a wrong answer")
        if got["live"] != "polite":
            problems.append(f"{where}: feedback not in an aria-live region")
    # a wrong answer, then "Show the answer"
    attempt(_typed(wrong), False)
    item.find_element(By.CSS_SELECTOR, "button.bq-reveal").click()
    got = driver.execute_script(READ_FEEDBACK, chapter, index)
    if got["verdictAttr"] != "shown" or plain(q["explanation"]).strip() != got["explanation"]:
        problems.append(f"{where}: 'Show the answer' shows {got['explanation'][:60]!r}")
    return problems


@pytest.mark.browser
def test_every_option_explains_itself(driver, tmp_path):
    keys = chapters()
    load(driver, quiz_page(tmp_path, keys))
    counts = driver.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('div.book-quiz')].map(d =>"
        " [d.dataset.quiz, d.hasAttribute('data-quiz-ready') ?"
        " d.querySelectorAll('li.bq-question').length : -1]))"
    )
    assert counts == {k: len(QUIZZES[k]) for k in keys}, counts
    assert all(n >= MIN_QUESTIONS for n in counts.values()), counts
    problems = []
    for chapter in keys:
        # A reader's keys and clicks on the first question of each kind in every chapter; the
        # page's own script presses the rest (the same handlers, without a round trip per press).
        first = {}
        for i, q in enumerate(QUIZZES[chapter]):
            first.setdefault(q["type"], i)
        for i, q in enumerate(QUIZZES[chapter]):
            check = check_choice if q["type"] == "choice" else check_numeric
            problems += check(driver, chapter, i, q, real_input=first[q["type"]] == i)
    urls, errors = requests_and_errors(driver)
    assert not problems, "\n".join(problems[:40])
    assert urls and all(u.startswith(LOCAL_SCHEMES) for u in urls), urls
    assert not errors, errors


SHOWN_ORDER = """
return Object.fromEntries([...document.querySelectorAll('div.book-quiz')].map(d => [
  d.dataset.quiz,
  [...d.querySelectorAll('li.bq-question')].map(li =>
    [...li.querySelectorAll('button.bq-option')].map(b =>
      [Number(b.getAttribute('data-option')), b.querySelector('.bq-option-text').textContent]))]));
"""


@pytest.mark.browser
def test_the_page_shows_the_options_in_the_predicted_order(driver, tmp_path):
    """The options of every question appear in the order display_order predicts, the one the
    tests of the positions (tests/test_quizzes.py) and the notebooks' quiz() assume; the page's
    own shuffle agrees with Python's on texts beyond the questions too."""
    keys = chapters()
    load(driver, quiz_page(tmp_path, keys))
    shown = driver.execute_script(SHOWN_ORDER)
    problems = []
    for chapter in keys:
        for i, q in enumerate(QUIZZES[chapter]):
            buttons = shown[chapter][i]
            if q["type"] != "choice":
                continue
            order = display_order(q["question"], len(q["options"]))
            want = [[k, plain(q["options"][k]["text"])] for k in order]
            if buttons != want:
                problems.append(f"{chapter} question {i + 1}: shown {buttons}, predicted {want}")
    texts = ["", "a", "What is <i>A</i>?", "ℝ<sup>𝒱</sup> 😀 é", "x" * 500]
    page = driver.execute_script(
        "return arguments[0].map(t => [2, 3, 4, 9].map(n => window.BookQuiz.displayOrder(t, n)))",
        texts,
    )
    predicted = [[display_order(t, n) for n in (2, 3, 4, 9)] for t in texts]
    assert page == predicted, (page, predicted, [question_seed(t) for t in texts])
    # a control: today's stored order is not the shown one, or the test could not tell
    assert any(o != sorted(o) for row in predicted for o in row)
    assert not problems, "\n".join(problems[:20])


FIND_OVERFLOW = """
const problems = [];
const vw = document.documentElement.clientWidth;
if (document.documentElement.scrollWidth > vw + 1)
  problems.push(`the page scrolls sideways: ${document.documentElement.scrollWidth} > ${vw}`);
for (const root of document.querySelectorAll('div.book-quiz')) {
  const box = root.getBoundingClientRect();
  if (root.scrollWidth > root.clientWidth + 1)
    problems.push(`${root.dataset.quiz}: content ${root.scrollWidth} px in ${root.clientWidth} px`);
  for (const el of root.querySelectorAll('.bq-prompt, .bq-option, .bq-feedback, .bq-numeric > *')) {
    const r = el.getBoundingClientRect();
    if (el.offsetParent !== null && (r.right > box.right + 1 || r.left < box.left - 1))
      problems.push(`${root.dataset.quiz}: ${el.className} runs past the quiz box`);
  }
}
return problems;
"""

OPEN_EVERYTHING = """
for (const b of document.querySelectorAll('li.bq-question button.bq-option')) b.click();
for (const item of document.querySelectorAll('li.bq-question[data-type="numeric"]')) {
  item.querySelector('input').value = '123456789';
  item.querySelector('button.bq-check').click();
}
"""


@pytest.mark.browser
@pytest.mark.parametrize("width", (1280, 400), ids=lambda w: f"{w}px")
def test_quiz_fits_the_page(driver, tmp_path, width):
    url = quiz_page(tmp_path, chapters())
    try:
        assert set_width(driver, width) == width
        load(driver, url)
        driver.execute_script(OPEN_EVERYTHING)
        problems = driver.execute_script(FIND_OVERFLOW)
        # the options stack one per line and take the quiz's width, at both widths
        widths = driver.execute_script(
            "const o = document.querySelector('button.bq-option');"
            "return [o.getBoundingClientRect().width,"
            " o.parentElement.getBoundingClientRect().width]"
        )
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert not problems, "\n".join(problems[:20])
    assert abs(widths[0] - widths[1]) <= 1, widths


@pytest.mark.browser
def test_without_javascript_the_placeholder_is_not_empty(driver, tmp_path):
    """Only quiz.css: an empty placeholder still says what it is for, and a key without
    questions keeps the placeholder's own text when the script runs."""
    load(driver, quiz_page(tmp_path, ["01_tokens"], scripts=False))
    content = driver.execute_script(
        "return getComputedStyle(document.querySelector('div.book-quiz'), '::before').content"
    )
    assert "JavaScript" in content, content
    height = driver.execute_script(
        "return document.querySelector('div.book-quiz').getBoundingClientRect().height"
    )
    assert height > 20, height

    page = tmp_path / "missing.html"
    page.write_text(
        f'<!DOCTYPE html><html><head><meta charset="utf-8">'
        f'<script src="{(INTERACTIVE / "quizzes.js").as_uri()}"></script>'
        f'<script src="{(INTERACTIVE / "quiz.js").as_uri()}"></script></head><body>'
        '<div class="book-quiz" data-quiz="99_no_such_chapter"><p>Fallback.</p></div>'
        "</body></html>",
        encoding="utf8",
    )
    load(driver, page.as_uri())
    text = driver.execute_script("return document.querySelector('div.book-quiz').textContent")
    assert text == "Fallback.", text
