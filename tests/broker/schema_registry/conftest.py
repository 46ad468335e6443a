"""Brokers serving the schema registry on a free port, and registry clients for them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.http_api.conftest import Api, wait_listening


@dataclass
class RegistryBroker:
    """A broker, its registry's URL and a raw HTTP client for it."""

    process: BrokerProcess
    port: int
    clients: list[SchemaRegistryClient] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def bootstrap(self) -> str:
        return self.process.bootstrap

    @property
    def api(self) -> Api:
        return Api(self.port)

    def client(self, **config: Any) -> SchemaRegistryClient:
        """A fresh client (its caches empty): each call asks the registry.

        Closed with the broker (its connection pool would be left to the garbage collector).
        """
        client = SchemaRegistryClient({"url": self.url, **config})
        self.clients.append(client)
        return client

    def close(self) -> None:
        for client in self.clients:
            client.close()
        self.process.close()


@pytest.fixture
def registry_broker(tmp_path: Path) -> Iterator[Callable[..., RegistryBroker]]:
    """``registry_broker(**overrides)``: a broker serving the registry on a free port."""
    started: list[RegistryBroker] = []

    def start(**overrides: str) -> RegistryBroker:
        port = free_port()
        process = BrokerProcess(
            tmp_path / f"data{len(started)}", {"schema.registry.port": str(port), **overrides}
        )
        broker = RegistryBroker(process, port)
        started.append(broker)
        process.start()
        wait_listening(port, process.alive, process.log)
        return broker

    yield start
    for broker in started:
        broker.close()
