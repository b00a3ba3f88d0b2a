"""Chapter 9's interactive figure (fig-ch09-explore) shows the trained language model's weights.

The attention weights and next-character logits are recomputed here from the committed checkpoint
(book/checkpoints/shakespeare_lm.eqx) on the chapter's line of Hamlet, and compared with the
numbers the page shows after pointing at characters, for several blocks and heads, to 3 decimals.
The neighbouring character's column must not match, and neither must a wrong next-character
distribution.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from explore_helpers import (
    assert_shows_columns,
    matches,
    point_at,
    read_values,
    select,
    set_temperature,
    wait_for_figure,
)

PAGE = "book/09_language_model.html"
FIGURE = "fig-ch09-explore"
CHECKPOINT = Path(__file__).resolve().parents[2] / "book" / "checkpoints" / "shakespeare_lm.eqx"
VERSE = "To be, or not to be, that is the question:"


def recomputed() -> tuple[np.ndarray, np.ndarray]:
    """``A[m, h, n', n]`` of every block and head and the (N, |V|) logits on the chapter's line."""
    import jax.numpy as jnp

    from transformer_intro import Vocabulary
    from transformer_intro.training import load_checkpoint

    model, info = load_checkpoint(CHECKPOINT)
    vocabulary = Vocabulary(info.extra["symbols"])
    ids = jnp.asarray(vocabulary.encode(VERSE))
    return np.asarray(model.attention_maps(ids), np.float64), np.asarray(model(ids), np.float64)


def softmax(z: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = z / temperature
    p = np.exp(z - z.max())
    return p / p.sum()


# Run with the browser checks, whose figure test recomputes the same weights: computed once.
@pytest.mark.browser
def test_recomputed_weights_are_causal_attention():
    maps, logits = recomputed()
    n = len(VERSE)
    assert maps.shape[2:] == (n, n) and logits.shape[0] == n
    np.testing.assert_allclose(maps.sum(axis=2), 1.0, atol=1e-5)  # columns sum to one
    later = np.tril(np.ones((n, n), dtype=bool), k=-1)  # [n', n] with n' > n
    assert np.all(maps[..., later] == 0)  # no output reads a later input


@pytest.mark.browser
def test_figure_shows_the_trained_model(html_dir, book_server, driver, screenshot_dir):
    maps, logits = recomputed()
    n_blocks, n_heads, n, _ = maps.shape
    driver.get(book_server.url + PAGE)
    root = wait_for_figure(driver, FIGURE)
    checked = 0
    for block in (0, n_blocks - 1):
        for head in range(n_heads):
            select(driver, FIGURE, layer=block, head=head)
            positions = (5, 20, n - 1)
            columns = [maps[block, head][:, p] for p in positions]
            neighbours = [maps[block, head][:, p - 1] for p in positions]
            assert_shows_columns(driver, FIGURE, positions, columns, neighbours)
            checked += len(positions)
    assert checked == 2 * n_heads * 3
    # the next-character distribution, most likely first, at two temperatures
    for temperature in (1.0, 0.5):
        set_temperature(driver, FIGURE, temperature)
        point_at(driver, FIGURE, n - 1)
        shown = read_values(driver, FIGURE, "next")
        expected = np.sort(softmax(logits[n - 1], temperature))[::-1][: len(shown)]
        assert shown and matches(shown, expected), (temperature, shown)
        wrong = np.sort(softmax(logits[n - 2], temperature))[::-1][: len(shown)]
        assert not matches(shown, wrong)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", root)
    root.screenshot(str(screenshot_dir / "fig-ch09-explore.png"))


@pytest.mark.browser
def test_figure_opens_on_the_last_character(html_dir, book_server, driver):
    # The first character can only attend to itself (a weight of 1 on one cell): the figure opens
    # on the last one, whose column spreads over the whole line.
    maps, _ = recomputed()
    n = maps.shape[-1]
    driver.get(book_server.url + PAGE)
    wait_for_figure(driver, FIGURE)
    shown = read_values(driver, FIGURE)
    assert matches(shown, maps[0, 0][:, n - 1])
    assert not matches(shown, maps[0, 0][:, 0])  # the first character's column, a control
