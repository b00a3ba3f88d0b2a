"""Store each progress bar as the reader last saw it, not as every frame it drew.

tqdm redraws its bar with carriage returns, and Jupyter stores every redraw as a separate stream
output: an 850-step bar becomes 850 lines in the notebook and in the HTML book. This script
merges consecutive outputs of the same stream and keeps, on each line, only the text after the
last carriage return, exactly what a terminal shows. nbval compares outputs after the same
merging, so a tidied notebook still passes against a fresh run.

Usage: python scripts/tidy_outputs.py book/*.ipynb   (`make execute` runs it after executing)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

# A committed notebook then holds its old outputs or its new ones, never half of them, even if
# the script is stopped while writing.
from transformer_intro.files import write_atomically

# The same rules as Jupyter's front ends and myst-nb: text before a carriage return that is not
# the end of a line is overwritten; a backspace deletes the character before it.
_OVERWRITTEN = re.compile(r".*\r(?=[^\n])")
_BACKSPACE = re.compile(r"[^\n]\x08")


def collapse(text: str) -> str:
    text = _OVERWRITTEN.sub("", text)
    while _BACKSPACE.search(text):
        text = _BACKSPACE.sub("", text)
    return text.replace("\r\n", "\n").rstrip("\r")


def tidy_outputs(outputs: list) -> list:
    tidied: list = []
    for output in outputs:
        previous = tidied[-1] if tidied else None
        if (
            output.get("output_type") == "stream"
            and previous is not None
            and previous.get("output_type") == "stream"
            and previous.get("name") == output.get("name")
        ):
            previous["text"] += output["text"]
        else:
            tidied.append(output)
    for output in tidied:
        if output.get("output_type") == "stream":
            output["text"] = collapse(output["text"])
    return tidied


def tidy_notebook(path: str) -> bool:
    notebook = nbformat.read(path, as_version=4)
    changed = False
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        tidied = tidy_outputs([dict(o) for o in cell.outputs])
        tidied = [nbformat.from_dict(o) for o in tidied]
        if tidied != cell.outputs:
            cell.outputs = tidied
            changed = True
    if changed:
        text = nbformat.writes(notebook)
        write_atomically(Path(path), (text if text.endswith("\n") else text + "\n").encode())
    return changed


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(("tidied " if tidy_notebook(path) else "unchanged ") + path)
