"""``seglog serve``: a broker from the command line, logging as Kafka's broker does."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.broker.conftest import free_port


def _serve(tmp_path: Path, *options: str) -> str:
    """Start ``seglog [options] serve``, wait until it listens, stop it; its stderr."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "seglog",
            *options,
            "serve",
            "--override",
            f"log.dirs={tmp_path / 'data'}",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (tmp_path / "data" / "meta.properties").exists():
            time.sleep(0.05)
        time.sleep(0.5)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    return stderr


def test_serve_logs_at_info_by_default(tmp_path: Path) -> None:
    stderr = _serve(tmp_path)
    assert "INFO listening on ('127.0.0.1'" in stderr
    assert "INFO stopped cleanly" in stderr


def test_log_level_quiets_the_broker(tmp_path: Path) -> None:
    assert "listening on" not in _serve(tmp_path, "--log-level", "WARNING")
