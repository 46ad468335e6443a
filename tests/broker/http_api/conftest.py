"""Brokers serving the HTTP API on a free port, and a small HTTP client (urllib) for them."""

from __future__ import annotations

import base64
import json
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.nodes.conftest import Cluster
from tests.broker.security.conftest import certs, secured_broker

__all__ = ["certs", "secured_broker"]  # the security tests' fixtures, for test_security.py

TIMEOUT = 60.0


def wait_listening(port: int, alive: Callable[[], bool], log: Path) -> None:
    """Wait for a port to accept connections (the broker opens its Kafka listener first)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"broker exited: {log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"port {port} did not open: {log.read_text()}")


@dataclass
class Answer:
    """An HTTP answer: status, JSON body, headers."""

    status: int
    body: Any
    headers: dict[str, str]


@dataclass
class Api:
    """The HTTP API of one broker (or node)."""

    port: int
    scheme: str = "http"
    context: ssl.SSLContext | None = None

    def url(self, path: str, **params: object) -> str:
        query = urllib.parse.urlencode({k: str(v) for k, v in params.items()})
        return f"{self.scheme}://127.0.0.1:{self.port}{path}" + (f"?{query}" if query else "")

    def get(self, path: str, *, auth: tuple[str, str] | None = None, **params: object) -> Answer:
        return self.send(urllib.request.Request(self.url(path, **params)), auth)

    def post(self, path: str, body: Any, *, auth: tuple[str, str] | None = None) -> Answer:
        """POST ``body`` as JSON."""
        request = urllib.request.Request(
            self.url(path),
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        return self.send(request, auth)

    def send(self, request: urllib.request.Request, auth: tuple[str, str] | None) -> Answer:
        """``request``'s answer, with HTTP Basic ``auth`` when given; an error status too."""
        if auth is not None:
            token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT, context=self.context) as reply:
                return Answer(reply.status, json.loads(reply.read()), dict(reply.headers))
        except urllib.error.HTTPError as error:
            with error:
                return Answer(error.code, json.loads(error.read()), dict(error.headers))

    def records(
        self, topic: str, *, auth: tuple[str, str] | None = None, **params: object
    ) -> Answer:
        return self.get(f"/v1/topics/{urllib.parse.quote(topic)}/records", auth=auth, **params)


def node_apis(cluster: Cluster, first_port: int) -> list[Api]:
    """The HTTP API of each node (node i on ``first_port + i``), once all are listening."""
    apis = [Api(first_port + i) for i in range(cluster.nodes)]
    for api in apis:
        wait_listening(api.port, cluster.alive, cluster.log)
    return apis


def create_topic(bootstrap: str, name: str, partitions: int = 1, **config: str) -> None:
    """Create ``name`` with its key index on (and any other ``config``)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, partitions, config={"key.index.enable": "true", **config})
    for future in admin.create_topics([topic]).values():
        future.result(30)


@dataclass
class ApiBroker:
    """A broker and its HTTP API."""

    process: BrokerProcess
    api: Api

    @property
    def bootstrap(self) -> str:
        return self.process.bootstrap


@pytest.fixture
def api_broker(tmp_path: Path) -> Iterator[Callable[..., ApiBroker]]:
    """``api_broker(**overrides)``: a broker serving its HTTP API on a free port."""
    started: list[BrokerProcess] = []

    def start(**overrides: str) -> ApiBroker:
        port = free_port()
        process = BrokerProcess(
            tmp_path / f"data{len(started)}", {"console.port": str(port), **overrides}
        )
        started.append(process)
        process.start()
        wait_listening(port, process.alive, process.log)
        return ApiBroker(process, Api(port))

    yield start
    for process in started:
        process.close()
