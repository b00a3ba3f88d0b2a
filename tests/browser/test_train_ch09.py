"""Chapter 9's training widget (_static/train.js) trains in the page as JAX trains.

The widget trains the medium preset with a fixed seed for a few steps in its Web Worker, and
records its initial weights and batches; JAX then trains the book's own ``LanguageModel`` from
those weights on those batches with the book's ``Recipe.optimiser()``, in float64, in a
subprocess (``scripts/make_train_js_fixture.py --losses``, so that float64 stays out of this
process). Every logged loss must equal JAX's within ``TOLERANCE``: measured on the first 12
steps, the largest relative difference was 7.5e-9 (the package computes the rotary angles in
float32, the page in float64), and 1e-5 leaves room for other processors. Two controls must miss
by far more: JAX without the clipping of the gradient, and JAX with the batches in reverse order.
The widget also works from file:// (the worker is a Blob URL), trains in slices in the page where
no worker can start, pauses, resumes and resets, and asks only for local files.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from test_offline import non_local

pytestmark = pytest.mark.browser

PAGE = "book/09_language_model.html"
REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "make_train_js_fixture.py"
STEPS = 12
TOLERANCE = 1e-5  # relative, per step's loss; measured 7.5e-9


def choose(driver, size="medium", play="hamlet", seed=3, record=0):
    driver.execute_script(
        "const root = document.querySelector('div.book-train');"
        "const [size, play] = root.querySelectorAll('select');"
        "size.value = arguments[0]; play.value = arguments[1];"
        "root.querySelector('input[aria-label=seed]').value = arguments[2];"
        "bookTrain.widgets[0].record = arguments[3];",
        size,
        play,
        seed,
        record,
    )


def press(driver, name):
    driver.execute_script(f"document.querySelector('div.book-train button.bt-{name}').click()")


def steps_done(driver) -> int:
    return driver.execute_script("return bookTrain.widgets[0].train.length")


def wait_for_steps(driver, n, timeout=240.0):
    deadline = time.monotonic() + timeout
    while steps_done(driver) < n:
        assert time.monotonic() < deadline, f"the widget did not reach {n} steps"
        time.sleep(0.2)


def requested(driver) -> list[str]:
    return [
        json.loads(e["message"])["message"]["params"]["request"]["url"]
        for e in driver.get_log("performance")
        if '"Network.requestWillBeSent"' in e["message"]
    ]


@pytest.fixture
def trained(driver, book_server, tmp_path):
    """The page's first STEPS losses and JAX's on the same weights and batches."""
    driver.get_log("performance")
    driver.get(book_server.url + PAGE)
    choose(driver, record=STEPS)
    press(driver, "train")
    wait_for_steps(driver, STEPS)
    press(driver, "pause")
    dump = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "bookTrain.widgets[0].request('dump').then(done);"
    )
    state = driver.execute_script(
        "const s = bookTrain.widgets[0]; return {losses: s.train.map((p) => p[1]),"
        " mode: s.driver.mode, heldOut: s.heldOut};"
    )
    (tmp_path / "dump.json").write_text(json.dumps(dump))
    subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--losses",
            str(tmp_path / "dump.json"),
            str(tmp_path / "jax.json"),
        ],
        check=True,
        timeout=600,
    )
    return state, json.loads((tmp_path / "jax.json").read_text()), requested(driver)


def test_losses_equal_jax(trained):
    page, jax_losses, _ = trained
    assert page["mode"] == "worker"
    shown = np.asarray(page["losses"][:STEPS])
    reference = np.asarray(jax_losses["same"])
    assert reference.shape == (STEPS,)
    difference = np.abs(shown / reference - 1).max()
    controls = {
        name: np.abs(shown / np.asarray(jax_losses[name]) - 1).max()
        for name in ("no_clipping", "reversed")
    }
    print(
        f"largest relative loss difference, page vs JAX over {STEPS} steps: {difference:.1e}; "
        f"controls: {controls}"
    )
    assert difference < TOLERANCE
    for name, miss in controls.items():
        assert miss > 10 * TOLERANCE, f"the control {name} was not caught"


def test_only_local_files_are_asked_for(trained):
    _, _, urls = trained
    paths = [u.split("?")[0] for u in urls]  # the book adds ?v=<digest> to its scripts
    assert any(p.endswith("_static/train.js") for p in paths), urls
    assert any(p.endswith("plays/hamlet.js") for p in paths), urls
    assert non_local(urls) == []


def test_from_file_with_pause_resume_and_reset(html_dir, driver):
    driver.get_log("performance")
    driver.get((html_dir / PAGE).as_uri())
    assert driver.execute_script("return bookTrain.widgets.length") == 1
    choose(driver, size="small", play="sonnets", seed=1)
    press(driver, "train")
    wait_for_steps(driver, 3)
    assert driver.execute_script("return bookTrain.widgets[0].driver.mode") == "worker"
    press(driver, "pause")
    time.sleep(1.0)  # a step in flight may still be reported
    paused = steps_done(driver)
    time.sleep(1.5)
    assert steps_done(driver) == paused
    press(driver, "pause")  # now labelled Resume
    wait_for_steps(driver, paused + 2)
    losses = driver.execute_script("return bookTrain.widgets[0].train.map((p) => p[1])")
    assert all(np.isfinite(losses)) and losses[0] > 0
    press(driver, "reset")
    assert steps_done(driver) == 0
    assert (
        driver.execute_script("return document.querySelector('button.bt-train').disabled") is False
    )
    assert non_local(requested(driver)) == []


def test_without_a_worker_it_trains_in_slices(html_dir, driver):
    driver.get((html_dir / PAGE).as_uri())
    driver.execute_script("window.Worker = undefined;")
    choose(driver, size="small", play="sonnets", seed=2)
    press(driver, "train")
    wait_for_steps(driver, 2)
    assert driver.execute_script("return bookTrain.widgets[0].driver.mode") == "page"
    press(driver, "reset")


def page_ready(driver, timeout=20.0):
    """Wait until the page is parsed and the widget's script has marked it (an untimed race)."""
    deadline = time.monotonic() + timeout
    while not driver.execute_script(
        "return document.readyState === 'complete'"
        " && document.documentElement.classList.contains('book-train-js')"
        " && document.querySelector('p.book-train-static') !== null"
    ):
        if time.monotonic() > deadline:
            raise AssertionError("the page or its training widget did not load within 20 s")
        time.sleep(0.1)


def test_print_shows_the_static_text(html_dir, driver):
    driver.get((html_dir / PAGE).as_uri())
    page_ready(driver)
    shown = driver.execute_script(
        "const p = document.querySelector('p.book-train-static');"
        "return p ? getComputedStyle(p).display : null;"
    )
    assert shown == "none"  # on screen, with JavaScript, the widget replaces it
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    try:
        style = driver.execute_script(
            "return [getComputedStyle(document.querySelector('p.book-train-static')).display,"
            " getComputedStyle(document.querySelector('div.book-train')).display];"
        )
    finally:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
    assert style == ["block", "none"]
