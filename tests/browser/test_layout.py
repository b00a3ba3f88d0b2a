"""Nothing a reader needs is cut off: every page of the built book at 1280 px and at 400 px wide.

Run with ``make browser`` or ``.venv/bin/python -m pytest tests/browser --run-browser`` after
``make book``. For every page and both widths, a page fails if

- a display equation, a code block, a cell output or a table is wider than its box and its box
  does not scroll (``scrollWidth > clientWidth`` with ``overflow-x`` visible, hidden or clip): the
  reader sees it run past the content column, or sees it clipped, with no scroll bar to reach
  the rest;
- such an element reaches past the right edge of the page's content column without a scrolling
  box between them;
- an equation number overlaps the visible part of its equation.

The book's stylesheet ``_css/layout.css`` lets wide display equations, code and tables scroll
inside the column. Stricter still, at 1280 px no code block, output or display equation may scroll
sideways at all (``test_nothing_scrolls_sideways_at_1280``, with an explicit allow-list of what
awaits an edit of its source), and at 400 px the page itself may not
(``test_page_does_not_scroll_sideways_at_400``). ``test_detector_layout`` and
``test_detector_sideways`` show that the checks fail on a synthetic page with each kind of fault,
and pass on its repaired twin.

Each page is loaded once per width. Its load at 1280 px also serves ``test_page``, the checks of
test_pages.py (what a reader would notice: math, links, images, the console, requests): loading
it a third time would add nothing but CPU time.
"""

from __future__ import annotations

import json
import time

import pytest
from test_pages import (
    FULL_PAGE_SCREENSHOTS,
    PAGES,
    WAIT_FOR_MATHJAX,
    _parse,
    check_in_browser,
    find_broken_links,
    screenshot_name,
    source_of,
)

WIDTHS = (1280, 400)

# Returns a list of problems found in the current page.
FIND_CLIPPING = r"""
const scrolls = (el) => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
// (sliced by code points: MathJax's letters lie outside the BMP, and half a surrogate pair
// cannot be sent back to Python)
const describe = (el) => {
  const text = (el.innerText || el.textContent || '').replace(/\s+/g, ' ').trim();
  const id = el.id || (el.closest('[id]') || {}).id || '';
  return `${el.tagName.toLowerCase()}.${[...el.classList].join('.')}` +
         (id ? ` near #${id}` : '') + `: "${Array.from(text).slice(0, 60).join('')}"`;
};
const column = document.querySelector('article.bd-article') ||
  document.querySelector('main article') || document.querySelector('main') || document.body;
const columnRight = column.getBoundingClientRect().right;
const selectors = [
  'div.math', 'mjx-container[display="true"]',
  'div.highlight pre', 'div.cell_output pre', 'div.output pre', 'div.cell_output',
  'table',
];
const problems = [];
const seen = new Set();
for (const el of document.querySelectorAll(selectors.join(','))) {
  if (seen.has(el) || el.offsetParent === null) continue;   // hidden (e.g. a closed dropdown)
  seen.add(el);
  const slack = 2;
  if (el.scrollWidth > el.clientWidth + slack && !scrolls(el)) {
    problems.push(`cut off without a scroll bar (${el.scrollWidth} px of content in ` +
                  `${el.clientWidth} px): ${describe(el)}`);
    continue;
  }
  // past the column's right edge, with no scrolling box in between?
  let scrolled = false;
  for (let a = el.parentElement; a && a !== column; a = a.parentElement) {
    if (scrolls(a)) { scrolled = true; break; }
  }
  const right = el.getBoundingClientRect().right;
  if (!scrolled && right > columnRight + slack) {
    problems.push(`runs ${Math.round(right - columnRight)} px past the content column: ` +
                  describe(el));
  }
}
// equation numbers must not overlap the visible part of their equation
const intersect = (a, b) => ({
  left: Math.max(a.left, b.left), right: Math.min(a.right, b.right),
  top: Math.max(a.top, b.top), bottom: Math.min(a.bottom, b.bottom),
});
const area = (r) => Math.max(0, r.right - r.left) * Math.max(0, r.bottom - r.top);
for (const number of document.querySelectorAll('div.math span.eqno')) {
  if (number.offsetParent === null) continue;
  const box = number.closest('div.math');
  const equation = box.querySelector('mjx-container mjx-math') || box.querySelector('.equation');
  if (!equation) continue;
  const container = equation.closest('mjx-container') || box;
  const visible = intersect(equation.getBoundingClientRect(), container.getBoundingClientRect());
  const numberRect = number.getBoundingClientRect();
  const label = number.firstChild ? number.firstChild.textContent.trim() : '';
  if (area(intersect(visible, numberRect)) > 4) {
    problems.push(`equation number ${label} overlaps its equation: ${describe(box)}`);
  }
}
return problems;
"""


def set_width(driver, width: int) -> int:
    """Make the viewport ``width`` CSS pixels wide; return the width the page reports."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 1000, "deviceScaleFactor": 1, "mobile": False},
    )
    return driver.execute_script("return window.innerWidth")


def measure_page(driver, url: str, width: int, *scripts: str, wait_for_mathjax: bool = True):
    """The results of ``scripts``, run in order on the page at ``url`` laid out ``width`` px wide.

    One script's result if one is given, else the list of them.
    """
    from selenium.webdriver.support.ui import WebDriverWait

    reported = set_width(driver, width)
    try:
        driver.get(url)
        WebDriverWait(driver, 60).until(
            lambda d: d.execute_script("return document.readyState") == "complete"
        )
        if wait_for_mathjax:
            driver.execute_async_script(WAIT_FOR_MATHJAX)
        time.sleep(0.2)  # let the layout settle after typesetting
        results = [driver.execute_script(script) for script in scripts]
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert reported == width, f"the viewport is {reported} px wide, not {width}"
    return results[0] if len(scripts) == 1 else results


def layout_problems(driver, url: str, width: int, *, wait_for_mathjax: bool = True) -> list[str]:
    return measure_page(driver, url, width, FIND_CLIPPING, wait_for_mathjax=wait_for_mathjax)


# Each page is loaded once per width for all of its checks. At 1280 px the load serves test_page
# (test_pages.py's checks of what a reader would notice) as well; then come what is cut off, and
# what scrolls sideways, which opens the closed dropdowns and so comes last.
_MEASURED: dict[tuple[str, int], dict] = {}


def measured(driver, base_url: str, page: str, width: int, screenshot_dir) -> dict:
    """One load's ``{"cut_off": [...], "sideways": {...}}``, with ``"reader": [...]`` at 1280 px."""
    key = (base_url + page, width)
    if key in _MEASURED:
        return _MEASURED[key]
    if width != 1280:
        cut_off, found = measure_page(driver, base_url + page, width, FIND_CLIPPING, FIND_SIDEWAYS)
        _MEASURED[key] = {"cut_off": cut_off, "sideways": found}
        return _MEASURED[key]
    screenshot = screenshot_dir / screenshot_name(page) if FULL_PAGE_SCREENSHOTS else None
    reported = set_width(driver, width)
    try:
        reader = check_in_browser(driver, base_url, page, screenshot)  # loads the page
        set_width(driver, width)  # again: the screenshot's tall window is undone
        time.sleep(0.2)  # let the layout settle
        cut_off = driver.execute_script(FIND_CLIPPING)
        found = driver.execute_script(FIND_SIDEWAYS)
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert reported == width, f"the viewport is {reported} px wide, not {width}"
    _MEASURED[key] = {"reader": reader, "cut_off": cut_off, "sideways": found}
    return _MEASURED[key]


@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES)
def test_page(page, html_dir, book_server, driver, screenshot_dir):
    assert (html_dir / page).is_file(), f"{page} is listed in _toc.yml but was not built"
    problems = find_broken_links(html_dir, page)

    source = source_of(page.removesuffix(".html"))
    if source is not None and source.suffix == ".ipynb":
        download = html_dir / "_sources" / (page.removesuffix(".html") + ".ipynb")
        hrefs = [url for tag, url in _parse(html_dir / page).urls if tag == "a"]
        if not any(
            url.endswith("_sources/" + download.relative_to(html_dir / "_sources").as_posix())
            for url in hrefs
        ):
            problems.append("no download link to the page's .ipynb")
        if not download.is_file() or "cells" not in json.loads(download.read_text(encoding="utf8")):
            problems.append(
                f"the .ipynb download {download.relative_to(html_dir)} is missing or not a notebook"
            )

    problems += measured(driver, book_server.url, page, 1280, screenshot_dir)["reader"]
    assert not problems, f"{page}:\n  " + "\n  ".join(problems)


@pytest.mark.browser
@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"{w}px")
@pytest.mark.parametrize("page", PAGES)
def test_nothing_cut_off(page, width, html_dir, book_server, driver, screenshot_dir):
    problems = measured(driver, book_server.url, page, width, screenshot_dir)["cut_off"]
    assert not problems, f"{page} at {width} px:\n  " + "\n  ".join(problems)


# ---------------------------------------------------------------------------------------------
# The detector can fail

BROKEN = """<!doctype html><html><head><style>
  body { margin: 0; }
  main { width: 360px; margin: 0 20px; }
  .wide { display: inline-block; width: 900px; height: 20px; background: #ccd; }
  div.math { position: relative; }
  span.eqno { float: right; }
  .clip { overflow: hidden; }
</style></head><body><main><article>
  <div class="math clip" id="equation-clipped"><span class="eqno">(1.1)</span>
    <div class="equation"><span class="wide"></span></div></div>
  <div class="math" id="equation-under"><span class="eqno">(1.2)</span>
    <div class="equation"><span class="wide"></span></div></div>
  <div class="highlight"><pre style="overflow: visible">PLACEHOLDER</pre></div>
  <table><tr><td><span class="wide"></span></td></tr></table>
</article></main></body></html>
"""

REPAIRED = (
    BROKEN.replace(".clip { overflow: hidden; }", ".clip { overflow-x: auto; }")
    .replace('<div class="equation"><span', '<div class="equation" style="overflow-x: auto"><span')
    .replace('style="overflow: visible"', 'style="overflow-x: auto"')
    .replace("<table>", '<table style="display: block; overflow-x: auto; max-width: 100%">')
)


def test_detector_pages_differ():
    assert REPAIRED != BROKEN and REPAIRED.count("overflow-x: auto") == 5


@pytest.mark.browser
def test_detector_layout(driver, serve_dir, tmp_path):
    long_line = "x = " + " + ".join(["token"] * 40)
    (tmp_path / "broken.html").write_text(BROKEN.replace("PLACEHOLDER", long_line), "utf8")
    (tmp_path / "repaired.html").write_text(REPAIRED.replace("PLACEHOLDER", long_line), "utf8")
    with serve_dir(tmp_path) as server:
        broken = layout_problems(driver, server.url + "broken.html", 400, wait_for_mathjax=False)
        repaired = layout_problems(
            driver, server.url + "repaired.html", 400, wait_for_mathjax=False
        )
    text = "\n".join(broken)
    assert "equation-clipped" in text and "cut off without a scroll bar" in text
    assert "equation number (1.2) overlaps" in text
    assert "pre." in text and "table" in text
    assert repaired == [], repaired


# ---------------------------------------------------------------------------------------------
# Nothing scrolls sideways at 1280 px; the page never scrolls sideways at 400 px
#
# The checks above accept a code block, an output or an equation that scrolls inside its own box.
# On a 1280-px laptop screen nothing a reader needs should: the book's code lines are at most 88
# characters and _css/layout.css sizes code and outputs so that they fit, long output lines wrap,
# and an equation too wide to sit beside its number takes the column's whole width. The test
# measures the real widths in the browser (scrollWidth against clientWidth), not characters. At
# 400 px code may scroll inside its box (a phone cannot show 88 characters) and equations may
# scroll inside theirs (with the shadow cue of layout.css), but the page itself must not.

# What still scrolls sideways at 1280 px only because its source needs an edit (the edits are
# proposed to the book's editors). Each entry is (page, kind, what): kind "code" or "output" with
# the start of the element's longest line, or "math" with the equation's label. An entry that no
# longer scrolls fails the test too, so that this list is emptied as the sources are fixed.
WIDE_AT_1280_ALLOWED: set[tuple[str, str, str]] = set()

# Returns [kind, what, overflow in px] for every code block, output and display equation whose
# content is wider than its box, and the page's own sideways overflow. Closed dropdowns are
# opened first: what they hide is read too once opened.
FIND_SIDEWAYS = r"""
for (const d of document.querySelectorAll('details')) d.open = true;
const longestLine = (el) => (el.innerText || el.textContent || '').split('\n')
  .reduce((a, b) => (b.length > a.length ? b : a), '');
const found = [];
const kinds = [
  ['output', 'div.cell_output pre, div.output pre'],
  ['code', 'div.highlight pre'],
  ['math', 'div.math mjx-container'],
];
const seen = new Set();
for (const [kind, selector] of kinds) {
  for (const el of document.querySelectorAll(selector)) {
    if (seen.has(el) || el.offsetParent === null) continue;
    seen.add(el);
    const over = el.scrollWidth - el.clientWidth;
    if (over <= 1) continue;
    let what;
    if (kind === 'math') {
      const box = el.closest('div.math');
      what = ((box && box.id) || '').replace(/^equation-/, '') ||
             (box && box.querySelector('span.eqno') || {textContent: '?'}).textContent;
    } else {
      what = Array.from(longestLine(el).trim()).slice(0, 60).join('');
    }
    found.push([kind, what, over]);
  }
}
const page = document.documentElement.scrollWidth - document.documentElement.clientWidth;
return {found, page};
"""


def sideways(driver, url: str, width: int, *, wait_for_mathjax: bool = True) -> dict:
    """``{"found": [[kind, what, px], ...], "page": px}`` for the page at ``url``."""
    return measure_page(driver, url, width, FIND_SIDEWAYS, wait_for_mathjax=wait_for_mathjax)


def scrolling_problems(page: str, found, allowed=WIDE_AT_1280_ALLOWED) -> list[str]:
    """What scrolls sideways and is not allowed, and allowed entries that no longer scroll."""
    problems, used = [], set()
    for kind, what, over in found:
        entry = next((a for a in allowed if a[:2] == (page, kind) and what.startswith(a[2])), None)
        if entry:
            used.add(entry)
        else:
            problems.append(f"{kind} scrolls sideways by {over} px: {what!r}")
    for entry in sorted(a for a in allowed if a[0] == page and a not in used):
        problems.append(f"{entry} is allowed to scroll but fits now: remove it from the list")
    return problems


@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES)
def test_nothing_scrolls_sideways_at_1280(page, html_dir, book_server, driver, screenshot_dir):
    result = measured(driver, book_server.url, page, 1280, screenshot_dir)["sideways"]
    problems = scrolling_problems(page, result["found"])
    if result["page"] > 0:
        problems.append(f"the page scrolls sideways by {result['page']} px")
    assert not problems, f"{page} at 1280 px:\n  " + "\n  ".join(problems)


@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES)
def test_page_does_not_scroll_sideways_at_400(page, html_dir, book_server, driver, screenshot_dir):
    result = measured(driver, book_server.url, page, 400, screenshot_dir)["sideways"]
    assert result["page"] <= 0, f"{page} at 400 px scrolls sideways by {result['page']} px"


SIDEWAYS_BROKEN = """<!doctype html><html><head><style>
  body { margin: 0; }
  main { width: 360px; margin: 0 20px; }
  pre { overflow-x: auto; font: 12px monospace; }
  div.math { display: flex; flex-direction: row-reverse; }
  mjx-container { display: block; overflow-x: auto; flex: 1 1 auto; min-width: 0; }
  .wide { display: inline-block; width: 600px; height: 20px; background: #ccd; }
</style></head><body><main><article>
  <div class="highlight"><pre>CODE</pre></div>
  <div class="cell_output"><pre>OUTPUT</pre></div>
  <div class="math" id="equation-eq-wide"><span class="eqno">(1.1)</span>
    <mjx-container><span class="wide"></span></mjx-container></div>
  <p>A long path: <code>PATH</code></p>
</article></main></body></html>
"""


def test_scrolling_problems_allow_list():
    found = [["code", "make serve  # builds", 6], ["math", "eq-other", 40]]
    allowed = {("p.html", "code", "make serve"), ("p.html", "math", "eq-fixed")}
    problems = scrolling_problems("p.html", found, allowed)
    assert len(problems) == 2, problems
    assert "eq-other" in problems[0] and "40 px" in problems[0]
    assert "eq-fixed" in problems[1] and "remove it" in problems[1]
    assert scrolling_problems("q.html", [], allowed) == []


@pytest.mark.browser
def test_detector_sideways(driver, serve_dir, tmp_path):
    long_code = "x = " + " + ".join(["token"] * 20)  # 164 characters: wider than 360 px
    long_output = " ".join(["word"] * 40)
    broken = (
        SIDEWAYS_BROKEN.replace("CODE", long_code)
        .replace("OUTPUT", long_output)
        .replace("PATH", "src/" + "a_long_folder_name/" * 8)
    )
    repaired = (  # short code, a wrapping output, a narrower equation, a path with spaces
        SIDEWAYS_BROKEN.replace("CODE", "x = token + token")
        .replace("<pre>OUTPUT", '<pre style="white-space: pre-wrap">' + long_output)
        .replace('class="wide"', 'class="wide" style="width: 200px"')
        .replace("PATH", "src/" + "a_long_folder_name/ " * 8)
    )
    assert repaired.count("pre-wrap") == 1 and long_code not in repaired
    (tmp_path / "broken.html").write_text(broken, "utf8")
    (tmp_path / "repaired.html").write_text(repaired, "utf8")
    with serve_dir(tmp_path) as server:
        bad = sideways(driver, server.url + "broken.html", 400, wait_for_mathjax=False)
        good = sideways(driver, server.url + "repaired.html", 400, wait_for_mathjax=False)
    kinds = {kind for kind, _, _ in bad["found"]}
    assert kinds == {"code", "output", "math"}, bad
    assert ["math", "eq-wide"] in [f[:2] for f in bad["found"]]
    assert any(what.startswith("x = token + token") for _, what, _ in bad["found"])
    assert scrolling_problems("broken.html", bad["found"], set()), bad
    assert bad["page"] > 0, bad
    assert good == {"found": [], "page": 0}, good
