"""Live code in the browser: `make serve`'s servers and the "Run live" button.

- The servers start as ``make serve`` starts them (scripts/serve.py), a chapter is loaded over
  http from 127.0.0.1 with the address ``make serve`` prints, live code is switched on, its first
  cells run on the kernel, and their outputs equal the ones stored in the notebook.
- Without a server (another origin, or file://) the button says how to start one.
- Security: the token never reaches the address bar or any file of the built book, and serving
  writes nothing there. The server's own checks (token, origin, loopback only), which need no
  browser, are in tests/test_serve.py and run in `make unit`.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest
from test_offline import non_local

REPO = Path(__file__).resolve().parents[2]
CHAPTER = "book/03_multi_head_attention"
PAGE = CHAPTER + ".html"
RUN_CELLS = 3  # the first code cells: setup, a printout of shapes, the first head by hand
HOWTO = "run `make serve` in the book's folder"


def load_serve():
    spec = importlib.util.spec_from_file_location("book_serve", REPO / "scripts" / "serve.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["book_serve"] = module
    spec.loader.exec_module(module)
    return module


def stored_outputs(count: int) -> list[str]:
    """The stored text outputs of the notebook's first ``count`` code cells."""
    cells = json.loads((REPO / (CHAPTER + ".ipynb")).read_text(encoding="utf8"))["cells"]
    texts = []
    for cell in [c for c in cells if c["cell_type"] == "code"][:count]:
        parts = []
        for output in cell.get("outputs", []):
            if output["output_type"] == "stream":
                parts.append("".join(output["text"]))
            elif "text/plain" in output.get("data", {}):
                parts.append("".join(output["data"]["text/plain"]))
        texts.append("".join(parts))
    return texts


def squash(text: str) -> str:
    return " ".join(text.split())


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        p.relative_to(folder).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
    }


@pytest.fixture(scope="module")
def live(html_dir):
    serve = load_serve()
    before = snapshot(html_dir)
    with serve.LiveBook(html_dir, python=sys.executable) as servers:
        yield servers
    assert snapshot(html_dir) == before, "serving wrote into the built book"


def wait_for(driver, script: str, timeout: float, *args):
    deadline = time.monotonic() + timeout
    while True:
        value = driver.execute_script(script, *args)
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.25)


@pytest.mark.browser
def test_live_code_runs_the_first_cells(live, driver, html_dir, screenshot_dir):
    from selenium.webdriver.common.by import By

    driver.get_log("performance")  # forget earlier pages
    driver.get(live.address(PAGE))
    wait_for(driver, "return document.readyState === 'complete'", 60)
    assert live.token not in driver.current_url, "the token must leave the address bar"
    driver.find_element(By.CSS_SELECTOR, ".ti-live-button").click()
    state = wait_for(
        driver,
        "const s = document.documentElement.getAttribute('data-live-status');"
        "return s === 'connected' || s === 'failed' ? s : null;",
        120,
    )
    label = driver.execute_script("return document.querySelector('.ti-live-text').textContent")
    assert state == "connected", f"live code did not connect: {state!r}, button says {label!r}"

    expected = stored_outputs(RUN_CELLS)
    got = []
    for index in range(RUN_CELLS):
        driver.execute_script(
            "document.querySelectorAll('.thebe-run-button')[arguments[0]].click()", index
        )
        # wait until this cell's busy marker is gone and its output (if any) has arrived
        text = wait_for(
            driver,
            "const cell = document.querySelectorAll('.thebe-run-button')[arguments[0]]"
            "  .closest('.cell');"
            "const busy = cell.querySelector('.thebe-busy');"
            "if (busy && busy.style.display !== 'none') return null;"
            "const out = cell.querySelector('[data-output]');"
            "const t = out ? out.innerText : '';"
            "return (arguments[1] && !t.trim()) ? null : (t || ' ');",
            180,
            index,
            bool(expected[index].strip()),
        )
        got.append(text or "")
    for index, (shown, stored) in enumerate(zip(got, expected)):
        assert squash(shown) == squash(stored), (index, shown, stored)
    assert any(squash(text) for text in expected), "no stored output compared"
    # live code too fetched nothing from outside 127.0.0.1 (Thebe's chunks, its CSS, the API)
    requested = [
        json.loads(entry["message"])["message"]["params"]["request"]["url"]
        for entry in driver.get_log("performance")
        if json.loads(entry["message"])["message"].get("method") == "Network.requestWillBeSent"
    ]
    assert any("/_static/thebe/index.js" in url for url in requested), requested
    assert not non_local(requested), non_local(requested)
    driver.execute_script(
        "document.querySelectorAll('.thebe-run-button')[1].scrollIntoView({block: 'start'});"
    )
    driver.save_screenshot(str(screenshot_dir / "live-ch03.png"))

    # the token is in no file of the built book
    for path in html_dir.rglob("*"):
        if path.is_file() and path.suffix in {".html", ".js", ".json", ".txt", ".ipynb", ".css"}:
            assert live.token.encode() not in path.read_bytes(), path


@pytest.mark.browser
@pytest.mark.parametrize("where", ["http", "file"])
def test_without_a_server_the_button_says_how(where, driver, book_server, html_dir):
    from selenium.webdriver.common.by import By

    # book_server is another origin than `live`'s, so no stored token applies
    url = book_server.url + PAGE if where == "http" else (html_dir / PAGE).as_uri()
    driver.get(url)
    wait_for(driver, "return document.readyState === 'complete'", 60)
    button = driver.find_element(By.CSS_SELECTOR, ".ti-live-button")
    assert HOWTO in button.get_attribute("title")
    button.click()
    label = driver.execute_script("return document.querySelector('.ti-live-text').textContent")
    assert HOWTO in label and label.count(".") == 1, label
    assert not driver.execute_script("return typeof window.thebe !== 'undefined'")
