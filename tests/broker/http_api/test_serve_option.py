"""``seglog serve --console-port N``: the option sets console.port, for one node or several."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from tests.broker.conftest import free_port
from tests.broker.http_api.conftest import Api, wait_listening


def test_console_port_option(tmp_path: Path) -> None:
    port, console = free_port(), free_port()
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "seglog", "--log-level", "INFO", "serve",
                "--override", f"log.dirs={tmp_path / 'data'}",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                "--console-port", str(console),
            ],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_listening(console, lambda: process.poll() is None, log)
        answer = Api(console).get("/v1/topics")
        assert answer.status == 200
        assert answer.body == {"topics": []}
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    assert f"HTTP API on http://127.0.0.1:{console}/" in log.read_text()


def test_nodes_whose_console_ports_do_not_all_exist_are_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable, "-m", "seglog", "serve", "--nodes", "2",
            "--override", f"log.dirs={tmp_path / 'data'}",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
            "--console-port", "65535",
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert "console.port=65535: ports 65535 to 65536" in done.stderr
