"""The book's trained models, written out for the page to run them (``_interactive/infer.js``).

Format. Each model becomes one small JavaScript file, ``_interactive/models/<name>.js``, that
does nothing but register one JSON object: ``(window.bookModelData = window.bookModelData ||
{})["<name>"] = {...};``. A page loads it with a ``<script>`` tag only when the reader starts the
widget (``fetch`` of a local file is refused from ``file://``, a script tag is not). The object
holds ``format`` (:data:`FORMAT`), ``kind`` ("vit", "lm" or "dates"), ``config`` (the sizes the
script reads, :func:`page_config`), ``tensors`` (a list of ``{"name",
"shape", "offset"}``: the model's arrays in their checkpoint order, named by their path in the
model, e.g. ``blocks.0.attention.key_projections``, row-major, ``offset`` counted in numbers),
``encoding`` and ``data``, the numbers of all tensors one after the other in base64.
``encoding`` is ``"float32"`` (little-endian bytes) or ``"float16-planes-deflate"``: IEEE half
precision, the low bytes of all numbers then their high bytes (this groups the exponents, which
compress well), compressed with zlib (``DecompressionStream("deflate")`` in the browser).
``extra`` holds what the widget needs besides weights: the language model's ``symbols`` (its
vocabulary, id order) and prompts; the ViT's ``digits`` (ten MNIST test images, uint8 in base64,
with their ``labels``); the dates model's source and target symbols, special ids and examples.

:func:`prepare_drawing` is the reference for how the page turns a drawn digit into an MNIST-like
28 x 28 image.

What the page computes. ``infer.js`` implements one kind of block and states which: its
``SUPPORTED`` object lists, for the blocks (every :class:`~transformer_intro.block.BlockConfig`
of the model) and for each kind of model, the values of the options it implements.
:func:`check_supported` reads that declaration from the script and refuses a model with any other
value, naming the option, since the page would compute another function without a word.

The repository's folders are arguments (:func:`export_model`); ``python -m
transformer_intro.export`` takes them from the repository it is run in.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import tempfile
import zlib
from pathlib import Path

import equinox as eqx
import jax
import numpy as np

from .files import write_atomically
from .training.checkpoints import load_checkpoint

__all__ = [
    "FORMAT",
    "MODELS",
    "UnsupportedModel",
    "check_supported",
    "export_all",
    "export_model",
    "page_config",
    "prepare_drawing",
    "read_export",
    "stored_precision",
    "supported_options",
]

FORMAT = "transformer_intro page model 1"

# name -> (checkpoint under book/checkpoints/, encoding)
MODELS = {
    "vit": ("vit_default.eqx", "float32"),
    "lm": ("shakespeare_lm.eqx", "float16-planes-deflate"),
    "dates": ("dates_model.eqx", "float32"),
}
LM_PROMPTS = ["ROMEO.\n", "KING.\n", "HAMLET.\nTo be, or not to be"]
DATE_EXAMPLES = ["22 April 2019", "April 22, 2019", "Apr. 22, 2019", "22.4.2019", "2019/04/22"]


def _name(path) -> str:
    parts = []
    for key in path:
        if isinstance(key, jax.tree_util.GetAttrKey):
            parts.append(key.name)
        elif isinstance(key, jax.tree_util.SequenceKey):
            parts.append(str(key.idx))
        else:  # pragma: no cover - the models hold attributes and tuples only
            parts.append(str(key))
    return ".".join(parts)


def _tensors(model: eqx.Module) -> list[tuple[str, np.ndarray]]:
    arrays = eqx.filter(model, eqx.is_inexact_array)
    leaves = jax.tree_util.tree_leaves_with_path(arrays)
    return [(_name(path), np.asarray(leaf, np.float32)) for path, leaf in leaves]


def stored_precision(model: eqx.Module, encoding: str) -> eqx.Module:
    """The model with its weights rounded as ``encoding`` stores them (what the page computes)."""
    if encoding == "float32":
        return model
    return jax.tree_util.tree_map(
        lambda x: x.astype(np.float16).astype(np.float32) if eqx.is_inexact_array(x) else x, model
    )


def _encode(flat: np.ndarray, encoding: str) -> str:
    if encoding == "float32":
        raw = flat.astype("<f4").tobytes()
    elif encoding == "float16-planes-deflate":
        pairs = flat.astype("<f2").view(np.uint8).reshape(-1, 2)
        raw = zlib.compress(pairs.T.tobytes(), 9)
    else:
        raise ValueError(f"unknown encoding {encoding!r}")
    return base64.b64encode(raw).decode("ascii")


def _decode(data: str, encoding: str, count: int) -> np.ndarray:
    raw = base64.b64decode(data)
    if encoding == "float32":
        return np.frombuffer(raw, "<f4").astype(np.float32)
    planes = np.frombuffer(zlib.decompress(raw), np.uint8).reshape(2, count)
    return planes.T.copy().view("<f2").reshape(-1).astype(np.float32)


def _mnist_digits() -> dict:
    """The first test image of each class 0..9, as uint8 in base64, with the labels."""
    from .datasets import load_mnist

    images, labels = load_mnist("test", progress=False)
    picks = [int(np.flatnonzero(labels == c)[0]) for c in range(10)]
    return {
        "digits": base64.b64encode(images[picks].astype(np.uint8).tobytes()).decode("ascii"),
        "labels": [int(labels[i]) for i in picks],
        "indices": picks,
    }


class UnsupportedModel(ValueError):
    """A model whose options ``infer.js`` does not implement: the page would compute another one."""


def supported_options(infer_js: str | Path) -> dict[str, dict[str, list]]:
    """The ``SUPPORTED`` declaration of ``infer.js``: part -> option -> the values it implements.

    The parts are ``"block"`` (every block of every model) and the kinds of :data:`MODELS`; a
    dotted option (``"encoder.rotary"``) names a field of a nested configuration.

    Raises:
        ValueError: if the script has no ``const SUPPORTED = {...};`` that is JSON.
    """
    text = Path(infer_js).read_text(encoding="utf8")
    found = re.search(r"const SUPPORTED = (\{.*?\n\s*\});", text, re.DOTALL)
    if found is None:
        raise ValueError(f"{infer_js} declares no `const SUPPORTED = {{...}};`")
    try:
        return json.loads(found.group(1))
    except ValueError as error:
        raise ValueError(f"{infer_js}'s SUPPORTED is not JSON ({error})") from error


def _blocks(kind: str, config) -> dict[str, object]:
    """The model's block configurations, by the name of their field."""
    return (
        {"encoder": config.encoder, "decoder": config.decoder}
        if kind == "dates"
        else {"block": config.block}
    )


def check_supported(kind: str, config, supported: dict[str, dict[str, list]]) -> None:
    """Refuse a configuration that the page's script does not implement.

    Raises:
        UnsupportedModel: naming each option whose value the script does not implement, the
            value and the values it does.
    """
    problems = []
    for name, block in _blocks(kind, config).items():
        for option, allowed in supported.get("block", {}).items():
            if getattr(block, option) not in allowed:
                value = getattr(block, option)
                problems.append(f"{name}.{option}={value!r} (it implements {allowed})")
    for option, allowed in supported.get(kind, {}).items():
        value = config
        for part in option.split("."):
            value = getattr(value, part)
        if value not in allowed:
            problems.append(f"{option}={value!r} (it implements {allowed})")
    if problems:
        raise UnsupportedModel(
            f"the page's infer.js does not implement this {kind} model's "
            f"{'; '.join(problems)}: it would compute another function. Export a model with "
            "those options, or implement them in infer.js and add them to its SUPPORTED."
        )


def page_config(kind: str, model) -> dict:
    """The sizes and options ``infer.js`` reads for a model of kind ``kind``."""
    config = model.config
    if kind == "vit":
        block = config.block
        return {
            "image_size": config.image_size,
            "patch_size": config.patch_size,
            "num_blocks": config.num_blocks,
            "num_heads": block.num_heads,
            "final_norm": config.final_norm,
            "norm_eps": block.norm_eps,
        }
    if kind == "lm":
        block = config.block
        return {
            "vocab_size": config.vocab_size,
            "window": config.window,
            "dim": block.dim,
            "num_blocks": config.num_blocks,
            "num_heads": block.num_heads,
            "mlp_hidden_dim": block.mlp_hidden_dim,
            "positions": "rotary" if block.rotary else "none",
            "rotary_base": block.rotary_base,
            "norm_eps": block.norm_eps,
        }
    return {
        "token_dim": config.encoder.dim,
        "num_heads": config.encoder.num_heads,
        "encoder_layers": config.encoder_layers,
        "decoder_layers": config.decoder_layers,
        "max_source_length": config.max_source_length,
        "max_target_length": config.max_target_length,
        "norm_eps": config.encoder.norm_eps,
    }


def export_model(
    name: str, out_dir: str | Path, *, checkpoints: str | Path, infer_js: str | Path
) -> Path:
    """Write ``<out_dir>/<name>.js`` for the model ``name`` of :data:`MODELS`; returns its path.

    Args:
        name: a key of :data:`MODELS`.
        out_dir: the folder of the page's model files (the repository's ``_interactive/models``).
        checkpoints: the folder of the book's checkpoints (``book/checkpoints``).
        infer_js: the page's script, whose ``SUPPORTED`` the model must fit.

    Raises:
        UnsupportedModel: if the checkpoint's model has an option ``infer.js`` does not implement.
        ValueError: if the written file does not read back as the checkpoint's weights (the
            committed file is then left as it was).
    """
    file, encoding = MODELS[name]
    source = Path(checkpoints) / file
    model, info = load_checkpoint(source)
    check_supported(name, model.config, supported_options(infer_js))
    tensors = _tensors(model)
    flat = np.concatenate([a.reshape(-1) for _, a in tensors])
    index, offset = [], 0
    for tensor_name, array in tensors:
        index.append({"name": tensor_name, "shape": list(array.shape), "offset": offset})
        offset += array.size
    config = page_config(name, model)
    if name == "vit":
        extra = _mnist_digits()
    elif name == "dates":
        from .datasets import dates

        extra = {
            "source_symbols": list(dates.SOURCE_VOCABULARY.symbols),
            "target_symbols": list(dates.TARGET_VOCABULARY.symbols),
            "pad_id": dates.PAD_ID,
            "start_id": dates.START_ID,
            "end_id": dates.END_ID,
            "examples": DATE_EXAMPLES,
        }
    else:
        extra = {"symbols": list(info.extra["symbols"]), "prompts": LM_PROMPTS}
    payload = {
        "format": FORMAT,
        "kind": name,
        "source": f"book/checkpoints/{file}",
        "config": config,
        "tensors": index,
        "count": int(flat.size),
        "encoding": encoding,
        "extra": extra,
        "data": _encode(flat, encoding),
    }
    text = (
        f"// The weights of book/checkpoints/{file}, written by transformer_intro.export"
        " (do not edit).\n"
        f"(window.bookModelData = window.bookModelData || {{}})[{json.dumps(name)}] = "
        + json.dumps(payload, sort_keys=True, separators=(",", ":"))
        + ";\n"
    )
    out = Path(out_dir) / f"{name}.js"
    out.parent.mkdir(parents=True, exist_ok=True)
    # Read back before it replaces the committed file, so a failed export leaves that as it was.
    with tempfile.TemporaryDirectory() as scratch:
        trial = Path(scratch) / out.name
        trial.write_text(text, encoding="ascii")
        _, stored = read_export(trial)
    stored_flat = np.concatenate([stored[t["name"]].reshape(-1) for t in index])
    expected = flat if encoding == "float32" else flat.astype(np.float16)
    if not np.array_equal(stored_flat, expected.astype(stored_flat.dtype)):
        raise ValueError(f"the export of {source} does not read back as its weights")
    return write_atomically(out, text.encode("ascii"))


def export_all(repo: str | Path) -> list[Path]:
    """Write every model of :data:`MODELS` into the repository ``repo``'s page models."""
    repo = Path(repo)
    return [
        export_model(
            name,
            repo / "_interactive" / "models",
            checkpoints=repo / "book" / "checkpoints",
            infer_js=repo / "_interactive" / "infer.js",
        )
        for name in MODELS
    ]


def read_export(path: str | Path) -> tuple[dict, dict[str, np.ndarray]]:
    """Parse a file written by :func:`export_model`: its JSON object and its tensors by name."""
    text = Path(path).read_text(encoding="ascii")
    payload = json.loads(text[text.index("] = ") + 4 : text.rindex(";")])
    flat = _decode(payload["data"], payload["encoding"], payload["count"])
    tensors = {
        t["name"]: flat[t["offset"] : t["offset"] + int(np.prod(t["shape"]))].reshape(t["shape"])
        for t in payload["tensors"]
    }
    return payload, tensors


def _round_half_up(x: float) -> int:
    return int(np.floor(x + 0.5))


def _box_weights(size: int, new_size: int) -> np.ndarray:
    """``W[i, y]``: the share of source pixel y in target pixel i when ``size`` -> ``new_size``."""
    step = size / new_size
    weights = np.zeros((new_size, size))
    for i in range(new_size):
        lo, hi = i * step, (i + 1) * step
        for y in range(int(np.floor(lo)), min(size, int(np.ceil(hi)))):
            weights[i, y] = max(0.0, min(hi, y + 1) - max(lo, y)) / step
    return weights


def prepare_drawing(ink: np.ndarray, *, box: int = 20, size: int = 28) -> np.ndarray:
    """A drawn digit prepared as MNIST's digits were: grey levels 0..1 in a 28 x 28 image.

    The steps (LeCun et al.'s, as the page's ``prepareDrawing`` does them, in float64):
    crop to the bounding box of the ink (pixels > 0); scale it by area averaging so that its
    longer side is ``box`` pixels, keeping the aspect ratio (the shorter side rounded half up,
    at least 1); put it into a ``size`` x ``size`` image so that its centre of mass (pixel centres
    at i + 1/2) falls as near the image's centre as whole pixels allow (the offset
    ``floor(size/2 - centre + 1/2)``, pixels pushed outside dropped).

    Args:
        ink: (H, W) grey levels in 0..1, 0 where nothing is drawn (the canvas's pixels / 255).
        box: the side of the box the digit is scaled to fit.
        size: the side of the image it is placed in.

    Returns:
        (size, size) float64 grey levels 0..1. The ViT reads ``2 * image - 1`` (MNIST's 0..255
        scaled to -1..1, as :func:`~transformer_intro.datasets.mnist.normalise_images` does).
    """
    ink = np.asarray(ink, np.float64)
    out = np.zeros((size, size))
    rows, cols = np.flatnonzero(ink.max(1) > 0), np.flatnonzero(ink.max(0) > 0)
    if rows.size == 0:
        return out
    crop = ink[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]
    h, w = crop.shape
    scale = box / max(h, w)
    nh, nw = max(1, _round_half_up(h * scale)), max(1, _round_half_up(w * scale))
    small = _box_weights(h, nh) @ crop @ _box_weights(w, nw).T
    total = small.sum()
    cy = (small.sum(1) * (np.arange(nh) + 0.5)).sum() / total
    cx = (small.sum(0) * (np.arange(nw) + 0.5)).sum() / total
    top, left = _round_half_up(size / 2 - cy), _round_half_up(size / 2 - cx)
    for i in range(nh):
        for j in range(nw):
            if 0 <= top + i < size and 0 <= left + j < size:
                out[top + i, left + j] = small[i, j]
    return out


if __name__ == "__main__":  # python -m transformer_intro.export [--repo .]
    parser = argparse.ArgumentParser(description="Write the book's models for its pages.")
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="the book's repository")
    for written in export_all(parser.parse_args().repo):
        print(written, written.stat().st_size, "bytes")
