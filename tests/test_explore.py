"""The Python side of the interactive figures (transformer_intro.explore).

The page side (explore.js) is tested in tests/browser/ (test_offline.py and test_figure_ch*.py).
"""

from __future__ import annotations

import base64
import json
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from transformer_intro.explore import (  # noqa: E402
    WEIGHT_SCALE,
    image_attention_figure,
    token_attention_figure,
)


def softmax_columns(scores):
    e = np.exp(scores - scores.max(axis=-2, keepdims=True))
    return e / e.sum(axis=-2, keepdims=True)


def data_of(fig):
    html = fig._repr_mimebundle_()["text/html"]
    match = re.search(
        r'<script type="application/json" class="ti-explore-data">(.*?)</script>', html
    )
    return json.loads(match.group(1).replace("<\\/", "</"))


@pytest.fixture
def token_fig():
    rng = np.random.default_rng(0)
    A = softmax_columns(rng.normal(size=(2, 3, 5, 4)))  # L=2, H=3, N_in=5, N_out=4
    logits = rng.normal(size=(4, 6))
    fig = token_attention_figure(
        list("abcde"),
        list("wxyz"),
        A,
        head_names=["h1", "h2", "h3"],
        next_token={"logits": logits, "vocabulary": list("uvwxyz")},
        name="fig-test-tokens",
    )
    return fig, A, logits


def test_token_figure_bundle(token_fig):
    fig, A, logits = token_fig
    bundle = fig._repr_mimebundle_()
    assert set(bundle) == {"text/html", "image/png", "text/plain"}
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")
    html = bundle["text/html"]
    assert 'id="explore-fig-test-tokens"' in html and 'data-explore-name="fig-test-tokens"' in html
    assert "data:image/png;base64," in html  # the fallback travels with the widget
    assert "<script src" not in html and "http" not in html  # no library, nothing remote
    data = data_of(fig)
    assert data["layers"] == ["layer 1", "layer 2"] and data["heads"] == ["h1", "h2", "h3"]
    # w[l][h][n] is column n of A_{l,h}: the weights of output n over the inputs n'
    w = np.asarray(data["w"]) / WEIGHT_SCALE
    assert w.shape == (2, 3, 4, 5)
    np.testing.assert_allclose(w[1, 2, 3], A[1, 2, :, 3], atol=0.6 / WEIGHT_SCALE)
    assert not np.allclose(w[1, 2, 3], A[1, 2, :, 2], atol=1e-3)  # neighbouring column fails
    np.testing.assert_allclose(data["next"]["logits"], logits, atol=1e-3)


def test_output_is_deterministic(token_fig):
    fig, A, logits = token_fig
    again = token_attention_figure(
        list("abcde"),
        list("wxyz"),
        A,
        head_names=["h1", "h2", "h3"],
        next_token={"logits": logits, "vocabulary": list("uvwxyz")},
        name="fig-test-tokens",
    )
    assert again._repr_mimebundle_() == fig._repr_mimebundle_()


def test_script_end_tag_is_escaped():
    A = np.ones((1, 1, 1, 1))
    fig = token_attention_figure(["</script>"], ["x"], A, name="fig-escape")
    html = fig.to_html()
    assert html.count("</script>") == 1  # only the data element's own end tag
    assert data_of(fig)["inputs"] == ["</script>"]


def test_static_figure_is_used_and_closed():
    A = np.ones((1, 1, 1, 1))
    static = plt.figure()
    number = static.number
    fig = token_attention_figure(["a"], ["b"], A, name="fig-static", static=static)
    assert number not in plt.get_fignums()  # closed: the notebook shows it only once
    assert fig.png.startswith(b"\x89PNG")
    png = fig.png
    assert token_attention_figure(["a"], ["b"], A, name="fig-static", static=png).png == png


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(weights=np.ones((1, 1, 2, 2))), "sum to one"),  # columns sum to two
        (dict(weights=np.ones((1, 2, 2))), "4 dimensions"),
        (dict(weights=np.full((1, 1, 3, 2), 1 / 3)), "last two axes"),
        (dict(name="3 bad name"), "name must be"),
        (dict(head_names=["a", "b"]), "head_names has 2 entries"),
        (dict(next_token={"logits": np.zeros((2, 3))}), "next_token must be a dict"),
        (dict(next_token={"logits": np.zeros((3, 2)), "vocabulary": "ab"}), "expected"),
        (dict(weights=np.full((1, 1, 2, 2), np.nan)), "NaN"),
        (dict(static=b"not a png"), "PNG bytes"),
    ],
)
def test_token_figure_refuses_bad_input(change, message):
    args = dict(weights=np.full((1, 1, 2, 2), 0.5), name="fig-ok", static=None)
    args.update(change)
    with pytest.raises(ValueError, match=message):
        token_attention_figure(["a", "b"], ["c", "d"], **args)


def test_transposed_weights_are_refused():
    # rows summing to one (A transposed) is the likely mistake: it must be caught
    rng = np.random.default_rng(1)
    A = softmax_columns(rng.normal(size=(1, 1, 3, 3)))
    with pytest.raises(ValueError, match="transpose"):
        token_attention_figure(list("abc"), list("abc"), np.swapaxes(A, 2, 3), name="fig-t")


def test_image_figure():
    rng = np.random.default_rng(2)
    image = rng.uniform(size=(8, 12))
    A = softmax_columns(rng.normal(size=(2, 2, 7, 7)))  # 2x3 patches of side 4, + class token
    R = softmax_columns(rng.normal(size=(7, 7)))
    fig = image_attention_figure(image, 4, A, rollout=R, name="fig-test-image")
    data = data_of(fig)
    assert (data["rows"], data["cols"], data["patch"]) == (2, 3, 4)
    assert len(data["pixels"]) == 96 and min(data["pixels"]) == 0 and max(data["pixels"]) == 255
    w = np.asarray(data["w"]) / WEIGHT_SCALE
    np.testing.assert_allclose(w[1, 0, 5], A[1, 0, :, 5], atol=1e-4)
    np.testing.assert_allclose(np.asarray(data["rollout"])[2] / WEIGHT_SCALE, R[:, 2], atol=1e-4)
    with pytest.raises(ValueError, match="does not divide"):
        image_attention_figure(image, 5, A, name="fig-x")
    with pytest.raises(ValueError, match="last two axes"):
        image_attention_figure(image, 2, A, name="fig-x")
    with pytest.raises(ValueError, match="rollout"):
        image_attention_figure(image, 4, A, rollout=R[:6, :6], name="fig-x")
