"""explore.js waits for a figure's data to arrive in full before it reads it.

A page reaches the browser in pieces, and the parser puts a figure's ``<script>`` element into
the document as soon as its first piece is in: for a moment its text is a prefix of the JSON.
Chapter 15's figure, the largest, once failed in CI with "Unexpected end of JSON input" because
the script read it then. Here a server on 127.0.0.1 sends the page in two pieces, cut in the
middle of the figure's data with a pause between; the figure must come up with the whole data.
"""

from __future__ import annotations

import http.server
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from explore_helpers import read_values, wait_for_figure

from transformer_intro.explore import token_attention_figure

SCRIPT = Path(__file__).resolve().parents[2] / "_interactive" / "explore.js"
FIGURE = "fig-streamed"
PAUSE_S = 1.0


def page_in_two_pieces() -> tuple[bytes, bytes, np.ndarray]:
    """The page's bytes before and after the cut, and the figure's weights A[l, h, n', n]."""
    n = 40
    rng = np.random.default_rng(0)
    weights = rng.random((2, 2, n, n)) + 0.1
    weights /= weights.sum(axis=2, keepdims=True)
    tokens = [f"t{i}" for i in range(n)]
    figure = token_attention_figure(
        tokens, tokens, weights, name=FIGURE, static=b"\x89PNG\r\n\x1a\n"
    )
    html = (
        "<!doctype html><html><head><meta charset='utf-8'>"
        "<script src='/explore.js'></script></head><body>"
        # enough bytes before the figure that the parser starts on them at once
        + "<p>"
        + "padding " * 4096
        + "</p>"
        + figure.to_html()
        + "<p>after the figure</p></body></html>"
    ).encode()
    data_start = html.index(b'class="ti-explore-data">') + len(b'class="ti-explore-data">')
    data_end = html.index(b"</script>", data_start)
    cut = (data_start + data_end) // 2
    return html[:cut], html[cut:], weights


class _TwoPieces(http.server.BaseHTTPRequestHandler):
    pieces: tuple[bytes, bytes] = (b"", b"")

    def do_GET(self):  # noqa: N802 - name fixed by the base class
        if self.path == "/explore.js":
            body = SCRIPT.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "text/javascript")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        first, second = self.pieces
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(first) + len(second)))
        self.end_headers()
        self.wfile.write(first)
        self.wfile.flush()
        time.sleep(PAUSE_S)
        self.wfile.write(second)

    def log_message(self, format, *args):  # noqa: A002 - signature of the base class
        pass


@pytest.mark.browser
def test_a_figure_whose_data_arrives_in_pieces_comes_up_whole(driver):
    first, second, weights = page_in_two_pieces()
    handler = type("Handler", (_TwoPieces,), {"pieces": (first, second)})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        driver.get(f"http://127.0.0.1:{server.server_address[1]}/")
        wait_for_figure(driver, FIGURE)
        # the page opens on the last output token of the first layer and head
        shown = read_values(driver, FIGURE)
        np.testing.assert_allclose(shown, weights[0, 0, :, -1], atol=5e-4)
    finally:
        server.shutdown()
        server.server_close()
