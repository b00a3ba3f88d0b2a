"""Serve the built book with live code: ``make serve`` (or ``.venv/bin/python scripts/serve.py``).

Starts two servers, both on 127.0.0.1 only:

* a static file server for the built HTML (``_build/html``), the book's origin;
* a Jupyter server from the project's environment, with a fresh random token (``secrets``) and
  ``allow_origin`` set to exactly the book's origin, so that only the book's pages may talk to it.

It then prints the address to open. The token reaches the page only in that address's fragment
(``#jupyter=...&token=...``): fragments are never sent to a server, the page moves the token into
its tab's sessionStorage and removes it from the address bar, and nothing is written to disk in
the book's folder, so neither the committed files nor the built HTML ever contain it. The kernel
runs in ``book/`` with ``src/`` first on ``PYTHONPATH``, like ``make execute``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parents[1]
HTML_DIR = REPO / "_build" / "html"
HOST = "127.0.0.1"

# Jupyter skips the origin check for token-authenticated requests (the token being the secret).
# The book's server checks it always: a page from another origin is refused even if it somehow
# had the token. The config file holds no secret; it is written to a temporary folder.
SERVER_CONFIG = """
from jupyter_server.auth.identity import PasswordIdentityProvider


class BookOriginOnly(PasswordIdentityProvider):
    def should_check_origin(self, handler):
        return True


c.ServerApp.identity_provider_class = BookOriginOnly
"""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def end_headers(self):
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def log_message(self, format, *args):  # noqa: A002 - signature of the base class
        pass


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _wait_for_jupyter(url: str, token: str, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    request = urllib.request.Request(
        url + "api/status", headers={"Authorization": f"token {token}"}
    )
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the Jupyter server exited with code {process.returncode}")
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"the Jupyter server at {url} did not answer within {timeout:.0f} s")
        time.sleep(0.2)


class LiveBook:
    """The static server and the Jupyter server, started together and stopped together.

    Attributes:
        book_url: the book's origin with a trailing slash, e.g. ``http://127.0.0.1:8000/``.
        jupyter_url: the Jupyter server's base URL, e.g. ``http://127.0.0.1:8888/``.
        token: the Jupyter server's token (random, new every start).
    """

    def __init__(
        self,
        html_dir: Path = HTML_DIR,
        *,
        book_port: int = 0,
        jupyter_port: int = 0,
        python: str = sys.executable,
        log=None,
    ):
        self.html_dir = Path(html_dir).resolve()
        if not (self.html_dir / "index.html").is_file():
            raise FileNotFoundError(f"no built book in {self.html_dir}: run `make book` first")
        handler = functools.partial(_QuietHandler, directory=str(self.html_dir))
        self.httpd = http.server.ThreadingHTTPServer((HOST, book_port), handler)
        self.httpd.daemon_threads = True
        self.book_url = f"http://{HOST}:{self.httpd.server_address[1]}/"
        self.jupyter_port = jupyter_port or _free_port()
        self.jupyter_url = f"http://{HOST}:{self.jupyter_port}/"
        self.token = secrets.token_urlsafe(32)
        self.python = python
        self.log = log
        self.process: subprocess.Popen | None = None
        self.config_dir = Path(tempfile.mkdtemp(prefix="book-serve-"))
        (self.config_dir / "book_server_config.py").write_text(SERVER_CONFIG, encoding="utf8")
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def command(self) -> list[str]:
        origin = self.book_url.rstrip("/")
        command = [
            self.python,
            "-m",
            "jupyter_server",
            "--no-browser",
            f"--config={self.config_dir / 'book_server_config.py'}",
            f"--ServerApp.ip={HOST}",
            f"--ServerApp.port={self.jupyter_port}",
            "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={REPO}",
            # only the book's own pages may use the server from a browser
            f"--ServerApp.allow_origin={origin}",
            "--ServerApp.allow_remote_access=False",
            "--ServerApp.password=",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.append("--allow-root")  # as in a container
        return command

    def start(self, timeout: float = 90.0) -> LiveBook:
        self.thread.start()
        env = dict(os.environ)
        # The token goes through the environment, not the command line (which `ps` shows).
        env["JUPYTER_TOKEN"] = self.token
        env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO / "src")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        )
        self.process = subprocess.Popen(
            self.command(),
            cwd=REPO,
            env=env,
            stdout=self.log or subprocess.DEVNULL,
            stderr=subprocess.STDOUT if self.log else subprocess.DEVNULL,
        )
        try:
            _wait_for_jupyter(self.jupyter_url, self.token, self.process, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        with contextlib.suppress(Exception):
            self.httpd.shutdown()
        self.httpd.server_close()
        shutil.rmtree(self.config_dir, ignore_errors=True)

    def __enter__(self) -> LiveBook:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def address(self, page: str = "book/intro.html") -> str:
        """The address to open: the page, with the server and token in the fragment."""
        return (
            f"{self.book_url}{page}#jupyter={quote(self.jupyter_url, safe='')}&token={self.token}"
        )


STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)


def _interrupt(signum, frame) -> None:
    """Turn a stop signal into KeyboardInterrupt, once: a second one waits for the first."""
    for other in STOP_SIGNALS:
        signal.signal(other, signal.SIG_IGN)
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--html", type=Path, default=HTML_DIR, help="the built book")
    parser.add_argument("--port", type=int, default=8000, help="port of the book (0: any free)")
    parser.add_argument("--jupyter-port", type=int, default=0, help="Jupyter's port (0: any)")
    args = parser.parse_args(argv)
    try:
        live = LiveBook(args.html, book_port=args.port, jupyter_port=args.jupyter_port)
    except OSError as error:
        sys.exit(f"cannot serve the book on {HOST}:{args.port}: {error} (try --port 0)")
    # A closed terminal (SIGHUP) or `kill` (SIGTERM) would otherwise end this process alone,
    # leaving the Jupyter server running with its kernel and token: raised as an interruption,
    # the signal stops both, as Ctrl-C does.
    for signum in STOP_SIGNALS:
        signal.signal(signum, _interrupt)
    print("starting a Jupyter server on 127.0.0.1 for the book's live code ...", flush=True)
    with live:
        print(
            "\nOpen this address in a browser (it holds this session's token; do not share it):\n"
            f"\n    {live.address()}\n\n"
            'Every chapter then has a "Run live" button. Press Ctrl-C here to stop both servers.',
            flush=True,
        )
        try:
            while live.process.poll() is None:
                time.sleep(0.5)
            print(f"the Jupyter server stopped (exit code {live.process.returncode})")
        except KeyboardInterrupt:
            print("\nstopping", flush=True)


if __name__ == "__main__":
    main()
