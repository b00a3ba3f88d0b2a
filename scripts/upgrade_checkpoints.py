"""Rewrite checkpoints of an older format (the book's, by default) in the current one.

Only the header line changes: a format-2 header's flat model configuration becomes format 3's
nested one (:func:`transformer_intro.training.checkpoints.upgrade_header`); the arrays after it
are copied byte for byte, so the models, and every figure drawn from them, are unchanged. Each
file is checked before it is replaced: the new header's configuration builds a model of the
file's class (an adapter's, its base model) and the file's arrays read into it. Written through
``transformer_intro.files.write_atomically``. Usage::

    python scripts/upgrade_checkpoints.py [FILE ...]    # default: book/checkpoints/*.eqx
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from transformer_intro.config import MODEL_CONFIGS
from transformer_intro.files import write_atomically
from transformer_intro.training.checkpoints import (
    FORMAT,
    checkpoint_header,
    load_checkpoint,
    upgrade_header,
)

REPO = Path(__file__).resolve().parents[1]


def upgrade(path: Path) -> bool:
    """Rewrite ``path`` in format :data:`FORMAT` if it is older; returns whether it was."""
    data = path.read_bytes()
    end = data.index(b"\n")
    header = json.loads(data[:end])
    if header["format"] == FORMAT:
        return False
    new = upgrade_header(header)
    # The configuration as save_checkpoint writes it (its own defaults and key order).
    config = MODEL_CONFIGS[new["model_class"]].from_dict(new["model_config"])
    new["model_config"] = json.loads(config.to_json())
    contents = json.dumps(new).encode() + data[end:]
    write_atomically(path, contents)
    # read back: the header as the current version reads it, and (a whole model) its arrays
    checkpoint_header(path)
    if new.get("adapter") is None:
        load_checkpoint(path)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    files = parser.parse_args().files or sorted((REPO / "book" / "checkpoints").glob("*.eqx"))
    for path in files:
        print(path, "upgraded" if upgrade(path) else f"already {FORMAT!r}")


if __name__ == "__main__":
    main()
