"""Certificates made at test time (openssl), and brokers with secured listeners."""

from __future__ import annotations

import socket
import struct
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from seglog.protocol.headers import decode_response, encode_request
from tests.broker.conftest import BrokerProcess, free_port


@dataclass(frozen=True)
class Certs:
    """A CA, a server certificate for 127.0.0.1/localhost and a client one (CN=alice)."""

    ca: Path
    server: Path
    """Key and chain in one PEM file (``ssl.keystore.location``)."""
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path
    """A CA that signed nothing the broker knows."""


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _ca(directory: Path, name: str) -> None:
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-keyout", f"{name}.key", "-out", f"{name}.pem", "-subj", f"/CN={name}",
        cwd=directory,
    )  # fmt: skip


def _signed(directory: Path, name: str, subject: str, extensions: str) -> None:
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
        "-out", f"{name}.csr", "-subj", subject, cwd=directory,
    )  # fmt: skip
    (directory / f"{name}.ext").write_text(extensions)
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext",
        cwd=directory,
    )  # fmt: skip


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    directory = tmp_path_factory.mktemp("certs")
    _ca(directory, "ca")
    _ca(directory, "other")
    _signed(
        directory,
        "server",
        "/CN=localhost",
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
    )
    _signed(directory, "client", "/C=US/O=Example/CN=alice", "extendedKeyUsage=clientAuth\n")
    bundle = directory / "server-bundle.pem"
    bundle.write_text(
        (directory / "server.key").read_text() + (directory / "server.pem").read_text()
    )
    return Certs(
        ca=directory / "ca.pem",
        server=bundle,
        server_cert=directory / "server.pem",
        server_key=directory / "server.key",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
        other_ca=directory / "other.pem",
    )


@dataclass
class Secured:
    """A broker with a PLAINTEXT listener and one secured listener."""

    process: BrokerProcess
    port: int
    """The secured listener's port."""

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture
def secured_broker(tmp_path: Path) -> Iterator[Callable[..., Secured]]:
    """``secured_broker("SASL_SSL", **overrides)``: PLAINTEXT on one port, the other beside."""
    started: list[BrokerProcess] = []

    def start(
        protocol: str, prepare: Callable[[Path], None] | None = None, **overrides: str
    ) -> Secured:
        process = BrokerProcess(tmp_path / f"data{len(started)}")
        if prepare is not None:
            prepare(process.data)
        port = free_port()
        process.overrides = {
            "listeners": f"PLAINTEXT://127.0.0.1:{process.port},{protocol}://127.0.0.1:{port}",
            **overrides,
        }
        started.append(process)
        process.start()
        return Secured(process, port)

    yield start
    for process in started:
        process.close()


class RawClient:
    """Kafka requests over a plain socket, for what real clients never send."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> None:
        self._correlation += 1
        self.sock.sendall(
            encode_request(api_key, version, self._correlation, "raw", body, framed=True)
        )

    def receive(self, api_key: int, version: int) -> dict[str, Any] | None:
        """The response, or None when the broker closed the connection instead."""
        frame = self.receive_frame()
        return None if frame is None else decode_response(api_key, version, frame)[1]

    def receive_frame(self) -> bytes | None:
        head = self._read(4)
        if head is None:
            return None
        return self._read(struct.unpack(">i", head)[0])

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any] | None:
        self.send(api_key, version, body)
        return self.receive(api_key, version)

    def _read(self, size: int) -> bytes | None:
        data = b""
        while len(data) < size:
            try:
                chunk = self.sock.recv(size - len(data))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            data += chunk
        return data
