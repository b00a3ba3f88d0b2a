"""Chapter 15's interactive figure (fig-ch15-attention) shows SmolLM2's attention on its sentence.

The attention weights of every block and head are recomputed here from the model's GGUF file
(``load_smollm2``) on the chapter's sentence and compared with the numbers the page shows after
pointing at tokens, for blocks at the bottom, middle and top, to 3 decimals. The neighbouring
token's column must not match.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from explore_helpers import (
    assert_shows_columns,
    matches,
    read_values,
    select,
    wait_for_figure,
)

PAGE = "book/15_pretrained_model.html"
FIGURE = "fig-ch15-attention"
SENTENCE = "The trophy did not fit in the suitcase because it was too big."


@functools.cache
def recomputed() -> np.ndarray:
    """``A[m, h, n', n]`` of every block and head of SmolLM2 on the chapter's sentence."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    from transformer_intro.pretrained import load_smollm2

    try:
        model, tokenizer = load_smollm2()
    except FileNotFoundError:
        pytest.skip("the SmolLM2 GGUF file is not available")
    ids = jnp.asarray(tokenizer.encode(SENTENCE))
    with jax.default_matmul_precision("highest"):  # as the chapter computes them
        maps = eqx.filter_jit(model.attention_maps)(ids)
    return np.asarray(maps, np.float64)


# Run with the browser checks, whose figure test recomputes the same weights: computed once.
@pytest.mark.browser
def test_recomputed_weights_are_causal_attention():
    maps = recomputed()
    n = maps.shape[-1]
    assert maps.shape == (30, 9, n, n) and n > 10
    np.testing.assert_allclose(maps.sum(axis=2), 1.0, atol=1e-5)  # columns sum to one
    later = np.tril(np.ones((n, n), dtype=bool), k=-1)  # [n', n] with n' > n
    assert np.all(maps[..., later] < 1e-6)  # no output reads a later input


@pytest.mark.browser
def test_figure_shows_the_models_attention(html_dir, book_server, driver, screenshot_dir):
    maps = recomputed()
    n_blocks, n_heads, n, _ = maps.shape
    driver.get(book_server.url + PAGE)
    root = wait_for_figure(driver, FIGURE)
    checked = 0
    for block in (0, 11, n_blocks - 1):
        for head in (0, 4, n_heads - 1):
            select(driver, FIGURE, layer=block, head=head)
            positions = (3, n - 1)
            columns = [maps[block, head][:, p] for p in positions]
            neighbours = [maps[block, head][:, p - 1] for p in positions]
            assert_shows_columns(driver, FIGURE, positions, columns, neighbours)
            checked += len(positions)
    assert checked == 3 * 3 * 2
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", root)
    root.screenshot(str(screenshot_dir / "fig-ch15-explore.png"))


@pytest.mark.browser
def test_figure_opens_on_the_view_its_prose_describes(html_dir, book_server, driver):
    # The chapter's prose: the page opens on block 1, head 1, at the last output, the full stop,
    # whose weight is spread with most of it on the second "the", "did" and "case", and no
    # token gets a third of it.
    maps = recomputed()
    n = maps.shape[-1]
    driver.get(book_server.url + PAGE)
    root = wait_for_figure(driver, FIGURE)
    status = root.find_element("css selector", ".ti-status").text
    assert f"output n = {n} (\u201c.\u201d)" in status and "block 1, head 1;" in status, status
    # the maths counts from 1, the code from 0, and the status says which is which
    assert f"the code's column A[:, {n - 1}]" in status, status
    shown = np.asarray(read_values(driver, FIGURE))
    opening = maps[0, 0][:, n - 1]
    assert matches(shown, opening)
    assert not matches(shown, maps[0, 0][:, n - 2])  # control: the output before it
    # The page shows a space as U+2423; the tokens are compared without it.
    inputs = driver.execute_script(
        "return [...arguments[0].querySelectorAll('.ti-weights .ti-in .ti-tok')]"
        ".map((e) => e.textContent.replace(/\u2423/g, ' ').trim());",
        root,
    )
    largest = np.argsort(shown)[::-1][:3]
    assert [inputs[i] for i in largest] == ["the", "did", "case"], inputs
    assert list(largest) == [6, 2, 8]  # the second "the", not the first (token 1)
    assert shown.max() < 1 / 3
