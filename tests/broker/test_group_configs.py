"""Group configs (KIP-848, the GROUP config resource) through confluent-kafka and raw requests."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from seglog.protocol.api_keys import ApiKey
from tests.broker.conftest import BrokerProcess
from tests.broker.test_dynamic_configs import _request

GROUP = 32
SET, DELETE = 0, 1
DYNAMIC_GROUP, STATIC, DEFAULT = 8, 4, 5
INVALID_CONFIG, INVALID_REQUEST = 40, 42
WAIT = 60.0


def _incremental(
    broker: BrokerProcess,
    group: str,
    ops: list[tuple[str, int, str | None]],
    *,
    validate_only: bool = False,
) -> tuple[int, str | None]:
    body = {
        "resources": [
            {
                "resource_type": GROUP,
                "resource_name": group,
                "configs": [
                    {"name": key, "config_operation": op, "value": value} for key, op, value in ops
                ],
            }
        ],
        "validate_only": validate_only,
    }
    answer = _request(broker, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"][0]
    return answer["error_code"], answer["error_message"]


def _describe(broker: BrokerProcess, group: str) -> dict[str, dict[str, Any]]:
    body = {
        "resources": [{"resource_type": GROUP, "resource_name": group, "configuration_keys": None}],
        "include_synonyms": True,
        "include_documentation": False,
    }
    result = _request(broker, ApiKey.DESCRIBE_CONFIGS, 4, body)["results"][0]
    assert result["error_code"] == 0, result
    return {c["name"]: c for c in result["configs"]}


def _heartbeat(broker: BrokerProcess, group: str) -> dict[str, Any]:
    """A new member's first ConsumerGroupHeartbeat (KIP-848) in ``group``."""
    body = {
        "group_id": group,
        "member_id": str(uuid.uuid4()),
        "member_epoch": 0,
        "rebalance_timeout_ms": 30000,
        "subscribed_topic_names": [],
        "topic_partitions": [],
    }
    answer: dict[str, Any] = _request(broker, ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, body)
    assert answer["error_code"] == 0, answer
    return answer


def test_defaults_come_from_the_broker_settings(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = make_broker(**{"group.consumer.heartbeat.interval.ms": "6000"})
    configs = _describe(broker, "g-defaults")
    assert {name: c["value"] for name, c in configs.items()} == {
        "consumer.heartbeat.interval.ms": "6000",
        "consumer.session.timeout.ms": "45000",
        "errors.deadletterqueue.copy.record.enable": "false",
        "errors.deadletterqueue.topic.name": "",
        "share.auto.offset.reset": "latest",
        "share.delivery.count.limit": "5",
        "share.partition.max.record.locks": "2000",
        "share.heartbeat.interval.ms": "5000",
        "share.isolation.level": "read_uncommitted",
        "share.record.lock.duration.ms": "30000",
        "share.session.timeout.ms": "45000",
    }
    session = configs["consumer.session.timeout.ms"]
    assert (session["config_source"], session["read_only"]) == (DEFAULT, False)
    heartbeat = configs["consumer.heartbeat.interval.ms"]
    assert heartbeat["config_source"] == STATIC
    assert [(s["name"], s["value"], s["source"]) for s in heartbeat["synonyms"]] == [
        ("group.consumer.heartbeat.interval.ms", "6000", STATIC),
        ("group.consumer.heartbeat.interval.ms", "5000", DEFAULT),
    ]


def test_set_validate_only_delete_and_kafkas_messages(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = make_broker()
    group = "g-set"
    assert _incremental(
        broker, group, [("consumer.session.timeout.ms", SET, "50000")], validate_only=True
    ) == (0, None)
    assert _describe(broker, group)["consumer.session.timeout.ms"]["value"] == "45000"
    assert _incremental(broker, group, [("consumer.session.timeout.ms", SET, "50000")]) == (0, None)
    entry = _describe(broker, group)["consumer.session.timeout.ms"]
    assert (entry["value"], entry["config_source"]) == ("50000", DYNAMIC_GROUP)
    assert entry["synonyms"][0] == {
        "name": "consumer.session.timeout.ms",
        "value": "50000",
        "source": DYNAMIC_GROUP,
    }
    # Another group keeps the broker's.
    assert _describe(broker, "g-other")["consumer.session.timeout.ms"]["value"] == "45000"
    assert _incremental(broker, group, [("consumer.session.timeout.ms", SET, "1000")]) == (
        INVALID_CONFIG,
        "consumer.session.timeout.ms must be greater than or equal to "
        "group.consumer.min.session.timeout.ms",
    )
    assert _incremental(broker, group, [("consumer.heartbeat.interval.ms", SET, "20000")]) == (
        INVALID_CONFIG,
        "consumer.heartbeat.interval.ms must be less than or equal to "
        "group.consumer.max.heartbeat.interval.ms",
    )
    assert _incremental(broker, group, [("no.such.config", SET, "1")]) == (
        INVALID_CONFIG,
        "Unknown group config name: no.such.config",
    )
    code, message = _incremental(broker, group, [("share.auto.offset.reset", SET, "middle")])
    assert code == INVALID_CONFIG and message is not None and "share.auto.offset.reset" in message
    code, _ = _incremental(broker, "", [("consumer.session.timeout.ms", SET, "50000")])
    assert code == INVALID_REQUEST
    # Refused changes left the value as it was; DELETE brings back the broker's.
    assert _describe(broker, group)["consumer.session.timeout.ms"]["value"] == "50000"
    assert _incremental(broker, group, [("consumer.session.timeout.ms", DELETE, None)]) == (0, None)
    assert _describe(broker, group)["consumer.session.timeout.ms"]["config_source"] == DEFAULT


def test_session_must_exceed_heartbeat_within_the_brokers_bounds(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = make_broker(
        **{
            "group.consumer.min.session.timeout.ms": "1000",
            "group.consumer.min.heartbeat.interval.ms": "1000",
        }
    )
    assert _incremental(broker, "g-order", [("consumer.session.timeout.ms", SET, "5000")]) == (
        INVALID_CONFIG,
        "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms",
    )


def test_confluent_kafka_alters_and_describes_a_group(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = make_broker()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(
        ResourceType.GROUP,
        "g-confluent",
        incremental_configs=[
            ConfigEntry(
                "consumer.heartbeat.interval.ms",
                "7000",
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(WAIT)
    described = admin.describe_configs([ConfigResource(ResourceType.GROUP, "g-confluent")])
    (entries,) = [future.result(WAIT) for future in described.values()]
    heartbeat = entries["consumer.heartbeat.interval.ms"]
    assert heartbeat.value == "7000"
    assert heartbeat.source == ConfigSource.GROUP_CONFIG.value
    assert entries["consumer.session.timeout.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_group_configs_survive_a_restart_and_set_the_heartbeat_interval(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = make_broker()
    group = "g-restart"
    assert _incremental(broker, group, [("consumer.heartbeat.interval.ms", SET, "8000")]) == (
        0,
        None,
    )
    assert _heartbeat(broker, group)["heartbeat_interval_ms"] == 8000  # at once
    assert broker.stop() == 0
    broker.start()
    assert _describe(broker, group)["consumer.heartbeat.interval.ms"]["value"] == "8000"
    assert (broker.data / "seglog-group-configs.json").exists()
    assert not (broker.data / "seglog-group-configs.json.tmp").exists()
    assert _heartbeat(broker, group)["heartbeat_interval_ms"] == 8000
    # A group without configs of its own is told the broker's interval.
    assert _heartbeat(broker, "g-plain")["heartbeat_interval_ms"] == 5000


def test_legacy_alter_configs_replaces_a_groups_whole_set(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = make_broker()
    group = "g-legacy"
    assert _incremental(broker, group, [("consumer.session.timeout.ms", SET, "50000")]) == (0, None)
    body = {
        "resources": [
            {
                "resource_type": GROUP,
                "resource_name": group,
                "configs": [{"name": "consumer.heartbeat.interval.ms", "value": "6000"}],
            }
        ],
        "validate_only": False,
    }
    answer = _request(broker, ApiKey.ALTER_CONFIGS, 1, body)["responses"][0]
    assert (answer["error_code"], answer["error_message"]) == (0, None)
    configs = _describe(broker, group)
    assert configs["consumer.heartbeat.interval.ms"]["config_source"] == DYNAMIC_GROUP
    assert configs["consumer.session.timeout.ms"]["config_source"] == DEFAULT
