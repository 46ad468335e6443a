"""Dynamic broker configs (KIP-226) through real clients: change, describe, persist, apply.

librdkafka and kafka-python cannot name the cluster-wide default (resource
name ``""``), as Kafka's Java admin client can: those requests are sent with
seglog's own codec over a socket, as that client sends them.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka.admin import ConfigResource as KPConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from seglog.protocol.api_keys import ApiKey
from seglog.protocol.headers import decode_response, encode_request
from tests.broker.conftest import BrokerProcess
from tests.broker.test_limits import api_versions, closed_within, connect

BROKER = 4
TOPIC = 2
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5
WAIT = 60.0


def _request(broker: BrokerProcess, api: ApiKey, version: int, body: dict[str, Any]) -> Any:
    with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as sock:
        sock.sendall(encode_request(api, version, 1, "dynamic-configs-test", body, framed=True))
        size = struct.unpack(">i", _read(sock, 4))[0]
        return decode_response(api, version, _read(sock, size))[1]


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data


def _incremental(
    broker: BrokerProcess,
    name: str,
    ops: list[tuple[str, int, str | None]],
    *,
    validate_only: bool = False,
) -> tuple[int, str | None]:
    """IncrementalAlterConfigs v1 on broker resource ``name``: (error code, message)."""
    body = {
        "resources": [
            {
                "resource_type": BROKER,
                "resource_name": name,
                "configs": [
                    {"name": key, "config_operation": op, "value": value} for key, op, value in ops
                ],
            }
        ],
        "validate_only": validate_only,
    }
    answer = _request(broker, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"][0]
    return answer["error_code"], answer["error_message"]


def _describe(broker: BrokerProcess, kind: int, name: str) -> dict[str, dict[str, Any]]:
    """DescribeConfigs v4 with synonyms: each config by name."""
    body = {
        "resources": [{"resource_type": kind, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": True,
        "include_documentation": False,
    }
    result = _request(broker, ApiKey.DESCRIBE_CONFIGS, 4, body)["results"][0]
    assert result["error_code"] == 0, result
    return {c["name"]: c for c in result["configs"]}


def _synonyms(entry: dict[str, Any]) -> list[tuple[str, str | None, int]]:
    return [(s["name"], s["value"], s["source"]) for s in entry["synonyms"]]


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _create(broker: BrokerProcess, topic: str, **config: str) -> None:
    admin = _admin(broker)  # kept until the answer: a destroyed client fails its futures
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(WAIT)


def test_the_default_and_one_broker_take_precedence_in_kafka_order(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = make_broker(**{"log.retention.ms": "3600000"})
    _create(broker, "plain")
    _create(broker, "overridden", **{"retention.ms": "1000"})

    assert _incremental(broker, "", [("log.retention.ms", SET, "7200000")]) == (0, None)
    assert _incremental(broker, "1", [("log.retention.ms", SET, "10800000")]) == (0, None)

    mine = _describe(broker, BROKER, "1")["log.retention.ms"]
    assert (mine["value"], mine["config_source"], mine["read_only"]) == (
        "10800000",
        DYNAMIC_BROKER,
        False,
    )
    assert _synonyms(mine) == [
        ("log.retention.ms", "10800000", DYNAMIC_BROKER),
        ("log.retention.ms", "7200000", DYNAMIC_DEFAULT),
        ("log.retention.ms", "3600000", STATIC),
        ("log.retention.hours", "168", DEFAULT),
    ]
    # The default resource lists only what is set at that level, with its own synonym.
    default = _describe(broker, BROKER, "")
    assert list(default) == ["log.retention.ms"]
    assert default["log.retention.ms"]["config_source"] == DYNAMIC_DEFAULT
    assert _synonyms(default["log.retention.ms"]) == [
        ("log.retention.ms", "7200000", DYNAMIC_DEFAULT)
    ]

    # A topic without an override follows the broker at once; one with an override keeps it.
    plain = _describe(broker, TOPIC, "plain")["retention.ms"]
    assert (plain["value"], plain["config_source"]) == ("10800000", DYNAMIC_BROKER)
    assert _synonyms(plain)[0] == ("log.retention.ms", "10800000", DYNAMIC_BROKER)
    overridden = _describe(broker, TOPIC, "overridden")["retention.ms"]
    assert (overridden["value"], overridden["config_source"]) == ("1000", DYNAMIC_TOPIC)
    assert _synonyms(overridden)[:2] == [
        ("retention.ms", "1000", DYNAMIC_TOPIC),
        ("log.retention.ms", "10800000", DYNAMIC_BROKER),
    ]

    # Deleting this broker's value falls back to the default level, then to the static one.
    assert _incremental(broker, "1", [("log.retention.ms", DELETE, None)]) == (0, None)
    plain = _describe(broker, TOPIC, "plain")["retention.ms"]
    assert (plain["value"], plain["config_source"]) == ("7200000", DYNAMIC_DEFAULT)
    assert _incremental(broker, "", [("log.retention.ms", DELETE, None)]) == (0, None)
    plain = _describe(broker, TOPIC, "plain")["retention.ms"]
    assert (plain["value"], plain["config_source"]) == ("3600000", STATIC)
    assert _describe(broker, BROKER, "") == {}


def test_static_unknown_and_bad_settings_are_refused_with_kafkas_messages(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = make_broker()
    invalid_request = 42
    cases: list[tuple[str, list[tuple[str, int, str | None]], str]] = [
        (
            "",
            [("listeners", SET, "PLAINTEXT://127.0.0.1:1"), ("log.retention.hours", SET, "1")],
            "Cannot update these configs dynamically: Set(listeners, log.retention.hours)",
        ),
        (
            "1",
            [("log.retention.ms", SET, "soon")],
            "Invalid value soon for configuration log.retention.ms: Not a number of type LONG",
        ),
        (
            "1",
            [("num.partitions", SET, "0")],
            "Invalid value 0 for configuration num.partitions: Value must be at least 1",
        ),
        (
            "",
            [("sasl.kerberos.min.time.before.relogin", SET, "58000")],
            "Cannot update these configs at default cluster level, broker id must be "
            "specified: Set(sasl.kerberos.min.time.before.relogin)",
        ),
        (
            "1",
            [("log.retention.hour", SET, "1")],
            "Unknown broker configs: Set(log.retention.hour)",
        ),
        ("2", [("log.retention.ms", SET, "1")], "Unexpected broker id, expected 1, but received 2"),
        ("one", [("log.retention.ms", SET, "1")], "Node id must be an integer, but it is: one"),
        (
            "1",
            [("log.retention.ms", SET, "1"), ("log.retention.ms", SET, "2")],
            "Error due to duplicate config keys",
        ),
        ("1", [("log.retention.ms", SET, None)], "Null value not supported for : log.retention.ms"),
    ]
    for name, ops, message in cases:
        assert _incremental(broker, name, ops) == (invalid_request, message), ops
    # APPEND to a setting that is not a list is Kafka's INVALID_CONFIG.
    assert _incremental(broker, "1", [("num.partitions", APPEND, "2")]) == (
        40,
        "Config value append is not allowed for config key: num.partitions",
    )
    # Nothing refused was kept, and validate_only keeps nothing either.
    assert _incremental(broker, "", [("log.retention.ms", SET, "5")], validate_only=True) == (
        0,
        None,
    )
    assert _describe(broker, BROKER, "") == {}
    assert _describe(broker, BROKER, "1")["log.retention.ms"]["config_source"] == DEFAULT
    assert not (broker.data / "seglog-broker-configs.json").exists()


# The legacy AlterConfigs is what librdkafka's test sends too, deprecated or not.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_confluent_kafka_alters_and_describes_this_broker(make_broker) -> None:  # type: ignore[no-untyped-def]
    """What librdkafka's test 0081-admin does to a broker, answered as Kafka answers it."""
    broker: BrokerProcess = make_broker()
    admin = _admin(broker)

    def incremental(entries: list[ConfigEntry]) -> None:
        resource = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=entries)
        admin.incremental_alter_configs([resource])[resource].result(WAIT)

    incremental(
        [
            ConfigEntry("background.threads", "9", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "log.cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            ),
        ]
    )
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = admin.describe_configs([resource])[resource].result(WAIT)
    assert configs["log.cleanup.policy"].value == "delete,compact"
    assert configs["log.cleanup.policy"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert configs["background.threads"].value == "9"
    assert not configs["background.threads"].is_read_only
    assert configs["log.dirs"].is_read_only

    incremental(
        [
            ConfigEntry("background.threads", "", incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry(
                "log.cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SUBTRACT
            ),
        ]
    )
    configs = admin.describe_configs([resource])[resource].result(WAIT)
    assert configs["log.cleanup.policy"].value == "delete"
    assert configs["background.threads"].source == ConfigSource.DEFAULT_CONFIG.value

    # The legacy AlterConfigs replaces the broker's whole set (validate_only first).
    legacy = ConfigResource(
        ConfigResource.Type.BROKER,
        "1",
        set_config={"sasl.kerberos.min.time.before.relogin": "58000"},
    )
    admin.alter_configs([legacy], validate_only=True)[legacy].result(WAIT)
    configs = admin.describe_configs([resource])[resource].result(WAIT)
    assert configs["sasl.kerberos.min.time.before.relogin"].value == "60000"
    admin.alter_configs([legacy])[legacy].result(WAIT)
    configs = admin.describe_configs([resource])[resource].result(WAIT)
    relogin = configs["sasl.kerberos.min.time.before.relogin"]
    assert (relogin.value, relogin.source) == ("58000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert configs["log.cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value

    static = ConfigResource(ConfigResource.Type.BROKER, "1", set_config={"node.id": "7"})
    with pytest.raises(KafkaException) as refused:
        admin.alter_configs([static])[static].result(WAIT)
    assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert refused.value.args[0].str() == "Cannot update these configs dynamically: Set(node.id)"


def test_kafka_python_alters_and_describes_this_broker(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = make_broker()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        resource = KPConfigResource(ConfigResourceType.BROKER, "1", {"log.retention.ms": "1000"})
        assert admin.alter_configs([resource]) == {"broker": {"1": "OK"}}
        described = admin.describe_configs(
            [KPConfigResource(ConfigResourceType.BROKER, "1")], include_synonyms=True
        )
        retention = described["broker"]["1"]["log.retention.ms"]
        assert retention["value"] == "1000"
        assert retention["config_source"] == "DYNAMIC_BROKER_CONFIG"
        assert not retention["read_only"]
        # kafka-python checks names against the broker's dynamic ones (read_only false).
        with pytest.raises(ValueError, match="listeners"):
            admin.alter_configs(
                [KPConfigResource(ConfigResourceType.BROKER, "1", {"listeners": "x"})]
            )
    finally:
        admin.close()


def test_dynamic_configs_survive_a_restart(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = make_broker()
    assert _incremental(broker, "", [("num.partitions", SET, "3")]) == (0, None)
    assert _incremental(broker, "1", [("log.segment.bytes", SET, "2097152")]) == (0, None)
    assert broker.stop() == 0
    broker.start()
    assert _describe(broker, BROKER, "")["num.partitions"]["value"] == "3"
    segment = _describe(broker, BROKER, "1")["log.segment.bytes"]
    assert (segment["value"], segment["config_source"]) == ("2097152", DYNAMIC_BROKER)
    # num.partitions applies to topics created later without a partition count.
    admin = _admin(broker)
    admin.create_topics([NewTopic("later")])["later"].result(WAIT)  # no partition count given
    assert len(admin.list_topics("later", timeout=WAIT).topics["later"].partitions) == 3
    # The file sits beside the partitions; no temporary file is left behind.
    assert (broker.data / "seglog-broker-configs.json").exists()
    assert not (broker.data / "seglog-broker-configs.json.tmp").exists()


def test_a_new_default_applies_to_existing_topics_at_once(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = make_broker(
        **{"internal.log.segment.bytes": "1024", "log.retention.check.interval.ms": "100"}
    )
    _create(broker, "events")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        producer.produce("events", value=b"x" * 400, key=str(i).encode())
        producer.flush(WAIT)
    consumer_config = {"bootstrap.servers": broker.bootstrap, "group.id": "dynamic-configs"}
    consumer = Consumer(consumer_config)
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("events", 0), timeout=WAIT)
        assert (low, high) == (0, 20)

        # message.max.bytes (max.message.bytes of every topic without an override).
        assert _incremental(broker, "", [("message.max.bytes", SET, "1000")]) == (0, None)
        failures: list[KafkaError] = []
        producer.produce(
            "events", value=b"y" * 2000, on_delivery=lambda err, msg: failures.append(err)
        )
        producer.flush(WAIT)
        assert [e.code() for e in failures] == [KafkaError.MSG_SIZE_TOO_LARGE]

        # log.retention.bytes: the next retention pass deletes the closed segments.
        assert _incremental(broker, "", [("log.retention.bytes", SET, "1")]) == (0, None)
        deadline = time.monotonic() + WAIT
        while True:
            low, high = consumer.get_watermark_offsets(TopicPartition("events", 0), timeout=WAIT)
            if low > 0 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert 0 < low <= high == 20
    finally:
        consumer.close()


def test_connection_limits_change_without_a_restart(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = make_broker()
    # Connections from 127.0.0.5 only, so that this test's own requests (from 127.0.0.1)
    # never count against the limit it sets.
    limit = ("max.connections.per.ip.overrides", SET, "127.0.0.5:1")
    assert _incremental(broker, "", [limit]) == (0, None)
    opened: list[socket.socket] = []
    try:
        opened += [connect(broker, "127.0.0.5"), connect(broker, "127.0.0.5")]
        assert api_versions(opened[0])
        assert closed_within(opened[1], WAIT), "a second connection from 127.0.0.5 is refused"
        assert _incremental(broker, "", [(limit[0], DELETE, None)]) == (0, None)
        opened.append(connect(broker, "127.0.0.5"))
        assert api_versions(opened[2]), "without the override a second connection is served"
    finally:
        for sock in opened:
            sock.close()
