"""How fast chapter 9's training widget (_interactive/train.js) learns in headless Chromium.

For each preset (small, medium, large), the widget trains on Hamlet with seed 1 in its Web Worker
for SECONDS seconds of training time (the worker's own clock, which leaves out the held-out
evaluations and the samples), on a stand-in page that holds only the widget (train.js and the
plays copied into a temporary folder, opened from file://, so no built book is needed). It
records the training characters per second, the held-out loss last evaluated (every 20 steps,
16 fixed windows of the play's last tenth) and the steps done. Only meaningful on a quiet
machine: the result depends on every other process on the cores.

    python benchmarks/train_in_page.py [--seconds 60] [--out benchmarks/results/train_in_page.json]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

from infer_in_page import browser  # beside this script: the same headless Chromium
from report import write_json  # beside this script: the benchmarks' one atomic writer
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[1]
STATIC = REPO / "_interactive"
PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8">
<script src="../_static/train.js"></script></head><body>
<div class="book-train"></div></body></html>
"""


def stand_in_page(folder: Path) -> Path:
    """A page with the widget alone, laid out as the built book (book/ beside _static/)."""
    (folder / "_static").mkdir()
    shutil.copy(STATIC / "train.js", folder / "_static" / "train.js")
    shutil.copytree(STATIC / "plays", folder / "_static" / "plays")
    (folder / "book").mkdir()
    page = folder / "book" / "train.html"
    page.write_text(PAGE)
    return page


def train_for(driver, page: Path, preset: str, seconds: float) -> dict:
    """Train ``preset`` on the stand-in page for ``seconds`` of training time; its figures."""
    driver.get(page.as_uri())
    driver.execute_script(
        "const root = document.querySelector('div.book-train');"
        "root.querySelector('select').value = arguments[0];"
        "root.querySelector('input[aria-label=seed]').value = 1;"
        "root.querySelector('button.bt-train').click();",
        preset,
    )
    read = (
        "const s = bookTrain.widgets[0]; return {seconds: s.seconds || 0, tokens: s.tokens || 0,"
        " steps: s.train.length, heldOut: s.heldOut.slice(-1)[0] || null,"
        " parameters: s.parameters || 0, mode: s.driver && s.driver.mode,"
        " done: !s.running && s.train.length > 0};"
    )
    with tqdm(total=round(seconds), desc=preset, unit="s") as bar:
        state = driver.execute_script(read)
        while state["seconds"] < seconds and not state["done"]:
            time.sleep(0.5)
            state = driver.execute_script(read)
            bar.update(min(round(state["seconds"]), round(seconds)) - bar.n)
    driver.execute_script("document.querySelector('div.book-train button.bt-pause').click()")
    time.sleep(1.0)
    state = driver.execute_script(read)
    return {
        "parameters": state["parameters"],
        "runs_in": state["mode"],
        "training_seconds": round(state["seconds"], 2),
        "steps": state["steps"],
        "characters_per_second": round(state["tokens"] / max(state["seconds"], 1e-9)),
        "held_out_nats_per_char": round(state["heldOut"][1], 4) if state["heldOut"] else None,
        "held_out_at_step": state["heldOut"][0] if state["heldOut"] else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--presets", nargs="+", default=["small", "medium", "large"])
    parser.add_argument(
        "--out", default=str(REPO / "benchmarks" / "results" / "train_in_page.json")
    )
    args = parser.parse_args()
    load_start = os.getloadavg()
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        page = stand_in_page(Path(folder))
        driver = browser()
        try:
            for preset in args.presets:
                results[preset] = train_for(driver, page, preset, args.seconds)
                print(preset, results[preset])
        finally:
            driver.quit()
    result = {
        "what": "chapter 9's training widget in headless Chromium, Hamlet, seed 1",
        "seconds_of_training": args.seconds,
        "presets": results,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "platform": platform.platform(),
        },
        "load_average_start": [round(x, 2) for x in load_start],
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
    }
    write_json(args.out, result)


if __name__ == "__main__":
    main()
