"""Idempotent produce over the wire: retries answered with the original offsets,
out-of-order sequences and fenced epochs refused, state kept across restarts."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer

from seglog.protocol import ApiKey, decode_response, encode_request, error_codes
from seglog.records.builder import SimpleRecord, build_batch
from tests.broker.clients.test_confluent_kafka import consume_all
from tests.broker.conftest import BrokerProcess
from tests.broker.test_bad_input import (  # noqa: F401 (the fixture is used by name)
    _close_sockets,
    connect,
    recv_frame,
    send_frame,
)

# The sockets ``connect`` opens are closed by test_bad_input's fixture.
pytestmark = pytest.mark.usefixtures("_close_sockets")


def _call(sock: socket.socket, api: ApiKey, version: int, body: dict[str, Any]) -> Any:
    send_frame(sock, encode_request(api, version, 5, "idempotence-test", body))
    _, response = decode_response(api, version, memoryview(recv_frame(sock)))
    return response


def _init_producer_id(sock: socket.socket) -> tuple[int, int]:
    response = _call(
        sock,
        ApiKey.INIT_PRODUCER_ID,
        4,
        {
            "transactional_id": None,
            "transaction_timeout_ms": 60_000,
            "producer_id": -1,
            "producer_epoch": -1,
        },
    )
    assert response["error_code"] == 0
    return response["producer_id"], response["producer_epoch"]


def _batch(pid: int, epoch: int, sequence: int, count: int = 3) -> bytes:
    now = int(time.time() * 1000)
    return build_batch(
        [SimpleRecord(f"seq-{sequence + i}".encode(), timestamp=now) for i in range(count)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
    )


def _produce(sock: socket.socket, topic: str, records: bytes) -> Any:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }
    response = _call(sock, ApiKey.PRODUCE, 9, body)
    return response["responses"][0]["partition_responses"][0]


def _log_end(sock: socket.socket, topic: str) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }
    response = _call(sock, ApiKey.LIST_OFFSETS, 7, body)
    partition = response["topics"][0]["partitions"][0]
    assert partition["error_code"] == 0
    return int(partition["offset"])


def test_a_retry_gets_the_original_offsets(broker: BrokerProcess, topic: str) -> None:
    sock = connect(broker)
    pid, epoch = _init_producer_id(sock)
    assert _produce(sock, topic, _batch(pid, epoch, 0))["base_offset"] == 0
    assert _produce(sock, topic, _batch(pid, epoch, 3))["base_offset"] == 3
    for sequence, offset in ((0, 0), (3, 3)):
        retry = _produce(sock, topic, _batch(pid, epoch, sequence))
        assert (retry["error_code"], retry["base_offset"]) == (0, offset)
    assert _log_end(sock, topic) == 6
    assert [m.value() for m in consume_all(broker.bootstrap, topic, 6)] == [
        f"seq-{i}".encode() for i in range(6)
    ]


def test_a_gap_in_the_sequence_is_refused(broker: BrokerProcess, topic: str) -> None:
    sock = connect(broker)
    pid, epoch = _init_producer_id(sock)
    _produce(sock, topic, _batch(pid, epoch, 0))
    refused = _produce(sock, topic, _batch(pid, epoch, 7))
    assert refused["error_code"] == error_codes.code_for("OUT_OF_ORDER_SEQUENCE_NUMBER")
    assert _log_end(sock, topic) == 3
    assert _produce(sock, topic, _batch(pid, epoch, 3))["error_code"] == 0


def test_a_fenced_epoch_is_refused(broker: BrokerProcess, topic: str) -> None:
    sock = connect(broker)
    pid, _ = _init_producer_id(sock)
    _produce(sock, topic, _batch(pid, 2, 0))
    refused = _produce(sock, topic, _batch(pid, 1, 3))
    assert refused["error_code"] == error_codes.code_for("INVALID_PRODUCER_EPOCH")
    assert _log_end(sock, topic) == 3


def test_produce_v3_and_later_takes_one_batch_per_partition(
    broker: BrokerProcess, topic: str
) -> None:
    sock = connect(broker)
    two = _batch(-1, -1, -1, 1) + _batch(-1, -1, -1, 1)
    refused = _produce(sock, topic, two)
    assert refused["error_code"] == error_codes.code_for("INVALID_RECORD")


def test_confluent_kafka_idempotent_producer_writes_each_message_once(
    broker: BrokerProcess, topic: str
) -> None:
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "batch.num.messages": 50,
        }
    )
    for i in range(2000):
        producer.produce(topic, value=b"m%d" % i)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    values = [m.value() for m in consume_all(broker.bootstrap, topic, 2000)]
    assert values == [b"m%d" % i for i in range(2000)]


@pytest.mark.parametrize("stop", ["clean", "kill"])
def test_producer_state_survives_a_restart(
    make_broker: Callable[..., BrokerProcess], stop: str
) -> None:
    broker = make_broker(**{"log.flush.interval.messages": "1"})
    topic = "restarted"
    sock = connect(broker)
    pid, epoch = _init_producer_id(sock)
    for sequence in (0, 3, 6):
        assert _produce(sock, topic, _batch(pid, epoch, sequence))["error_code"] == 0
    sock.close()
    if stop == "clean":
        assert broker.stop() == 0
    else:
        broker.kill()
    broker.start()
    sock = connect(broker)
    retry = _produce(sock, topic, _batch(pid, epoch, 6))
    assert (retry["error_code"], retry["base_offset"]) == (0, 6)
    gap = _produce(sock, topic, _batch(pid, epoch, 12))
    assert gap["error_code"] == error_codes.code_for("OUT_OF_ORDER_SEQUENCE_NUMBER")
    assert _produce(sock, topic, _batch(pid, epoch, 9))["base_offset"] == 9
    assert _log_end(sock, topic) == 12
