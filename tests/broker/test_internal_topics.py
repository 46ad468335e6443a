"""Internal topics: clients cannot append to them, and an unreadable record in
``__consumer_offsets`` costs only that record, never every group."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from seglog.coordinator.offset_store import (
    TOPIC,
    CommittedOffset,
    offset_key,
    offset_value,
    partition_for,
)
from seglog.protocol import error_codes
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage.log_dir import LogDir
from tests.broker.conftest import BrokerProcess
from tests.broker.test_bad_input import _produce as _produce_on

TS = 1_700_000_000_000
INVALID_TOPIC = error_codes.code_for("INVALID_TOPIC_EXCEPTION")


def _produce(broker: BrokerProcess, topic: str, records: bytes) -> dict[str, Any]:
    """A raw Produce v9 of ``records`` to partition 0; its partition answer."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        return _produce_on(sock, topic, records)


def _consumer(broker: BrokerProcess, group: str) -> Any:
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
        }
    )


def _commit(broker: BrokerProcess, group: str, topic: str, offset: int) -> None:
    # The topic must exist for a commit to be accepted.
    assert _produce(broker, topic, build_batch([SimpleRecord(b"x")]))["error_code"] == 0
    consumer = _consumer(broker, group)
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def _committed(broker: BrokerProcess, group: str, topic: str) -> int:
    consumer = _consumer(broker, group)
    try:
        (found,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
    finally:
        consumer.close()
    assert found.error is None, found.error
    return int(found.offset)


def test_a_client_cannot_produce_to_consumer_offsets(make_broker: Any, topic: str) -> None:
    broker: BrokerProcess = make_broker()
    record = build_batch([SimpleRecord(b"value", b"\x00\x07not a key", TS)])
    # Before any group exists the topic is absent, and a Produce does not create it.
    assert _produce(broker, TOPIC, record)["error_code"] == error_codes.code_for(
        "UNKNOWN_TOPIC_OR_PARTITION"
    )
    _commit(broker, "g", topic, 5)  # the coordinator creates the topic
    result = _produce(broker, TOPIC, record)
    assert result["error_code"] == INVALID_TOPIC
    assert result["error_message"] == f"Cannot append to internal topic {TOPIC}"
    assert result["base_offset"] == -1

    failures: list[KafkaError] = []
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "retries": 0, "message.timeout.ms": 10_000}
    )
    producer.produce(
        TOPIC, key=b"\x00\x07x", value=b"v", on_delivery=lambda err, _: failures.append(err)
    )
    assert producer.flush(15) == 0
    assert [f.code() for f in failures] == [KafkaError.TOPIC_EXCEPTION]
    assert _committed(broker, "g", topic) == 5
    assert broker.stop() == 0
    with LogDir.open(broker.data) as log_dir:
        assert log_dir.log(TOPIC, partition_for("g", 50)).log_end_offset == 1


def _write_unreadable_records(data: Path, group: str) -> None:
    """Records the loader cannot read, in the group's partition and another one."""
    good_value = offset_value(CommittedOffset(99, "", TS))
    unreadable = [
        (b"\x00\x01\x00\x02\xff\xfe\x00\x01t\x00\x00\x00\x00", good_value),  # not UTF-8
        (b"\x00\x07" + offset_key(group, "t", 0)[2:], good_value),  # unknown key version
        (offset_key(group, "elsewhere", 0)[:-2], good_value),  # key cut short
        (offset_key(group, "elsewhere", 0), good_value[:-1]),  # value cut short
        (offset_key(group, "elsewhere", 0), b"\x00\x63" + good_value[2:]),  # value version 99
    ]
    with LogDir.open(data) as log_dir:
        for partition in {partition_for(group, 50), (partition_for(group, 50) + 1) % 50}:
            batch = build_batch([SimpleRecord(value, key, TS) for key, value in unreadable])
            log_dir.log(TOPIC, partition).append(batch)


def test_unreadable_records_do_not_stop_the_groups_from_loading(
    make_broker: Any, topic: str
) -> None:
    broker: BrokerProcess = make_broker()
    _commit(broker, "g", topic, 7)
    _commit(broker, "other", topic, 3)
    assert broker.stop() == 0
    # The broker refuses them from clients; a disk, a bug or a newer Kafka may not.
    _write_unreadable_records(broker.data, "g")
    broker.start()
    assert _committed(broker, "g", topic) == 7
    assert _committed(broker, "other", topic) == 3
    _commit(broker, "g", topic, 8)
    assert _committed(broker, "g", topic) == 8
    assert broker.stop() == 0
    log = broker.log.read_text()
    assert f"skipping the unreadable record at offset 1 of {TOPIC}-{partition_for('g', 50)}" in log
    assert "skipped 10 unreadable records" in log
    broker.start()  # and again, after compaction may have run: still loads
    assert _committed(broker, "g", topic) == 8


def test_raw_produce_to_every_internal_topic_name_is_refused(make_broker: Any) -> None:
    broker: BrokerProcess = make_broker()
    record = build_batch([SimpleRecord(b"v", b"k", TS)])
    for name in ("__transaction_state", "__share_group_state"):
        assert _produce(broker, name, record)["error_code"] == error_codes.code_for(
            "UNKNOWN_TOPIC_OR_PARTITION"
        )
    assert not list(broker.data.glob("__*")), "a Produce created an internal topic"


def test_only_the_coordinator_creates_consumer_offsets(make_broker: Any, topic: str) -> None:
    broker: BrokerProcess = make_broker(**{"offsets.topic.num.partitions": "3"})
    # A producer's Metadata requests ask for auto-creation: refused for internal topics.
    producer = Producer({"bootstrap.servers": broker.bootstrap, "allow.auto.create.topics": True})
    for name in (TOPIC, "__share_group_state"):
        producer.list_topics(name, timeout=10)
    found = producer.list_topics(timeout=10).topics
    del producer
    assert TOPIC not in found and "__share_group_state" not in found
    # The group coordinator creates it, with its settings, on the first commit.
    _commit(broker, "g", topic, 1)
    assert broker.stop() == 0
    with LogDir.open(broker.data) as log_dir:
        assert log_dir.topic_config(TOPIC).compact
        assert log_dir.topics()[TOPIC].partitions == 3
        assert "__share_group_state" not in log_dir.topics()
