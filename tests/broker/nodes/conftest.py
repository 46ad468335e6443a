"""A real ``seglog serve --nodes N`` on consecutive free ports.

``make_cluster`` stops its clusters gracefully at teardown; the directory is then
checked with ``seglog verify`` (the autouse fixture of ``tests/broker/conftest.py``).
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from seglog.protocol import ApiKey, decode_response, encode_request
from tests.broker.conftest import free_ports, listening


def node_pids(parent: int) -> list[int]:
    """The node processes of a supervisor, by their parent."""
    out = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(parent)], capture_output=True, text=True, check=False
    ).stdout
    return [int(x) for x in out.split()]


class Cluster:
    """``seglog serve --nodes N`` as a subprocess: node i on port ``base + i``, id ``1 + i``."""

    def __init__(self, data: Path, nodes: int, overrides: dict[str, str] | None = None) -> None:
        self.data = data
        self.nodes = nodes
        self.base = free_ports(nodes)
        self.overrides = overrides or {}
        self.process: subprocess.Popen[bytes] | None = None
        self.log = data.parent / f"{data.name}-nodes.log"
        self.environment: dict[str, str] | None = None
        """The supervisor's (and so the nodes') environment; None: this process's."""

    def port(self, node_id: int) -> int:
        return self.base + node_id - 1

    def alive(self) -> bool:
        """Whether ``seglog serve`` (the supervisor of the nodes) is running."""
        return self.process is not None and self.process.poll() is None

    def bootstrap(self, node_id: int = 1) -> str:
        return f"127.0.0.1:{self.port(node_id)}"

    def start(self, nodes: int | None = None, *, timeout: float = 120) -> None:
        if nodes is not None:
            self.nodes = nodes
        args = [
            sys.executable,
            "-m",
            "seglog",
            "--log-level",
            "INFO",
            "serve",
            "--nodes",
            str(self.nodes),
            "--override",
            f"log.dirs={self.data}",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{self.base}",
        ]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, env=self.environment
            )
        self.wait_listening(timeout=timeout)

    def wait_listening(self, node_ids: list[int] | None = None, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        wanted = node_ids or list(range(1, self.nodes + 1))
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"seglog serve exited: {self.log.read_text()}")
            if all(listening(self.port(n)) for n in wanted):
                return
            time.sleep(0.05)
        raise RuntimeError(f"nodes did not start listening: {self.log.read_text()}")

    def node_pid(self, node_id: int) -> int:
        """The pid of the process listening on node ``node_id``'s port."""
        assert self.process is not None
        for pid in node_pids(self.process.pid):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue  # exited since ps listed it
            if b"--node-index" in cmdline:
                index = int(cmdline[cmdline.index(b"--node-index") + 1])
                if index == node_id - 1:
                    return pid
        raise LookupError(f"no process for node {node_id}")

    def kill_node(self, node_id: int) -> int:
        """kill -9 one node; its pid."""
        pid = self.node_pid(node_id)
        os.kill(pid, signal.SIGKILL)
        return pid

    def stop(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=60)
        self.process = None
        return code

    def close(self) -> None:
        """At teardown: stop gracefully if still running, else (or if it hangs) kill.

        Graceful, so that the nodes close their partitions and the directory is left
        as a clean shutdown leaves it, which ``seglog verify`` then checks.
        """
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=150)
        self.kill()

    def kill(self) -> None:
        if self.process is not None:
            pids = node_pids(self.process.pid)
            self.process.kill()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.process.wait(timeout=30)
            self.process = None


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Any]:
    """A factory of clusters, stopped at the end of the test if still running."""
    started: list[Cluster] = []

    def factory(nodes: int, environment: dict[str, str] | None = None, **overrides: str) -> Cluster:
        cluster = Cluster(tmp_path / f"data{len(started)}", nodes, overrides)
        cluster.environment = environment
        cluster.start()
        started.append(cluster)
        return cluster

    yield factory
    for cluster in started:
        cluster.close()


class Raw:
    """One connection speaking the wire protocol directly (closed after its test)."""

    opened: ClassVar[list[socket.socket]] = []

    def __init__(self, port: int) -> None:
        # A guard against a hang only: under load a held request may take long.
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=150)
        Raw.opened.append(self.sock)
        self.correlation = 0

    def call(self, api: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.correlation += 1
        payload = encode_request(api, version, self.correlation, "test", body)
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", self._exactly(4))
        _, answer = decode_response(api, version, memoryview(self._exactly(size)))
        return answer

    def _exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return bytes(out)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(autouse=True)
def close_client_sockets() -> Iterator[None]:
    """Close this test's raw connections, and collect the sockets clients leave behind.

    kafka-python leaves the socket of a refused connection (to a killed node)
    unclosed: collected here, not during whichever test runs next.
    """
    yield
    while Raw.opened:
        Raw.opened.pop().close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
