"""Speed of the book's models in the page (_interactive/infer.js), measured in headless Chromium.

Opens the built chapters 8 and 9 from file:// (run `make book` first), loads each model's weights
and times, after a warm-up, inside the page (performance.now()):

* the ViT: milliseconds per prediction (logits and every block's attention) on MNIST test digits;
* the language model: characters per second sampling 1,000 characters after "ROMEO.\\n"
  (temperature 0.8, top-k 10), the cache rebuilt from the newest half of the window each time it
  fills, as `generate` does; and the steady rate of single cached steps (no rebuild).

    python benchmarks/infer_in_page.py [--out benchmarks/results/infer_in_page.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import tempfile
from pathlib import Path

import numpy as np
from report import write_json  # beside this script: the benchmarks' one atomic writer

REPO = Path(__file__).resolve().parents[1]
HTML = REPO / "_build" / "html" / "book"


def browser():
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("google-chrome")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tempfile.mkdtemp(prefix='bench-chromium-')}")
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_script_timeout(600)
    return driver


def load(driver, page: str, name: str) -> None:
    driver.get((HTML / page).as_uri())
    status = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "bookModels.load(arguments[0]).then(() => done('ok'), (e) => done(e.message));",
        name,
    )
    assert status == "ok", status


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/infer_in_page.json"))
    args = parser.parse_args()
    from transformer_intro.datasets import load_mnist

    images, _ = load_mnist("test")
    pixels = (images[:100].astype(np.float64) / 255).reshape(100, -1).tolist()
    load_start = os.getloadavg()
    driver = browser()
    try:
        load(driver, "08_vision_transformer.html", "vit")
        vit_ms = driver.execute_script(
            "const ps = arguments[0], m = bookModels.models.vit;"
            "ps.slice(0, 20).forEach((p) => m.forward(p));"
            "const t0 = performance.now(); ps.forEach((p) => m.forward(p));"
            "return (performance.now() - t0) / ps.length;",
            pixels,
        )
        load(driver, "09_language_model.html", "lm")
        lm = driver.execute_script(
            "const lm = bookModels.models.lm, options = {temperature: 0.8, topK: 10, seed: 1};"
            "lm.complete('ROMEO.\\n', 100, options);"
            "let t0 = performance.now(); lm.complete('ROMEO.\\n', 1000, options);"
            "const sampled = 1000 / ((performance.now() - t0) / 1000);"
            "const run = lm.start('ROMEO.\\n', options); t0 = performance.now();"
            "for (let i = 0; i < 50; i++) run.step();"
            "const steady = 50 / ((performance.now() - t0) / 1000);"
            "return {sampled, steady, version: navigator.userAgent};",
        )
    finally:
        driver.quit()
    result = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "platform": platform.platform(),
            "browser": lm["version"],
        },
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "load_average_start": [round(x, 2) for x in load_start],
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "vit_ms_per_prediction": round(vit_ms, 2),
        "lm_characters_per_second_sampling_1000": round(lm["sampled"], 1),
        "lm_characters_per_second_cached_steps": round(lm["steady"], 1),
    }
    print(json.dumps(result, indent=1))
    write_json(args.out, result)


if __name__ == "__main__":
    main()
