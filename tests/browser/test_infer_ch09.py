"""Chapter 9's language model runs in the page (_static/infer.js) and computes what JAX computes.

The page stores the weights in float16 (transformer_intro.export), so two references are computed
here from the committed checkpoint, book/checkpoints/shakespeare_lm.eqx: JAX with the same
float16-rounded weights, which the page must equal within 1e-4, and JAX with the float32 weights,
which the page must equal within the effect of the rounding measured here (plus 1e-4). The inputs
are 20 windows of the held-out plays. Greedy continuations of 3 prompts are `complete`'s text,
the same seed writes the same text, and removing the causal mask in the page breaks the logits.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from infer_helpers import open_with_model, start_widget
from test_offline import non_local

pytestmark = pytest.mark.browser

PAGE = "book/09_language_model.html"
REPO = Path(__file__).resolve().parents[2]
CHECKPOINT = REPO / "book" / "checkpoints" / "shakespeare_lm.eqx"
TOLERANCE = 1e-4
PROMPTS = ["ROMEO.\n", "KING.\n", "HAMLET.\nTo be, or not to be"]
LENGTH = 150  # characters: longer than the window, so the cache is rebuilt on the way


@pytest.fixture(scope="module")
def reference():
    import jax

    from transformer_intro.datasets.shakespeare import load_shakespeare
    from transformer_intro.export import stored_precision
    from transformer_intro.tokenisers import Vocabulary
    from transformer_intro.training import load_checkpoint

    model, info = load_checkpoint(CHECKPOINT)
    vocabulary = Vocabulary(info.extra["symbols"])
    text = load_shakespeare("validation")
    window = model.config.window
    starts = np.linspace(0, len(text) - window, 20).astype(int)
    inputs = np.stack([vocabulary.encode(text[s : s + window]) for s in starts])
    half = stored_precision(model, "float16-planes-deflate")
    with jax.default_matmul_precision("highest"):
        exact = np.asarray(jax.vmap(model)(inputs), np.float64)
        rounded = np.asarray(jax.vmap(half)(inputs), np.float64)
    return model, vocabulary, inputs, exact, rounded


@pytest.fixture
def page(driver, book_server):
    """The chapter from the local server with its model loaded."""
    return open_with_model(driver, book_server.url + PAGE, "lm")


def page_logits(driver, inputs: np.ndarray) -> np.ndarray:
    return np.asarray(
        driver.execute_script(
            "return arguments[0].map((ids) => bookModels.models.lm.logits(ids));",
            inputs.tolist(),
        )
    )


def test_logits_equal_jax(page, reference):
    _, _, inputs, exact, rounded = reference
    shown = page_logits(page, inputs)
    to_rounded = np.abs(shown - rounded).max()
    rounding = np.abs(rounded - exact).max()  # what float16 storage costs, measured in JAX
    to_exact = np.abs(shown - exact).max()
    print(
        f"largest logit difference, page vs JAX with the same float16 weights: {to_rounded:.2e}; "
        f"page vs JAX float32: {to_exact:.2e}; float16 rounding in JAX alone: {rounding:.2e}"
    )
    assert to_rounded < TOLERANCE
    assert to_exact < rounding + TOLERANCE


def test_without_the_causal_mask_the_logits_differ(page, reference):
    _, _, inputs, _, rounded = reference
    page.execute_script("bookModels.faults.noCausalMask = true;")
    try:
        shown = page_logits(page, inputs[:5])
    finally:
        page.execute_script("bookModels.faults.noCausalMask = false;")
    assert np.abs(shown - rounded[:5]).max() > 100 * TOLERANCE
    assert np.abs(page_logits(page, inputs[:1]) - rounded[:1]).max() < TOLERANCE


def test_greedy_continuations_equal_complete(page, reference):
    import jax

    from transformer_intro.models.generation import complete

    model, vocabulary, *_ = reference
    for prompt in PROMPTS:
        expected = complete(model, vocabulary, prompt, LENGTH, jax.random.PRNGKey(0), temperature=0)
        shown = page.execute_script(
            "return bookModels.models.lm.complete(arguments[0], arguments[1], {temperature: 0});",
            prompt,
            LENGTH,
        )
        assert shown == expected


def test_same_seed_same_text(page):
    run = (
        "return bookModels.models.lm.complete('KING.\\n', 80,"
        " {temperature: 1, topK: 10, seed: arguments[0]});"
    )
    first, again, other = (page.execute_script(run, seed) for seed in (5, 5, 6))
    assert first == again
    assert first != other


def test_widget_steps_and_shows_attention(html_dir, driver):
    """From file://: start the widget, step, and read the distribution and the attention."""
    driver.get_log("performance")
    driver.get((html_dir / PAGE).as_uri())
    start_widget(driver, "lm", "run", timeout=60)
    driver.execute_script(
        "const b = [...document.querySelectorAll('div.book-infer button')]"
        ".find((x) => x.textContent === 'Step'); for (let i = 0; i < 5; i++) b.click();"
    )
    state = driver.execute_script(
        "const s = bookModels.widgets.lm.run;"
        "return {text: s.text.join(''), context: s.state.context.length,"
        " bars: document.querySelectorAll('div.book-infer[data-model=lm] .bi-bar').length,"
        " shaded: document.querySelectorAll('div.book-infer .bi-text span.bi-ctx').length,"
        " attention: s.state.attention.map((b) => b.map((h) => h.reduce((a, v) => a + v, 0)))};"
    )
    assert len(state["text"]) == 5
    assert state["bars"] == 5
    assert state["shaded"] == state["context"]
    assert np.allclose(state["attention"], 1)  # every head's weights over the context sum to one
    # Run, then Stop: the text grows past the window, and the page says how fast it went
    press = (
        "[...document.querySelectorAll('div.book-infer button')]"
        ".find((x) => x.textContent === arguments[0]).click();"
    )
    driver.execute_script(press, "Run")
    time.sleep(2)
    driver.execute_script(press, "Stop")
    state = driver.execute_script(
        "return {n: bookModels.widgets.lm.run.text.length,"
        " speed: document.querySelector('div.book-infer[data-model=lm] .bi-timing').textContent,"
        " grey: document.querySelector('div.book-infer .bi-old').textContent.length};"
    )
    assert state["n"] > 64 and state["grey"] > 0, state
    assert state["speed"].endswith("symbols/s"), state
    requested = [
        json.loads(e["message"])["message"]["params"]["request"]["url"]
        for e in driver.get_log("performance")
        if '"Network.requestWillBeSent"' in e["message"]
    ]
    assert any(u.endswith("models/lm.js") for u in requested), requested
    assert not non_local(requested)
    assert not [u for u in requested if u.startswith(("http:", "https:"))], requested
