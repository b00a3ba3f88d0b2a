"""Chapter 14's figures fit the page at 1280 and 400 px wide, and are drawn large enough to read.

For each of the chapter's figures, at both widths, the image must lie inside the viewport and
inside the page's content column (nothing of it cut off or scrolled out of sight), and be drawn at
its own width or, where the column is narrower, at the column's full width (a figure shrunk
further would lose its labels). At 400 px the ablation figure (fig-ch14-ablation), two panels of
curves, must keep at least 60% of its own width, so that its legend and axis labels stay legible.
``test_detector_figure_fit`` shows that the check fails on a figure that overflows its column and
on one shrunk to a thumbnail.
"""

from __future__ import annotations

import time

import pytest

PAGE = "book/14_modern_transformer.html"
FIGURES = ("fig-ch14-wavelengths", "fig-ch14-muon-singular-values", "fig-ch14-ablation")
WIDTHS = (1280, 400)

# The figure's image, the room its figure gives it and the content column, in CSS pixels.
MEASURE = """
const figure = document.getElementById(arguments[0]);
if (!figure) return null;
const img = figure.querySelector("img");
const column = figure.closest("article, main, .bd-article") || document.body;
const style = getComputedStyle(figure);
const f = figure.getBoundingClientRect();
const room = f.width - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
const r = img.getBoundingClientRect(), c = column.getBoundingClientRect();
return {complete: img.complete, natural: img.naturalWidth, left: r.left, right: r.right,
        width: r.width, room: room, column_left: c.left, column_right: c.right,
        viewport: document.documentElement.clientWidth};
"""


def set_width(driver, width: int) -> int:
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 1000, "deviceScaleFactor": 1, "mobile": False},
    )
    return driver.execute_script("return window.innerWidth")


def measure(driver, url: str, width: int, names) -> dict:
    """``{name: box}`` for each figure of the page at ``url`` laid out ``width`` px wide."""
    from selenium.webdriver.support.ui import WebDriverWait

    reported = set_width(driver, width)
    try:
        driver.get(url)
        WebDriverWait(driver, 60).until(
            lambda d: d.execute_script("return document.readyState") == "complete"
        )
        boxes = {}
        for name in names:
            WebDriverWait(driver, 30).until(
                lambda d, n=name: (d.execute_script(MEASURE, n) or {}).get("complete")
            )
            time.sleep(0.1)  # let the layout settle
            boxes[name] = driver.execute_script(MEASURE, name)
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert reported == width, f"the viewport is {reported} px wide, not {width}"
    return boxes


def fit_problems(name: str, box: dict | None, min_scale: float = 0.0) -> list[str]:
    """What is wrong with one figure's box: outside the page or column, or shrunk too far."""
    if box is None:
        return [f"{name}: no such figure on the page"]
    problems = []
    if box["left"] < -0.5 or box["right"] > box["viewport"] + 0.5:
        problems.append(
            f"{name}: drawn from {box['left']:.0f} to {box['right']:.0f} px, "
            f"outside the {box['viewport']} px viewport"
        )
    if box["left"] < box["column_left"] - 0.5 or box["right"] > box["column_right"] + 0.5:
        problems.append(
            f"{name}: wider than its column ({box['column_left']:.0f} to "
            f"{box['column_right']:.0f} px)"
        )
    expected = min(box["natural"], box["room"])
    if box["width"] < expected - 1:  # it takes the room its figure gives it
        problems.append(f"{name}: drawn {box['width']:.0f} px wide where {expected:.0f} px fit")
    if box["width"] < min_scale * box["natural"]:
        problems.append(
            f"{name}: drawn at {box['width'] / box['natural']:.0%} of its "
            f"{box['natural']} px, below {min_scale:.0%}"
        )
    return problems


@pytest.mark.browser
@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"{w}px")
def test_figures_fit_the_page(width, html_dir, book_server, driver, screenshot_dir):
    boxes = measure(driver, book_server.url + PAGE, width, FIGURES)
    problems = []
    for name, box in boxes.items():
        min_scale = 0.6 if name == "fig-ch14-ablation" else 0.0
        problems += fit_problems(name, box, min_scale)
    assert not problems, f"{PAGE} at {width} px:\n  " + "\n  ".join(problems)
    set_width(driver, width)
    try:
        figure = driver.find_element("id", "fig-ch14-ablation")
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", figure)
        figure.screenshot(str(screenshot_dir / f"fig-ch14-ablation-{width}.png"))
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


BROKEN = """<!doctype html><html><body><main style="width: 360px; margin: 0 20px">
<figure id="wide" style="margin: 0"><img src="wide.png" style="width: 900px"></figure>
<figure id="thumbnail" style="margin: 0"><img src="wide.png" style="width: 60px"></figure>
<figure id="fits" style="margin: 0"><img src="wide.png" style="max-width: 100%"></figure>
</main></body></html>"""


@pytest.mark.browser
def test_detector_figure_fit(driver, serve_dir, tmp_path):
    import struct
    import zlib

    # a 640 x 40 grey PNG, written without any imaging library
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\x80" * 640 for _ in range(40))
    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 640, 40, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )
    (tmp_path / "wide.png").write_bytes(png)
    (tmp_path / "page.html").write_text(BROKEN)
    with serve_dir(tmp_path) as server:
        boxes = measure(driver, server.url + "page.html", 400, ("wide", "thumbnail", "fits"))
    assert any("wider than its column" in p for p in fit_problems("wide", boxes["wide"]))
    assert any("where" in p for p in fit_problems("thumbnail", boxes["thumbnail"], 0.5))
    assert fit_problems("fits", boxes["fits"], 0.5) == []
