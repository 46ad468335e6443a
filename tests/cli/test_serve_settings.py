"""``seglog serve`` checks its settings as Kafka does and says at start what is in force."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from seglog import __version__
from tests.broker.conftest import free_port


def _serve(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``seglog serve`` over ``tmp_path/data`` until it listens, then stop it.

    A run stopped by the signal before it could handle it found its port
    answered by another process (taken since it was found free): run again.
    """
    for _ in range(5):
        done = _serve_once(tmp_path, *args)
        if done.returncode != -signal.SIGTERM:
            break
    return done


def _serve_once(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable, "-m", "seglog", "serve",
            "--override", f"log.dirs={tmp_path / 'data'}",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            *args,
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _refused(tmp_path: Path, *overrides: str) -> list[str]:
    """Run ``seglog serve`` with ``overrides``: it must exit 1 having opened nothing."""
    args = [sys.executable, "-m", "seglog", "serve", "--override", f"log.dirs={tmp_path / 'd'}"]
    for item in overrides:
        args += ["--override", item]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "listening on" not in done.stderr
    assert not (tmp_path / "d").exists(), "nothing may be opened before the refusal"
    return done.stderr.splitlines()


def test_a_misspelt_setting_refuses_to_start_naming_the_one_meant(tmp_path: Path) -> None:
    lines = _refused(
        tmp_path,
        f"listener=PLAINTEXT://127.0.0.1:{free_port()}",
        "log.retention.hour=1",
        "auto.create.topic.enable=false",
    )
    assert lines == [
        "seglog: error: `listener` is not a known setting; did you mean `listeners`?",
        "seglog: error: `log.retention.hour` is not a known setting; "
        "did you mean `log.retention.hours`?",
        "seglog: error: `auto.create.topic.enable` is not a known setting; "
        "did you mean `auto.create.topics.enable`?",
    ]


def test_a_typo_in_the_properties_file_refuses_too(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text(f"log.dirs={tmp_path / 'd'}\nlog.segment.byte=1048576\n")
    done = subprocess.run(
        [sys.executable, "-m", "seglog", "serve", str(properties)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "seglog: error: `log.segment.byte` is not a known setting; "
        "did you mean `log.segment.bytes`?"
    ]


def test_settings_that_would_move_the_broker_refuse(tmp_path: Path) -> None:
    assert _refused(tmp_path, "port=9093") == [
        "seglog: error: `port` was removed from Kafka and seglog does not read it; "
        "set listeners=PLAINTEXT://host:port instead"
    ]
    other = tmp_path / "other"
    assert _refused(tmp_path, f"log.dirs={tmp_path / 'd'},{other}") == [
        f"seglog: error: log.dirs lists 2 directories ({tmp_path / 'd'},{other}); "
        "seglog stores in one log directory: give exactly one"
    ]
    assert not other.exists()


def test_the_start_up_log_says_what_is_in_force(tmp_path: Path) -> None:
    done = _serve(
        tmp_path,
        "--override", "log.retention.hours=1",
        "--override", "num.partitions=1",  # its default: not listed
        "--override", "ssl.keystore.password=do-not-show-me",
        "--override", "process.roles=broker",
        "--override", "my.plugin.endpoint=http://example.com",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    log = done.stderr
    assert f"INFO seglog {__version__} starting: node 1, data directory {tmp_path / 'data'}" in log
    assert "INFO settings that differ from the defaults:\n" in log
    settings = log.split("settings that differ from the defaults:\n", 1)[1]
    listed = [line.strip() for line in settings.split(" (seglog.broker.server)")[0].splitlines()]
    assert listed == [
        f"listeners = PLAINTEXT://127.0.0.1:{listed[0].rsplit(':', 1)[1]}",
        f"log.dirs = {tmp_path / 'data'}",
        "log.retention.hours = 1",
        "my.plugin.endpoint = [hidden]",
        "process.roles = broker",
        "ssl.keystore.password = [hidden]",
    ]
    assert "do-not-show-me" not in log and "example.com" not in log
    assert "WARNING `my.plugin.endpoint` is not a known setting (a plugin's?): it is ignored" in log
    assert "ignored: process.roles" in log
    assert "INFO listening on ('127.0.0.1'" in log


def test_log_level_after_the_subcommand(tmp_path: Path) -> None:
    done = _serve(tmp_path, "--log-level", "debug")
    assert done.returncode == 0, done.stderr
    assert "DEBUG " in done.stderr and "INFO listening on" in done.stderr
    quiet = _serve(tmp_path, "--log-level=WARNING")
    assert quiet.returncode == 0, quiet.stderr
    assert "listening on" not in quiet.stderr
