"""`make lab`: JupyterLab serves the chapters and runs them with the project's kernel.

The test starts the same server `make lab` starts (`jupyter lab book/`), headless on 127.0.0.1,
and talks to it as the JupyterLab front end does: the REST API lists the chapters and starts a
kernel, and chapter 1's code cells run through the kernel's websocket, one execute_request
each. Nothing else is needed: no browser, no network beyond the loopback.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

websocket = pytest.importorskip("websocket")  # websocket-client, with Jupyter

BOOK = Path(__file__).resolve().parents[1] / "book"
STARTUP_TIMEOUT = 60.0  # seconds for the server to answer
CELL_TIMEOUT = 120.0  # seconds for one cell, JAX compilations included


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    def __init__(self, port: int, token: str, log: Path, process: subprocess.Popen):
        self.base = f"http://127.0.0.1:{port}"
        self.token, self.log, self.process = token, log, process

    def request(self, method: str, path: str, body: dict | None = None, timeout: float = 10.0):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"token {self.token}")
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=timeout) as response:
            payload = response.read()
        return json.loads(payload) if payload else None

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    home = tmp_path_factory.mktemp("lab")
    port, token = free_port(), secrets.token_hex(16)
    # A private config, runtime and settings folder: the reader's own Jupyter setup is not read,
    # and the test leaves nothing behind. The kernelspec comes from the environment's prefix.
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
    )
    log = home / "server.log"
    command = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={BOOK}",
    ]
    if os.geteuid() == 0:  # containers and CI often run as root, which Jupyter refuses by default
        command.append("--allow-root")
    with open(log, "wb") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=env)
    server = LabServer(port, token, log, process)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            if process.poll() is not None:
                pytest.fail(f"jupyter lab exited with {process.returncode}:\n{server.log_tail()}")
            try:
                server.request("GET", "/api/status", timeout=2.0)
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"jupyter lab did not answer within {STARTUP_TIMEOUT:.0f} s:\n"
                        f"{server.log_tail()}"
                    )
                time.sleep(0.5)
        yield server
        server.request("POST", "/api/shutdown")
        assert process.wait(timeout=30) == 0, server.log_tail()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture
def kernel(lab):
    """A websocket to a fresh kernel that the server started with the project's kernelspec."""
    started = lab.request("POST", "/api/kernels", {"name": "python3"})
    url = (
        lab.base.replace("http", "ws")
        + f"/api/kernels/{started['id']}/channels?session_id={uuid.uuid4().hex}"
    )
    channels = websocket.create_connection(
        url, header=[f"Authorization: token {lab.token}"], timeout=CELL_TIMEOUT
    )
    try:
        yield channels
    finally:
        channels.close()
        lab.request("DELETE", f"/api/kernels/{started['id']}")


def run_cell(channels, code: str) -> tuple[str, list[str]]:
    """Execute one cell as JupyterLab does; return the reply's status and every problem it showed.

    Problems are error outputs (a traceback's exception) and text written to stderr.
    """
    msg_id = uuid.uuid4().hex
    channels.send(
        json.dumps(
            {
                "header": {
                    "msg_id": msg_id,
                    "msg_type": "execute_request",
                    "username": "test",
                    "session": uuid.uuid4().hex,
                    "version": "5.3",
                    "date": "",
                },
                "parent_header": {},
                "metadata": {},
                "channel": "shell",
                "buffers": [],
                "content": {
                    "code": code,
                    "silent": False,
                    "store_history": True,
                    "user_expressions": {},
                    "allow_stdin": False,
                    "stop_on_error": True,
                },
            }
        )
    )
    status, problems, idle = None, [], False
    deadline = time.monotonic() + CELL_TIMEOUT
    while status is None or not idle:  # the reply (shell) and the kernel going idle (iopub)
        if time.monotonic() > deadline:
            raise TimeoutError(f"no reply within {CELL_TIMEOUT:.0f} s to:\n{code[:200]}")
        message = json.loads(channels.recv())
        if message.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        kind, content = message["msg_type"], message["content"]
        if kind == "execute_reply":
            status = content["status"]
        elif kind == "error":
            problems.append(f"{content['ename']}: {content['evalue']}")
        elif kind == "stream" and content["name"] == "stderr":
            problems.append(f"stderr: {content['text']}")
        elif kind == "status" and content["execution_state"] == "idle":
            idle = True
    return status, problems


def test_lab_lists_every_chapter(lab):
    listing = lab.request("GET", "/api/contents/")
    notebooks = {entry["name"] for entry in listing["content"] if entry["type"] == "notebook"}
    chapters = {path.name for path in BOOK.glob("*.ipynb")}
    assert len(chapters) >= 8
    assert chapters <= notebooks, f"missing from JupyterLab: {sorted(chapters - notebooks)}"


def test_lab_kernel_runs_chapter_1(lab, kernel):
    notebook = json.loads((BOOK / "01_tokens.ipynb").read_text())
    assert notebook["metadata"]["kernelspec"]["name"] == "python3"  # the kernel make lab installs
    cells = ["".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert len(cells) >= 10
    for number, code in enumerate(cells, start=1):
        status, problems = run_cell(kernel, code)
        assert (status, problems) == ("ok", []), f"code cell {number} of chapter 1:\n{code[:300]}"


def test_run_cell_reports_a_failing_cell(lab, kernel):
    # Negative controls: the helper above must see an exception and a warning on stderr.
    assert run_cell(kernel, "x = 1 + 1") == ("ok", [])
    status, problems = run_cell(kernel, "raise ValueError('on purpose')")
    assert status == "error" and problems == ["ValueError: on purpose"]
    status, problems = run_cell(kernel, "import warnings; warnings.warn('careful')")
    assert status == "ok" and len(problems) == 1 and "careful" in problems[0]
