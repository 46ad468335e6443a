"""Brokers serving the schema registry on a free port (alone, or as 2 nodes), and clients."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.http_api.conftest import Api, wait_listening
from tests.broker.nodes.conftest import Cluster, free_ports, listening


@dataclass
class RegistryBroker:
    """A broker (or the nodes of one cluster), its registry's URLs and clients for them.

    With several nodes, each new client asks the next node: every node must answer.
    """

    server: BrokerProcess | Cluster
    ports: list[int]
    clients: list[SchemaRegistryClient] = field(default_factory=list)
    _turn: Iterator[int] = field(default_factory=itertools.count)

    @property
    def port(self) -> int:
        return self.ports[0]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def bootstrap(self) -> str:
        return (
            self.server.bootstrap() if isinstance(self.server, Cluster) else self.server.bootstrap
        )

    @property
    def api(self) -> Api:
        return Api(self.ports[next(self._turn) % len(self.ports)])

    def client(self, **config: Any) -> SchemaRegistryClient:
        """A fresh client (its caches empty): each call asks the registry.

        Closed with the broker (its connection pool would be left to the garbage collector).
        """
        port = self.ports[next(self._turn) % len(self.ports)]
        client = SchemaRegistryClient({"url": f"http://127.0.0.1:{port}", **config})
        self.clients.append(client)
        return client

    def alive(self) -> bool:
        return self.server.alive()

    def wait(self) -> None:
        """Until every registry port accepts connections."""
        for port in self.ports:
            wait_listening(port, self.alive, self.server.log)

    def kill_and_restart(self) -> None:
        """kill -9 the broker (every node), then start it again on the same data."""
        self.server.kill()
        # Killed nodes (children of the supervisor) may hold their ports a moment longer.
        deadline = time.monotonic() + 60
        while any(listening(port) for port in self.ports) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.server.start()
        self.wait()

    def close(self) -> None:
        for client in self.clients:
            client.close()
        self.server.close()


def start_registry(data: Path, nodes: int, **overrides: str) -> RegistryBroker:
    """A broker of ``nodes`` nodes with the registry on free ports."""
    port = free_port() if nodes == 1 else free_ports(nodes)
    settings = {"schema.registry.port": str(port), **overrides}
    server = BrokerProcess(data, settings) if nodes == 1 else Cluster(data, nodes, settings)
    broker = RegistryBroker(server, [port + i for i in range(nodes)])
    try:
        server.start()
        broker.wait()
    except BaseException:
        broker.close()
        raise
    return broker


@pytest.fixture
def registry_broker(tmp_path: Path) -> Iterator[Callable[..., RegistryBroker]]:
    """``registry_broker(**overrides)``: a broker serving the registry on a free port."""
    started: list[RegistryBroker] = []

    def start(nodes: int = 1, **overrides: str) -> RegistryBroker:
        broker = start_registry(tmp_path / f"data{len(started)}", nodes, **overrides)
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.close()


@pytest.fixture(params=[1, 2], ids=["alone", "2 nodes"])
def any_registry(
    request: pytest.FixtureRequest, registry_broker: Callable[..., RegistryBroker]
) -> RegistryBroker:
    """The registry of a broker alone, then of ``--nodes 2`` (clients taking turns at nodes)."""
    return registry_broker(nodes=request.param)
