"""Chapter 8's interactive figure (fig-ch08-explore) shows the committed model's attention.

The page is the built book; the numbers are read from the widget with the helpers of
explore_helpers.py and compared (3 decimals) with the same weights recomputed here from the
committed checkpoint, book/checkpoints/vit_default.eqx, on the same test digit (the first 7 of the
MNIST test set). Pointing at the neighbouring patch must give other numbers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from explore_helpers import point_at, read_values, select

pytestmark = pytest.mark.browser

PAGE = "book/08_vision_transformer.html"
FIGURE = "fig-ch08-explore"
REPO = Path(__file__).resolve().parents[2]
CHECKPOINT = REPO / "book" / "checkpoints" / "vit_default.eqx"
TOLERANCE = 1e-3  # the page stores weights in units of 1e-4 and prints 3 decimals


def rollout(per_block: np.ndarray) -> np.ndarray:
    """Attention rollout (Abnar and Zuidema 2020) in the book's orientation, as chapter 8 defines
    it: heads averaged, half identity for the residual, multiplied through the blocks."""
    result = np.eye(per_block.shape[-1])
    for block in per_block:
        result = result @ (0.5 * block.mean(0) + 0.5 * np.eye(block.shape[-1]))
    return result


@pytest.fixture(scope="module")
def attention():
    """A[m, h, n', n] of the committed model on the first 7 of the test set, and its rollout."""
    import jax

    from transformer_intro.datasets import load_mnist
    from transformer_intro.training import load_checkpoint

    model, _ = load_checkpoint(CHECKPOINT)
    images, labels = load_mnist("test")
    digit = images[int(np.flatnonzero(labels == 7)[0])]
    image = (digit.astype(np.float32) * (2 / 255) - 1)[None]
    with jax.default_matmul_precision("highest"):
        weights = np.asarray(model.intermediates(image)["attention_weights"], np.float64)
    return weights, rollout(weights)


@pytest.fixture(scope="module")
def page(driver, book_server):
    driver.get(book_server.url + PAGE)
    return driver


def _close(shown, expected) -> bool:
    return len(shown) == len(expected) and np.allclose(shown, expected, atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("head", [0, 3])
@pytest.mark.parametrize("patch", [6, 11])
def test_patch_attention_is_the_models(page, attention, head, patch):
    weights, _ = attention
    last = weights.shape[0] - 1
    select(page, FIGURE, layer=last, head=head)
    point_at(page, FIGURE, patch)
    shown = read_values(page, FIGURE)
    assert _close(shown, weights[last, head, :, patch])
    # the neighbouring patch's column is a different distribution: the comparison can fail
    assert not _close(shown, weights[last, head, :, patch + 1])
    assert _close(read_values(page, FIGURE, "class"), weights[last, head, :, 0])


def test_first_block_and_rollout(page, attention):
    weights, rolled = attention
    select(page, FIGURE, layer=0, head=1)
    point_at(page, FIGURE, 5)
    assert _close(read_values(page, FIGURE), weights[0, 1, :, 5])
    select(page, FIGURE, head="rollout")
    point_at(page, FIGURE, 5)
    shown = read_values(page, FIGURE)
    assert _close(shown, rolled[:, 5])
    assert not _close(shown, rolled[:, 4])
    assert _close(read_values(page, FIGURE, "class"), rolled[:, 0])
