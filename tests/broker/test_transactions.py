"""Transactions against a real broker with confluent-kafka: commit, abort,
consume-transform-produce, zombie fencing and a kill -9 mid-transaction."""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.protocol import ApiKey, decode_response, encode_request, error_codes
from seglog.records.builder import SimpleRecord, build_batch
from tests.broker.conftest import BrokerProcess


def _create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(timeout=10)


def _producer(bootstrap: str, txn_id: str, **extra: Any) -> Producer:
    config = {
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "transaction.timeout.ms": 60_000,
        "linger.ms": 5,
    }
    config.update(extra)
    return Producer(config)


def _read(
    bootstrap: str, topic: str, partitions: int = 1, *, committed: bool = True
) -> list[bytes]:
    """Every value a consumer of the isolation level sees, up to the end of each partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 20
    while len(at_end) < partitions and time.monotonic() < deadline:
        message = consumer.poll(0.1)
        if message is None:
            continue
        if message.error():
            if message.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition())
                continue
            raise KafkaException(message.error())
        values.append(message.value())
    consumer.close()
    assert len(at_end) == partitions, "the reader never reached the end"
    return values


def _committed_end(bootstrap: str, topic: str) -> int:
    """The offset a read_committed reader sees as the end (the LSO)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"probe-{uuid.uuid4()}",
            "isolation.level": "read_committed",
        }
    )
    _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    consumer.close()
    return int(high)


def test_committed_records_are_seen_once_and_aborted_never(
    broker: BrokerProcess, topic: str
) -> None:
    _create(broker.bootstrap, topic, 2)
    producer = _producer(broker.bootstrap, f"txn-{topic}")
    producer.init_transactions(10)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, f"c1-{i}".encode(), partition=i % 2)
    producer.commit_transaction(10)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, f"a-{i}".encode(), partition=i % 2)
    producer.flush(10)
    producer.abort_transaction(10)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"c2-{i}".encode(), partition=i % 2)
    producer.commit_transaction(10)
    seen = _read(broker.bootstrap, topic, 2)
    assert sorted(seen) == sorted(
        [f"c1-{i}".encode() for i in range(10)] + [f"c2-{i}".encode() for i in range(5)]
    )
    everything = _read(broker.bootstrap, topic, 2, committed=False)
    assert sum(v.startswith(b"a-") for v in everything) == 10


def test_an_open_transaction_is_invisible_until_it_commits(
    broker: BrokerProcess, topic: str
) -> None:
    _create(broker.bootstrap, topic)
    producer = _producer(broker.bootstrap, f"txn-{topic}")
    producer.init_transactions(10)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, f"v{i}".encode())
    producer.flush(10)
    assert _read(broker.bootstrap, topic) == []
    assert len(_read(broker.bootstrap, topic, committed=False)) == 3
    assert _committed_end(broker.bootstrap, topic) == 0
    producer.commit_transaction(10)
    assert _read(broker.bootstrap, topic) == [b"v0", b"v1", b"v2"]
    assert _committed_end(broker.bootstrap, topic) == 4  # three records and the marker


def test_a_zombie_producer_is_fenced(broker: BrokerProcess, topic: str) -> None:
    _create(broker.bootstrap, topic)
    txn_id = f"txn-{topic}"
    zombie = _producer(broker.bootstrap, txn_id)
    zombie.init_transactions(10)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie")
    zombie.flush(10)
    successor = _producer(broker.bootstrap, txn_id)
    successor.init_transactions(10)  # aborts the zombie's open transaction
    successor.begin_transaction()
    successor.produce(topic, b"successor")
    successor.commit_transaction(10)
    with pytest.raises(KafkaException) as failure:
        zombie.produce(topic, b"late")
        zombie.commit_transaction(10)
    assert failure.value.args[0].fatal() or failure.value.args[0].code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    )
    assert _read(broker.bootstrap, topic) == [b"successor"]


def _consume_transform_produce(
    bootstrap: str, source: str, sink: str, group: str, txn_id: str, count: int
) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([source])
    producer = _producer(bootstrap, txn_id)
    producer.init_transactions(10)
    done = 0
    deadline = time.monotonic() + 30
    while done < count and time.monotonic() < deadline:
        messages = consumer.consume(5, 0.5)
        messages = [m for m in messages if not m.error()]
        if not messages:
            continue
        producer.begin_transaction()
        for message in messages:
            producer.produce(sink, message.value().upper())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 10
        )
        producer.commit_transaction(10)
        done += len(messages)
    consumer.close()
    assert done == count


def test_consume_transform_produce_commits_offsets_with_the_output(
    broker: BrokerProcess, topic: str
) -> None:
    source, sink, group = f"{topic}-in", f"{topic}-out", f"{topic}-group"
    _create(broker.bootstrap, source)
    _create(broker.bootstrap, sink)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(12):
        plain.produce(source, f"m{i}".encode())
    plain.flush(10)
    _consume_transform_produce(broker.bootstrap, source, sink, group, f"txn-{topic}", 12)
    assert sorted(_read(broker.bootstrap, sink)) == sorted(f"M{i}".encode() for i in range(12))
    # The offsets were committed with the output, and only then.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    (committed,) = consumer.committed([TopicPartition(source, 0)], timeout=10)
    consumer.close()
    assert committed.offset == 12


def _request(broker: BrokerProcess, api: ApiKey, version: int, body: dict[str, Any]) -> Any:
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    try:
        payload = encode_request(api, version, 1, "txn-test", body)
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", _exactly(sock, 4))[0]
        _, response = decode_response(api, version, memoryview(_exactly(sock, size)))
    finally:
        sock.close()
    return response


def _offset_fetch(broker: BrokerProcess, group: str, topic: str, *, stable: bool) -> Any:
    """OffsetFetch v7 of partition 0: (error code, committed offset)."""
    body = {
        "group_id": group,
        "topics": [{"name": topic, "partition_indexes": [0]}],
        "require_stable": stable,
    }
    response = _request(broker, ApiKey.OFFSET_FETCH, 7, body)
    (partition,) = response["topics"][0]["partitions"]
    return partition["error_code"], partition["committed_offset"]


def _exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        assert chunk, "the broker closed the connection"
        out += chunk
    return out


def test_offsets_of_a_transaction_are_visible_only_after_its_commit(
    broker: BrokerProcess, topic: str
) -> None:
    group = f"{topic}-group"
    _create(broker.bootstrap, topic)
    producer = _producer(broker.bootstrap, f"txn-{topic}")
    producer.init_transactions(10)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    metadata = consumer.consumer_group_metadata()
    consumer.close()
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition(topic, 0, 7)], metadata, 10)
    assert _offset_fetch(broker, group, topic, stable=False) == (0, -1)
    unstable = error_codes.code_for("UNSTABLE_OFFSET_COMMIT")
    assert _offset_fetch(broker, group, topic, stable=True) == (unstable, -1)
    producer.abort_transaction(10)
    assert _offset_fetch(broker, group, topic, stable=True) == (0, -1)
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition(topic, 0, 9)], metadata, 10)
    producer.commit_transaction(10)
    assert _offset_fetch(broker, group, topic, stable=True) == (0, 9)


def test_a_transaction_timeout_above_the_maximum_is_refused(
    make_broker: Callable[..., BrokerProcess], topic: str
) -> None:
    broker = make_broker(**{"transaction.max.timeout.ms": "10000"})
    producer = _producer(broker.bootstrap, f"txn-{topic}", **{"transaction.timeout.ms": 20_000})
    with pytest.raises(KafkaException) as failure:
        producer.init_transactions(10)
    assert failure.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT


def test_transactions_are_described_and_listed(broker: BrokerProcess, topic: str) -> None:
    _create(broker.bootstrap, topic, 2)
    txn_id = f"txn-{topic}"
    producer = _producer(broker.bootstrap, txn_id)
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(topic, b"x", partition=1)
    producer.flush(10)
    (described, unknown) = _request(
        broker,
        ApiKey.DESCRIBE_TRANSACTIONS,
        0,
        {"transactional_ids": [txn_id, f"{txn_id}-unknown"]},
    )["transaction_states"]
    assert described["error_code"] == 0
    assert described["transaction_state"] == "Ongoing"
    assert described["transaction_timeout_ms"] == 60_000
    assert described["transaction_start_time_ms"] > 0
    assert described["topics"] == [{"topic": topic, "partitions": [1]}]
    assert unknown["error_code"] == error_codes.code_for("TRANSACTIONAL_ID_NOT_FOUND")
    pid = described["producer_id"]
    listed = _request(
        broker,
        ApiKey.LIST_TRANSACTIONS,
        1,
        {
            "state_filters": ["Ongoing", "Bogus"],
            "producer_id_filters": [pid],
            "duration_filter": -1,
        },
    )
    assert listed["unknown_state_filters"] == ["Bogus"]
    assert listed["transaction_states"] == [
        {"transactional_id": txn_id, "producer_id": pid, "transaction_state": "Ongoing"}
    ]
    producer.commit_transaction(10)
    listed = _request(
        broker,
        ApiKey.LIST_TRANSACTIONS,
        0,
        {"state_filters": ["Ongoing"], "producer_id_filters": [pid]},
    )
    assert listed["transaction_states"] == []


def test_transactional_data_goes_only_to_partitions_of_the_transaction(
    broker: BrokerProcess, topic: str
) -> None:
    _create(broker.bootstrap, topic, 2)
    txn_id = f"txn-{topic}"
    init = _request(
        broker,
        ApiKey.INIT_PRODUCER_ID,
        4,
        {"transactional_id": txn_id, "transaction_timeout_ms": 60_000},
    )
    pid, epoch = init["producer_id"], init["producer_epoch"]
    added = _request(
        broker,
        ApiKey.ADD_PARTITIONS_TO_TXN,
        3,
        {
            "v3_and_below_transactional_id": txn_id,
            "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
        },
    )
    assert added["results_by_topic_v3_and_below"][0]["results_by_partition"] == [
        {"partition_index": 0, "partition_error_code": 0}
    ]

    def produce(partition: int, producer_epoch: int) -> int:
        records = build_batch(
            [SimpleRecord(b"v", timestamp=int(time.time() * 1000))],
            producer_id=pid,
            producer_epoch=producer_epoch,
            base_sequence=0,
            is_transactional=True,
        )
        body = {
            "transactional_id": txn_id,
            "acks": -1,
            "timeout_ms": 5000,
            "topic_data": [
                {
                    "name": topic,
                    "partition_data": [{"index": partition, "records": records}],
                }
            ],
        }
        answer = _request(broker, ApiKey.PRODUCE, 9, body)
        return int(answer["responses"][0]["partition_responses"][0]["error_code"])

    # Partition 1 was never added: its data would hang the partition's LSO.
    assert produce(1, epoch) == error_codes.code_for("INVALID_TXN_STATE")
    assert produce(0, epoch - 1 if epoch else epoch + 5) == error_codes.code_for(
        "INVALID_PRODUCER_EPOCH"
    )
    assert produce(0, epoch) == 0
    assert _committed_end(broker.bootstrap, topic) == 0
