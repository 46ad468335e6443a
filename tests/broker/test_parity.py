"""Kafka parity of Produce and the admin APIs, with real clients against a real broker.

Each test names what Kafka 4.x answers; seglog must answer the same.
"""

from __future__ import annotations

import re
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from seglog.protocol.api_keys import ApiKey
from seglog.protocol.headers import decode_response, encode_request
from seglog.records.builder import SimpleRecord, build_batch
from tests.broker.conftest import BrokerProcess


def _raw_produce(
    broker: BrokerProcess,
    topic: str,
    keys: list[bytes | None],
    timestamps: list[int] | None = None,
) -> dict[str, Any]:
    """One Produce v9 of one batch of records with ``keys``; the decoded answer."""
    now = int(time.time() * 1000)
    stamps = timestamps or [now] * len(keys)
    records = [SimpleRecord(b"value", key, stamp) for key, stamp in zip(keys, stamps, strict=True)]
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 10000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": build_batch(records)}]}
        ],
    }
    return _request(broker, ApiKey.PRODUCE, 9, body)


def _request(broker: BrokerProcess, api_key: int, version: int, body: dict[str, Any]) -> Any:
    """Send one request with seglog's own codec over a socket; the decoded answer."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(encode_request(api_key, version, 1, "parity-test", body, framed=True))
        size = struct.unpack(">i", _read(sock, 4))[0]
        return decode_response(api_key, version, _read(sock, size))[1]


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _create(broker: BrokerProcess, topic: str, partitions: int = 1, **config: str) -> None:
    admin = _admin(broker)
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(10)


def _deliver(
    broker: BrokerProcess, topic: str, messages: list[tuple[bytes | None, bytes]], **conf: Any
) -> list[tuple[bytes, KafkaError | None]]:
    """Produce ``messages`` (key, value) in one batch; each value with its delivery error."""
    reports: list[tuple[bytes, KafkaError | None]] = []
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "linger.ms": 1000,
            "batch.num.messages": len(messages),
            "message.send.max.retries": 3,
            **conf,
        }
    )
    for key, value in messages:
        producer.produce(
            topic,
            key=key,
            value=value,
            partition=0,
            on_delivery=lambda err, msg: reports.append((msg.value(), err)),
        )
    assert producer.flush(30) == 0
    return reports


def test_produce_names_each_unkeyed_record_of_a_compacted_batch(
    broker: BrokerProcess, topic: str
) -> None:
    """KIP-467: Kafka refuses the batch with one record error per unkeyed record, so that
    librdkafka fails those with INVALID_RECORD and the rest of the batch with
    _INVALID_DIFFERENT_RECORD (librdkafka's test 0011, variation 1)."""
    _create(broker, topic, **{"cleanup.policy": "compact"})
    messages = [(None if i % 10 == 0 else b"k%d" % i, b"v%d" % i) for i in range(100)]
    reports = _deliver(broker, topic, messages)
    codes = {value: err.code() if err else None for value, err in reports}
    assert len(codes) == 100
    for i in range(100):
        expected = (
            KafkaError.INVALID_RECORD if i % 10 == 0 else KafkaError._INVALID_DIFFERENT_RECORD
        )
        assert codes[b"v%d" % i] == expected, i


def test_produce_one_record_a_batch_fails_only_the_unkeyed(
    broker: BrokerProcess, topic: str
) -> None:
    """librdkafka's test 0011, variation 2: one record a batch, so exactly the 10 unkeyed
    records fail (INVALID_RECORD) and the other 90 are delivered."""
    _create(broker, topic, **{"cleanup.policy": "compact"})
    messages = [(None if i % 10 == 0 else b"k%d" % i, b"v%d" % i) for i in range(100)]
    reports = _deliver(broker, topic, messages, **{"batch.size": 1})
    failed = sorted(int(value[1:]) for value, err in reports if err is not None)
    assert failed == list(range(0, 100, 10))
    assert {err.code() for _, err in reports if err is not None} == {KafkaError.INVALID_RECORD}


def test_produce_record_errors_on_the_wire(broker: BrokerProcess, topic: str) -> None:
    """The Produce v9 answer itself, read by kafka-python: Kafka's LogValidator words."""
    _create(broker, topic, **{"cleanup.policy": "compact"})
    response = _raw_produce(broker, topic, [b"a", None, b"c", None])
    partition = response["responses"][0]["partition_responses"][0]
    assert partition["error_code"] == 87  # INVALID_RECORD
    assert partition["record_errors"] == [
        {
            "batch_index": 1,
            "batch_index_error_message": "Compacted topic cannot accept message without key "
            f"in topic partition {topic}-0",
        },
        {
            "batch_index": 3,
            "batch_index_error_message": "Compacted topic cannot accept message without key "
            f"in topic partition {topic}-0",
        },
    ]
    assert partition["error_message"].startswith(
        "One or more records have been rejected due to 2 record errors in total, and only "
        "showing the first three errors at most: [RecordError(batchIndex=1, message='Compacted"
    )


def test_produce_names_records_with_timestamps_out_of_range(
    broker: BrokerProcess, topic: str
) -> None:
    _create(broker, topic, **{"message.timestamp.before.max.ms": "60000"})
    now = int(time.time() * 1000)
    response = _raw_produce(
        broker, topic, [b"a", b"b", b"c"], timestamps=[now, now - 3_600_000, now]
    )
    partition = response["responses"][0]["partition_responses"][0]
    assert partition["error_code"] == 32  # INVALID_TIMESTAMP
    assert partition["error_message"] == (
        "One or more records have been rejected due to invalid timestamp"
    )
    [error] = partition["record_errors"]
    assert error["batch_index"] == 1
    assert error["batch_index_error_message"].startswith(
        f"Timestamp {now - 3_600_000} of message with offset 1 is out of range. "
        "The timestamp should be within ["
    )


def _node_id(admin: AdminClient) -> int:
    return int(admin.describe_cluster().result(10).nodes[0].id)


def _partitions(admin: AdminClient, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def test_create_topics_with_an_explicit_assignment_on_this_node(
    broker: BrokerProcess, topic: str
) -> None:
    """Kafka accepts an assignment naming live brokers and refuses any other with
    INVALID_REPLICA_ASSIGNMENT."""
    admin = _admin(broker)
    node = _node_id(admin)
    assigned = NewTopic(topic, 3, replica_assignment=[[node], [node], [node]])
    admin.create_topics([assigned])[topic].result(10)
    assert _partitions(admin, topic) == 3

    elsewhere = NewTopic(f"{topic}.x", 1, replica_assignment=[[node + 1]])
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([elsewhere])[f"{topic}.x"].result(10)
    error = refused.value.args[0]
    assert error.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert f"includes broker {node + 1}, but no such broker is registered" in error.str()

    twice = NewTopic(f"{topic}.y", 1, replica_assignment=[[node, node]])
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([twice])[f"{topic}.y"].result(10)
    assert refused.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT


def test_create_topics_kip_464_defaults_and_validate_only(
    broker: BrokerProcess, topic: str
) -> None:
    admin = _admin(broker)
    # -1 partitions and -1 replication factor: the broker's defaults.
    admin.create_topics([NewTopic(topic)])[topic].result(10)
    assert _partitions(admin, topic) == 1
    # validate_only checks everything and creates nothing.
    admin.create_topics([NewTopic(f"{topic}.v", 4, 1)], validate_only=True)[f"{topic}.v"].result(10)
    assert f"{topic}.v" not in admin.list_topics(timeout=10).topics
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic(topic, 4, 1)], validate_only=True)[topic].result(10)
    assert refused.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic(f"{topic}.r", 1, 3)], validate_only=True)[
            f"{topic}.r"
        ].result(10)
    assert refused.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert refused.value.args[0].str() == (
        "Unable to replicate the partition 3 time(s): The target replication factor of 3 "
        "cannot be reached because only 1 broker(s) are registered."
    )
    with pytest.raises(KafkaException) as refused:
        admin.create_topics(
            [NewTopic(f"{topic}.b", 1, 1, config={"segment.ms": "0"})], validate_only=True
        )[f"{topic}.b"].result(10)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG


def _topic_configs(admin: AdminClient, topic: str) -> dict[str, Any]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(10)  # type: ignore[no-any-return]


# confluent-kafka warns that AlterConfigs is deprecated; tools still send it.
alter_configs_is_deprecated = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@alter_configs_is_deprecated
def test_alter_configs_replaces_all_topic_overrides(broker: BrokerProcess, topic: str) -> None:
    """AlterConfigs (API 33): the overrides given replace all others, which fall back to
    their defaults (Kafka's legacyAlterConfigs)."""
    _create(broker, topic, **{"retention.ms": "1000", "segment.bytes": "2000000"})
    admin = _admin(broker)
    resource = ConfigResource(
        ConfigResource.Type.TOPIC, topic, set_config={"cleanup.policy": "compact"}
    )
    admin.alter_configs([resource])[resource].result(10)
    configs = _topic_configs(admin, topic)
    assert configs["cleanup.policy"].value == "compact"
    assert not configs["cleanup.policy"].is_default
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].is_default
    assert configs["segment.bytes"].is_default

    # validate_only changes nothing; a bad value is refused with Kafka's message.
    check = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"segment.ms": "5"})
    admin.alter_configs([check], validate_only=True)[check].result(10)
    assert _topic_configs(admin, topic)["segment.ms"].is_default
    bad = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"segment.ms": "0"})
    with pytest.raises(KafkaException) as refused:
        admin.alter_configs([bad])[bad].result(10)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert _topic_configs(admin, topic)["cleanup.policy"].value == "compact"


def test_alter_configs_with_kafka_python(broker: BrokerProcess, topic: str) -> None:
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    _create(broker, topic, **{"retention.ms": "1000"})
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        response = client.alter_configs(
            [KpResource(ConfigResourceType.TOPIC, topic, configs={"segment.ms": "60000"})],
            incremental=False,
        )
        assert response == {"topic": {topic: "OK"}}
    finally:
        client.close()
    configs = _topic_configs(_admin(broker), topic)
    assert configs["segment.ms"].value == "60000"
    # kafka-python sends the overrides it read back with the new one, to keep them.
    assert configs["retention.ms"].value == "1000"


@alter_configs_is_deprecated
def test_alter_configs_of_a_static_broker_setting_is_refused_clearly(
    broker: BrokerProcess,
) -> None:
    """A setting read at start only is refused with Kafka's error and message."""
    admin = _admin(broker)
    node = str(_node_id(admin))
    resource = ConfigResource(ConfigResource.Type.BROKER, node, set_config={"log.dirs": "/tmp/x"})
    with pytest.raises(KafkaException) as refused:
        admin.alter_configs([resource])[resource].result(10)
    assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert refused.value.args[0].str() == "Cannot update these configs dynamically: Set(log.dirs)"


def test_incremental_alter_configs_appends_to_a_list(broker: BrokerProcess, topic: str) -> None:
    """APPEND and SUBTRACT on a LIST config (librdkafka's test 0011 makes its topic compacted
    with APPEND cleanup.policy=compact); on any other type Kafka answers INVALID_CONFIG."""
    _create(broker, topic)
    admin = _admin(broker)

    def alter(op: AlterConfigOpType, name: str, value: str) -> None:
        entry = ConfigEntry(name, value, incremental_operation=op)
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
        admin.incremental_alter_configs([resource])[resource].result(10)

    alter(AlterConfigOpType.APPEND, "cleanup.policy", "compact")
    assert _topic_configs(admin, topic)["cleanup.policy"].value == "delete,compact"
    alter(AlterConfigOpType.SUBTRACT, "cleanup.policy", "delete")
    assert _topic_configs(admin, topic)["cleanup.policy"].value == "compact"
    with pytest.raises(KafkaException) as refused:
        alter(AlterConfigOpType.APPEND, "segment.ms", "5")
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert refused.value.args[0].str() == (
        "Can't APPEND to key segment.ms because its type is not LIST."
    )


def test_delete_records_on_a_compact_only_topic_is_a_policy_violation(
    broker: BrokerProcess, topic: str
) -> None:
    """Kafka refuses to move the log start of a log whose cleanup.policy lacks delete."""
    _create(broker, topic, **{"cleanup.policy": "compact"})
    _deliver(broker, topic, [(b"k%d" % i, b"v") for i in range(5)])
    admin = _admin(broker)
    [future] = admin.delete_records([TopicPartition(topic, 0, 3)]).values()
    with pytest.raises(KafkaException) as refused:
        future.result(10)
    assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION

    # compact,delete may be trimmed.
    _create(broker, f"{topic}.both", **{"cleanup.policy": "compact,delete"})
    _deliver(broker, f"{topic}.both", [(b"k%d" % i, b"v") for i in range(5)])
    [future] = admin.delete_records([TopicPartition(f"{topic}.both", 0, 3)]).values()
    assert future.result(10).low_watermark == 3


def test_segment_jitter_is_drawn_per_segment(broker: BrokerProcess, topic: str) -> None:
    """Kafka draws each segment's roll jitter in [0, min(segment.jitter.ms, segment.ms)):
    half way through segment.ms, about half of the partitions have rolled, not all."""
    partitions = 20
    _create(broker, topic, partitions, **{"segment.ms": "2000", "segment.jitter.ms": "2000"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for partition in range(partitions):
        producer.produce(topic, b"first", partition=partition)
    assert producer.flush(10) == 0
    time.sleep(1.0)
    for partition in range(partitions):
        producer.produce(topic, b"second", partition=partition)
    assert producer.flush(10) == 0
    rolled = sum(
        len(list((broker.data / f"{topic}-{p}").glob("*.log"))) > 1 for p in range(partitions)
    )
    # A roll needs a jitter above 1000 ms: each partition rolled with probability ~1/2.
    assert 2 <= rolled <= partitions - 2, rolled


def test_describe_configs_answers_each_values_source_and_synonyms(make_broker: Any) -> None:
    """Kafka's ConfigHelper: a topic override is TOPIC_CONFIG, a value set in the broker's
    properties STATIC_BROKER_CONFIG, anything else DEFAULT_CONFIG; the synonyms list the
    override, then the broker names given, then the broker defaults. (Schema Registry
    and Kafka Connect read cleanup.policy this way.)"""
    broker: BrokerProcess = make_broker(**{"log.segment.bytes": "2097152"})
    topic = "described"
    _create(broker, topic, **{"cleanup.policy": "compact"})
    configs = _topic_configs(_admin(broker), topic)
    policy = configs["cleanup.policy"]
    assert policy.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert [(s.name, s.value, s.source) for s in policy.synonyms.values()] == [
        ("cleanup.policy", "compact", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        ("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG.value),
    ]
    segment = configs["segment.bytes"]
    assert (segment.value, segment.source) == ("2097152", ConfigSource.STATIC_BROKER_CONFIG.value)
    # librdkafka keeps one synonym per name; the answer itself lists both.
    body = {
        "resources": [
            {"resource_type": 2, "resource_name": topic, "configuration_keys": ["segment.bytes"]}
        ],
        "include_synonyms": True,
        "include_documentation": False,
    }
    [result] = _request(broker, ApiKey.DESCRIBE_CONFIGS, 4, body)["results"]
    assert result["configs"][0]["synonyms"] == [
        {"name": "log.segment.bytes", "value": "2097152", "source": 4},
        {"name": "log.segment.bytes", "value": "1073741824", "source": 5},
    ]
    # log.retention.ms has no default of its own in Kafka: no synonyms, source default.
    retention = configs["retention.ms"]
    assert retention.source == ConfigSource.DEFAULT_CONFIG.value
    assert retention.synonyms == {}

    # The broker itself: what server.properties gave is static, the rest default.
    resource = ConfigResource(ConfigResource.Type.BROKER, str(_node_id(_admin(broker))))
    admin = _admin(broker)
    brokers = admin.describe_configs([resource])[resource].result(10)
    assert brokers["log.segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert brokers["log.cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value
    # Settings that may change at run time (KIP-226) are not read-only; the others are.
    assert not brokers["log.cleanup.policy"].is_read_only
    assert brokers["listeners"].is_read_only


def test_describe_configs_with_documentation(broker: BrokerProcess, topic: str) -> None:
    """include_documentation (v3+) answers each config's documentation and type."""
    _create(broker, topic)
    body = {
        "resources": [
            {"resource_type": 2, "resource_name": topic, "configuration_keys": ["segment.ms"]}
        ],
        "include_synonyms": True,
        "include_documentation": True,
    }
    [result] = _request(broker, ApiKey.DESCRIBE_CONFIGS, 4, body)["results"]
    [entry] = result["configs"]
    assert entry["name"] == "segment.ms"
    assert entry["config_type"] == 5  # LONG
    assert "segment" in entry["documentation"]
    assert entry["config_source"] == 5
    # log.roll.ms has no default of its own in Kafka (log.roll.hours gives it): none.
    assert entry["synonyms"] == []
    body["include_documentation"] = False
    [result] = _request(broker, ApiKey.DESCRIBE_CONFIGS, 4, body)["results"]
    assert result["configs"][0]["documentation"] is None


@pytest.fixture
def kafka_python_admin(broker: BrokerProcess) -> Iterator[Any]:
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield client
    client.close()


def test_describe_log_dirs(broker: BrokerProcess, topic: str, kafka_python_admin: Any) -> None:
    """One log directory; each partition's size on disk and offset lag 0 (no future replica)."""
    _create(broker, topic, 2)
    _deliver(broker, topic, [(b"k", b"v" * 100)])
    [answer] = kafka_python_admin.describe_log_dirs()
    [log_dir] = answer["log_dirs"]
    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"] == str(broker.data.resolve())
    assert log_dir["total_bytes"] > 0 and log_dir["usable_bytes"] > 0
    [mine] = [t for t in log_dir["topics"] if t["name"] == topic]
    sizes = {p["partition_index"]: p["partition_size"] for p in mine["partitions"]}
    assert sizes[0] == (broker.data / f"{topic}-0" / "00000000000000000000.log").stat().st_size
    assert sizes[0] > 100 and sizes[1] == 0
    assert {p["offset_lag"] for p in mine["partitions"]} == {0}


def test_alter_replica_log_dirs_is_refused_clearly(
    broker: BrokerProcess, topic: str, kafka_python_admin: Any
) -> None:
    """seglog has one log directory: any other is LOG_DIR_NOT_FOUND (Kafka's answer for a path
    outside log.dirs); the directory a replica is in already is a no-op."""
    from kafka.errors import LogDirNotFoundError, NoError
    from kafka.structs import TopicPartitionReplica

    _create(broker, topic)
    node = _node_id(_admin(broker))
    replica = TopicPartitionReplica(topic, 0, node)
    moved = kafka_python_admin.alter_replica_log_dirs({replica: "/elsewhere"})
    assert moved == {replica: LogDirNotFoundError}
    stayed = kafka_python_admin.alter_replica_log_dirs({replica: str(broker.data.resolve())})
    assert stayed == {replica: NoError}


def test_describe_producers(broker: BrokerProcess, topic: str, kafka_python_admin: Any) -> None:
    """The idempotent producers a partition remembers, with their last sequence."""
    from kafka import TopicPartition as KpTopicPartition

    _create(broker, topic)
    _deliver(broker, topic, [(b"k", b"v%d" % i) for i in range(5)], **{"enable.idempotence": True})
    partition = KpTopicPartition(topic, 0)
    states = kafka_python_admin.describe_producers([partition])
    [producer] = states[partition].active_producers
    assert producer.producer_id >= 0
    assert producer.producer_epoch == 0
    assert producer.last_sequence == 4
    assert producer.last_timestamp > 0
    assert producer.coordinator_epoch == -1
    assert producer.current_transaction_start_offset == -1


def test_describe_topic_partitions_pages_with_a_cursor(
    broker: BrokerProcess, topic: str, kafka_python_admin: Any
) -> None:
    """KIP-966: this node leads every partition and is its whole ISR; a page holds at most
    response_partition_limit partitions and names where the next one starts."""
    _create(broker, topic, 3)
    node = _node_id(_admin(broker))
    first = kafka_python_admin.describe_topic_partitions([topic], response_partition_limit=2)
    [described] = first["topics"]
    assert described["error_code"] == 0 and not described["is_internal"]
    # No authorizer: every topic operation (READ ... ALTER_CONFIGS) is authorized.
    assert described["topic_authorized_operations"] == 3576
    assert [p["partition_index"] for p in described["partitions"]] == [0, 1]
    assert {(p["leader_id"], tuple(p["isr_nodes"])) for p in described["partitions"]} == {
        (node, (node,))
    }
    assert first["next_cursor"] == {"topic_name": topic, "partition_index": 2}
    rest = kafka_python_admin.describe_topic_partitions(
        [topic], response_partition_limit=2, cursor=first["next_cursor"]
    )
    assert [p["partition_index"] for p in rest["topics"][0]["partitions"]] == [2]
    assert rest["next_cursor"] is None
    unknown = kafka_python_admin.describe_topic_partitions([f"{topic}.none"])
    assert unknown["topics"][0]["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_elect_leaders_is_never_needed(broker: BrokerProcess, topic: str) -> None:
    """The one replica is already the preferred leader: ELECTION_NOT_NEEDED, as Kafka."""
    from confluent_kafka import ElectionType

    _create(broker, topic)
    admin = _admin(broker)
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(10)
    [(partition, error)] = result.items()
    assert (partition.topic, partition.partition) == (topic, 0)
    assert error.code() == KafkaError.ELECTION_NOT_NEEDED
    missing = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition(topic, 5)]).result(10)
    assert [e.code() for e in missing.values()] == [KafkaError.UNKNOWN_TOPIC_OR_PART]


def test_partition_reassignments_on_one_node(
    broker: BrokerProcess, topic: str, kafka_python_admin: Any
) -> None:
    """No reassignment is ever in progress; a partition may only be "moved" to this node
    (a no-op), any other broker is INVALID_REPLICA_ASSIGNMENT, a cancellation
    NO_REASSIGNMENT_IN_PROGRESS."""
    from kafka import TopicPartition as KpTopicPartition
    from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError

    _create(broker, topic, 2)
    node = _node_id(_admin(broker))
    assert kafka_python_admin.list_partition_reassignments() == {}
    zero, one = KpTopicPartition(topic, 0), KpTopicPartition(topic, 1)
    answer = kafka_python_admin.alter_partition_reassignments({zero: [node], one: [node + 1]})
    assert answer[zero] is None
    assert answer[one] is InvalidReplicationAssignmentError
    cancelled = kafka_python_admin.alter_partition_reassignments({zero: None})
    assert cancelled[zero] is NoReassignmentInProgressError


def test_the_docs_list_every_api_served(broker: BrokerProcess) -> None:
    """docs/compatibility.md's API table names every API and versions ApiVersions advertises."""
    readme = (Path(__file__).parents[2] / "docs" / "compatibility.md").read_text(encoding="utf-8")
    table = {}
    for line in readme.splitlines():
        match = re.fullmatch(r"\| \w+ \((\d+)\) \| (\d+)(?:-(\d+))? \| .+ \|", line)
        if match:
            low = int(match.group(2))
            table[int(match.group(1))] = (low, int(match.group(3) or low))
    body = {"client_software_name": "parity", "client_software_version": "1"}
    answer = _request(broker, ApiKey.API_VERSIONS, 3, body)
    advertised = {e["api_key"]: (e["min_version"], e["max_version"]) for e in answer["api_keys"]}
    assert table == advertised


def _alter_quotas(broker: BrokerProcess, entity: dict[str, str | None], **values: float) -> Any:
    body = {
        "entries": [
            {
                "entity": [{"entity_type": k, "entity_name": v} for k, v in entity.items()],
                "ops": [{"key": k, "value": v, "remove": False} for k, v in values.items()],
            }
        ],
        "validate_only": False,
    }
    return _request(broker, ApiKey.ALTER_CLIENT_QUOTAS, 1, body)["entries"]


def _describe_quotas(broker: BrokerProcess, kind: str, match: str | None) -> Any:
    body = {
        "components": [{"entity_type": kind, "match_type": 0, "match": match}],
        "strict": False,
    }
    return _request(broker, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, body)


def test_client_quotas_are_kept_and_described(make_broker: Any) -> None:
    """AlterClientQuotas and DescribeClientQuotas (no Python client has them: seglog's own
    codec sends them); the settings survive a restart, as Kafka's quota records do."""
    broker: BrokerProcess = make_broker()
    [ok] = _alter_quotas(broker, {"client-id": "app"}, producer_byte_rate=1024.0)
    assert ok["error_code"] == 0
    [bad] = _alter_quotas(broker, {"client-id": "app"}, producer_byte_rate=1.5)
    assert (bad["error_code"], bad["error_message"]) == (
        42,
        "producer_byte_rate cannot be a fractional value.",
    )
    [bad] = _alter_quotas(broker, {"user": "u"}, bogus_rate=1.0)
    assert bad["error_message"] == "Invalid configuration key bogus_rate"
    broker.stop()
    broker.start()
    answer = _describe_quotas(broker, "client-id", "app")
    assert answer["error_code"] == 0
    assert answer["entries"] == [
        {
            "entity": [{"entity_type": "client-id", "entity_name": "app"}],
            "values": [{"key": "producer_byte_rate", "value": 1024.0}],
        }
    ]
    assert _describe_quotas(broker, "user", "someone")["entries"] == []


def test_produce_byte_rate_quota_delays_the_answer(make_broker: Any) -> None:
    """KIP-13: past its producer_byte_rate a client is throttled for (rate - quota) / quota
    times the measuring window (at least ten 1-second windows): 110 kB against 10 kB/s is
    a rate of about 11 kB/s, so about one second. librdkafka reports the throttle time;
    another client id is not throttled."""
    broker: BrokerProcess = make_broker()
    topic = "quoted"
    _create(broker, topic, **{"max.message.bytes": "1000000"})
    _alter_quotas(broker, {"client-id": "slow"}, producer_byte_rate=10_000.0)
    throttles: list[float] = []

    def produce(client_id: str) -> float:
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "client.id": client_id,
                "throttle_cb": lambda event: throttles.append(event.throttle_time),
                "linger.ms": 0,
            }
        )
        began = time.monotonic()
        producer.produce(topic, b"x" * 110_000, partition=0)
        assert producer.flush(30) == 0
        producer.poll(0)
        return time.monotonic() - began

    assert produce("fast") < 0.8
    assert throttles == []
    took = produce("slow")
    assert len(throttles) == 1 and 0.5 < throttles[0] < 1.5, throttles
    assert took >= throttles[0]


def test_request_percentage_quota_throttles_every_request(make_broker: Any) -> None:
    """KIP-124: a request quota far below one request's time throttles each request, by at
    most one quota window (1 s), and the answer says so in throttle_time_ms."""
    broker: BrokerProcess = make_broker()
    _alter_quotas(broker, {"client-id": "parity-test"}, request_percentage=0.0001)
    began = time.monotonic()
    answer = _request(
        broker, ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False}
    )
    assert 0 < answer["throttle_time_ms"] <= 1000
    assert time.monotonic() - began >= answer["throttle_time_ms"] / 1000


def test_consumer_byte_rate_quota_throttles_fetches(make_broker: Any) -> None:
    """consumer_byte_rate counts Fetch answer bytes: 110 kB against 10 kB/s is about one
    second of throttle, reported to librdkafka's consumer."""
    from confluent_kafka import Consumer

    broker: BrokerProcess = make_broker()
    topic = "fetched"
    _create(broker, topic, **{"max.message.bytes": "1000000"})
    _deliver(broker, topic, [(b"k", b"x" * 110_000)])
    _alter_quotas(broker, {"client-id": "reader"}, consumer_byte_rate=10_000.0)
    throttles: list[float] = []
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": "reader",
            "group.id": "readers",
            "auto.offset.reset": "earliest",
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 20
        message = None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
        assert message is not None and message.error() is None
        while not throttles and time.monotonic() < deadline:
            consumer.poll(0.2)
    finally:
        consumer.close()
    assert throttles and 0.5 < max(throttles) < 1.5, throttles


def test_every_confluent_admin_call(broker: BrokerProcess, topic: str) -> None:
    """confluent-kafka's AdminClient, every call it has, against seglog; each line says what a
    one-node Kafka 4 cluster answers, and seglog must answer the same (or, where noted, how
    it differs)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, ElectionType, TopicCollection
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        NewPartitions,
        OffsetSpec,
        ResourcePatternType,
        ResourceType,
    )

    admin = _admin(broker)
    node = _node_id(admin)
    group = f"{topic}.group"
    # CreateTopics: created, 2 partitions.
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)
    # Metadata / DescribeTopics: this node leads each partition and is its ISR.
    described = admin.describe_topics(TopicCollection([topic]))[topic].result(10)
    assert [(p.leader.id, [r.id for r in p.isr]) for p in described.partitions] == [
        (node, [node]),
        (node, [node]),
    ]
    # DescribeCluster: one node, which is also the controller.
    cluster = admin.describe_cluster().result(10)
    assert [n.id for n in cluster.nodes] == [node] and cluster.controller.id == node
    # CreatePartitions: grown to 3.
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(10)
    assert _partitions(admin, topic) == 3
    # ListOffsets: the latest offset of an empty partition is 0.
    [latest] = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest()}).values()
    assert latest.result(10).offset == 0
    # DeleteRecords: the low watermark moves to the offset given.
    [deleted] = admin.delete_records([TopicPartition(topic, 0, 0)]).values()
    assert deleted.result(10).low_watermark == 0
    # ElectLeaders: ELECTION_NOT_NEEDED, the one replica leads already.
    elected = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(10)
    assert [e.code() for e in elected.values()] == [KafkaError.ELECTION_NOT_NEEDED]
    # DescribeConfigs / AlterConfigs / IncrementalAlterConfigs: covered above.
    assert _topic_configs(admin, topic)["cleanup.policy"].value == "delete"
    # OffsetCommit (alter_consumer_group_offsets) for a group without members, then
    # OffsetFetch, ListGroups, DescribeGroups and DeleteGroups.
    offsets = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 0)])]
    admin.alter_consumer_group_offsets(offsets)[group].result(10)
    fetched = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    assert [p.offset for p in fetched[group].result(10).topic_partitions] == [0]
    listed = admin.list_consumer_groups().result(10).valid
    assert group in {g.group_id for g in listed}
    assert admin.describe_consumer_groups([group])[group].result(10).members == []
    admin.delete_consumer_groups([group])[group].result(10)
    # ACLs: Kafka without an authorizer answers SECURITY_DISABLED to each call.
    no_acls = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    # (librdkafka drops DescribeAcls' top-level error and answers an empty list, as it does
    # against Kafka; the answer itself carries SECURITY_DISABLED.)
    assert admin.describe_acls(no_acls).result(10) == []
    described_acls = _request(
        broker,
        ApiKey.DESCRIBE_ACLS,
        3,
        {
            "resource_type_filter": 1,
            "resource_name_filter": None,
            "pattern_type_filter": 1,
            "principal_filter": None,
            "host_filter": None,
            "operation": 1,
            "permission_type": 1,
        },
    )
    assert described_acls["error_code"] == 54  # SECURITY_DISABLED
    binding = AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        "User:x",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    [created] = admin.create_acls([binding]).values()
    with pytest.raises(KafkaException) as refused:
        created.result(10)
    assert refused.value.args[0].code() == KafkaError.SECURITY_DISABLED
    [deleted_acls] = admin.delete_acls([no_acls]).values()
    with pytest.raises(KafkaException) as refused:
        deleted_acls.result(10)
    assert refused.value.args[0].code() == KafkaError.SECURITY_DISABLED
    # DeleteTopics: gone.
    admin.delete_topics([topic])[topic].result(10)
    assert topic not in admin.list_topics(timeout=10).topics


def test_create_partitions_checks_assignments_and_validate_only(
    broker: BrokerProcess, topic: str
) -> None:
    """Kafka checks an explicit assignment of the new partitions (one list per new partition,
    registered brokers, the topic's replication factor) and makes every check with
    validate_only, creating nothing."""
    from confluent_kafka.admin import NewPartitions

    _create(broker, topic)
    admin = _admin(broker)
    node = _node_id(admin)

    def grow(count: int, assignment: list[list[int]] | None = None, **kwargs: Any) -> None:
        if assignment is None:
            request = NewPartitions(topic, count)
        else:
            request = NewPartitions(topic, count, replica_assignment=assignment)
        admin.create_partitions([request], **kwargs)[topic].result(10)

    with pytest.raises(KafkaException) as refused:
        grow(3, [[node + 1], [node + 1]])
    assert refused.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    # librdkafka checks the number of lists itself; the broker's answer, sent directly:
    body = {
        "topics": [{"name": topic, "count": 3, "assignments": [{"broker_ids": [node]}]}],
        "timeout_ms": 10000,
        "validate_only": False,
    }
    [result] = _request(broker, ApiKey.CREATE_PARTITIONS, 3, body)["results"]
    assert result["error_message"] == (
        "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."
    )
    with pytest.raises(KafkaException) as refused:
        grow(3, [[node + 1], [node + 1]], validate_only=True)
    assert refused.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    body["topics"][0].update(count=1, assignments=None)
    body["validate_only"] = True
    [result] = _request(broker, ApiKey.CREATE_PARTITIONS, 3, body)["results"]
    assert result["error_message"] == "Topic already has 1 partition(s)."
    grow(4, validate_only=True)
    assert _partitions(admin, topic) == 1
    grow(3, [[node], [node]])
    assert _partitions(admin, topic) == 3
