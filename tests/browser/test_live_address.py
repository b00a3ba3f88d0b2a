"""_interactive/live.js accepts only a loopback Jupyter address, and sends no token elsewhere.

A crafted link to a published copy of the book (``...#jupyter=http://elsewhere/&token=...``)
once made a click on "Run live" send the token to any server. The page here is self-contained
(one code cell and live.js, served from 127.0.0.1): a recorder wrapped around ``fetch`` and
``WebSocket`` before live.js loads notes every request the page makes, so nothing needs the
built book, and nothing leaves the machine.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from urllib.parse import quote

import pytest

REPO = Path(__file__).resolve().parents[2]
TOKEN = "a-secret-token-0123"

PAGE = """<!doctype html><meta charset="utf-8"><title>live</title>
<script>
  window.requests = [];
  window.fetch = function (resource, init) {
    var url = typeof resource === "string" ? resource : resource.url;
    window.requests.push({url: url, headers: JSON.stringify((init && init.headers) || {})});
    return Promise.reject(new Error("recorded"));
  };
  window.WebSocket = function (url) { window.requests.push({url: url, headers: ""}); };
</script>
<main><div class="cell"><div class="cell_input"><pre>print(1)</pre></div></div></main>
<script src="live.js"></script>
"""


@pytest.fixture
def page(tmp_path, serve_dir):
    (tmp_path / "page.html").write_text(PAGE, encoding="utf8")
    shutil.copy(REPO / "_interactive" / "live.js", tmp_path / "live.js")
    with serve_dir(tmp_path) as server:
        yield server.url + "page.html"


def click_run_live(driver, address):
    driver.get("about:blank")
    driver.get(address)
    driver.execute_script("sessionStorage.clear()")
    driver.get(address)  # with nothing stored from an earlier address
    driver.find_element("css selector", "button.ti-live-button").click()
    time.sleep(1.0)
    return {
        "requests": driver.execute_script("return window.requests"),
        "text": driver.find_element("css selector", ".ti-live-text").text,
        "stored": driver.execute_script("return JSON.stringify(sessionStorage)"),
        "address": driver.current_url,
    }


@pytest.mark.browser
@pytest.mark.parametrize(
    "server",
    [
        "http://elsewhere.example:8888/",
        "http://127.0.0.1.elsewhere.example/",
        "http://10.0.0.7:8888/",
    ],
)
def test_a_foreign_jupyter_address_is_refused_and_gets_no_token(driver, page, server):
    seen = click_run_live(driver, f"{page}#jupyter={quote(server, safe='')}&token={TOKEN}")
    assert seen["requests"] == [], f"the page contacted {seen['requests']}"
    assert TOKEN not in json.dumps(seen)  # not sent, not stored, not left in the address bar
    assert "not a loopback address" in seen["text"] and "make serve" in seen["text"]


@pytest.mark.browser
@pytest.mark.parametrize(
    "server",
    ["http://127.0.0.1:9/", "http://localhost:9/", "http://[::1]:9/", "http://127.3.2.1:9/"],
)
def test_a_loopback_address_is_contacted_with_the_token(driver, page, server):
    # Control: the recorder sees what the page sends, so an empty record above means something.
    seen = click_run_live(driver, f"{page}#jupyter={quote(server, safe='')}&token={TOKEN}")
    assert [r["url"] for r in seen["requests"]] == [server + "api/status"]
    assert TOKEN in seen["requests"][0]["headers"]
    assert TOKEN not in seen["address"]
