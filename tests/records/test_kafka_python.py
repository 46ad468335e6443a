"""Cross-checks against kafka-python, an independent implementation of the formats."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from seglog.records import legacy, log_entries
from seglog.records.builder import SimpleRecord, build_batch
from seglog.records.compression import Codec
from seglog.records.record import decode_entries, decode_records
from tests.records.strategies import records

TS = 1_700_000_000_000


@settings(max_examples=40)
@given(recs=records, codec=st.sampled_from(list(Codec)))
def test_kafka_python_reads_what_seglog_writes(recs: list[SimpleRecord], codec: Codec) -> None:
    theirs = DefaultRecordBatch(build_batch(recs, codec=codec, base_offset=7))
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs]
    assert got == [
        (7 + i, s.timestamp, s.key, s.value, [(h.key, h.value) for h in s.headers])
        for i, s in enumerate(recs)
    ]


@settings(max_examples=40)
@given(recs=records, codec=st.sampled_from(list(Codec)))
def test_seglog_reads_what_kafka_python_writes(recs: list[SimpleRecord], codec: Codec) -> None:
    builder = DefaultRecordBatchBuilder(2, int(codec), False, 5, 1, 0, 1 << 24)
    for i, s in enumerate(recs):
        builder.append(i, s.timestamp, s.key, s.value, [(h.key, h.value) for h in s.headers])
    data = bytes(builder.build())
    decoded = decode_records(data)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in decoded] == [
        (i, s.timestamp, s.key, s.value) for i, s in enumerate(recs)
    ]
    assert [r.headers for r in decoded] == [tuple(s.headers) for s in recs]
    entry = log_entries.read_entry(data)
    assert (entry.base_offset, entry.last_offset, entry.record_count) == (
        0,
        len(recs) - 1,
        len(recs),
    )


def _legacy(magic: int, codec: int, count: int, base: int = 0) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i in range(count):
        builder.append(i if codec and magic == 1 else base + i, TS + i, b"k%d" % i, b"v%d" % i)
    data = bytearray(builder.build())
    if codec:
        # A broker stores the wrapper under the absolute offset of its last message.
        data[0:8] = (base + count - 1).to_bytes(8, "big")
    return bytes(data)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2])
def test_legacy_message_sets(magic: int, codec: int) -> None:
    data = _legacy(magic, codec, 4, base=100)
    info = log_entries.scan(data).entries
    assert info[0].base_offset == 100 and info[-1].last_offset == 103
    assert sum(e.record_count for e in info) == 4
    recs = list(decode_entries(data))
    assert [r.key for r in recs] == [b"k0", b"k1", b"k2", b"k3"]
    if magic == 1 and codec == 0:
        assert [r.timestamp for r in recs] == [TS, TS + 1, TS + 2, TS + 3]
    converted = legacy.convert_to_v2(memoryview(data))
    again = list(decode_entries(converted))
    assert [(r.key, r.value) for r in again] == [(r.key, r.value) for r in recs]
    assert [r.timestamp for r in again] == [r.timestamp for r in recs]


def test_legacy_crc_is_checked() -> None:
    data = bytearray(_legacy(1, 0, 1))
    data[-1] ^= 0xFF
    from seglog.errors import CorruptRecordError

    with pytest.raises(CorruptRecordError):
        legacy.describe_entry(memoryview(data))
    assert log_entries.scan(bytes(data)).error is not None
