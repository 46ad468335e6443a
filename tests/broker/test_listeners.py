"""Several named listeners at once; Metadata answers with the client's own listener."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from seglog.broker.settings import Listener
from seglog.errors import InvalidConfigError
from tests.broker.conftest import BrokerProcess, free_port


@pytest.fixture
def started() -> Iterator[Callable[[BrokerProcess], BrokerProcess]]:
    """Start a broker configured by hand; kill it after the test."""
    brokers: list[BrokerProcess] = []

    def start(broker: BrokerProcess) -> BrokerProcess:
        brokers.append(broker)
        broker.start()
        return broker

    yield start
    for broker in brokers:
        if broker.alive():
            broker.kill()


def _brokers_seen(bootstrap: str) -> list[tuple[int, str, int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(timeout=10)
    return [(b.id, b.host, b.port) for b in metadata.brokers.values()]


def test_each_listener_advertises_its_own_address(
    tmp_path: Path, started: Callable[[BrokerProcess], BrokerProcess]
) -> None:
    internal = free_port()
    broker = BrokerProcess(tmp_path / "data")
    broker.overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},INTERNAL://127.0.0.1:{internal}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "advertised.listeners": f"INTERNAL://localhost:{internal}",
    }
    started(broker)
    # PLAINTEXT is not advertised explicitly: its own address is.
    assert _brokers_seen(broker.bootstrap) == [(1, "127.0.0.1", broker.port)]
    assert _brokers_seen(f"127.0.0.1:{internal}") == [(1, "localhost", internal)]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"listeners": "A://127.0.0.1:{p},A://127.0.0.1:{q}"},
            "each listener must have a different name",
        ),
        (
            {"listeners": "A://127.0.0.1:{p},B://127.0.0.1:{p}"},
            "each listener must have a different port",
        ),
        (
            {"listeners": "A://127.0.0.1:{p}", "advertised.listeners": "B://h:{q}"},
            "B is not in listeners",
        ),
    ],
)
def test_inconsistent_listeners_are_refused(
    tmp_path: Path, overrides: dict[str, str], message: str
) -> None:
    p, q = free_port(), free_port()
    values = {k: v.format(p=p, q=q) for k, v in overrides.items()}
    values["listener.security.protocol.map"] = "A:PLAINTEXT,B:PLAINTEXT"
    broker = BrokerProcess(tmp_path / "data", values)
    with pytest.raises(RuntimeError, match=message):
        broker.start()


def test_listener_names_with_underscores_and_ipv6() -> None:
    protocols = {"SASL_SSL": "SASL_SSL", "PLAINTEXT": "PLAINTEXT"}
    assert Listener.parse("SASL_SSL://0.0.0.0:9093", protocols) == Listener(
        "SASL_SSL", "0.0.0.0", 9093, "SASL_SSL"
    )
    assert Listener.parse("plaintext://[::1]:9092", protocols).host == "::1"
    assert Listener.parse("PLAINTEXT://:9092", protocols).host == ""
    with pytest.raises(InvalidConfigError, match="expected NAME://host:port"):
        Listener.parse("PLAINTEXT://host", protocols)


def test_a_sasl_listener_needs_mechanisms_seglog_serves(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data")
    broker.overrides = {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{broker.port}",
        # sasl.enabled.mechanisms defaults to GSSAPI, as in Kafka.
    }
    with pytest.raises(RuntimeError, match="GSSAPI not supported; seglog serves PLAIN"):
        broker.start()
