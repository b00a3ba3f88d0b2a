"""Chapter 10's dates model runs in the page (_static/infer.js) and computes what JAX computes.

The references are computed here from the committed checkpoint, book/checkpoints/dates_model.eqx,
on dates of the chapter's three test sets: teacher-forced logits on 21 pairs equal JAX's within
1e-4 (the page stores the weights in float32), and the greedy answers on 21 dates are
`greedy_decode`'s. A negative control (one value map of the cross-attention transposed in the
page) must break both comparisons. The widget works from file:// and asks only for local files.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from infer_helpers import open_with_model, start_widget
from test_offline import non_local

pytestmark = pytest.mark.browser

PAGE = "book/10_encoder_decoder.html"
REPO = Path(__file__).resolve().parents[2]
CHECKPOINT = REPO / "book" / "checkpoints" / "dates_model.eqx"
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def reference():
    import jax
    import jax.numpy as jnp

    from transformer_intro.datasets import dates
    from transformer_intro.training import load_checkpoint

    model, _ = load_checkpoint(CHECKPOINT)
    pairs = [pair for pairs in dates.load_test_sets(7).values() for pair in pairs]
    texts = [text for text, _ in pairs]
    sources = dates.encode_sources(texts)
    inputs, _ = dates.encode_targets([iso for _, iso in pairs])
    with jax.default_matmul_precision("highest"):
        logits = np.asarray(jax.vmap(model)(jnp.asarray(sources), jnp.asarray(inputs)), np.float64)
        answers = np.asarray(model.greedy_decode(jnp.asarray(sources), dates.START_ID))
    return {
        "texts": texts,
        "sources": [s[s != dates.PAD_ID].tolist() for s in sources],
        "inputs": [i[i != dates.PAD_ID].tolist() for i in inputs],
        "logits": logits,
        "answers": [dates.decode_target(a) for a in answers],
    }


@pytest.fixture
def page(driver, book_server):
    """The chapter from the local server with its model loaded."""
    return open_with_model(driver, book_server.url + PAGE, "dates")


def largest_difference(driver, reference) -> float:
    shown = driver.execute_script(
        "return arguments[0].map((s, i) => bookModels.models.dates.logits(s, arguments[1][i]));",
        reference["sources"],
        reference["inputs"],
    )
    return max(
        np.abs(np.asarray(rows) - reference["logits"][i, : len(rows)]).max()
        for i, rows in enumerate(shown)
    )


def answers(driver, texts):
    return driver.execute_script(
        "return arguments[0].map((t) => bookModels.models.dates.answer(t).text);", texts
    )


def test_logits_equal_jax(page, reference):
    difference = largest_difference(page, reference)
    print(f"largest logit difference, page vs JAX (float32 weights): {difference:.2e}")
    assert len(reference["texts"]) >= 20
    assert difference < TOLERANCE


def test_greedy_answers_equal_greedy_decode(page, reference):
    assert answers(page, reference["texts"]) == reference["answers"]


def test_a_transposed_value_map_is_caught(page, reference):
    transpose = (
        "bookModels.debug.transpose('dates', 'decoder.1.cross_attention.value_projections');"
    )
    page.execute_script(transpose)
    try:
        difference = largest_difference(page, reference)
        shown = answers(page, reference["texts"])
    finally:
        page.execute_script(transpose)
    assert difference > 100 * TOLERANCE
    assert shown != reference["answers"]
    assert largest_difference(page, reference) < TOLERANCE  # restored


def test_widget_from_file(html_dir, driver):
    driver.get_log("performance")
    driver.get((html_dir / PAGE).as_uri())
    start_widget(driver, "dates", "result", timeout=30)
    driver.execute_script(
        "const i = document.querySelector('div.book-infer input.bi-date');"
        "i.value = '22 April 2019'; i.dispatchEvent(new Event('input'));"
        "document.querySelectorAll('div.book-infer .bi-out')[2].click();"
    )
    state = driver.execute_script(
        "const s = bookModels.widgets.dates;"
        "return {text: s.result.text, chosen: s.chosen, weights: s.shownAttention,"
        " cells: document.querySelectorAll('div.book-infer .bi-out').length,"
        " sources: document.querySelectorAll('div.book-infer .bi-src').length};"
    )
    assert state["text"] == "2019-04-22"
    assert state["cells"] == 10 and state["chosen"] == 2
    assert state["sources"] == len("22 April 2019")
    assert abs(sum(state["weights"]) - 1) < 1e-9
    requested = [
        json.loads(e["message"])["message"]["params"]["request"]["url"]
        for e in driver.get_log("performance")
        if '"Network.requestWillBeSent"' in e["message"]
    ]
    assert any(u.endswith("models/dates.js") for u in requested), requested
    assert not non_local(requested)
    assert not [u for u in requested if u.startswith(("http:", "https:"))], requested
