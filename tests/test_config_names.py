"""Setting names checked as Kafka checks them: typos refused, plugins' names warned about."""

from __future__ import annotations

import re

import pytest

from seglog.broker.settings import BrokerSettings
from seglog.config import BROKER_CONFIGS
from seglog.config_names import (
    HIDDEN,
    KAFKA_IGNORED,
    check_names,
    closest,
    differing_from_defaults,
)
from seglog.errors import InvalidConfigError


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("listener", "listeners"),
        ("log.retention.hour", "log.retention.hours"),
        ("auto.create.topic.enable", "auto.create.topics.enable"),
        ("Listeners", "listeners"),
        ("log.segemnt.bytes", "log.segment.bytes"),  # two letters swapped
        ("num.network.thread", "num.network.threads"),
        ("socket.send.buffer.byte", "socket.send.buffer.bytes"),  # one seglog ignores
        (
            "listener.name.sasl_ssl.ssl.keystore.locaton",
            "listener.name.sasl_ssl.ssl.keystore.location",
        ),
        (
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.confg",
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config",
        ),
    ],
)
def test_a_likely_typo_names_the_setting_meant_and_refuses(typo: str, meant: str) -> None:
    found = check_names([typo])
    assert found.errors == (f"`{typo}` is not a known setting; did you mean `{meant}`?",)
    with pytest.raises(InvalidConfigError, match=re.escape(f"did you mean `{meant}`")):
        BrokerSettings.from_properties({typo: "1"})


def test_a_name_like_nothing_known_is_a_warning() -> None:
    found = check_names(["confluent.support.metrics.enable", "my.plugin.url"])
    assert found.errors == ()
    assert found.warnings == (
        "`confluent.support.metrics.enable` is not a known setting (a plugin's?): it is ignored",
        "`my.plugin.url` is not a known setting (a plugin's?): it is ignored",
    )
    BrokerSettings.from_properties({"my.plugin.url": "http://example.com"})


def test_every_known_name_and_kafkas_ignored_ones_pass() -> None:
    found = check_names([*BROKER_CONFIGS, *KAFKA_IGNORED, "listener.name.x.ssl.key.password"])
    assert found.errors == () and found.warnings == ()
    assert sorted(found.ignored) == sorted(KAFKA_IGNORED)
    # No name seglog knows is itself a "typo" of another: each is its own best match.
    for name in BROKER_CONFIGS:
        assert closest(name) == name


def test_a_kafka_server_properties_starts_unchanged() -> None:
    # The settings of Kafka 4's sample config/server.properties (KRaft, combined roles).
    kafka = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": "localhost:9093",
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "inter.broker.listener.name": "PLAINTEXT",
        "advertised.listeners": "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "num.network.threads": "3",
        "num.io.threads": "8",
        "socket.send.buffer.bytes": "102400",
        "socket.receive.buffer.bytes": "102400",
        "socket.request.max.bytes": "104857600",
        "log.dirs": "/tmp/kraft-combined-logs",
        "num.partitions": "1",
        "num.recovery.threads.per.data.dir": "1",
        "offsets.topic.replication.factor": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "log.retention.hours": "168",
        "log.segment.bytes": "1073741824",
        "log.retention.check.interval.ms": "300000",
    }
    found = check_names(kafka)
    assert found.errors == () and found.warnings == ()
    assert "process.roles" in found.ignored
    BrokerSettings.from_properties(kafka)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("port", "`port` was removed from Kafka and seglog does not read it; "
                 "set listeners=PLAINTEXT://host:port instead"),
        ("host.name", "set listeners=PLAINTEXT://host:port instead"),
        ("advertised.host.name", "set advertised.listeners=PLAINTEXT://host:port instead"),
        ("retention.ms", "`retention.ms` is a topic setting; the broker's default for every "
                         "topic is `log.retention.ms`"),
        ("max.message.bytes", "is `message.max.bytes`"),
    ],
)  # fmt: skip
def test_settings_that_would_be_silently_ignored_refuse(name: str, message: str) -> None:
    with pytest.raises(InvalidConfigError, match=re.escape(message)):
        BrokerSettings.from_properties({name: "9093"})


def test_several_log_dirs_refuse() -> None:
    with pytest.raises(InvalidConfigError, match=re.escape("log.dirs lists 2 directories")):
        BrokerSettings.from_properties({"log.dirs": "/a, /b"})
    with pytest.raises(InvalidConfigError, match=re.escape("log.dirs names no directory")):
        BrokerSettings.from_properties({"log.dirs": " , "})
    assert str(BrokerSettings.from_properties({"log.dirs": "/a,"}).log_dir) == "/a"


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(InvalidConfigError) as raised:
        BrokerSettings.from_properties({"listener": "x", "port": "1", "log.dirs": "/d"})
    assert str(raised.value).splitlines() == [
        "`listener` is not a known setting; did you mean `listeners`?",
        "`port` was removed from Kafka and seglog does not read it; "
        "set listeners=PLAINTEXT://host:port instead",
    ]


def test_settings_that_differ_from_defaults_with_secrets_hidden() -> None:
    shown = dict(
        differing_from_defaults(
            {
                "num.partitions": "1",  # the default: not shown
                "log.retention.hours": "1",
                "listeners": "PLAINTEXT://127.0.0.1:9093",
                "ssl.keystore.password": "s3cret",
                "listener.name.sasl_ssl.plain.sasl.jaas.config": 'x required password="p";',
                "sasl.plain.users.file": "/etc/users",
                "my.plugin.api.key": "k3y",
                "my.plugin.password": "pw",
                "process.roles": "broker,controller",
                "segment.bytes": "oops",
            }
        )
    )
    assert shown == {
        "log.retention.hours": "1",
        "listeners": "PLAINTEXT://127.0.0.1:9093",
        "ssl.keystore.password": HIDDEN,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": HIDDEN,
        "sasl.plain.users.file": "/etc/users",
        "my.plugin.api.key": HIDDEN,
        "my.plugin.password": HIDDEN,
        "process.roles": "broker,controller",
        "segment.bytes": HIDDEN,
    }
