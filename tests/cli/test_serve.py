"""``seglog serve``: a broker from the command line, logging as Kafka's broker does."""

from __future__ import annotations

import signal
import socket
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


def _refused(tmp_path: Path, *overrides: str) -> str:
    """Run ``seglog serve`` with ``overrides``; it must exit non-zero without listening."""
    args = [sys.executable, "-m", "seglog", "serve", "--override", f"log.dirs={tmp_path / 'd'}"]
    for item in overrides:
        args += ["--override", item]
    process = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert process.returncode != 0, process.stderr
    assert "listening on" not in process.stderr
    assert not (tmp_path / "d").exists(), "nothing may be opened before the refusal"
    return process.stderr


def test_a_tls_listener_without_a_key_store_is_refused(tmp_path: Path) -> None:
    port = free_port()
    stderr = _refused(tmp_path, f"listeners=SSL://127.0.0.1:{port}")
    assert "seglog: error: listener SSL uses TLS but has no key store" in stderr
    stderr = _refused(
        tmp_path,
        f"listeners=PLAINTEXT://127.0.0.1:{free_port()},SECURE://127.0.0.1:{port}",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL",
    )
    assert "listener SECURE uses TLS but has no key store" in stderr


def test_the_protocol_map_names_listeners(tmp_path: Path) -> None:
    stderr = _refused(tmp_path, f"listeners=INTERNAL://127.0.0.1:{free_port()}")
    assert "no security protocol defined for listener INTERNAL" in stderr
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "seglog",
            "serve",
            "--override",
            f"log.dirs={tmp_path / 'data'}",
            "--override",
            f"listeners=INTERNAL://127.0.0.1:{port}",
            "--override",
            "listener.security.protocol.map=INTERNAL:PLAINTEXT",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert "(INTERNAL, PLAINTEXT)" in stderr


def test_nodes_that_cannot_be_run_are_refused_before_anything_starts(tmp_path: Path) -> None:
    for options, message in (
        (["--nodes", "0"], "Invalid value 0 for configuration nodes"),
        (["--nodes", "many"], "Invalid value many for configuration nodes"),
        (
            ["--nodes", "2", "--override", "listeners=PLAINTEXT://127.0.0.1:0"],
            "each listener needs a fixed port",
        ),
    ):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "seglog",
                "serve",
                "--override",
                f"log.dirs={tmp_path / 'data'}",
                *options,
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 1 and message in done.stderr
    assert not (tmp_path / "data").exists()
