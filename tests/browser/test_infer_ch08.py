"""Chapter 8's ViT runs in the page (_static/infer.js) and computes what JAX computes.

The reference values are computed here from the committed checkpoint,
book/checkpoints/vit_default.eqx, on MNIST's test digits: the page's logits on 20 digits equal
JAX's within 1e-4 (the page stores the weights in float32), its classes on 100 digits are
Python's, and a digit drawn with pointer events is prepared as
``transformer_intro.export.prepare_drawing`` prepares the same canvas pixels, and classified alike.
A negative control (the patch filters transposed in the page) must break the comparisons. The
page also works from file://, and only asks for local files.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from infer_helpers import open_with_model, start_widget
from test_offline import non_local

pytestmark = pytest.mark.browser

PAGE = "book/08_vision_transformer.html"
REPO = Path(__file__).resolve().parents[2]
CHECKPOINT = REPO / "book" / "checkpoints" / "vit_default.eqx"
TOLERANCE = 1e-4
# A 7 drawn in canvas coordinates (the canvas is 280 x 280): the bar, then the stem.
STROKES = [
    [(70, 60), (110, 58), (150, 57), (200, 58), (205, 62)],
    [(205, 62), (185, 110), (165, 160), (150, 200), (140, 235)],
]


@pytest.fixture(scope="module")
def reference():
    import jax

    from transformer_intro.datasets import load_mnist
    from transformer_intro.training import load_checkpoint

    model, _ = load_checkpoint(CHECKPOINT)
    images, _ = load_mnist("test")
    pixels = images[:100].astype(np.float64) / 255
    with jax.default_matmul_precision("highest"):
        logits = np.asarray(
            jax.vmap(model)((pixels.astype(np.float32) * 2 - 1)[:, None]), np.float64
        )
    return model, pixels, logits


@pytest.fixture
def page(driver, book_server):
    """The chapter from the local server with its model loaded."""
    return open_with_model(driver, book_server.url + PAGE, "vit")


def page_logits(driver, pixels: np.ndarray) -> np.ndarray:
    return np.asarray(
        driver.execute_script(
            "return arguments[0].map((p) => bookModels.models.vit.logits(p));",
            pixels.reshape(len(pixels), -1).tolist(),
        )
    )


def test_logits_equal_jax(page, reference):
    _, pixels, logits = reference
    shown = page_logits(page, pixels[:20])
    difference = np.abs(shown - logits[:20]).max()
    print(f"largest logit difference, page vs JAX (float32 weights): {difference:.2e}")
    assert difference < TOLERANCE


def test_classes_of_100_digits_equal_pythons(page, reference):
    _, pixels, logits = reference
    classes = page.execute_script(
        "return arguments[0].map((p) => bookModels.models.vit.predict(p));",
        pixels.reshape(100, -1).tolist(),
    )
    assert classes == logits.argmax(-1).tolist()


def test_a_transposed_weight_matrix_is_caught(page, reference):
    _, pixels, logits = reference
    transpose = "bookModels.debug.transpose('vit', 'tokeniser.convolution.weight');"
    page.execute_script(transpose)
    try:
        shown = page_logits(page, pixels[:20])
    finally:
        page.execute_script(transpose)
    assert np.abs(shown - logits[:20]).max() > 100 * TOLERANCE
    assert (shown.argmax(-1) != logits[:20].argmax(-1)).any()
    assert np.abs(page_logits(page, pixels[:2]) - logits[:2]).max() < TOLERANCE  # restored


def _replay(driver, strokes):
    """Draw the strokes with pointer events dispatched on the canvas."""
    driver.execute_script(
        """
        const canvas = document.querySelector('div.book-infer canvas.bi-draw');
        canvas.scrollIntoView({block: 'center'});
        const r = canvas.getBoundingClientRect();
        const at = ([x, y]) => ({clientX: r.left + x * r.width / canvas.width,
                                 clientY: r.top + y * r.height / canvas.height,
                                 pointerId: 1, bubbles: true, isPrimary: true});
        document.querySelector('div.book-infer button:not(.bi-start)').click();  // Clear
        for (const stroke of arguments[0]) {
          canvas.dispatchEvent(new PointerEvent('pointerdown', at(stroke[0])));
          for (const point of stroke.slice(1)) {
            canvas.dispatchEvent(new PointerEvent('pointermove', at(point)));
          }
          canvas.dispatchEvent(new PointerEvent('pointerup', at(stroke[stroke.length - 1])));
        }
        """,
        strokes,
    )


def test_drawing_is_prepared_like_mnist(page, reference):
    import jax

    from transformer_intro.export import prepare_drawing

    model, _, _ = reference
    start_widget(page, "vit", "result", timeout=30)
    _replay(page, STROKES)
    state = page.execute_script(
        "const s = bookModels.widgets.vit;"
        "return {ink: Array.from(s.ink), pixels: s.pixels, predicted: s.predicted};"
    )
    ink = np.asarray(state["ink"]).reshape(280, 280)
    assert ink.max() > 0.9, "nothing was drawn"
    expected = prepare_drawing(ink)
    shown = np.asarray(state["pixels"]).reshape(28, 28)
    assert np.abs(shown - expected).max() <= 1 / 255
    with jax.default_matmul_precision("highest"):
        python_class = int(np.argmax(model((expected.astype(np.float32) * 2 - 1)[None])))
    assert state["predicted"] == python_class == 7
    # the comparison can fail: the same drawing one pixel lower is another image
    assert np.abs(shown - np.roll(expected, 1, axis=0)).max() > 1 / 255


def test_works_from_file_and_stays_local(html_dir, driver):
    driver.get_log("performance")
    driver.get((html_dir / PAGE).as_uri())
    start_widget(driver, "vit", "result", timeout=30)
    digits = driver.execute_script(
        "return bookModels.models.vit.digits().map((d) => bookModels.models.vit.predict(d.pixels));"
    )
    assert digits == list(range(10))
    assert driver.execute_script("return document.querySelectorAll('.bi-bar').length") == 10
    urls = [
        entry["message"]
        for entry in driver.get_log("performance")
        if '"Network.requestWillBeSent"' in entry["message"]
    ]
    import json

    requested = [json.loads(u)["message"]["params"]["request"]["url"] for u in urls]
    assert any(u.endswith("models/vit.js") for u in requested), requested
    assert requested and not non_local(requested)
    assert not [u for u in requested if u.startswith(("http:", "https:"))], requested
