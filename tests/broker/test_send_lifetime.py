"""A Fetch answer carries its own topic's bytes, or the connection closes; never a hang.

A slow reader keeps a large Fetch answer pending in the broker's ``sendfile``
while the segment it reads is deleted (and its descriptor number could be
reused by a new topic's file) or cut short.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.protocol import ApiKey, decode_response, encode_request
from seglog.records import log_entries
from seglog.records.record import decode_entries
from tests.broker.conftest import BrokerProcess

FETCH_VERSION = 12
_VALUE_A = b"A" * 90
_VALUE_B = b"B" * 90


def _produce(broker: BrokerProcess, topic: str, value: bytes, count: int) -> None:
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.num.messages": 2000}
    )
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value=value)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(30) == 0


def _create(admin: AdminClient, topic: str) -> None:
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)


def _slow_fetch(broker: BrokerProcess, topic: str) -> tuple[socket.socket, int]:
    """Ask for 8 MiB of ``topic`` with a tiny receive buffer; read only the size prefix."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(20)  # a hang fails the test instead of wedging it
    sock.connect(("127.0.0.1", broker.port))
    body = {
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 8 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 8 << 20}],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    request = encode_request(ApiKey.FETCH, FETCH_VERSION, 1, "slow", body)
    sock.sendall(struct.pack(">i", len(request)) + request)
    prefix = _exactly(sock, 4)
    assert prefix is not None
    (size,) = struct.unpack(">i", prefix)
    return sock, size


def _exactly(sock: socket.socket, size: int) -> bytes | None:
    """``size`` bytes, or None when the broker closes the connection first."""
    out = bytearray()
    while len(out) < size:
        try:
            chunk = sock.recv(min(size - len(out), 1 << 20))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        out += chunk
    return bytes(out)


def _check_only_a(frame: bytes) -> int:
    """Every byte of the answer's records belongs to topic A; returns A's records seen."""
    _, response = decode_response(ApiKey.FETCH, FETCH_VERSION, memoryview(frame))
    records = bytes(response["responses"][0]["partitions"][0]["records"])
    assert _VALUE_B[:8] not in records, "topic B's bytes inside topic A's answer"
    scan = log_entries.scan(records)  # CRC-checked, whole batches only
    assert scan.entries, "no whole batch in the answer"
    whole = records[: scan.entries[-1].position + scan.entries[-1].size]
    values = [r.value for r in decode_entries(whole)]
    assert values and all(v == _VALUE_A for v in values)
    assert scan.entries[0].base_offset == 0
    # The tail after the last whole batch is the start of A's next batch.
    assert len(records) - len(whole) < scan.entries[0].size * 2
    return len(values)


def test_a_deleted_topic_is_sent_from_its_own_file(make_broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    broker = make_broker()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    _create(admin, "topic-a")
    _produce(broker, "topic-a", _VALUE_A, 80_000)

    sock, size = _slow_fetch(broker, "topic-a")
    with sock:
        assert size > 4 << 20
        admin.delete_topics(["topic-a"])["topic-a"].result(10)
        # New files now take the descriptor numbers topic A's segment freed.
        _create(admin, "topic-b")
        _produce(broker, "topic-b", _VALUE_B, 120_000)
        frame = _exactly(sock, size)
    if frame is not None:
        assert _check_only_a(frame) > 40_000
    assert broker.alive()


@pytest.mark.leaves_damaged_log_dir(
    "the live segment is truncated behind the broker's back; the broker is not restarted"
)
def test_a_file_cut_under_a_send_closes_the_connection(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker = make_broker()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    _create(admin, "topic-a")
    _produce(broker, "topic-a", _VALUE_A, 80_000)

    sock, size = _slow_fetch(broker, "topic-a")
    with sock:
        segment = broker.data / "topic-a-0" / f"{0:020d}.log"
        os.truncate(segment, 100_000)  # shorter than what has been sent already
        assert _exactly(sock, size) is None, "a short frame must end in a closed connection"
    assert broker.alive()
    # The broker still answers: a fresh read of what is left.
    sock, size = _slow_fetch(broker, "topic-a")
    sock.close()


def _open_files(broker: BrokerProcess, fragment: str) -> list[str]:
    assert broker.process is not None
    fds = Path(f"/proc/{broker.process.pid}/fd")
    found = []
    for fd in fds.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if fragment in target:
            found.append(target)
    return found


def test_a_reader_that_stops_reading_does_not_hold_files_for_ever(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker = make_broker(**{"connections.max.idle.ms": "500"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    _create(admin, "topic-a")
    _produce(broker, "topic-a", _VALUE_A, 80_000)

    sock, size = _slow_fetch(broker, "topic-a")
    with sock:
        admin.delete_topics(["topic-a"])["topic-a"].result(10)
        # The pending answer keeps the deleted segment open...
        assert any("(deleted)" in f for f in _open_files(broker, "topic-a"))
        # ...until the connection has made no progress for connections.max.idle.ms.
        deadline = time.monotonic() + 60
        while _open_files(broker, "topic-a") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _open_files(broker, "topic-a")
        assert _exactly(sock, size) is None, "the stalled answer ends in a closed connection"
    assert "a response has made no progress" in broker.log.read_text()
