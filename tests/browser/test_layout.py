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
inside the column. ``test_detector_layout`` shows that the checks fail on a synthetic page with
each kind of fault, and pass on its repaired twin.
"""

from __future__ import annotations

import time

import pytest
from test_pages import PAGES, WAIT_FOR_MATHJAX

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


def layout_problems(driver, url: str, width: int, *, wait_for_mathjax: bool = True) -> list[str]:
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
        problems = driver.execute_script(FIND_CLIPPING)
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert reported == width, f"the viewport is {reported} px wide, not {width}"
    return problems


@pytest.mark.browser
@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"{w}px")
@pytest.mark.parametrize("page", PAGES)
def test_nothing_cut_off(page, width, html_dir, book_server, driver):
    problems = layout_problems(driver, book_server.url + page, width)
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
