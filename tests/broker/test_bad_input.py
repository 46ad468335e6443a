"""Malformed, oversized and unsupported requests: a clear answer or a closed connection,
and the broker keeps serving everyone else."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from seglog.protocol import ApiKey, decode_response, encode_request, error_codes
from seglog.records.builder import SimpleRecord, build_batch
from tests.broker.clients.test_confluent_kafka import consume_all
from tests.broker.conftest import BrokerProcess

_OPEN: list[socket.socket] = []


@pytest.fixture(autouse=True)
def _close_sockets() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def connect(broker: BrokerProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    _OPEN.append(sock)
    return sock


def send_frame(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(struct.pack(">i", len(payload)) + payload)


def recv_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return out

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionError:
        return True


def still_serving(broker: BrokerProcess, topic: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, value=b"still here")
    assert producer.flush(10) == 0
    assert consume_all(broker.bootstrap, topic, 1)[0].value() == b"still here"


def test_oversized_frame_closes_only_that_connection(broker: BrokerProcess, topic: str) -> None:
    sock = connect(broker)
    sock.sendall(struct.pack(">i", 200 * 1024 * 1024))
    assert closed(sock)
    still_serving(broker, topic)


def test_garbage_closes_the_connection(broker: BrokerProcess, topic: str) -> None:
    sock = connect(broker)
    send_frame(sock, b"\x00\x03\x00\x09garbage that is not a request")
    assert closed(sock)
    still_serving(broker, topic)


def test_unknown_api_key_closes_the_connection(broker: BrokerProcess) -> None:
    sock = connect(broker)
    send_frame(sock, struct.pack(">hhih", 999, 0, 1, -1))
    assert closed(sock)


def test_api_versions_with_a_future_version_gets_the_supported_list(
    broker: BrokerProcess,
) -> None:
    sock = connect(broker)
    send_frame(sock, struct.pack(">hhih", ApiKey.API_VERSIONS, 99, 7, -1) + b"\x00")
    correlation, body = decode_response(ApiKey.API_VERSIONS, 0, memoryview(recv_frame(sock)))
    assert correlation == 7
    assert body["error_code"] == error_codes.code_for("UNSUPPORTED_VERSION")
    produce = next(k for k in body["api_keys"] if k["api_key"] == ApiKey.PRODUCE)
    assert (produce["min_version"], produce["max_version"]) == (0, 9)


def test_unsupported_version_of_another_api_closes(broker: BrokerProcess) -> None:
    sock = connect(broker)
    send_frame(sock, struct.pack(">hhih", ApiKey.FETCH, 1, 3, -1))
    assert closed(sock)


def _produce(sock: socket.socket, topic: str, records: bytes) -> dict:  # type: ignore[type-arg]
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 1000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }
    send_frame(sock, encode_request(ApiKey.PRODUCE, 9, 11, "test", body))
    _, response = decode_response(ApiKey.PRODUCE, 9, memoryview(recv_frame(sock)))
    return response["responses"][0]["partition_responses"][0]  # type: ignore[no-any-return]


def test_corrupt_batch_is_refused_with_corrupt_message(broker: BrokerProcess, topic: str) -> None:
    sock = connect(broker)
    good = build_batch([SimpleRecord(value=b"fine", timestamp=1_700_000_000_000)])
    assert _produce(sock, topic, good)["error_code"] == 0
    broken = bytearray(good)
    broken[-2] ^= 0xFF
    result = _produce(sock, topic, bytes(broken))
    assert result["error_code"] == error_codes.code_for("CORRUPT_MESSAGE")
    assert "CRC" in result["error_message"]
    # The same connection goes on working, and nothing of the bad batch was written.
    assert _produce(sock, topic, good)["base_offset"] == 1


def test_produce_to_missing_topic_without_auto_create(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker = make_broker(**{"auto.create.topics.enable": "false"})
    sock = connect(broker)
    good = build_batch([SimpleRecord(value=b"x", timestamp=1_700_000_000_000)])
    result = _produce(sock, "nowhere", good)
    assert result["error_code"] == error_codes.code_for("UNKNOWN_TOPIC_OR_PARTITION")


def test_client_vanishing_mid_request(broker: BrokerProcess, topic: str) -> None:
    for _ in range(5):
        sock = connect(broker)
        sock.sendall(struct.pack(">i", 1000) + b"\x00\x00\x00")
        sock.close()
    still_serving(broker, topic)


def test_fetch_out_of_range_answers_with_empty_records(broker: BrokerProcess, topic: str) -> None:
    sock = connect(broker)
    assert (
        _produce(sock, topic, build_batch([SimpleRecord(b"only", timestamp=1)]))["error_code"] == 0
    )
    body = {
        "max_wait_ms": 0,
        "min_bytes": 1,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": 0, "fetch_offset": 99, "partition_max_bytes": 1024}],
            }
        ],
        "forgotten_topics_data": [],
    }
    send_frame(sock, encode_request(ApiKey.FETCH, 12, 3, "test", body))
    _, response = decode_response(ApiKey.FETCH, 12, memoryview(recv_frame(sock)))
    partition = response["responses"][0]["partitions"][0]
    assert partition["error_code"] == error_codes.code_for("OFFSET_OUT_OF_RANGE")
    assert partition["high_watermark"] == 1
    # Null records make librdkafka fail to parse the response and retry in a loop.
    assert partition["records"] is not None and len(partition["records"]) == 0


def test_a_consumer_past_the_end_resets_to_earliest(broker: BrokerProcess, topic: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, value=b"first")
    assert producer.flush(10) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 42)])
        message = None
        deadline = time.monotonic() + 15
        while message is None and time.monotonic() < deadline:
            polled = consumer.poll(0.5)
            if polled is not None and polled.error() is None:
                message = polled
        assert message is not None and message.value() == b"first"
    finally:
        consumer.close()
