"""The static pictures beside the in-page models of chapters 8, 9 and 10 (book/figures/infer_*.png).

Each widget, ``<div class="book-infer" data-model="...">``, is followed by its picture,
``img.book-infer-static`` (drawn by scripts/infer_fallbacks.py). Three ways to read the page:

- without JavaScript (Chromium's script execution switched off before the page loads): the
  ``<noscript>`` sentence and the picture show, and the picture has loaded;
- printed (print media emulated, JavaScript on): the picture shows and the widget does not;
- on screen with JavaScript: the widget shows (its start button), the picture does not.

The paragraph that says what to try with a widget (``.book-infer-try``) shows only beside a live
widget: without JavaScript and on paper there is no button to press.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

PAGES = {
    "vit": "book/08_vision_transformer.html",
    "lm": "book/09_language_model.html",
    "dates": "book/10_encoder_decoder.html",
}

STATE = r"""
const model = arguments[0];
const widget = document.querySelector(`div.book-infer[data-model="${model}"]`);
const images = [...document.querySelectorAll("img.book-infer-static")];
const image = images.find((img) => img.src.endsWith(`/infer_${model}.png`));
const shown = (node) => !!node && getComputedStyle(node).display !== "none"
  && node.getBoundingClientRect().width > 0;
return {
  images: images.length,
  src: image ? image.getAttribute("src") : null,
  alt: image ? image.alt : null,
  loaded: !!image && image.complete && image.naturalWidth > 0,
  natural: image ? [image.naturalWidth, image.naturalHeight] : null,
  imageShown: shown(image),
  follows: !!image && !!widget
    && !!(widget.compareDocumentPosition(image) & Node.DOCUMENT_POSITION_FOLLOWING),
  widgetShown: shown(widget),
  startShown: shown(widget && widget.querySelector("button.bi-start")),
  text: widget ? widget.innerText : null,
  scripted: document.documentElement.classList.contains("book-infer-js"),
  tryShown: [...document.querySelectorAll(".book-infer-try")].some(shown),
  tryText: [...document.querySelectorAll(".book-infer-try")].map((n) => n.textContent).join(""),
};
"""

SIZES = {"vit": [600, 520], "lm": [600, 440], "dates": [600, 460]}


def state(driver, model: str) -> dict:
    # the picture is loaded even where it is hidden (an eager image); wait for it
    driver.execute_script(
        "document.querySelectorAll('img.book-infer-static')"
        ".forEach((img) => { img.loading = 'eager'; });"
    )
    for _ in range(100):
        info = driver.execute_script(STATE, model)
        if info["loaded"]:
            break
        driver.execute_script("return new Promise((ok) => setTimeout(ok, 50));")
    return info


@pytest.fixture
def no_script(driver):
    """The driver with the pages' scripts switched off (and on again afterwards)."""
    driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        yield driver
    finally:
        driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})
        driver.get("about:blank")


@pytest.fixture
def printed(driver):
    """The driver emulating print media (and screen again afterwards)."""
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    try:
        yield driver
    finally:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})


@pytest.mark.parametrize("model", sorted(PAGES))
def test_without_javascript_the_picture_shows(no_script, book_server, model):
    no_script.get(book_server.url + PAGES[model])
    info = state(no_script, model)
    assert not info["scripted"], "infer.js ran although scripts are off"
    assert info["images"] == 1
    assert info["loaded"] and info["natural"] == SIZES[model], info
    assert info["imageShown"] and info["follows"], info
    assert info["alt"].startswith("Static picture of the")
    assert "This box needs JavaScript" in info["text"], info["text"]
    assert not info["startShown"]
    assert "What to try" in info["tryText"] and not info["tryShown"], "no button to press"


@pytest.mark.parametrize("model", sorted(PAGES))
def test_in_print_the_picture_replaces_the_widget(printed, book_server, model):
    printed.get(book_server.url + PAGES[model])
    info = state(printed, model)
    assert info["scripted"]
    assert info["loaded"] and info["imageShown"], info
    assert not info["widgetShown"], info
    assert "What to try" in info["tryText"] and not info["tryShown"], "no button on paper"


@pytest.mark.parametrize("model", sorted(PAGES))
def test_on_screen_with_javascript_the_widget_shows_and_the_picture_does_not(
    driver, book_server, model
):
    driver.get(book_server.url + PAGES[model])
    info = state(driver, model)
    assert info["scripted"]
    assert info["widgetShown"] and info["startShown"], info
    assert not info["imageShown"], info
    assert info["loaded"], "the hidden picture still loads, ready for print"
    assert "This box needs JavaScript" not in info["text"]
    assert info["tryShown"], "what to try with the widget shows beside it"
