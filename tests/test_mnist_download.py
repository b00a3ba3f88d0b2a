"""The MNIST download, against real HTTP servers on 127.0.0.1.

A good mirror fills the per-user cache and is not asked again; a corrupt file, a connection cut
mid-file and a server that never answers each raise a named error and leave the cache empty; a
broken first mirror falls through to the next.
"""

from __future__ import annotations

import gzip
import http.server
import os
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from transformer_intro.datasets import (
    MNISTChecksumError,
    MNISTDownloadError,
    MNISTError,
    load_mnist,
    mnist,
)

TEST_FILES = ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def _official_folder() -> Path | None:
    """The official .gz files.

    ``MNIST_DIR`` if set, else ``../shared/data/mnist`` beside the repo.
    """
    candidates = [
        os.environ.get("MNIST_DIR", ""),
        Path(__file__).resolve().parents[2] / "shared" / "data" / "mnist",
    ]
    for folder in candidates:
        if folder and all((Path(folder) / name).is_file() for name in TEST_FILES):
            return Path(folder)
    return None


OFFICIAL = _official_folder()
needs_official = pytest.mark.skipif(
    OFFICIAL is None,
    reason=(
        "the official MNIST .gz files are not here (set MNIST_DIR or provide ../shared/data/mnist)"
    ),
)


class Server:
    """A threaded HTTP server on 127.0.0.1 whose handler class decides how it (mis)behaves."""

    def __init__(self, handler: type[http.server.BaseHTTPRequestHandler]) -> None:
        self.requests: list[str] = []
        server = self

        class Counting(handler):
            def log_message(self, *args) -> None:  # keep the test output quiet
                pass

            def parse_request(self) -> bool:
                # Counted before the answer is sent: a client that has read the answer
                # must already see its request here.
                parsed = super().parse_request()
                if parsed:
                    server.requests.append(self.path)
                return parsed

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Counting)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/mnist/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def serving(
    files: dict[str, bytes], *, cut_after: int | None = None
) -> type[http.server.BaseHTTPRequestHandler]:
    """A handler serving ``files`` at /mnist/<name>.

    With ``cut_after`` it announces the full length, sends that many bytes and closes the
    connection.
    """

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            name = self.path.rsplit("/", 1)[-1]
            if not self.path.startswith("/mnist/") or name not in files:
                self.send_error(404)
                return
            body = files[name]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body if cut_after is None else body[:cut_after])
            self.wfile.flush()
            if cut_after is not None:
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True

    return Handler


class SilentServer:
    """Accepts connections and never answers."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/mnist/"
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self.accepted.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self) -> None:
        for connection in self.accepted:
            connection.close()
        self.sock.close()


def closed_port_url() -> str:
    """A URL on a port where nothing listens: the connection is refused at once."""
    with socket.create_server(("127.0.0.1", 0)) as sock:
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/mnist/"


@pytest.fixture
def env(monkeypatch, tmp_path: Path):
    """No MNIST_DIR, no proxy, the cache under tmp_path.

    Returns a function that sets the mirrors.
    """
    monkeypatch.delenv("MNIST_DIR", raising=False)
    for name in (
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    servers = []

    def use(*mirrors) -> None:
        servers.extend(m for m in mirrors if not isinstance(m, str))
        monkeypatch.setenv(
            "MNIST_MIRRORS", " ".join(m if isinstance(m, str) else m.url for m in mirrors)
        )

    yield use
    for server in servers:
        server.close()


def load_test_split(tmp_path: Path, timeout=(5.0, 10.0)):
    # An empty tensorflow-datasets folder: no prepared copy, so the download is the source.
    return load_mnist("test", tfds_data_dir=tmp_path / "tfds", timeout=timeout, progress=False)


def cache_files() -> list[str]:
    folder = mnist.cache_dir()
    return sorted(os.listdir(folder)) if folder.is_dir() else []


def official(name: str) -> bytes:
    return (OFFICIAL / name).read_bytes()


def test_cache_follows_xdg_and_mirrors_follow_the_environment(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert mnist.cache_dir() == tmp_path / "transformer_intro" / "mnist"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert mnist.cache_dir() == Path.home() / ".cache" / "transformer_intro" / "mnist"
    monkeypatch.delenv("MNIST_MIRRORS", raising=False)
    assert mnist.mirrors() == list(mnist.MIRRORS)
    monkeypatch.setenv("MNIST_MIRRORS", " http://a.example/x  https://b.example/y/ ")
    assert mnist.mirrors() == ["http://a.example/x/", "https://b.example/y/"]


@needs_official
def test_the_package_md5_sums_are_those_of_the_official_files() -> None:
    import hashlib

    for stem, digest in mnist.CONTENT_MD5.items():
        path = OFFICIAL / f"{stem}.gz"
        if path.is_file():
            assert hashlib.md5(gzip.decompress(path.read_bytes())).hexdigest() == digest, stem


@needs_official
def test_download_fills_the_cache_and_the_second_call_asks_nobody(env, tmp_path: Path) -> None:
    server = Server(serving({name: official(name) for name in TEST_FILES}))
    env(server)
    images, labels = load_test_split(tmp_path)
    assert sorted(server.requests) == sorted(f"/mnist/{name}" for name in TEST_FILES)
    assert cache_files() == sorted(TEST_FILES)  # no temporary file left beside them
    for name in TEST_FILES:
        assert (mnist.cache_dir() / name).read_bytes() == official(name)
    expected = mnist.load_idx_split(OFFICIAL, "test")
    np.testing.assert_array_equal(images, expected[0])
    np.testing.assert_array_equal(labels, expected[1])

    server.requests.clear()
    again_images, _ = load_test_split(tmp_path)
    assert server.requests == []
    np.testing.assert_array_equal(again_images, images)


@needs_official
def test_corrupt_file_raises_checksum_error_and_leaves_nothing(env, tmp_path: Path) -> None:
    # A valid gzip file of the right size whose content differs in one label.
    content = bytearray(gzip.decompress(official(TEST_FILES[1])))
    content[-1] = (content[-1] + 1) % 10
    files = {TEST_FILES[0]: official(TEST_FILES[0]), TEST_FILES[1]: gzip.compress(bytes(content))}
    server = Server(serving(files))
    env(server)
    with pytest.raises(MNISTChecksumError, match="MD5") as err:
        load_test_split(tmp_path)
    assert "\n" not in str(err.value) and "MNIST_MIRRORS" in str(err.value)
    # The images arrived intact and stay; the corrupt labels left nothing behind.
    assert cache_files() == [TEST_FILES[0]]
    assert isinstance(err.value, MNISTError)


@needs_official
def test_connection_closed_mid_file_raises_download_error_and_leaves_nothing(
    env, tmp_path: Path
) -> None:
    body = official(TEST_FILES[0])
    server = Server(serving({TEST_FILES[0]: body}, cut_after=len(body) // 2))
    env(server)
    with pytest.raises(MNISTDownloadError, match="closed before the end") as err:
        load_test_split(tmp_path)
    assert "\n" not in str(err.value)
    assert server.requests == [f"/mnist/{TEST_FILES[0]}"]
    assert cache_files() == []


def test_server_that_never_answers_fails_within_the_timeout(env, tmp_path: Path) -> None:
    silent = SilentServer()
    env(silent)
    start = time.perf_counter()
    with pytest.raises(MNISTDownloadError, match="timed out"):
        load_test_split(tmp_path, timeout=(0.5, 0.5))
    assert time.perf_counter() - start < 5
    assert silent.accepted  # it did connect, and then heard nothing
    assert cache_files() == []


def test_offline_error_is_one_sentence_and_fast(env, tmp_path: Path) -> None:
    env(closed_port_url(), closed_port_url())
    start = time.perf_counter()
    with pytest.raises(MNISTDownloadError) as err:
        load_test_split(tmp_path)
    assert time.perf_counter() - start < 5
    message = str(err.value)
    assert message.startswith("MNIST could not be downloaded") and message.count(". ") == 0
    assert "MNIST_DIR" in message and "\n" not in message
    assert "connect to the internet" in message  # nothing answered: the advice fits
    assert err.value.__cause__ is None and err.value.__suppress_context__
    assert cache_files() == []


def test_a_mirror_serving_wrong_bytes_is_not_told_to_connect(env, tmp_path: Path) -> None:
    # The mirror answers, with the wrong content: connecting would not help; another mirror would.
    server = Server(serving({name: gzip.compress(b"not MNIST") for name in TEST_FILES}))
    env(server)
    with pytest.raises(MNISTError) as err:
        load_test_split(tmp_path)
    message = str(err.value)
    assert "internet" not in message and "MNIST_MIRRORS" in message and "MNIST_DIR" in message
    assert server.requests  # it was asked
    assert cache_files() == []


@needs_official
def test_broken_first_mirror_falls_through_to_the_second(env, tmp_path: Path) -> None:
    missing = Server(serving({}))  # answers 404
    good = Server(serving({name: official(name) for name in TEST_FILES}))
    env(closed_port_url(), missing, good)
    images, _ = load_test_split(tmp_path)
    assert images.shape == (10_000, 28, 28)
    assert (
        sorted(missing.requests)
        == sorted(good.requests)
        == sorted(f"/mnist/{name}" for name in TEST_FILES)
    )
    assert cache_files() == sorted(TEST_FILES)


def test_mnist_dir_comes_first(env, monkeypatch, tmp_path: Path) -> None:
    silent = SilentServer()
    env(silent)
    monkeypatch.setenv("MNIST_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(mnist.MNISTFileNotFoundError, match="MNIST_DIR"):
        load_test_split(tmp_path)
    assert silent.accepted == [] and cache_files() == []
