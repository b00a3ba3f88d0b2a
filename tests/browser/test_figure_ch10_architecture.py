"""fig-ch10-architecture: every label inside its box, clear of its edges, at 1280 and 400 px.

The page shows the figure as a PNG, whose labels cannot be measured. So the test runs the
chapter's own figure cell here with matplotlib, saves the drawing as SVG (its glyphs become
paths, as in the PNG), and lays it over the page's image at the image's size, at 1280 and 400 px
wide. The browser then gives the box of each label's ink and of each rectangle and circle.

A label's box is the smallest rectangle or circle of the figure that holds the label's anchor
point. Every label must lie inside its box with a gap of at least 0.45 of a line of its text on
every side (a label on its box's edge, or on a frame's line, fails), each line of its ink at
least 7 px high, and must not cross any other box but those around its own (a frame's label may
not touch the boxes in the frame). A label outside every box must cross none.
``test_detector_*`` shows that the check fails on the figure the book had before (one label ran
past its box, one touched its box's edge, one sat on its frame's top line), on a label made too
long for its box, and on the figure shrunk to a 400-px screen's column (labels 4.4 px a line,
where the book shows them 8.9 px at both widths).
"""

from __future__ import annotations

import ast
import functools
import io
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHAPTER = REPO / "book" / "10_encoder_decoder.ipynb"
PAGE = "book/10_encoder_decoder.html"
FIGURE = "fig-ch10-architecture"
WIDTHS = (1280, 400)
# The least gap between a label's ink and its box's edge, in lines of the label's ink: nearer
# than about half a line a label reads as touching its box (the frames' labels the review found
# were 0.36 and 0.38 lines from the frame's top line, today's labels 0.50 and more). The "+" of a
# residual circle needs only to sit clear of the circle's box.
GAP = {"rectangle": 0.45, "circle": 0.25}
# The least height of a line of a label's ink, in CSS px, at either width: the caption's text is
# about 14 px a line; shrunk to the 400-px column the figure's labels were 4 px, unreadable
# (the figure now keeps its 1280-px width there, tests/browser/test_wide_figures.py).
LEAST_LINE_PX = 7.0

# The figure before this check (commit d69a6cc): the three labels the reader's review found.
OLD_FIGURE_CHANGES = {
    "box(ax, 2, 0.25, \"source characters $s_1 \\\\dots s_{N_s}$\\n(e.g. 'Apr. 22, 2019')\",\n"
    '    width=3.9, height=0.72, colour="white")': (
        "box(ax, 2, 0.25, \"source characters $s_1 \\\\dots s_{N_s}$  (e.g. 'Apr. 22, 2019')\",\n"
        '    width=3.9, colour="white")'
    ),
    'box(ax, 7, 7.25, "LayerNorm, linear $\\\\rightarrow$ next-character logits", width=3.9)': (
        'box(ax, 7, 7.25, "LayerNorm, linear $\\\\rightarrow$ next-character logits")'
    ),
    'ax.text(x + 0.12, y + height - 0.12, text, fontsize=8, va="top")': (
        'ax.text(x + 0.1, y + height - 0.07, text, fontsize=8, va="top")'
    ),
}

# The SVG laid over the image, then the box of every element the test named (CSS pixels).
OVERLAY = """
const [name, svg] = arguments;
const img = document.getElementById(name).querySelector("img");
img.scrollIntoView({block: "center"});
const r = img.getBoundingClientRect();
const layer = document.createElement("div");
layer.id = "measured-figure";
layer.style.cssText = `position: absolute; left: ${r.left + window.scrollX}px;
  top: ${r.top + window.scrollY}px; width: ${r.width}px; height: ${r.height}px; z-index: 9999`;
layer.innerHTML = svg;
const drawing = layer.querySelector("svg");
drawing.setAttribute("width", r.width);
drawing.setAttribute("height", r.height);
document.body.appendChild(layer);
const boxes = {};
for (const element of layer.querySelectorAll("[id^='shape-'], [id^='label-']")) {
  const b = element.getBoundingClientRect();
  boxes[element.id] = [b.left, b.top, b.right, b.bottom];
}
return {image: [r.left, r.top, r.right, r.bottom], boxes: boxes};
"""


def figure_source(changes: dict[str, str] | None = None) -> str:
    """The chapter's figure cell, with ``changes`` (old text -> new text) made to it."""
    cells = json.loads(CHAPTER.read_text(encoding="utf-8"))["cells"]
    (cell,) = [
        c
        for c in cells
        if c.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("name") == FIGURE
    ]
    source = "".join(cell["source"])
    for new, old in (changes or {}).items():
        assert new in source, f"the figure cell no longer has {new!r}"
        source = source.replace(new, old)
    return source


def chapter_style() -> str:
    """The chapter's ``plt.rcParams.update(...)`` statement, from its first code cell."""
    cells = json.loads(CHAPTER.read_text(encoding="utf-8"))["cells"]
    first = "".join(next(c for c in cells if c["cell_type"] == "code")["source"])
    for node in ast.walk(ast.parse(first)):
        if isinstance(node, ast.Expr) and "rcParams.update" in ast.unparse(node):
            return ast.get_source_segment(first, node)
    raise AssertionError("the chapter's first code cell sets no rcParams")


def drawn(source: str, extra: str = "") -> tuple[str, dict]:
    """The figure as SVG, its shapes and labels named, and each label's box and surroundings.

    Returns:
        ``(svg, layout)``; ``layout[label] = (its box or None, the shapes around that box)``,
        and ``layout["lines"]`` the number of lines of each label.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Circle, Rectangle

    figures = []
    namespace = {"plt": plt}
    with matplotlib.rc_context():
        exec(chapter_style(), namespace)
        show, plt.show = plt.show, lambda: figures.append(plt.gcf())
        try:
            exec(source + "\n" + extra, namespace)
        finally:
            plt.show = show
        (fig,) = figures
        ax = fig.axes[0]
        shapes, kinds = {}, {}
        for i, patch in enumerate(ax.patches):
            if isinstance(patch, Rectangle):
                x0, y0 = patch.get_xy()
                extent = (x0, y0, x0 + patch.get_width(), y0 + patch.get_height())
            elif isinstance(patch, Circle):
                (cx, cy), radius = patch.center, patch.radius
                extent = (cx - radius, cy - radius, cx + radius, cy + radius)
            else:
                continue
            patch.set_gid(f"shape-{i}")
            shapes[f"shape-{i}"] = extent
            kinds[f"shape-{i}"] = "circle" if isinstance(patch, Circle) else "rectangle"

        def inside(point, extent):
            return extent[0] <= point[0] <= extent[2] and extent[1] <= point[1] <= extent[3]

        def area(extent):
            return (extent[2] - extent[0]) * (extent[3] - extent[1])

        def around(name):  # the shapes that hold the whole of shape ``name``
            e = shapes[name]
            return {
                other
                for other, o in shapes.items()
                if other != name and o[0] <= e[0] and o[1] <= e[1] and e[2] <= o[2] and e[3] <= o[3]
            }

        layout, lines = {}, {}
        for j, text in enumerate(ax.texts):
            if not text.get_text().strip():
                continue  # an arrow's annotation
            holders = [s for s, e in shapes.items() if inside(text.get_position(), e)]
            box = min(holders, key=lambda s: area(shapes[s])) if holders else None
            text.set_gid(f"label-{j}")
            layout[f"label-{j}"] = (box, around(box) if box else set())
            lines[f"label-{j}"] = text.get_text().count("\n") + 1
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
        plt.close(fig)
    layout["lines"], layout["kinds"] = lines, kinds
    return buffer.getvalue(), layout


def smallest_line(boxes: dict, layout: dict) -> float:
    """The least height of one line of a label's ink, in CSS px."""
    return min(
        (boxes[label][3] - boxes[label][1]) / lines
        for label, lines in layout["lines"].items()
        # a label in a rectangle: a residual circle's "+" is less than a line high
        if layout[label][0] is not None and layout["kinds"][layout[label][0]] == "rectangle"
    )


def problems(boxes: dict, layout: dict) -> list[str]:
    """What is wrong with the labels' places and sizes, measured in the browser (CSS px)."""
    found = []
    lines, kinds = layout["lines"], layout["kinds"]
    least_line = smallest_line(boxes, layout)
    if least_line < LEAST_LINE_PX:
        found.append(f"a label's line is {least_line:.1f} px high (at least {LEAST_LINE_PX})")
    shapes = {name: b for name, b in boxes.items() if name.startswith("shape-")}

    def crosses(a, b):
        return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]

    for label, place in layout.items():
        if label in ("lines", "kinds"):
            continue
        box, allowed = place
        ink = boxes[label]
        line = (ink[3] - ink[1]) / lines[label]
        if box is not None:
            outer = shapes[box]
            gaps = (ink[0] - outer[0], ink[1] - outer[1], outer[2] - ink[2], outer[3] - ink[3])
            least = GAP[kinds[box]] * line
            if min(gaps) < least:
                found.append(
                    f"{label} is {min(gaps):.1f} px from an edge of its {kinds[box]} {box}"
                    f" (at least {least:.1f} px, {GAP[kinds[box]]} of its line)"
                )
        for other, b in shapes.items():
            if other != box and other not in allowed and crosses(ink, b):
                found.append(f"{label} crosses {other}, which is not its box")
    return found


@functools.cache
def chapter_figure() -> tuple[str, dict]:
    return drawn(figure_source())


def measure(driver, url: str, width: int, svg: str) -> dict:
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
                FIGURE,
            )
        )
        assert driver.execute_script("return window.innerWidth") == width
        return driver.execute_script(OVERLAY, FIGURE, svg)
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


@pytest.mark.browser
@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"{w}px")
def test_labels_lie_inside_their_boxes(width, html_dir, book_server, driver, screenshot_dir):
    svg, layout = chapter_figure()
    measured = measure(driver, book_server.url + PAGE, width, svg)
    image = measured["image"]
    assert image[2] - image[0] > 100, f"the figure's image is {image[2] - image[0]:.0f} px wide"
    assert set(measured["boxes"]) >= {k for k in layout if k.startswith("label-")}, "not drawn"
    found = problems(measured["boxes"], layout)
    assert not found, f"{FIGURE} at {width} px:\n  " + "\n  ".join(found)


PAGE_FOR_DETECTOR = """<!doctype html><html><body><main style="width: {width}px">
<figure id="{name}" style="margin: 0"><img src="figure.png" style="width: 100%"></figure>
</main></body></html>"""


def _detector_page(tmp_path, width, page="page.html"):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(9.8, 6.4), dpi=100)
    fig.savefig(tmp_path / "figure.png")
    plt.close(fig)
    (tmp_path / page).write_text(PAGE_FOR_DETECTOR.format(width=width, name=FIGURE))


@pytest.mark.browser
def test_detector_fails_on_the_old_figure_a_label_too_long_and_the_figure_shrunk(
    driver, serve_dir, tmp_path
):
    _detector_page(tmp_path, 700)
    old_svg, old_layout = drawn(figure_source(OLD_FIGURE_CHANGES))
    long_svg, long_layout = drawn(
        figure_source(), 'box(ax, 2, 7.6, "a label far too long for the box it is in", width=1.5)'
    )
    new_svg, new_layout = chapter_figure()
    # Today's figure shrunk to a 400-px screen's column, as it was before the wide-figure rule.
    _detector_page(tmp_path, 337, "shrunk.html")
    with serve_dir(tmp_path) as server:
        shrunk = problems(
            measure(driver, server.url + "shrunk.html", 400, new_svg)["boxes"], new_layout
        )
        old = problems(
            measure(driver, server.url + "page.html", 1280, old_svg)["boxes"], old_layout
        )
        long = problems(
            measure(driver, server.url + "page.html", 1280, long_svg)["boxes"], long_layout
        )
        new = problems(
            measure(driver, server.url + "page.html", 1280, new_svg)["boxes"], new_layout
        )
    assert len(old) >= 3, old  # the three labels of the review
    assert long, long
    assert new == [], new  # control: today's figure on the same page passes
    assert any("px high" in p for p in shrunk), shrunk
