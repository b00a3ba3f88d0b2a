"""Chapter 10's widget removes a cross-attention head as chapter 18 does; the page equals JAX.

With ``keep[m][h] = 0`` the page (_static/infer.js) leaves cross-attention head h of decoder
layer m out of its layer's sum of heads: zero ablation, as
``transformer_intro.interpretability.run_decoder_with_heads`` computes it. The reference is
JAX's ablated teacher-forced logits on 21 pairs of the chapter's three test sets, which the page
must equal within test_infer_ch10's 1e-4 (the page holds the float32 weights). The control: the
page with another head removed differs from that reference by far more than the tolerance. The
ablated model's greedy answers, decoded in JAX with the same hook, are the page's; and the
widget's switch gives them too.
"""

from __future__ import annotations

import numpy as np
import pytest
from infer_helpers import open_with_model, start_widget
from test_infer_ch10 import CHECKPOINT, PAGE, TOLERANCE

pytestmark = pytest.mark.browser

REMOVED = (0, 2)  # layer 1, head 3 (0-based in code)
OTHER = (0, 1)  # the control: layer 1, head 2


def keep_without(config, head) -> list[list[int]]:
    keep = np.ones((config.decoder_layers, config.decoder.num_heads), int)
    if head is not None:
        keep[head] = 0
    return keep.tolist()


@pytest.fixture(scope="module")
def reference():
    import jax
    import jax.numpy as jnp

    from transformer_intro.datasets import dates
    from transformer_intro.interpretability import run_decoder_with_heads
    from transformer_intro.training import load_checkpoint

    model, _ = load_checkpoint(CHECKPOINT)
    pairs = [pair for pairs in dates.load_test_sets(7).values() for pair in pairs]
    texts = [text for text, _ in pairs]
    sources = jnp.asarray(dates.encode_sources(texts))  # padded, as chapter 10 reads them
    inputs, _ = dates.encode_targets([iso for _, iso in pairs])
    keep = jnp.asarray(keep_without(model.config, REMOVED), jnp.float32)
    ablated = jax.jit(
        jax.vmap(lambda s, t: run_decoder_with_heads(model, s, t, keep).logits)
    )  # fmt: skip

    with jax.default_matmul_precision("highest"):
        removed = np.asarray(ablated(sources, jnp.asarray(inputs)))
        intact = np.asarray(jax.vmap(model)(sources, jnp.asarray(inputs)))
        # the ablated model's greedy answers: position n's logits read only positions <= n,
        # so a padded target is decoded one position at a time
        written = np.full(inputs.shape, dates.PAD_ID, np.int32)
        written[:, 0] = dates.START_ID
        for n in range(inputs.shape[1] - 1):
            written[:, n + 1] = np.argmax(np.asarray(ablated(sources, written))[:, n], -1)
        # the last position's prediction too, as the page writes up to max_target_length symbols
        last = np.argmax(np.asarray(ablated(sources, written))[:, -1], -1)
        written = np.concatenate([written, last[:, None]], axis=1)
        intact_answers = np.asarray(model.greedy_decode(sources, dates.START_ID))
    lengths = [int((i != dates.PAD_ID).sum()) for i in inputs]
    return {
        "model": model,
        "texts": texts,
        "sources": [s[s != dates.PAD_ID].tolist() for s in np.asarray(sources)],
        "inputs": [i[:n].tolist() for i, n in zip(inputs, lengths)],
        "removed": [r[:n] for r, n in zip(removed, lengths)],
        "intact": [r[:n] for r, n in zip(intact, lengths)],
        "answers": [dates.decode_target(w[1:]) for w in written],
        "intact_answers": [dates.decode_target(a) for a in intact_answers],
    }


@pytest.fixture
def page(driver, book_server):
    return open_with_model(driver, book_server.url + PAGE, "dates")


def page_logits(driver, reference, keep):
    return driver.execute_script(
        "return arguments[0].map((s, i) =>"
        " bookModels.models.dates.logits(s, arguments[1][i], arguments[2]));",
        reference["sources"],
        reference["inputs"],
        keep,
    )


def largest(shown, expected) -> float:
    return max(np.abs(np.asarray(a) - b).max() for a, b in zip(shown, expected))


def test_page_with_a_cross_attention_head_removed_equals_jax(page, reference):
    config = reference["model"].config
    shown = page_logits(page, reference, keep_without(config, REMOVED))
    other = page_logits(page, reference, keep_without(config, OTHER))
    gap = largest(shown, reference["removed"])
    control = largest(other, reference["removed"])
    effect = largest(reference["removed"], reference["intact"])
    print(
        f"cross-attention head {REMOVED} removed, page vs JAX: {gap:.2e}; head {OTHER} removed "
        f"instead: {control:.2e}; the removal's own effect on the logits: {effect:.2e}"
    )
    assert gap < TOLERANCE
    assert control > 100 * TOLERANCE  # another head removed is told apart
    assert effect > 100 * TOLERANCE  # and removing this one changes the model


def test_greedy_answers_with_the_head_removed(page, reference):
    keep = keep_without(reference["model"].config, REMOVED)
    shown = page.execute_script(
        "return arguments[0].map((t) => bookModels.models.dates.answer(t, arguments[1]).text);",
        reference["texts"],
        keep,
    )
    assert shown == reference["answers"]
    changed = sum(a != b for a, b in zip(reference["answers"], reference["intact_answers"]))
    print(f"{changed} of {len(shown)} answers change with head {REMOVED} removed")
    assert changed > 0


def test_widget_switch_removes_the_head(html_dir, driver, reference):
    driver.get((html_dir / PAGE).as_uri())
    start_widget(driver, "dates", "result", timeout=60)
    m, h = REMOVED
    switch = f"div.book-infer[data-model=dates] button.bi-knock[data-block='{m}'][data-head='{h}']"
    texts = reference["texts"][:6]
    expected = reference["answers"][:6]
    read = (
        "const w = bookModels.widgets.dates, input = document.querySelector('input.bi-date');"
        "input.value = arguments[0]; input.dispatchEvent(new Event('input'));"
        "return w.result.text;"
    )
    driver.execute_script(f'document.querySelector("{switch}").click();')
    assert driver.execute_script(f'return document.querySelector("{switch}").ariaPressed;') == (
        "true"
    )
    assert [driver.execute_script(read, t) for t in texts] == expected
    driver.execute_script(f'document.querySelector("{switch}").click();')  # the head is back
    assert [driver.execute_script(read, t) for t in texts] == reference["intact_answers"][:6]
