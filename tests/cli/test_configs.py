"""``seglog configs``: kafka-configs.sh's describe and alter on a live broker."""

from __future__ import annotations

import subprocess
import sys

import pytest

from seglog.cli.configs import parse_configs
from tests.broker.conftest import BrokerProcess


def _configs(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "seglog", "configs", "--bootstrap-server", broker.bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_add_config_reads_lists_in_brackets() -> None:
    assert parse_configs("a=1,b=[x,y],c=") == {"a": "1", "b": "x,y", "c": ""}


def test_brokers_default_and_one_broker(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = make_broker(**{"log.retention.hours": "2"})
    out = _ok(
        _configs(
            broker,
            "--alter",
            "--entity-type",
            "brokers",
            "--entity-default",
            "--add-config",
            "log.retention.ms=3600000,log.cleanup.policy=[delete,compact]",
        )
    )
    assert out == "Completed updating default config for brokers in the cluster.\n"
    out = _ok(_configs(broker, "--describe", "--entity-type", "brokers", "--entity-default"))
    assert out.splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  log.cleanup.policy=delete,compact sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleanup.policy=delete,compact}",
        "  log.retention.ms=3600000 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000}",
    ]
    alter_one = ("--alter", "--entity-type", "brokers", "--entity-name", "1")
    out = _ok(_configs(broker, *alter_one, "--add-config", "log.retention.ms=1000"))
    assert out == "Completed updating config for broker 1.\n"
    out = _ok(_configs(broker, "--describe", "--entity-type", "brokers"))
    assert out.splitlines()[:2] == [
        "Dynamic configs for broker 1 are:",
        "  log.retention.ms=1000 sensitive=false synonyms={"
        "DYNAMIC_BROKER_CONFIG:log.retention.ms=1000, "
        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000, "
        "STATIC_BROKER_CONFIG:log.retention.hours=2, DEFAULT_CONFIG:log.retention.hours=168}",
    ]
    assert "Default configs for brokers in the cluster are:" in out
    _ok(_configs(broker, *alter_one, "--delete-config", "log.retention.ms"))
    again = _configs(broker, *alter_one, "--delete-config", "log.retention.ms")
    assert again.returncode != 0
    assert "Invalid config(s): log.retention.ms" in again.stderr

    static = _configs(
        broker,
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--add-config",
        "log.retention.hours=1",
    )
    assert static.returncode != 0
    assert "Cannot update these configs dynamically: Set(log.retention.hours)" in static.stderr


def test_topics(broker: BrokerProcess, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    alter = ("--alter", "--entity-type", "topics", "--entity-name", topic)
    out = _ok(_configs(broker, *alter, "--add-config", "retention.ms=5000,cleanup.policy=compact"))
    assert out == f"Completed updating config for topic {topic}.\n"
    described = _ok(
        _configs(broker, "--describe", "--entity-type", "topics", "--entity-name", topic)
    )
    lines = described.splitlines()
    assert lines[0] == f"Dynamic configs for topic {topic} are:"
    assert [line.split("=")[0].strip() for line in lines[1:]] == ["cleanup.policy", "retention.ms"]
    assert lines[2].startswith("  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG")
    _ok(_configs(broker, *alter, "--delete-config", "cleanup.policy,retention.ms"))
    described = _ok(
        _configs(broker, "--describe", "--entity-type", "topics", "--entity-name", topic)
    )
    assert described.splitlines() == [f"Dynamic configs for topic {topic} are:"]


def test_users_and_clients(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = make_broker()
    out = _ok(
        _configs(
            broker,
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--add-config",
            "SCRAM-SHA-256=[iterations=8192,password=alice-secret],producer_byte_rate=1024",
        )
    )
    assert out == "Completed updating config for user-principal 'alice'.\n"
    out = _ok(_configs(broker, "--describe", "--entity-type", "users", "--entity-name", "alice"))
    assert out.splitlines() == [
        "Quota configs for user-principal 'alice' are producer_byte_rate=1024.0",
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192",
    ]
    _ok(
        _configs(
            broker,
            "--alter",
            "--entity-type",
            "clients",
            "--entity-default",
            "--add-config",
            "consumer_byte_rate=2048",
        )
    )
    out = _ok(_configs(broker, "--describe", "--entity-type", "clients", "--entity-default"))
    assert out == "Quota configs for the default client-id are consumer_byte_rate=2048.0\n"


@pytest.mark.parametrize(
    "args",
    [
        ("--describe", "--entity-type", "brokers", "--entity-name", "x"),
        ("--alter", "--entity-type", "brokers", "--entity-default"),
        ("--entity-type", "topics", "--entity-name", "t"),
    ],
)
def test_usage_errors(broker: BrokerProcess, args: tuple[str, ...]) -> None:
    result = _configs(broker, *args)
    assert result.returncode == 2, result.stderr


def test_a_groups_configs(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = make_broker()
    alter = ("--alter", "--entity-type", "groups", "--entity-name", "orders-app")
    out = _ok(_configs(broker, *alter, "--add-config", "consumer.session.timeout.ms=50000"))
    assert out == "Completed updating config for group orders-app.\n"
    describe = ("--describe", "--entity-type", "groups", "--entity-name", "orders-app")
    assert _ok(_configs(broker, *describe)).splitlines() == [
        "Dynamic configs for group orders-app are:",
        "  consumer.session.timeout.ms=50000 sensitive=false synonyms={"
        "DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000, "
        "DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}",
    ]
    refused = _configs(broker, *alter, "--add-config", "consumer.session.timeout.ms=10")
    assert refused.returncode != 0
    assert "must be greater than or equal to group.consumer.min.session.timeout.ms" in (
        refused.stderr
    )
    out = _ok(_configs(broker, *alter, "--delete-config", "consumer.session.timeout.ms"))
    assert out == "Completed updating config for group orders-app.\n"
    assert _ok(_configs(broker, *describe)).splitlines() == [
        "Dynamic configs for group orders-app are:"
    ]
