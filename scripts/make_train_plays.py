"""Write ``_interactive/plays/<name>.js``: the plays the page's trainer learns from (chapter 9).

Each file registers one play, ``(window.bookTrainPlays = window.bookTrainPlays ||
{})["<name>"] = {"title", "characters", "encoding": "utf8-deflate", "data"}``: the text as in
:func:`~transformer_intro.datasets.shakespeare.load_play`, UTF-8, compressed with zlib and written
in base64 (the page inflates it with the browser's ``DecompressionStream("deflate")``). A script
tag, not ``fetch``, because Chromium refuses ``fetch`` of local files from ``file://``;
``_interactive/train.js`` adds the tag only when a reader presses Train. ``tests/test_train_js.py``
checks that the files hold the package's texts. Run from the repository root:
``.venv/bin/python scripts/make_train_plays.py``.
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
import zlib
from pathlib import Path

from transformer_intro.datasets.shakespeare import load_play

REPO = Path(__file__).resolve().parents[1]
OUT_DIR = REPO / "_interactive" / "plays"
PLAYS = {"hamlet": "Hamlet", "romeo_and_juliet": "Romeo and Juliet", "sonnets": "The Sonnets"}


def play_script(name: str) -> str:
    """The text of ``plays/<name>.js``."""
    text = load_play(name)
    payload = {
        "title": PLAYS[name],
        "characters": len(text),
        "encoding": "utf8-deflate",
        "data": base64.b64encode(zlib.compress(text.encode("utf-8"), 9)).decode("ascii"),
    }
    body = json.dumps(payload, separators=(",", ":"))
    registry = "(window.bookTrainPlays = window.bookTrainPlays || {})"
    return f"{registry}[{json.dumps(name)}] = {body};\n"


def read_play(path: Path) -> str:
    """The text a ``plays/<name>.js`` file holds (the inverse of :func:`play_script`)."""
    body = path.read_text().split("] = ", 1)[1].rstrip().rstrip(";")
    return zlib.decompress(base64.b64decode(json.loads(body)["data"])).decode("utf-8")


def main() -> None:
    OUT_DIR.mkdir(exist_ok=True)
    for name in PLAYS:
        target = OUT_DIR / f"{name}.js"
        with tempfile.NamedTemporaryFile("w", dir=OUT_DIR, delete=False, suffix=".tmp") as f:
            f.write(play_script(name))
        if read_play(Path(f.name)) != load_play(name):  # verified before it replaces the old one
            os.unlink(f.name)
            raise RuntimeError(f"{target} would not hold the play's text")
        os.replace(f.name, target)
        print(f"wrote {target.relative_to(REPO)} ({target.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
