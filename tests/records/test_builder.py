"""Building v2 batches: golden bytes, kafka-python reading them, offsets, horizons, limits."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords

from seglog.errors import InvalidRecordError
from seglog.records import batch
from seglog.records.builder import SimpleRecord, as_simple_record, build_batch, rebuild_batch
from seglog.records.compression import Codec
from seglog.records.record import Header, Record, decode_records
from tests.records.format_doc import worked_examples
from tests.records.strategies import codecs, header_pairs, offset_deltas, records, wide_records

TS = 1_700_000_000_000


def test_golden_transactional_batch_with_headers_and_gaps() -> None:
    """Two records at offset deltas 0 and 2 (a gap), one a tombstone with a null key."""
    first = (
        b"\x00"  # attributes
        + b"\x00"  # timestamp delta 0
        + b"\x00"  # offset delta 0
        + b"\x02a"  # key "a"
        + b"\x02b"  # value "b"
        + b"\x04"  # 2 headers
        + b"\x02h"
        + b"\x02v"  # h = v
        + b"\x04h2"
        + b"\x01"  # h2 = null
    )
    second = (
        b"\x00"
        + b"\xd0\x0f"  # timestamp delta 1000 (zigzag 2000)
        + b"\x04"  # offset delta 2
        + b"\x01"  # null key
        + b"\x01"  # null value: a tombstone
        + b"\x00"
    )
    records_block = bytes([2 * len(first)]) + first + bytes([2 * len(second)]) + second
    attributes = 0x10  # transactional
    covered = struct.pack(">hiqqqhii", attributes, 2, TS, TS + 1000, 99, 3, 17, 2) + records_block
    expected = struct.pack(">qiibI", 500, 9 + len(covered), 4, 2, crc32c.crc32c(covered)) + covered
    built = build_batch(
        [
            SimpleRecord(value=b"b", key=b"a", timestamp=TS, headers=[("h", b"v"), ("h2", None)]),
            SimpleRecord(value=None, key=None, timestamp=TS + 1000, offset_delta=2),
        ],
        base_offset=500,
        producer_id=99,
        producer_epoch=3,
        base_sequence=17,
        partition_leader_epoch=4,
        is_transactional=True,
    )
    assert built == expected


def test_worked_examples_of_the_format_doc() -> None:
    batch_example, record_example, _legacy_example = worked_examples()
    assert batch_example == build_batch(
        [SimpleRecord(value=b"hello", key=b"k1", timestamp=TS)], base_offset=42
    )
    two = build_batch(
        [
            SimpleRecord(value=b"a", timestamp=TS),
            SimpleRecord(value=b"v", timestamp=TS + 1000, offset_delta=2, headers=[("h", None)]),
        ]
    )
    assert two.endswith(record_example)
    assert decode_records(two)[1] == Record(2, TS + 1000, None, b"v", (Header("h", None),))


@given(recs=wide_records, codec=codecs, base=st.integers(0, 2**62))
def test_kafka_python_reads_what_seglog_writes(
    recs: list[SimpleRecord], codec: Codec, base: int
) -> None:
    data = build_batch(recs, codec=codec, base_offset=base, last_offset_delta=len(recs) + 3)
    theirs = DefaultRecordBatch(data)
    assert theirs.validate_crc()
    assert theirs.compression_type == (codec if recs else Codec.NONE)
    assert theirs.base_offset == base and theirs.last_offset_delta == len(recs) + 3
    assert theirs.records_count == len(recs)
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs]
    assert got == [
        (base + i, s.timestamp, s.key, s.value, header_pairs(s.headers)) for i, s in enumerate(recs)
    ]


@pytest.mark.parametrize("codec", list(Codec))
def test_kafka_python_reads_a_buffer_of_batches(codec: Codec) -> None:
    big = [
        SimpleRecord(value=b"v%d" % i * 3000, key=b"k%d" % i, timestamp=TS + i) for i in range(40)
    ]
    buf = build_batch(big, codec=codec, base_offset=0) + build_batch(
        [SimpleRecord(value=b"last", timestamp=TS)], codec=codec, base_offset=40
    )
    assert batch.validate(buf).compression == codec
    memory = MemoryRecords(buf)
    values: list[tuple[int, bytes | None]] = []
    while memory.has_next():
        values.extend((r.offset, r.value) for r in memory.next_batch())
    assert values == [(i, b"v%d" % i * 3000) for i in range(40)] + [(40, b"last")]


def test_producer_and_flag_fields_as_kafka_python_sees_them() -> None:
    data = build_batch(
        [SimpleRecord(key=b"\x00\x00\x00\x00", value=b"\x00\x00\x00\x00\x00\x00")],
        producer_id=7,
        producer_epoch=2,
        base_sequence=11,
        is_transactional=True,
        is_control=True,
        timestamp_type=batch.LOG_APPEND_TIME,
        max_timestamp=TS,
    )
    theirs = DefaultRecordBatch(data)
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (7, 2, 11)
    assert theirs.is_transactional and theirs.is_control_batch
    assert theirs.timestamp_type == 1 and theirs.max_timestamp == TS
    header = batch.validate(data)
    assert header.is_control and header.is_transactional
    assert header.attributes == 0x08 | 0x10 | 0x20


@given(st.data(), codecs)
def test_offset_gaps_round_trip(data: st.DataObject, codec: Codec) -> None:
    recs = data.draw(records)
    deltas = data.draw(offset_deltas(len(recs)))
    extra = data.draw(st.integers(0, 5))
    with_gaps = [
        SimpleRecord(value=r.value, key=r.key, timestamp=r.timestamp, offset_delta=d)
        for r, d in zip(recs, deltas, strict=True)
    ]
    built = build_batch(
        with_gaps, codec=codec, base_offset=1000, last_offset_delta=deltas[-1] + extra
    )
    header = batch.validate(built)
    assert header.last_offset == 1000 + deltas[-1] + extra
    assert [r.offset for r in decode_records(built)] == [1000 + d for d in deltas]
    assert [r.offset for r in DefaultRecordBatch(built)] == [1000 + d for d in deltas]


def test_empty_batch_keeps_its_span() -> None:
    data = build_batch(
        [],
        base_offset=40,
        codec=Codec.GZIP,
        last_offset_delta=9,
        max_timestamp=TS,
        producer_id=3,
        producer_epoch=0,
        base_sequence=100,
    )
    h = batch.validate(data)
    assert len(data) == batch.HEADER_SIZE  # no payload
    assert h.compression == Codec.NONE  # nothing compressed: no codec, as Kafka writes it
    assert (h.base_offset, h.last_offset, h.record_count) == (40, 49, 0)
    assert h.base_timestamp == h.max_timestamp == TS
    assert h.last_sequence == 109
    assert list(DefaultRecordBatch(data)) == []
    bare = batch.validate(build_batch([]))
    assert (bare.base_timestamp, bare.max_timestamp, bare.last_offset_delta) == (-1, -1, 0)


def test_delete_horizon() -> None:
    data = build_batch([SimpleRecord(value=None, key=b"k", timestamp=TS)], delete_horizon_ms=TS + 5)
    h = batch.validate(data)
    assert h.attributes & 0x40 and h.base_timestamp == TS + 5 and h.max_timestamp == TS
    assert decode_records(data)[0].timestamp == TS
    # kafka-python knows nothing of the horizon but computes the same timestamps.
    assert [r.timestamp for r in DefaultRecordBatch(data)] == [TS]
    empty = batch.validate(build_batch([], delete_horizon_ms=TS))
    assert empty.has_delete_horizon and empty.delete_horizon_ms == TS
    with pytest.raises(InvalidRecordError, match="horizon"):
        build_batch([SimpleRecord(value=b"x")], delete_horizon_ms=TS, base_timestamp=TS - 1)


def test_base_timestamp_and_max_timestamp_overrides() -> None:
    data = build_batch(
        [SimpleRecord(value=b"a", timestamp=TS + 10), SimpleRecord(value=b"b", timestamp=TS)],
        base_timestamp=TS - 100,
    )
    h = batch.validate(data)
    assert h.base_timestamp == TS - 100 and h.max_timestamp == TS + 10
    assert [r.timestamp for r in decode_records(data)] == [TS + 10, TS]
    # By default the base is the first record's timestamp, even if a later one is smaller.
    h = batch.validate(build_batch([(None, b"a", TS + 10), (None, b"b", TS)]))
    assert (h.base_timestamp, h.max_timestamp) == (TS + 10, TS + 10)


def test_tuples_and_missing_timestamps() -> None:
    data = build_batch(
        [
            (b"k", b"v"),
            (None, b"w", TS),
            (b"k2", None, TS + 1, [("h", b"1"), Header("i", None)]),
            SimpleRecord(value=b"x"),
        ]
    )
    assert decode_records(data) == [
        Record(0, 0, b"k", b"v"),
        Record(1, TS, None, b"w"),
        Record(2, TS + 1, b"k2", None, (Header("h", b"1"), Header("i", None))),
        Record(3, 0, None, b"x"),
    ]
    assert as_simple_record((b"k", b"v")) == SimpleRecord(value=b"v", key=b"k")
    with pytest.raises(InvalidRecordError, match="tuple"):
        build_batch([(b"k",)])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("kwargs", "recs", "message"),
    [
        ({}, [SimpleRecord(value=b"a", offset_delta=1), SimpleRecord(value=b"b")], "increase"),
        ({}, [SimpleRecord(value=b"a", offset_delta=-1)], "increase"),
        ({}, [SimpleRecord(value=b"a", offset_delta=2**31)], "int32"),
        ({"last_offset_delta": 0}, [SimpleRecord(value=b"a", offset_delta=3)], "below"),
        ({"last_offset_delta": 2**31}, [], "int32"),
        (
            {},
            [SimpleRecord(value=b"a", timestamp=-(2**63)), SimpleRecord(value=b"b", timestamp=1)],
            "too far",
        ),
        ({"base_offset": 2**63}, [], "int64"),
        ({"max_timestamp": 2**64}, [], "int64"),
        ({}, [SimpleRecord(value=b"a", headers=[(b"k", b"v")])], "str"),  # type: ignore[list-item]
    ],
)
def test_values_the_format_cannot_hold(
    kwargs: dict[str, int], recs: list[SimpleRecord], message: str
) -> None:
    with pytest.raises(InvalidRecordError, match=message):
        build_batch(recs, **kwargs)  # type: ignore[arg-type]


def test_extreme_but_legal_values() -> None:
    recs = [
        SimpleRecord(value=b"a", timestamp=-(2**62)),
        SimpleRecord(value=b"b", timestamp=2**62 - 1, offset_delta=2**31 - 1),
    ]
    data = build_batch(recs, base_offset=2**63 - 2**31)
    assert [(r.offset, r.timestamp) for r in decode_records(data)] == [
        (2**63 - 2**31, -(2**62)),
        (2**63 - 1, 2**62 - 1),
    ]


# --- rebuild_batch -------------------------------------------------------------------------


def test_rebuild_keeps_offsets_span_and_producer() -> None:
    original = build_batch(
        [SimpleRecord(value=b"%d" % i, key=b"k", timestamp=TS + i) for i in range(5)],
        base_offset=100,
        producer_id=3,
        producer_epoch=2,
        base_sequence=50,
        codec=Codec.LZ4,
    )
    header = batch.validate(original)
    kept = [r for r in decode_records(original) if r.offset in (101, 103)]
    rebuilt = rebuild_batch(header, kept)
    h = batch.validate(rebuilt)
    assert (h.base_offset, h.last_offset, h.producer_id, h.producer_epoch, h.base_sequence) == (
        100,
        104,
        3,
        2,
        50,
    )
    assert h.compression == Codec.LZ4
    assert decode_records(rebuilt) == kept
    assert batch.validate(rebuild_batch(header, kept, codec=Codec.ZSTD)).compression == Codec.ZSTD


def test_rebuild_to_empty_keeps_the_max_timestamp() -> None:
    original = build_batch(
        [SimpleRecord(value=b"x", timestamp=TS + i) for i in range(3)],
        base_offset=10,
        producer_id=1,
        producer_epoch=0,
        base_sequence=0,
    )
    h = batch.validate(rebuild_batch(batch.validate(original), []))
    assert (h.base_offset, h.last_offset, h.record_count) == (10, 12, 0)
    assert h.base_timestamp == h.max_timestamp == TS + 2


def test_rebuild_log_append_time_and_legacy() -> None:
    original = bytearray(build_batch([SimpleRecord(value=b"x", timestamp=1)] * 2))
    batch.apply_log_append_time(original, 0, TS)
    header = batch.validate(original)
    rebuilt = rebuild_batch(header, decode_records(original)[1:])
    h = batch.validate(rebuilt)
    assert h.timestamp_type == batch.LOG_APPEND_TIME and h.max_timestamp == TS
    assert [(r.offset, r.timestamp) for r in decode_records(rebuilt)] == [(1, TS)]
    legacy = [Record(7, -1, b"k", b"v"), Record(9, -1, None, b"w")]
    h = batch.validate(rebuild_batch(None, legacy))
    assert (h.base_offset, h.last_offset, h.producer_id) == (7, 9, -1)


@pytest.mark.parametrize(
    "stamps",
    [
        [-(2**62), -(2**63) - 5],  # below int64, though its delta from the first fits
        [2**62, 2**63 + 5],  # above int64, with an explicit (LogAppendTime) max below
    ],
)
def test_record_timestamps_must_fit_int64(stamps: list[int]) -> None:
    recs = [SimpleRecord(value=b"x", timestamp=t) for t in stamps]
    with pytest.raises(InvalidRecordError, match="int64"):
        build_batch(recs, max_timestamp=TS)
    with pytest.raises(InvalidRecordError, match="int64"):
        build_batch(recs)


@given(recs=wide_records, codec=codecs, horizon=st.integers(0, 2**62))
def test_rebuild_with_a_delete_horizon_keeps_record_timestamps(
    recs: list[SimpleRecord], codec: Codec, horizon: int
) -> None:
    original = build_batch(
        recs, codec=codec, base_offset=70, producer_id=4, producer_epoch=1, base_sequence=9
    )
    header = batch.validate(original)
    decoded = decode_records(original)
    rebuilt = rebuild_batch(header, decoded, delete_horizon_ms=horizon)
    h = batch.validate(rebuilt)
    assert h.has_delete_horizon and h.delete_horizon_ms == h.base_timestamp == horizon
    assert (h.base_offset, h.last_offset) == (header.base_offset, header.last_offset)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (4, 1, 9)
    assert h.compression == header.compression
    assert decode_records(rebuilt) == decoded
    assert [(r.offset, r.timestamp) for r in DefaultRecordBatch(rebuilt)] == [
        (r.offset, r.timestamp) for r in decoded
    ]
