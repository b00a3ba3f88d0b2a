"""`make serve`'s servers (scripts/serve.py) keep the kernel to the book: token, origin, loopback.

These checks need neither Chromium nor a built book: the servers serve a two-page folder made
here, and the requests are plain HTTP. The browser's side of live code (the "Run live" button,
the token leaving the address bar) is in tests/browser/test_live.py.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from urllib.parse import unquote

import pytest

# The Jupyter server is the book's .venv's, as `make serve` runs it; a Python without it (as
# make check-gpu's may be) has no server to check.
pytest.importorskip("jupyter_server")

REPO = Path(__file__).resolve().parents[1]


def load_serve():
    spec = importlib.util.spec_from_file_location("book_serve", REPO / "scripts" / "serve.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["book_serve"] = module
    spec.loader.exec_module(module)
    return module


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        p.relative_to(folder).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
    }


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    html = tmp_path_factory.mktemp("html")
    (html / "index.html").write_text("<!doctype html><title>book</title>", encoding="utf8")
    (html / "book").mkdir()
    (html / "book" / "page.html").write_text("<!doctype html><p>page</p>", encoding="utf8")
    before = snapshot(html)
    with load_serve().LiveBook(html, python=sys.executable) as servers:
        yield servers
    assert snapshot(html) == before, "serving wrote into the book's folder"


def status(url: str, token: str | None = None, origin: str | None = None) -> int:
    headers = {}
    if token is not None:
        headers["Authorization"] = f"token {token}"
    if origin is not None:
        headers["Origin"] = origin
    request = urllib.request.Request(url + "api/sessions", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_server_needs_the_token_and_the_book_origin(live):
    assert live.jupyter_url.startswith("http://127.0.0.1:")
    assert len(live.token) >= 40
    assert status(live.jupyter_url, live.token) == 200
    assert status(live.jupyter_url, live.token, origin=live.book_url.rstrip("/")) == 200
    assert status(live.jupyter_url) == 403, "no token: must be refused"
    assert status(live.jupyter_url, "wrong" + live.token[5:]) == 403, "wrong token: refused"
    refused = status(live.jupyter_url, live.token, origin="http://evil.example")
    assert refused in (403, 404), f"another origin got {refused}"


def test_the_book_is_served_from_its_folder(live):
    with urllib.request.urlopen(live.book_url + "book/page.html", timeout=10) as response:
        assert response.read() == b"<!doctype html><p>page</p>"


def test_server_listens_on_loopback_only(live):
    """The servers' listening sockets, read from /proc/net/tcp{,6}: 127.0.0.1 only."""
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]
    if not tables[0].is_file():
        pytest.skip("no /proc/net/tcp on this system")
    ports = {int(url.rstrip("/").rsplit(":", 1)[1]) for url in (live.jupyter_url, live.book_url)}
    found = {}
    for table in tables:
        if not table.is_file():
            continue
        for line in table.read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port = local.split(":")
            if state == "0A" and int(port, 16) in ports:  # 0A: LISTEN
                found.setdefault(int(port, 16), set()).add(address)
    assert set(found) == ports, f"listening sockets not found: {found}"
    for port, addresses in found.items():
        assert addresses == {"0100007F"}, f"port {port} listens on {addresses}, not 127.0.0.1"


def test_served_address_carries_the_token_only_in_the_fragment():
    serve = load_serve()
    book = serve.LiveBook.__new__(serve.LiveBook)
    book.book_url, book.jupyter_url, book.token = "http://127.0.0.1:1/", "http://127.0.0.1:2/", "T"
    address = book.address("book/x.html")
    before, _, fragment = address.partition("#")
    assert "T" not in before and "token=T" in fragment


def test_serving_needs_a_built_book(tmp_path):
    with pytest.raises(FileNotFoundError, match="make book"):
        load_serve().LiveBook(tmp_path)


def port_open(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_stops_both_servers(tmp_path, signum):
    # A closed terminal (SIGHUP), `kill` or a process manager (SIGTERM) once stopped serve.py
    # alone: its Jupyter server went on with the kernel and the token. Only Ctrl-C stopped both.
    (tmp_path / "index.html").write_text("<!doctype html><title>book</title>", encoding="utf8")
    command = [sys.executable, str(REPO / "scripts" / "serve.py"), "--html", str(tmp_path)]
    # A session of its own, so that whatever it leaves behind can be found and ended here.
    serve = subprocess.Popen(
        [*command, "--port", "0"], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        for line in serve.stdout:
            if "#jupyter=" in line:
                break
        else:
            pytest.fail(f"serve.py exited ({serve.wait()}) before printing its address")
        jupyter = unquote(line.split("#jupyter=", 1)[1].split("&", 1)[0])
        port = urllib.parse.urlsplit(jupyter).port
        assert port_open(port)  # control: Jupyter is up before the signal
        serve.send_signal(signum)
        serve.wait(timeout=30)
        deadline = time.monotonic() + 5
        while port_open(port) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not port_open(port), f"Jupyter still listens on {port} after {signum.name}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(serve.pid, signal.SIGKILL)
        serve.wait()
