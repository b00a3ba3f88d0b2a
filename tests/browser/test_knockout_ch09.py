"""Chapter 9's widget removes a head (block m, head h) as chapter 18 does; the page equals JAX.

The page (_static/infer.js) leaves head h of block m out of the heads' sum when ``keep[m][h] = 0``:
zero ablation, as ``transformer_intro.interpretability.run_with_heads`` computes it. The
reference is JAX's ablated logits with the same float16-rounded weights the page holds, on 8
windows of the held-out plays, which the page must equal within test_infer_ch09's 1e-4. The
control: the page with another head removed differs from that reference by far more than the
tolerance, so the comparison can tell heads apart. The widget's switch is then pressed: its
next-symbol logits are JAX's ablated logits of its context, and its greedy text is ``complete``'s
on the model with that head's output projection zeroed by ``zero_head`` (an ``eqx.tree_at``
edit, the other way chapter 18 removes a head).
"""

from __future__ import annotations

import numpy as np
import pytest
from infer_helpers import open_with_model, start_widget
from test_infer_ch09 import CHECKPOINT, PAGE, TOLERANCE

pytestmark = pytest.mark.browser

REMOVED = (0, 1)  # block 1, head 2 (0-based in code)
OTHER = (1, 3)  # the control: block 2, head 4
PROMPT = "KING.\n"
LENGTH = 100


def keep_without(config, head) -> list[list[int]]:
    keep = np.ones((config.num_blocks, config.block.num_heads), int)
    if head is not None:
        keep[head] = 0
    return keep.tolist()


@pytest.fixture(scope="module")
def reference():
    import jax

    from transformer_intro.datasets.shakespeare import load_shakespeare
    from transformer_intro.export import stored_precision
    from transformer_intro.interpretability import run_with_heads
    from transformer_intro.tokenisers import Vocabulary
    from transformer_intro.training import load_checkpoint

    model, info = load_checkpoint(CHECKPOINT)
    vocabulary = Vocabulary(info.extra["symbols"])
    text = load_shakespeare("validation")
    window = model.config.window
    starts = np.linspace(0, len(text) - window, 8).astype(int)
    inputs = np.stack([vocabulary.encode(text[s : s + window]) for s in starts])
    half = stored_precision(model, "float16-planes-deflate")
    keep = np.asarray(keep_without(model.config, REMOVED), np.float32)

    def ablated(symbols):
        with jax.default_matmul_precision("highest"):
            return np.asarray(run_with_heads(half, symbols, keep).logits, np.float64)

    with jax.default_matmul_precision("highest"):
        intact = np.asarray(jax.vmap(half)(inputs), np.float64)
        removed = np.asarray(jax.vmap(lambda s: run_with_heads(half, s, keep).logits)(inputs))
    return model, vocabulary, inputs, intact, removed.astype(np.float64), ablated


@pytest.fixture
def page(driver, book_server):
    return open_with_model(driver, book_server.url + PAGE, "lm")


def page_logits(driver, inputs: np.ndarray, keep) -> np.ndarray:
    return np.asarray(
        driver.execute_script(
            "return arguments[0].map((ids) => bookModels.models.lm.logits(ids, arguments[1]));",
            inputs.tolist(),
            keep,
        )
    )


def test_page_with_a_head_removed_equals_jax(page, reference):
    model, _, inputs, intact, removed, _ = reference
    shown = page_logits(page, inputs, keep_without(model.config, REMOVED))
    other = page_logits(page, inputs, keep_without(model.config, OTHER))
    gap = np.abs(shown - removed).max()
    control = np.abs(other - removed).max()
    effect = np.abs(removed - intact).max()
    print(
        f"head {REMOVED} removed, page vs JAX: {gap:.2e}; head {OTHER} removed instead: "
        f"{control:.2e}; the removal's own effect on the logits: {effect:.2e}"
    )
    assert gap < TOLERANCE
    assert control > 100 * TOLERANCE  # another head removed is told apart
    assert effect > 100 * TOLERANCE  # and removing this one changes the model
    # keep all ones is the model itself
    full = page_logits(page, inputs[:2], keep_without(model.config, None))
    assert np.abs(full - intact[:2]).max() < TOLERANCE


def test_widget_switch_removes_the_head(html_dir, driver, reference):
    """Press head REMOVED's switch: the widget's logits and greedy text are the ablated model's."""
    import jax

    from transformer_intro.interpretability import zero_head
    from transformer_intro.models.generation import complete

    model, vocabulary, *_, ablated = reference
    driver.get((html_dir / PAGE).as_uri())
    start_widget(driver, "lm", "run", timeout=60)
    m, h = REMOVED
    switch = f"div.book-infer[data-model=lm] button.bi-knock[data-block='{m}'][data-head='{h}']"
    driver.execute_script(f'document.querySelector("{switch}").click();')
    state = driver.execute_script(
        "const w = bookModels.widgets.lm;"
        "return {context: w.run.state.context, logits: w.run.logits(), keep: w.keep,"
        f' pressed: document.querySelector("{switch}").getAttribute("aria-pressed"),'
        " bars: document.querySelectorAll('div.book-infer[data-model=lm] .bi-bar').length};"
    )
    assert state["pressed"] == "true"
    assert state["keep"] == keep_without(model.config, REMOVED)
    assert state["bars"] == 5
    expected = ablated(np.asarray(state["context"]))[-1]
    assert np.abs(np.asarray(state["logits"]) - expected).max() < TOLERANCE
    # the page's greedy text with the head removed is JAX's with O_h zeroed (float32 weights)
    shown = driver.execute_script(
        "return bookModels.models.lm.complete(arguments[0], arguments[1],"
        " {temperature: 0, keep: arguments[2]});",
        PROMPT,
        LENGTH,
        keep_without(model.config, REMOVED),
    )
    edited = zero_head(model, *REMOVED)
    assert shown == complete(
        edited, vocabulary, PROMPT, LENGTH, jax.random.PRNGKey(0), temperature=0
    )
    assert shown != complete(
        model, vocabulary, PROMPT, LENGTH, jax.random.PRNGKey(0), temperature=0
    )
    # pressing it again puts the head back: the intact model's logits
    driver.execute_script(f'document.querySelector("{switch}").click();')
    back = driver.execute_script("return bookModels.widgets.lm.run.logits();")
    assert driver.execute_script("return bookModels.widgets.lm.keep.flat().every((k) => k);")
    assert np.abs(np.asarray(back) - np.asarray(state["logits"])).max() > 100 * TOLERANCE
