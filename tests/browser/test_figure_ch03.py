"""Chapter 3's interactive figure (fig-ch03-explore) shows the designed heads' true weights.

The weights are recomputed here from the chapter's recipe (the package's MultiHeadSelfAttention
with the hand-set key and query projections) and compared with the numbers the page shows after
pointing at each output token, for each head, to 3 decimals. The neighbouring token's column
must not match (heads 1 and 2; every column of head 3 is the same by design, so there the
neighbouring head must not match).
"""

from __future__ import annotations

import numpy as np
import pytest
from explore_helpers import assert_shows_columns, point_at, select, wait_for_figure

PAGE = "book/03_multi_head_attention.html"
FIGURE = "fig-ch03-explore"


def designed_attention() -> tuple[list[str], np.ndarray]:
    """The chapter's three designed heads on "abcbacab": labels and A[h, n', n]."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    from transformer_intro import MultiHeadSelfAttention

    tokens = list("abcbacab")
    types = jnp.array(["abc".index(t) for t in tokens])
    n_tokens = len(tokens)
    width = 3 + n_tokens
    x = jnp.concatenate([jax.nn.one_hot(types, 3), jnp.eye(n_tokens)], axis=1)
    beta = 6.0
    U_k = np.zeros((3, n_tokens, width))
    U_q = np.zeros((3, n_tokens, width))
    U_k[0, :, 3:] = beta * np.eye(n_tokens)  # previous token
    U_q[0, :, 3:] = np.eye(n_tokens, k=1)
    U_k[1, :3, :3] = beta * np.eye(3)  # same type
    U_q[1, :3, :3] = np.eye(3)
    U_k[2, :3, :3] = beta * np.eye(3)  # find the c's
    U_q[2, 2, 3:] = 1.0
    layer = MultiHeadSelfAttention(width, 3, n_tokens, scaled=False, key=jax.random.PRNGKey(3))
    layer = eqx.tree_at(
        lambda m: (m.key_projections, m.query_projections),
        layer,
        (jnp.asarray(U_k), jnp.asarray(U_q)),
    )
    labels = [f"{t}{n + 1}" for n, t in enumerate(tokens)]
    return labels, np.asarray(layer.attention_weights(x), dtype=np.float64)


# Run with the browser checks, whose figure test recomputes the same weights: computed once.
@pytest.mark.browser
def test_recomputed_weights_are_attention():
    labels, A = designed_attention()
    assert A.shape == (3, 8, 8) and labels[3] == "b4"
    np.testing.assert_allclose(A.sum(axis=1), 1.0, atol=1e-6)  # columns sum to one
    assert A[0, 2, 3] > 0.9  # b4 takes c3 under head 1


@pytest.mark.browser
def test_figure_shows_the_designed_heads(html_dir, book_server, driver, screenshot_dir):
    labels, A = designed_attention()
    driver.get(book_server.url + PAGE)
    root = wait_for_figure(driver, FIGURE)
    shown_labels = driver.execute_script(
        "return [...arguments[0].querySelectorAll('.ti-outputs .ti-out')].map(e => e.textContent)",
        root,
    )
    assert shown_labels == labels
    checked = 0
    for h in range(3):
        select(driver, FIGURE, head=h)
        tokens = range(len(labels))
        # the negative control: the neighbouring token's weights; for head 3, whose
        # columns are all alike by design, head 1's weights for the same token
        wrong = [A[h][:, (n + 1) % len(labels)] if h < 2 else A[0][:, n] for n in tokens]
        assert_shows_columns(driver, FIGURE, tokens, [A[h][:, n] for n in tokens], wrong)
        checked += len(tokens)
    assert checked == 24
    # leave the figure on b4, head 2, for the screenshot
    select(driver, FIGURE, head=1)
    point_at(driver, FIGURE, 3)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", root)
    root.screenshot(str(screenshot_dir / "fig-ch03-explore.png"))
