"""A real broker: ``python -m seglog serve`` as a subprocess on a free port.

Every log directory a broker test leaves in its ``tmp_path`` (the brokers of
``make_broker``, ``secured_broker``, ``make_cluster``, or a test's own) is
checked with ``seglog verify`` at teardown, once the fixtures have stopped their
brokers (:mod:`tests.log_dirs`); the session's shared broker is checked once
it has stopped.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.log_dirs import check_unless_damaged, verify_tmp_path_at_teardown
from tests.ports import free_ports

__all__ = ["free_ports", "verify_tmp_path_at_teardown"]

CLOSE_TIMEOUT = 60.0
"""How long a broker stopped at teardown may take to close its logs before it is killed."""


def free_port() -> int:
    """A port free now, for a server to bind soon after (see :func:`free_ports`)."""
    return free_ports(1)


def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port`` now."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class BrokerProcess:
    """A broker subprocess that can be stopped, killed and started again on the same data."""

    def __init__(self, data: Path, overrides: dict[str, str] | None = None) -> None:
        self.data = data
        self.port = free_port()
        self.overrides = overrides or {}
        self.process: subprocess.Popen[bytes] | None = None
        self.log = data.parent / f"{data.name}-broker.log"
        self.preexec: Callable[[], None] | None = None
        """Run in the broker's process before it starts (e.g. to lower a resource limit)."""

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        args = [
            sys.executable,
            "-m",
            "seglog",
            "--log-level",
            "INFO",
            "serve",
            "--override",
            f"log.dirs={self.data}",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
        ]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        started_at = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, preexec_fn=self.preexec
            )
        waiting = self.listener_ports()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited: {self.log.read_text()}")
            # Its own log must say it listens: another test's server may hold the port.
            said = self.log.read_bytes()[started_at:].decode(errors="replace")
            waiting = [
                port
                for port in waiting
                if not (re.search(rf"listening on \('[^']*', {port}[,)]", said) and listening(port))
            ]
            if not waiting:
                return
            time.sleep(0.05)
        raise RuntimeError(f"broker did not start listening on {waiting}: {self.log.read_text()}")

    def listener_ports(self) -> list[int]:
        """The ports of every listener the broker is given, not just the first one.

        The broker binds its listeners one after another: a test that talks to a
        second listener as soon as the first accepts would find it not yet open.
        """
        listeners = self.overrides.get("listeners", f"PLAINTEXT://127.0.0.1:{self.port}")
        ports = [int(entry.rsplit(":", 1)[1]) for entry in listeners.split(",") if entry]
        return [port for port in ports if port != 0]

    def stop(self) -> int:
        """Graceful stop (SIGTERM); returns the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=30)
        self.process = None
        return code

    def kill(self) -> None:
        """kill -9."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=30)
        self.process = None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def close(self) -> None:
        """At teardown: stop gracefully if still running (killed if it does not stop in time).

        Graceful, so that the directory is left as a clean shutdown leaves it, which
        ``seglog verify`` then checks.
        """
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=CLOSE_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        self.process = None


@pytest.fixture(scope="session")
def broker(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[BrokerProcess]:
    """One broker for the whole session (topics are unique per test); verified once stopped."""
    process = BrokerProcess(tmp_path_factory.mktemp("broker") / "data")
    process.start()
    yield process
    assert process.alive(), "the shared broker died during the tests"
    assert process.stop() == 0
    check_unless_damaged(request, process.data)


@pytest.fixture
def make_broker(tmp_path: Path) -> Iterator[type[BrokerProcess] | object]:
    """A factory of private brokers for restart and configuration tests."""
    started: list[BrokerProcess] = []

    def factory(**overrides: str) -> BrokerProcess:
        process = BrokerProcess(tmp_path / f"data{len(started)}", overrides)
        process.start()
        started.append(process)
        return process

    yield factory
    for process in started:
        process.close()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test."""
    module = request.node.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    name = request.node.name.removeprefix("test_")
    cleaned = "".join(c if c.isalnum() or c in "._" else "-" for c in f"{module}.{name}")
    return f"{cleaned}-{os.getpid()}"[:200]
