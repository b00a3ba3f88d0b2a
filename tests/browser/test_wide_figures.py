"""A diagram marked ``wide-figure`` keeps its 1280-px size at 400 px, and scrolls in its own box.

A diagram's labels are its content. Shrunk to a 400-px column, a figure drawn 9 to 11 inches wide
sets them about 4 px high. A figure whose metadata gives it the class ``wide-figure`` keeps at
400 px the width its image has at 1280 px (``_css/layout.css``): the image scrolls sideways inside
the figure, the page itself does not, and the caption stays in view however far the image is
scrolled. Measured in the browser for every such figure of the book; ``test_detector_*`` shows
that the check fails on the same figure without the book's style sheet and without the caption's
sticky position.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NARROW, WIDE = 400, 1280
# At 400 px the image must be at least this share of its 1280-px width.
LEAST_SHARE = 0.95


def wide_figures() -> list[tuple[str, str]]:
    """(page, figure name) for every figure of the book with the class ``wide-figure``."""
    found = []
    for notebook in sorted((REPO / "book").glob("*.ipynb")):
        for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
            figure = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
            if "wide-figure" in str(figure.get("classes", "")).split():
                found.append((f"book/{notebook.stem}.html", figure["name"]))
    return found


# The image's width, the figure's scroll widths, the caption's box before and after the figure
# is scrolled to its right end, and how far the page scrolls sideways.
MEASURE = """
const figure = document.getElementById(arguments[0]);
const img = figure.querySelector('img'), caption = figure.querySelector('figcaption');
figure.scrollIntoView({block: 'center'});
const box = (el) => { const r = el.getBoundingClientRect(); return [r.left, r.right]; };
const before = box(caption);
figure.scrollLeft = figure.scrollWidth;
const after = box(caption);
return {
  image: img.getBoundingClientRect().width,
  scroll: [figure.scrollWidth, figure.clientWidth],
  caption: [before, after],
  page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
  viewport: window.innerWidth,
};
"""


def measure(driver, url: str, name: str, width: int) -> dict:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 1000, "deviceScaleFactor": 1, "mobile": False},
    )
    try:
        driver.get(url)
        WebDriverWait(driver, 60).until(
            lambda d: d.execute_script(
                "const f = document.getElementById(arguments[0]);"
                "const i = f && f.querySelector('img'); return !!(i && i.complete);",
                name,
            )
        )
        return driver.execute_script(MEASURE, name)
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def problems(wide: dict, narrow: dict) -> list[str]:
    """What is wrong at 400 px (``narrow``), given the figure at 1280 px (``wide``)."""
    found = []
    if narrow["image"] < LEAST_SHARE * wide["image"]:
        found.append(
            f"the image is {narrow['image']:.0f} px wide at {NARROW} px, {wide['image']:.0f} px at"
            f" {WIDE}: its labels shrink to {narrow['image'] / wide['image']:.2f} of their size"
        )
    if narrow["page"] > 0:
        found.append(f"the page scrolls sideways by {narrow['page']} px")
    for when, (left, right) in zip(("unscrolled", "scrolled to its end"), narrow["caption"]):
        if left < -1 or right > narrow["viewport"] + 1:
            found.append(f"the caption ({left:.0f}-{right:.0f} px) leaves the screen, {when}")
    return found


@pytest.mark.browser
def test_the_book_marks_its_diagrams_wide():
    names = {name for _, name in wide_figures()}
    assert {"fig-ch10-architecture", "fig-ch15-architecture"} <= names, names


@pytest.mark.browser
@pytest.mark.parametrize("page,name", wide_figures(), ids=lambda v: v.split("/")[-1])
def test_wide_figures_keep_their_size(page, name, html_dir, book_server, driver):
    wide = measure(driver, book_server.url + page, name, WIDE)
    narrow = measure(driver, book_server.url + page, name, NARROW)
    assert wide["scroll"][0] <= wide["scroll"][1], f"{name} scrolls at {WIDE} px: {wide}"
    found = problems(wide, narrow)
    assert not found, f"{name} on {page}:\n  " + "\n  ".join(found)


PAGE = """<!doctype html><html><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width">{style}
<style>img {{ max-width: 100%; }} main {{ max-width: 676px; margin: 0 auto; }}
{extra}</style></head><body><main><div class="cell_output">
<figure class="wide-figure" id="fig-test"><img src="figure.png">
<figcaption><p>A caption of a few words.</p></figcaption></figure></div></main></body></html>"""


@pytest.mark.browser
def test_detector_fails_without_the_style_sheet_or_the_sticky_caption(driver, serve_dir, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(9.8, 6.4), dpi=100)
    fig.savefig(tmp_path / "figure.png")
    plt.close(fig)
    shutil.copy(REPO / "_css" / "layout.css", tmp_path / "layout.css")
    link = '<link rel="stylesheet" href="layout.css">'
    pages = {
        "book": PAGE.format(style=link, extra=""),
        "no_style": PAGE.format(style="", extra=""),
        "no_sticky": PAGE.format(style=link, extra="figcaption { position: static !important; }"),
    }
    for kind, html in pages.items():
        (tmp_path / f"{kind}.html").write_text(html)
    with serve_dir(tmp_path) as server:
        found = {
            kind: problems(
                measure(driver, server.url + f"{kind}.html", "fig-test", WIDE),
                measure(driver, server.url + f"{kind}.html", "fig-test", NARROW),
            )
            for kind in pages
        }
    assert found["book"] == [], found["book"]  # control: the book's rule passes
    assert any("labels shrink" in p for p in found["no_style"]), found["no_style"]
    assert any("scrolled to its end" in p for p in found["no_sticky"]), found["no_sticky"]
