"""Fixtures for the headless-Chromium test of the built book.

Tests marked ``browser`` run only with ``--run-browser`` (``make browser`` passes it); without
the flag they are skipped, so ``pytest tests`` needs neither Chromium nor a built book. The
option itself is registered in tests/conftest.py.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# The built book; override with BOOK_HTML_DIR to test a build elsewhere.
HTML_DIR = Path(os.environ.get("BOOK_HTML_DIR", REPO / "_build" / "html")).resolve()
SCREENSHOT_DIR = Path(__file__).resolve().parent / "screenshots"

CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    # Without these Chromium keeps trying to reach Google services, which this closed network
    # refuses.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-features=Translate,OptimizationHints,MediaRouter",
    "--window-size=1280,1000",
    "--lang=en-US",
]


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "browser: needs headless Chromium and the built book; runs only with --run-browser",
    )


def pytest_collection_modifyitems(config, items):
    try:
        run = config.getoption("--run-browser")
    except ValueError:  # option not registered (tests/conftest.py not loaded)
        run = False
    if run:
        return
    skip = pytest.mark.skip(reason="browser test: pass --run-browser (make browser) to run it")
    for item in items:
        if item.get_closest_marker("browser") is not None:
            item.add_marker(skip)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature of the base class
        pass


class StaticServer:
    """Serve a directory on 127.0.0.1 (a free port) from a background thread."""

    def __init__(self, root: Path):
        self.root = Path(root)
        handler = functools.partial(_QuietHandler, directory=str(self.root))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


@pytest.fixture(scope="session")
def html_dir() -> Path:
    if not (HTML_DIR / "index.html").is_file():
        pytest.fail(f"no built book in {HTML_DIR}: run `make book` first")
    return HTML_DIR


@pytest.fixture(scope="session")
def book_server(html_dir):
    with StaticServer(html_dir) as server:
        yield server


@pytest.fixture(scope="session")
def serve_dir():
    """``with serve_dir(path) as server:`` serves ``path`` at ``server.url``."""
    return StaticServer


@pytest.fixture(scope="session")
def screenshot_dir() -> Path:
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    return SCREENSHOT_DIR


@pytest.fixture(scope="session")
def driver():
    webdriver = pytest.importorskip("selenium.webdriver")
    chromium = (
        shutil.which("chromium")
        or shutil.which("chromium-browser")
        or shutil.which("google-chrome")
    )
    chromedriver = shutil.which("chromedriver")
    if not chromium or not chromedriver:
        pytest.fail(
            "--run-browser needs chromium and chromedriver "
            "(apt-get install chromium chromium-driver)"
        )

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    profile = tempfile.mkdtemp(prefix="book-chromium-")
    for flag in CHROMIUM_FLAGS + [f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    # Console messages for the error check, network events for the "nothing leaves 127.0.0.1" check.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    # An explicit driver path: Selenium Manager (which would go online) is never started.
    service = webdriver.ChromeService(executable_path=chromedriver)
    drv = webdriver.Chrome(service=service, options=options)
    drv.set_page_load_timeout(60)
    drv.set_script_timeout(60)
    try:
        yield drv
    finally:
        drv.quit()
        shutil.rmtree(profile, ignore_errors=True)
