"""Draw the static pictures of the in-page models of chapters 8, 9 and 10 (book/figures/).

Each widget (``<div class="book-infer" data-model="vit|lm|dates">``, run by
``_interactive/infer.js``) has a PNG beside it that shows what the widget shows for one fixed
example. A reader without JavaScript sees the PNG instead of the widget, and so does the printed
book (``_interactive/infer.css`` hides the live widget in print). The pictures are drawn with
matplotlib from the committed checkpoints in ``book/checkpoints/`` and the package's own models,
with the weights rounded as the page stores them (``transformer_intro.export.stored_precision``),
so they show what the page computes:

- ``infer_vit.png``: MNIST test digit 7 (the one the page's "7" button loads) as it would be
  drawn on the page's 280 x 280 canvas, prepared as the page prepares a drawing
  (``transformer_intro.export.prepare_drawing``), the class token's attention over the 16 patches
  in the last block (mean of the heads), and the ten class probabilities;
- ``infer_lm.png``: the prompt "ROMEO." and a new line, its greedy continuation (temperature 0),
  and the next-character distribution at the first step;
- ``infer_dates.png``: a date in a format the model never saw in training, its ISO 8601 answer
  with each character's probability, and the last decoder layer's cross-attention (mean of the
  heads) from each answer character to the source characters.

Run it after a checkpoint or the exported weights change (``python -m transformer_intro.export``)
and commit the pictures:

    python scripts/infer_fallbacks.py                # writes book/figures/infer_*.png
    python scripts/infer_fallbacks.py --out-dir DIR  # somewhere else

The same versions of matplotlib and JAX write the same bytes (no time stamp or software name in
the files); other versions may differ in the last pixels, so no test compares the bytes.
``tests/test_infer_fallback_pictures.py`` checks that the script runs and what size its pictures
are.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import io
import textwrap
from pathlib import Path

import numpy as np

from transformer_intro.files import write_atomically

REPO = Path(__file__).resolve().parents[1]
OUT_DIR = REPO / "book" / "figures"
CHECKPOINTS = REPO / "book" / "checkpoints"

DPI = 100
# figure sizes in inches: at DPI 100 the pictures are 600 pixels wide, so that the text stays
# legible when the page shows them 400 pixels wide
SIZES = {"vit": (6.0, 5.2), "lm": (6.0, 4.4), "dates": (6.0, 4.6)}
FILES = {name: f"infer_{name}.png" for name in SIZES}

VIT_DIGIT = 7  # the test digit shown (the page's widget starts with it too)
LM_PROMPT = "ROMEO.\n"
LM_TOKENS = 120  # more than the window holds: the page and `generate` slide it alike
DATE = "Apr. 22, 2019"  # "mon. day, year", a format held out of training
DATE_FORMAT = "mon. day, year"

ORANGE = (220 / 255, 80 / 255, 20 / 255)  # the page's colour for attention
BAR = "#0a7d91"  # the page's colour for probability bars


def pixel_size(name: str) -> tuple[int, int]:
    """(width, height) in pixels of the picture ``name`` ("vit", "lm" or "dates")."""
    width, height = SIZES[name]
    return round(width * DPI), round(height * DPI)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcdefaults()
    plt.rcParams.update(
        {
            "font.family": "DejaVu Sans",
            "font.size": 11,
            "axes.titlesize": 11,
            "svg.hashsalt": "book",
            "path.simplify": True,
        }
    )
    return plt


def _png(fig, name: str) -> bytes:
    """The figure as PNG bytes (256 colours: a tenth of the size, the same look)."""
    from PIL import Image

    plt = _pyplot()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    plt.close(fig)
    image = Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")
    assert image.size == pixel_size(name), (image.size, pixel_size(name))
    small = image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    out = io.BytesIO()
    small.save(out, format="PNG", optimize=True)
    return out.getvalue()


def _bars(ax, labels, values, highlight: int, *, title: str) -> None:
    """Horizontal bars, the first label on top, each with its value, as the page's ``bars``."""
    y = np.arange(len(labels))
    colours = [BAR if i == highlight else "#7fbcc6" for i in range(len(labels))]
    ax.barh(y, values, color=colours, height=0.7)
    ax.set_yticks(y, labels, family="DejaVu Sans Mono")
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xticks([0, 0.5, 1])
    for i, v in enumerate(values):
        if v > 0.7:  # inside a long bar, in white
            ax.text(v - 0.03, i, f"{v:.3f}", va="center", ha="right", fontsize=10, color="white")
        else:
            ax.text(v + 0.03, i, f"{v:.3f}", va="center", fontsize=10)
    ax.set_title(title)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


# ---------------------------------------------------------------------------------------------
# Chapter 8: the ViT


def vit_example() -> dict:
    """What the ViT widget shows for test digit :data:`VIT_DIGIT` drawn on its canvas."""
    import jax
    import jax.numpy as jnp

    from transformer_intro.export import prepare_drawing, read_export
    from transformer_intro.training import load_checkpoint

    # the page's ten test digits, from the exported file (no MNIST download needed)
    payload, _ = read_export(REPO / "_interactive" / "models" / "vit.js")
    extra = payload["extra"]
    digits = np.frombuffer(base64.b64decode(extra["digits"]), np.uint8).reshape(-1, 28, 28)
    digit = digits[extra["labels"].index(VIT_DIGIT)] / 255.0
    canvas = np.kron(digit, np.ones((10, 10)))  # as the page's 280 x 280 canvas shows it
    prepared = prepare_drawing(canvas)
    model, _ = load_checkpoint(CHECKPOINTS / "vit_default.eqx")
    with jax.default_matmul_precision("highest"):
        out = model.intermediates(jnp.asarray(2 * prepared - 1, jnp.float32)[None])
    probabilities = np.asarray(jax.nn.softmax(out["logits"]), np.float64)
    weights = np.asarray(out["attention_weights"], np.float64)  # (M, H, N+1, N+1) = A[n', n]
    side = model.config.image_size // model.config.patch_size
    column = weights[-1, :, :, 0].mean(0)  # the class token's attention, last block, heads' mean
    return {
        "index": extra["indices"][extra["labels"].index(VIT_DIGIT)],
        "canvas": canvas,
        "prepared": prepared,
        "probabilities": probabilities,
        "patches": column[1:].reshape(side, side),
        "blocks": weights.shape[0],
    }


def draw_vit() -> tuple[bytes, str]:
    """The ViT widget's picture, and its alternative text."""
    plt = _pyplot()
    e = vit_example()
    fig, axes = plt.subplots(2, 2, figsize=SIZES["vit"], layout="constrained")
    (a, b), (c, d) = axes
    a.imshow(e["canvas"], cmap="gray", vmin=0, vmax=1, interpolation="nearest")
    a.set_title(f"test digit {VIT_DIGIT} on the canvas")
    b.imshow(e["prepared"], cmap="gray", vmin=0, vmax=1, interpolation="nearest")
    b.set_title("prepared 28 × 28")
    patches = e["patches"]
    c.imshow(patches, cmap="Oranges", vmin=0, vmax=patches.max(), interpolation="nearest")
    for (i, j), w in np.ndenumerate(patches):
        colour = "white" if w > 0.6 * patches.max() else "black"
        c.text(j, i, f"{w:.2f}", ha="center", va="center", fontsize=10, color=colour)
    c.set_title(f"class token → patches\n(block {e['blocks']}, mean of heads)")
    for ax in (a, b, c):
        ax.set_xticks([])
        ax.set_yticks([])
    predicted = int(np.argmax(e["probabilities"]))
    _bars(
        d, [str(k) for k in range(10)], e["probabilities"], predicted, title="class probabilities"
    )
    alt = (
        f"Static picture of the digit widget: MNIST test digit {VIT_DIGIT} as drawn on the"
        " canvas, the same digit prepared as a 28 by 28 image, the class token's attention over"
        f" the 16 patches in block {e['blocks']} (mean of the heads), and the ten class"
        f" probabilities, with {predicted} the most probable."
    )
    return _png(fig, "vit"), alt


# ---------------------------------------------------------------------------------------------
# Chapter 9: the character language model


def _shown(symbol: str) -> str:
    return {"\n": "↵", " ": "␣"}.get(symbol, symbol)


def lm_example() -> dict:
    """The greedy continuation of :data:`LM_PROMPT` and the first step's distribution."""
    import jax
    import jax.numpy as jnp

    from transformer_intro.export import MODELS, stored_precision
    from transformer_intro.models.generation import generate
    from transformer_intro.tokenisers import Vocabulary
    from transformer_intro.training import load_checkpoint

    model, info = load_checkpoint(CHECKPOINTS / "shakespeare_lm.eqx")
    model = stored_precision(model, MODELS["lm"][1])  # the float16 weights the page holds
    vocabulary = Vocabulary(info.extra["symbols"])
    ids = np.asarray(vocabulary.encode(LM_PROMPT), np.int32)
    with jax.default_matmul_precision("highest"):
        new = generate(model, jnp.asarray(ids), LM_TOKENS, jax.random.PRNGKey(0), temperature=0.0)
        logits = model(jnp.asarray(ids))[-1]
    probabilities = np.asarray(jax.nn.softmax(logits), np.float64)
    order = np.argsort(-probabilities, kind="stable")[:8]
    return {
        "continuation": vocabulary.decode(np.asarray(new)),
        "labels": [_shown(vocabulary.decode([int(i)])) for i in order],
        "probabilities": probabilities[order],
    }


def draw_lm() -> tuple[bytes, str]:
    """The language model widget's picture, and its alternative text."""
    plt = _pyplot()
    e = lm_example()
    fig = plt.figure(figsize=SIZES["lm"], layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1, 1])
    ax = top.subplots()
    ax.set_axis_off()
    ax.set_title("prompt (black) and greedy continuation (blue), temperature 0", loc="left")
    lines = []
    for paragraph in (LM_PROMPT + e["continuation"]).split("\n"):
        lines += textwrap.wrap(paragraph, 44) or [""]
    prompt_lines = LM_PROMPT.rstrip("\n").split("\n")
    y = 0.92
    for k, line in enumerate(lines):
        in_prompt = k < len(prompt_lines)
        ax.text(
            0.0,
            y,
            line + ("↵" if in_prompt else ""),
            family="DejaVu Sans Mono",
            fontsize=12,
            color="black" if in_prompt else "#1f4e99",
            weight="bold" if in_prompt else "normal",
            va="top",
            transform=ax.transAxes,
        )
        y -= 0.2
    bars = bottom.subplots()
    _bars(
        bars,
        e["labels"],
        e["probabilities"],
        0,
        title="next character after the prompt (the 8 likeliest)",
    )
    first = e["labels"][0]
    alt = (
        "Static picture of the language model widget: the prompt ROMEO. and a new line, the"
        " model's greedy continuation at temperature 0, which falls into a repeating phrase,"
        " and the eight likeliest next characters after the prompt with their probabilities,"
        f" {first} the likeliest."
    )
    return _png(fig, "lm"), alt


# ---------------------------------------------------------------------------------------------
# Chapter 10: dates


def dates_example() -> dict:
    """The dates model's greedy answer for :data:`DATE`, its probabilities and cross-attention."""
    import jax
    import jax.numpy as jnp

    from transformer_intro.datasets import dates
    from transformer_intro.training import load_checkpoint

    model, _ = load_checkpoint(CHECKPOINTS / "dates_model.eqx")
    source = jnp.asarray(dates.encode_sources([DATE]))
    with jax.default_matmul_precision("highest"):
        written = np.asarray(model.greedy_decode(source, dates.START_ID))[0]
        stop = [i for i, t in enumerate(written) if t in (dates.END_ID, dates.PAD_ID)]
        answer = written[: stop[0] if stop else len(written)]
        inputs = jnp.asarray(np.concatenate([[dates.START_ID], answer[:-1]]), jnp.int32)
        logits = model(source[0], inputs)
        cross = model.cross_attention_weights(source[0], inputs)  # (L, H, M, N)
    probabilities = np.asarray(jax.nn.softmax(logits, -1), np.float64)
    day = datetime.datetime.strptime(DATE, "%b. %d, %Y").date()
    assert dates.FORMATS[DATE_FORMAT](day) == DATE and DATE_FORMAT in dates.HELD_OUT_FORMATS
    return {
        "right": day.isoformat(),
        "answer": dates.decode_target(answer),
        "probabilities": probabilities[np.arange(len(answer)), answer],
        "cross": np.asarray(cross, np.float64)[-1].mean(0)[: len(DATE), : len(answer)],
        "layer": cross.shape[0],
    }


def draw_dates() -> tuple[bytes, str]:
    """The dates widget's picture, and its alternative text."""
    plt = _pyplot()
    e = dates_example()
    fig, (top, ax) = plt.subplots(
        2, 1, figsize=SIZES["dates"], height_ratios=[1.3, 3], layout="constrained"
    )
    top.set_axis_off()
    top.text(0, 1.0, f"source: {DATE}   (a format never seen in training)", va="top")
    top.text(
        0,
        0.72,
        f"answer, each character with its probability (right: {e['right']}):",
        fontsize=10,
        va="top",
    )
    n = len(e["answer"])
    for i, (ch, p) in enumerate(zip(e["answer"], e["probabilities"])):
        x = (i + 0.5) / n
        top.text(x, 0.3, ch, ha="center", va="center", fontsize=16, family="DejaVu Sans Mono")
        top.text(x, -0.08, f"{p:.2f}", ha="center", va="center", fontsize=10, color="#333")
    cross = e["cross"].T  # answer characters down, source characters across
    ax.imshow(cross, cmap="Oranges", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(DATE)), [_shown(c) for c in DATE], family="DejaVu Sans Mono")
    ax.set_yticks(range(n), list(e["answer"]), family="DejaVu Sans Mono")
    ax.tick_params(length=0)
    ax.set_xlabel("source character")
    ax.set_ylabel("answer character")
    ax.set_title(f"cross-attention, decoder layer {e['layer']}, mean of heads")
    alt = (
        "Static picture of the dates widget: the date "
        f"{DATE}, written in a format the model never saw in training, the model's answer"
        f" {e['answer']} (the right answer is {e['right']}) with the probability of each of its"
        " characters, and a grid of"
        " cross-attention weights showing which source characters each answer character reads."
    )
    return _png(fig, "dates"), alt


DRAW = {"vit": draw_vit, "lm": draw_lm, "dates": draw_dates}


def draw_all(out_dir: str | Path = OUT_DIR) -> dict[str, tuple[Path, str]]:
    """Write the three pictures into ``out_dir``: ``{name: (path, alternative text)}``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, draw in DRAW.items():
        png, alt = draw()
        path = out_dir / FILES[name]
        write_atomically(path, png)  # the committed picture: the old one or the new one
        written[name] = (path, alt)
    return written


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)
    for name, (path, alt) in draw_all(args.out_dir).items():
        print(f"{path}: {path.stat().st_size} bytes, {pixel_size(name)} pixels")
        print(f"  alt: {alt}")


if __name__ == "__main__":
    main()
