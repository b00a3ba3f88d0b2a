"""Interactive attention figures that work in the book's static HTML, offline.

A figure is a Python object whose rich display (``_repr_mimebundle_``) holds three things:

* ``text/html``: a ``<div class="ti-explore">`` carrying the figure's data as JSON and a PNG of the
  static figure. The book's own script (``_interactive/explore.js``, loaded once per page from
  ``_static``) turns every such div into a small SVG/HTML widget: point at a token or a patch and
  the weights it puts on the inputs appear as coloured cells with their numbers. Without the
  script (or in print) the PNG shows instead.
* ``image/png``: the same static figure, for nbval, for print, and for readers of the notebook.
* ``text/plain``: one line naming the figure.

Nothing random goes into the output: ids come from ``name`` and numbers are rounded, so
re-executing a notebook reproduces its stored output exactly.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["ExploreFigure", "image_attention_figure", "token_attention_figure"]

#: Weights travel as integers in units of 1/WEIGHT_SCALE (shorter than decimals, and exact).
WEIGHT_SCALE = 10_000
#: Decimals kept for logits (the page recomputes the softmax from them).
LOGIT_DECIMALS = 3
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


class ExploreFigure:
    """An interactive figure; the last expression of a cell renders it.

    Attributes:
        name: the figure's name, also its HTML id (``explore-<name>``).
        data: the JSON-ready dictionary the page's script reads.
        png: the static fallback as PNG bytes.
        alt: the fallback image's alternative text.
    """

    def __init__(self, name: str, data: dict[str, Any], png: bytes, alt: str):
        """Hold the parts as given; the two figure functions build and check them."""
        self.name = name
        self.data = data
        self.png = png
        self.alt = alt

    def to_json(self) -> str:
        """The data as compact JSON, safe inside a ``<script>`` element."""
        text = json.dumps(self.data, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
        return text.replace("</", "<\\/")

    def to_html(self) -> str:
        """The ``<div>`` the book's script turns into a widget (with the PNG as fallback)."""
        png = base64.b64encode(self.png).decode("ascii")
        return (
            f'<div class="ti-explore" id="explore-{self.name}" '
            f'data-explore-name="{self.name}" data-explore-kind="{self.data["kind"]}">'
            f'<script type="application/json" class="ti-explore-data">{self.to_json()}</script>'
            f'<img class="ti-explore-static" alt="{html.escape(self.alt)}" '
            f'src="data:image/png;base64,{png}"/>'
            "</div>"
        )

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = {
            "text/html": self.to_html(),
            "image/png": base64.b64encode(self.png).decode("ascii"),
            "text/plain": repr(self),
        }
        return {key: value for key, value in bundle.items() if not include or key in include}

    def __repr__(self) -> str:
        """One line naming the figure: its ``text/plain`` view."""
        return f"<interactive figure {self.name!r} ({self.data['kind']})>"


# ---------------------------------------------------------------------------------------------
# Helpers


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"name must be letters, digits, '-' or '_' and start with a letter, got {name!r}"
        )
    return name


def _as_array(value, what: str, ndim: int) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64)
    if array.ndim != ndim:
        raise ValueError(f"{what} must have {ndim} dimensions, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{what} contains NaN or infinite values")
    return array


def _check_columns(weights: np.ndarray, what: str) -> None:
    """Attention columns (axis -1 is the output n, axis -2 the input n') must sum to one."""
    if np.any(weights < -1e-6):
        raise ValueError(f"{what} has negative entries: not attention weights")
    sums = weights.sum(axis=-2)
    worst = float(np.max(np.abs(sums - 1.0))) if sums.size else 0.0
    if worst > 1e-3:
        raise ValueError(
            f"every column of {what} (axis -2 = input n', summed for each output n) must sum "
            f"to one; the worst is off by {worst:.3g}. Pass A[l, h, n', n], not its transpose."
        )


def _quantise(weights: np.ndarray) -> list:
    return np.rint(weights * WEIGHT_SCALE).astype(np.int64).tolist()


def _names(given, count: int, default: str, what: str) -> list[str]:
    if given is None:
        return [f"{default} {i + 1}" for i in range(count)]
    given = [str(g) for g in given]
    if len(given) != count:
        raise ValueError(f"{what} has {len(given)} entries for {count} {default}s")
    return given


def _png_bytes(static) -> bytes:
    """PNG bytes of a matplotlib figure (closed afterwards, so it is not shown twice) or bytes."""
    if isinstance(static, (bytes, bytearray)):
        if not bytes(static[:8]) == b"\x89PNG\r\n\x1a\n":
            raise ValueError("static must be a matplotlib figure or PNG bytes")
        return bytes(static)
    if hasattr(static, "savefig"):
        import matplotlib.pyplot as plt

        buffer = io.BytesIO()
        # No software/version metadata: the bytes depend only on the drawing.
        static.savefig(buffer, format="png", metadata={"Software": None})
        plt.close(static)
        return buffer.getvalue()
    raise ValueError(f"static must be a matplotlib figure or PNG bytes, got {type(static)}")


def _default_token_static(inputs, outputs, weights, head_names, layer_names):
    """Static fallback: the first layer's heads as heatmaps (input n' down, output n across)."""
    import matplotlib.pyplot as plt

    heads = weights.shape[1]
    fig, axes = plt.subplots(
        1, heads, figsize=(2.8 * heads + 0.6, 3.0), layout="constrained", squeeze=False
    )
    for h, ax in enumerate(axes[0]):
        image = ax.imshow(weights[0, h], vmin=0.0, vmax=1.0, cmap="viridis")
        ax.set_title(f"{layer_names[0]}, {head_names[h]}", fontsize=9)
        if len(outputs) <= 24:
            ax.set_xticks(range(len(outputs)), outputs, fontsize=7)
            ax.set_yticks(range(len(inputs)), inputs, fontsize=7)
        ax.set_xlabel("output $n$ (query)")
        ax.set_ylabel("input $n'$ (key)")
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8, label="$A_{n',n}$")
    return fig


def _default_image_static(image, weights, patch_size):
    import matplotlib.pyplot as plt

    rows, cols = image.shape[0] // patch_size, image.shape[1] // patch_size
    fig, axes = plt.subplots(1, 2, figsize=(5.6, 2.8), layout="constrained")
    axes[0].imshow(image, cmap="gray")
    axes[0].set_title("input")
    cls = weights[-1].mean(axis=0)[1:, 0].reshape(rows, cols)
    axes[1].imshow(cls, cmap="viridis")
    axes[1].set_title("class token, last layer (mean of heads)")
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    return fig


# ---------------------------------------------------------------------------------------------
# The two figures


def token_attention_figure(
    inputs: Sequence[str],
    outputs: Sequence[str],
    weights,
    *,
    layer_names: Sequence[str] | None = None,
    head_names: Sequence[str] | None = None,
    next_token: dict | None = None,
    name: str = "fig-explore",
    static=None,
) -> ExploreFigure:
    """Attention of output tokens over input tokens, per layer and head, to explore in the page.

    Pointing at (or clicking) output token ``n`` shows column ``n`` of the selected head's
    ``A``: the weight ``A[l, h, n', n]`` on every input token ``n'``, as coloured cells with
    their numbers. The page opens on the last output token, which under a causal mask is the one
    that sees every input.

    Args:
        inputs: the ``N_in`` input (key) tokens ``n'``, as strings.
        outputs: the ``N_out`` output (query) tokens ``n``, as strings.
        weights: array ``[L, H, N_in, N_out]`` with ``weights[l, h, n', n] = A_{n',n}`` of layer
            ``l``, head ``h``; every column (fixed ``l, h, n``) sums to one.
        layer_names: ``L`` names for the layer selector (default "layer 1", ...).
        head_names: ``H`` names for the head selector (default "head 1", ...).
        next_token: optional ``{"logits": [N_out, |V|], "vocabulary": list of |V| strings}``: the
            page then shows the next-token distribution at the pointed output, with a
            temperature slider (the softmax is recomputed in the page).
        name: the figure's name (letters, digits, ``-``, ``_``); use the myst-nb figure name.
        static: the fallback, a matplotlib figure (closed here) or PNG bytes; default: heatmaps
            of the first layer's heads.

    Returns:
        An :class:`ExploreFigure`; make it the last expression of a cell.

    Raises:
        ValueError: on shapes that do not match, columns that do not sum to one, a bad name.
    """
    name = _check_name(name)
    inputs = [str(t) for t in inputs]
    outputs = [str(t) for t in outputs]
    A = _as_array(weights, "weights [L, H, N_in, N_out]", 4)
    if A.shape[2:] != (len(inputs), len(outputs)):
        raise ValueError(
            f"weights has shape {A.shape}; its last two axes must be (len(inputs), "
            f"len(outputs)) = ({len(inputs)}, {len(outputs)})"
        )
    _check_columns(A, "weights")
    layers = _names(layer_names, A.shape[0], "layer", "layer_names")
    heads = _names(head_names, A.shape[1], "head", "head_names")
    data: dict[str, Any] = {
        "kind": "token",
        "name": name,
        "inputs": inputs,
        "outputs": outputs,
        "layers": layers,
        "heads": heads,
        "scale": WEIGHT_SCALE,
        # w[l][h][n] lists the weights of output n over the inputs n' (column n of A_h).
        "w": _quantise(np.swapaxes(A, 2, 3)),
    }
    if next_token is not None:
        if not isinstance(next_token, dict) or set(next_token) != {"logits", "vocabulary"}:
            raise ValueError('next_token must be a dict with keys "logits" and "vocabulary"')
        logits = _as_array(next_token["logits"], "next_token logits [N_out, |V|]", 2)
        vocabulary = [str(v) for v in next_token["vocabulary"]]
        if logits.shape != (len(outputs), len(vocabulary)):
            raise ValueError(
                f"next_token logits has shape {logits.shape}, expected (len(outputs), "
                f"len(vocabulary)) = ({len(outputs)}, {len(vocabulary)})"
            )
        data["next"] = {
            "vocabulary": vocabulary,
            "logits": np.round(logits, LOGIT_DECIMALS).tolist(),
        }
    if static is None:
        static = _default_token_static(inputs, outputs, A, heads, layers)
    alt = f"Attention weights of {len(outputs)} output tokens over {len(inputs)} input tokens"
    return ExploreFigure(name, data, _png_bytes(static), alt)


def image_attention_figure(
    image,
    patch_size: int,
    weights,
    *,
    rollout=None,
    layer_names: Sequence[str] | None = None,
    head_names: Sequence[str] | None = None,
    name: str = "fig-explore-image",
    static=None,
) -> ExploreFigure:
    """A vision transformer's attention over the patches of one image, to explore in the page.

    Pointing at a patch (output ``n``, patches numbered from 1 in row-major order; 0 is the class
    token) shows where it attends, beside where the class token attends, for the selected layer
    and head, or rolled out over the layers.

    Args:
        image: array ``[height, width]`` (grey levels, any range; shown scaled to 0..1).
        patch_size: patch side ``P`` in pixels; must divide both sides.
        weights: array ``[L, H, N+1, N+1]``, ``weights[l, h, n', n] = A_{n',n}``, index 0 the
            class token, ``N`` the number of patches; columns sum to one.
        rollout: optional array ``[N+1, N+1]`` (attention rolled out over the layers, same
            orientation, columns summing to one), offered as an extra "rollout" choice.
        layer_names: ``L`` names (default "layer 1", ...).
        head_names: ``H`` names (default "head 1", ...).
        name: the figure's name.
        static: a matplotlib figure (closed here) or PNG bytes; default: the image and the class
            token's attention in the last layer.

    Returns:
        An :class:`ExploreFigure`.

    Raises:
        ValueError: on shapes that do not match, columns that do not sum to one, a bad name.
    """
    name = _check_name(name)
    picture = _as_array(image, "image [height, width]", 2)
    if not isinstance(patch_size, (int, np.integer)) or patch_size < 1:
        raise ValueError(f"patch_size must be a positive integer, got {patch_size!r}")
    if picture.shape[0] % patch_size or picture.shape[1] % patch_size:
        raise ValueError(f"patch_size {patch_size} does not divide the image shape {picture.shape}")
    rows, cols = picture.shape[0] // patch_size, picture.shape[1] // patch_size
    count = rows * cols + 1
    A = _as_array(weights, "weights [L, H, N+1, N+1]", 4)
    if A.shape[2:] != (count, count):
        raise ValueError(
            f"weights has shape {A.shape}; with {rows}x{cols} patches and a class token its "
            f"last two axes must be ({count}, {count})"
        )
    _check_columns(A, "weights")
    low, high = float(picture.min()), float(picture.max())
    grey = (picture - low) / (high - low) if high > low else np.zeros_like(picture)
    data: dict[str, Any] = {
        "kind": "image",
        "name": name,
        "height": int(picture.shape[0]),
        "width": int(picture.shape[1]),
        "patch": int(patch_size),
        "rows": rows,
        "cols": cols,
        "pixels": np.rint(grey * 255).astype(np.int64).ravel().tolist(),
        "layers": _names(layer_names, A.shape[0], "layer", "layer_names"),
        "heads": _names(head_names, A.shape[1], "head", "head_names"),
        "scale": WEIGHT_SCALE,
        "w": _quantise(np.swapaxes(A, 2, 3)),
    }
    if rollout is not None:
        R = _as_array(rollout, "rollout [N+1, N+1]", 2)
        if R.shape != (count, count):
            raise ValueError(f"rollout has shape {R.shape}, expected ({count}, {count})")
        _check_columns(R, "rollout")
        data["rollout"] = _quantise(R.T)
    if static is None:
        static = _default_image_static(picture, A, patch_size)
    alt = f"Attention over the {rows * cols} patches of an image"
    return ExploreFigure(name, data, _png_bytes(static), alt)
