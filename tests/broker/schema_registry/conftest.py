"""Brokers serving the schema registry on a free port, and registry clients for them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
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
        """A fresh client (its caches empty): each call asks the registry."""
        return SchemaRegistryClient({"url": self.url, **config})


@pytest.fixture
def registry_broker(tmp_path: Path) -> Iterator[Callable[..., RegistryBroker]]:
    """``registry_broker(**overrides)``: a broker serving the registry on a free port."""
    started: list[BrokerProcess] = []

    def start(**overrides: str) -> RegistryBroker:
        port = free_port()
        process = BrokerProcess(
            tmp_path / f"data{len(started)}", {"schema.registry.port": str(port), **overrides}
        )
        started.append(process)
        process.start()
        wait_listening(port, process.alive, process.log)
        return RegistryBroker(process, port)

    yield start
    for process in started:
        process.close()
