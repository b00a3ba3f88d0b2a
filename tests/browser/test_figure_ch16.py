"""Chapter 16's figures fit the page at 1280 and 400 px wide, and are drawn large enough to read.

The checks are chapter 14's (``test_figure_ch14``, whose detector test shows that they fail on a
figure that overflows its column or is shrunk to a thumbnail): each figure lies inside the
viewport and the content column and takes the room its figure gives it. That the dates figure's
legend (fig-ch16-dates) covers no bar and that every entry of it has a visible bar is asserted
where the figure is drawn, in the chapter's cell.
"""

from __future__ import annotations

import pytest
from test_figure_ch14 import WIDTHS, fit_problems, measure, set_width

PAGE = "book/16_quantisation_and_adapters.html"
FIGURES = ("fig-ch16-error", "fig-ch16-dates")


@pytest.mark.browser
@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"{w}px")
def test_figures_fit_the_page(width, html_dir, book_server, driver, screenshot_dir):
    boxes = measure(driver, book_server.url + PAGE, width, FIGURES)
    problems = []
    for name, box in boxes.items():
        problems += fit_problems(name, box)
    assert not problems, f"{PAGE} at {width} px:\n  " + "\n  ".join(problems)
    set_width(driver, width)
    try:
        for name in FIGURES:
            figure = driver.find_element("id", name)
            driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", figure)
            figure.screenshot(str(screenshot_dir / f"{name}-{width}.png"))
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
