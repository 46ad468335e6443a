"""CLI fixtures: a partition written the way a Kafka broker writes it, by an independent encoder."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

# The real broker of tests/broker (a `python -m seglog serve` subprocess on a free port)
# for the client commands' tests: `broker` (one per session), `make_broker`, `topic`.
from tests.broker.conftest import broker, make_broker, topic

__all__ = ["broker", "make_broker", "topic"]

BASE = 1000
TS = 1_700_000_000_000


def _kafka_batch(base_offset: int, values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for i, value in enumerate(values):
        builder.append(i, TS + base_offset + i, b"key%d" % (base_offset + i), value, [("h", b"v")])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)  # the broker patches the base offset
    return bytes(data)


@pytest.fixture
def kafka_partition(tmp_path: Path) -> Path:
    """``orders-0`` with one segment at base 1000 and the indexes Kafka would write."""
    directory = tmp_path / "orders-0"
    directory.mkdir()
    log = bytearray()
    index = bytearray()
    tindex = bytearray()
    offset = BASE
    since_index = 0
    max_ts = -1
    for n in range(20):
        data = _kafka_batch(offset, [b"value-%d-%d" % (n, i) + b"." * 300 for i in range(3)])
        last = offset + 2
        batch_max = TS + last
        if batch_max > max_ts:
            max_ts = batch_max
        if since_index > 4096:
            index += struct.pack(">ii", last - BASE, len(log))
            tindex += struct.pack(">qi", max_ts, last - BASE)
            since_index = 0
        since_index += len(data)
        log += data
        offset = last + 1
    tindex += struct.pack(">qi", max_ts, offset - 1 - BASE)
    name = f"{BASE:020d}"
    (directory / f"{name}.log").write_bytes(bytes(log))
    (directory / f"{name}.index").write_bytes(bytes(index))
    (directory / f"{name}.timeindex").write_bytes(bytes(tindex))
    return directory


@pytest.fixture
def legacy_segment(tmp_path: Path) -> Path:
    """A segment of magic-1 messages, as Kafka 0.10 wrote them."""
    directory = tmp_path / "old-0"
    directory.mkdir()
    out = bytearray()
    for i in range(5):
        builder = LegacyRecordBatchBuilder(1, 0, 1 << 20)
        builder.append(i, TS + i, b"k%d" % i, b"legacy-%d" % i)
        out += builder.build()
    path = directory / f"{0:020d}.log"
    path.write_bytes(bytes(out))
    return path
