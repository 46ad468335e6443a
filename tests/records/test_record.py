"""Decoding the records of v2 batches: round trips, kafka-python's batches, damage."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecordsBuilder

from seglog.errors import CorruptRecordError, UnsupportedMagicError
from seglog.records import batch
from seglog.records.builder import SimpleRecord, build_batch, rebuild_batch
from seglog.records.compression import Codec, compress
from seglog.records.crc32c import crc32c
from seglog.records.record import (
    Header,
    Record,
    decode_entries,
    decode_entry,
    decode_records,
    first_at_or_after,
    first_record_timestamp,
    iter_batches,
)
from tests.records.strategies import (
    codecs,
    full_range_records,
    header_pairs,
    records,
    wide_records,
)

TS = 1_700_000_000_000


def reframe(
    data: bytes, block: bytes, *, record_count: int | None = None, codec: Codec | None = None
) -> bytes:
    """The batch ``data`` with ``block`` as its (already encoded) payload and a valid CRC."""
    out = bytearray(data[: batch.HEADER_SIZE]) + block
    struct.pack_into(">i", out, 8, len(out) - batch.LOG_OVERHEAD)
    if record_count is not None:
        struct.pack_into(">i", out, 57, record_count)
    if codec is not None:
        attributes = struct.unpack_from(">h", out, 21)[0] & ~batch.COMPRESSION_MASK
        struct.pack_into(">h", out, 21, attributes | codec)
    struct.pack_into(">I", out, batch.CRC_OFFSET, crc32c(memoryview(out)[21:]))
    return bytes(out)


def as_tuples(recs: list[SimpleRecord]) -> list[tuple[bytes | None, bytes | None, int]]:
    return [(s.key, s.value, 0 if s.timestamp is None else s.timestamp) for s in recs]


# --- round trips ---------------------------------------------------------------------------


@given(recs=wide_records, codec=codecs, base=st.integers(0, 2**62))
def test_round_trip(recs: list[SimpleRecord], codec: Codec, base: int) -> None:
    data = build_batch(recs, codec=codec, base_offset=base)
    decoded = decode_records(data, check_crc=True)
    assert [r.offset for r in decoded] == list(range(base, base + len(recs)))
    assert [(r.key, r.value, r.timestamp) for r in decoded] == as_tuples(recs)
    assert [r.headers for r in decoded] == [tuple(s.headers) for s in recs]
    assert list(decode_entries(data)) == decoded == decode_entry(data)


@given(recs=wide_records, codec=codecs, horizon=st.integers(-(2**62), 2**62))
def test_round_trip_with_delete_horizon(
    recs: list[SimpleRecord], codec: Codec, horizon: int
) -> None:
    data = build_batch(recs, codec=codec, delete_horizon_ms=horizon)
    header = batch.validate(data)
    assert header.has_delete_horizon and header.base_timestamp == horizon
    assert [(r.key, r.value, r.timestamp) for r in decode_records(data)] == as_tuples(recs)


def test_delete_horizon_deltas_may_be_negative() -> None:
    recs = [
        SimpleRecord(value=None, key=b"k", timestamp=TS),
        SimpleRecord(value=b"v", key=b"j", timestamp=TS + 9),
    ]
    horizon = TS + 86_400_000
    data = build_batch(recs, delete_horizon_ms=horizon)
    h = batch.validate(data)
    assert h.has_delete_horizon and h.delete_horizon_ms == horizon
    assert h.max_timestamp == TS + 9
    # The first record's timestamp delta (right after its length and attributes) is
    # TS - horizon, a negative varlong, as Kafka's cleaner writes it.
    assert data[batch.HEADER_SIZE + 2 : batch.HEADER_SIZE + 6] == bytes.fromhex("ff ef b2 52")
    assert [r.timestamp for r in decode_records(data)] == [TS, TS + 9]


def test_log_append_time_gives_every_record_the_max_timestamp() -> None:
    data = build_batch(
        [SimpleRecord(value=b"a", timestamp=1), SimpleRecord(value=b"b", timestamp=2)],
        timestamp_type=batch.LOG_APPEND_TIME,
        max_timestamp=TS,
    )
    assert [r.timestamp for r in decode_records(data)] == [TS, TS]


@pytest.mark.parametrize("codec", list(Codec))
def test_empty_batch(codec: Codec) -> None:
    data = build_batch([], codec=codec, base_offset=5, last_offset_delta=3)
    assert decode_records(data, check_crc=True) == []
    assert list(iter_batches(data)) == [(batch.validate(data), [])]
    # An empty batch written with a codec flag and no payload (as a careless writer
    # might) still reads as empty: there is nothing to decompress.
    flagged = reframe(data, b"", codec=codec)
    assert decode_records(flagged, check_crc=True) == []


def test_header_value_may_be_null() -> None:
    data = build_batch([SimpleRecord(value=b"x", headers=[Header("a", None), ("b", b"1")])])
    assert decode_records(data)[0].headers == (Header("a", None), Header("b", b"1"))


def test_iter_batches() -> None:
    a = build_batch([SimpleRecord(value=b"a", timestamp=TS)], base_offset=0)
    b = build_batch([SimpleRecord(value=b"b", timestamp=TS)] * 2, base_offset=1, codec=Codec.ZSTD)
    got = [(h.base_offset, [r.value for r in recs]) for h, recs in iter_batches(a + b)]
    assert got == [(0, [b"a"]), (1, [b"b", b"b"])]
    with pytest.raises(CorruptRecordError):
        list(iter_batches(a + b[:-1]))
    broken = bytearray(a + b)
    broken[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(iter_batches(broken))
    with contextlib.suppress(CorruptRecordError):  # without the CRC, zstd may notice
        list(iter_batches(broken, check_crc=False))
    with pytest.raises(UnsupportedMagicError):
        list(iter_batches(a[:16] + b"\x01" + a[17:]))


def test_decode_entries_ignores_a_cut_tail() -> None:
    a = build_batch([SimpleRecord(value=b"a", timestamp=TS)], base_offset=0)
    b = build_batch([SimpleRecord(value=b"b", timestamp=TS)], base_offset=1)
    for cut in range(len(b)):
        assert [r.value for r in decode_entries(a + b[:cut])] == [b"a"]


@settings(max_examples=80)
@given(
    shapes=st.lists(
        st.tuples(
            st.sampled_from([0, 1, 50, 63, 64, 200, 1000, 8180, 8200, 20_000]),
            st.integers(-200, 200) | st.integers(-(2**40), 2**40),
        ),
        min_size=1,
        max_size=12,
    ),
    codec=st.sampled_from([Codec.NONE, Codec.GZIP]),
    base=st.integers(0, 2**40),
    target=st.integers(-300, 300) | st.integers(-(2**41), 2**41),
    min_offset=st.integers(0, 12),
)
def test_time_search_agrees_with_decoding(
    shapes: list[tuple[int, int]],
    codec: Codec,
    base: int,
    target: int,
    min_offset: int,
) -> None:
    """Record lengths of one, two and three varint bytes, deltas short and long."""
    data = build_batch(
        [SimpleRecord(value=b"v" * size, timestamp=TS + delta) for size, delta in shapes],
        codec=codec,
        base_offset=base,
    )
    expected = next(
        (
            (r.offset, r.timestamp)
            for r in decode_records(data)
            if r.timestamp >= TS + target and r.offset >= base + min_offset
        ),
        None,
    )
    assert first_at_or_after(data, TS + target, base + min_offset) == expected


def test_time_search_within_a_batch() -> None:
    data = build_batch(
        [SimpleRecord(value=b"x", timestamp=TS + t) for t in (0, 0, 5, 5, 9)], base_offset=10
    )
    assert first_record_timestamp(data) == (10, TS)
    assert first_at_or_after(data, TS + 1, 0) == (12, TS + 5)
    assert first_at_or_after(data, TS + 5, 13) == (13, TS + 5)
    assert first_at_or_after(data, TS + 10, 0) is None
    zstd = build_batch([SimpleRecord(value=b"x", timestamp=TS + t) for t in (3, 1)], codec=4)
    assert first_record_timestamp(zstd) is None  # compressed: not a cheap look
    assert first_at_or_after(zstd, TS + 2, 0) == (0, TS + 3)
    appended = bytearray(data)
    batch.apply_log_append_time(appended, 0, TS + 50)
    assert first_record_timestamp(appended) == (10, TS + 50)
    assert first_at_or_after(appended, TS + 50, 12) == (12, TS + 50)
    assert first_at_or_after(appended, TS + 51, 0) is None


@settings(max_examples=60)
@given(recs=full_range_records(), codec=codecs, base=st.integers(0, 2**62))
def test_round_trip_full_timestamp_range(recs: list[SimpleRecord], codec: Codec, base: int) -> None:
    """0..50 records, timestamps anywhere in int64, every codec; kafka-python agrees."""
    data = build_batch(recs, codec=codec, base_offset=base)
    decoded = decode_records(data, check_crc=True)
    expected = [
        (base + i, s.timestamp, s.key, s.value, tuple(s.headers)) for i, s in enumerate(recs)
    ]
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded] == expected
    header = batch.validate(data)
    assert header.record_count == len(recs)
    if recs:
        assert header.max_timestamp == max(s.timestamp or 0 for s in recs)
        assert header.base_timestamp == recs[0].timestamp
    theirs = DefaultRecordBatch(data)
    assert theirs.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in theirs] == [
        (o, t, k, v, tuple(header_pairs(h))) for o, t, k, v, h in expected
    ]


@given(recs=records, deltas_seed=st.data(), log_append=st.booleans())
def test_first_record_timestamp(
    recs: list[SimpleRecord], deltas_seed: st.DataObject, log_append: bool
) -> None:
    gaps = deltas_seed.draw(st.lists(st.integers(1, 9), min_size=len(recs), max_size=len(recs)))
    first = deltas_seed.draw(st.integers(0, 5))
    deltas = [first + sum(gaps[:i]) for i in range(len(recs))]
    with_gaps = [
        SimpleRecord(value=r.value, key=r.key, timestamp=r.timestamp, offset_delta=d)
        for r, d in zip(recs, deltas, strict=True)
    ]
    data = bytearray(build_batch(with_gaps, base_offset=300))
    if log_append:
        batch.apply_log_append_time(data, 0, TS + 7)
    decoded = decode_records(data)
    # What a full decode says of the first record, cheaply: offset and timestamp.
    assert first_record_timestamp(data) == (decoded[0].offset, decoded[0].timestamp)
    assert decoded[0].offset == 300 + first
    # At a position inside a larger buffer, too.
    assert first_record_timestamp(b"\x00" * 5 + data, 5) == first_record_timestamp(data)


def test_first_record_timestamp_edge_cases() -> None:
    assert first_record_timestamp(build_batch([], base_offset=3, max_timestamp=TS)) is None
    gz = build_batch([SimpleRecord(value=b"x", timestamp=TS)], codec=Codec.GZIP)
    assert first_record_timestamp(gz) is None
    horizon = build_batch(
        [SimpleRecord(value=None, key=b"k", timestamp=TS)], delete_horizon_ms=TS + 10**6
    )
    assert first_record_timestamp(horizon) == (0, TS)  # record time, not the horizon
    data = build_batch([SimpleRecord(value=b"x", timestamp=TS)])
    for cut in range(len(data)):
        with pytest.raises(CorruptRecordError):
            first_record_timestamp(data[:cut])


def test_log_append_time_lookups_respect_offset_gaps() -> None:
    """Compaction can leave a LogAppendTime batch whose first record is past its base."""
    original = bytearray(
        build_batch([SimpleRecord(value=b"%d" % i, timestamp=TS) for i in range(5)], base_offset=50)
    )
    batch.apply_log_append_time(original, 0, TS + 99)
    kept = [r for r in decode_records(original) if r.offset in (52, 54)]
    compacted = rebuild_batch(batch.validate(original), kept)
    assert batch.validate(compacted).base_offset == 50
    assert first_record_timestamp(compacted) == (52, TS + 99)
    assert first_at_or_after(compacted, 0, 0) == (52, TS + 99)
    assert first_at_or_after(compacted, TS + 99, 53) == (54, TS + 99)
    assert first_at_or_after(compacted, TS + 100, 0) is None
    assert first_at_or_after(compacted, 0, 55) is None
    empty = rebuild_batch(batch.validate(original), [])
    assert first_at_or_after(empty, 0, 0) is None  # no record at all


# --- what kafka-python writes --------------------------------------------------------------


@given(recs=records, codec=codecs)
def test_seglog_reads_what_kafka_python_writes(recs: list[SimpleRecord], codec: Codec) -> None:
    builder = DefaultRecordBatchBuilder(2, int(codec), False, 5, 1, 0, 1 << 24)
    for i, s in enumerate(recs):
        builder.append(i, s.timestamp, s.key, s.value, header_pairs(s.headers))
    data = bytes(builder.build())
    header = batch.validate(data)
    # kafka-python stores a batch uncompressed when compressing would not shrink it.
    assert header.compression in (codec, Codec.NONE) and header.producer_id == 5
    decoded = decode_records(data)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in decoded] == [
        (i, s.timestamp, s.key, s.value) for i, s in enumerate(recs)
    ]
    assert [r.headers for r in decoded] == [tuple(s.headers) for s in recs]


@pytest.mark.parametrize("codec", list(Codec))
def test_seglog_reads_kafka_python_memory_records(codec: Codec) -> None:
    builder = MemoryRecordsBuilder(2, int(codec), batch_size=1 << 20, offset=100)
    for i in range(50):
        builder.append(TS + i, b"key%d" % i, b"value%d" % i * 20, headers=[("h", b"%d" % i)])
    builder.close()
    data = bytes(builder.buffer())
    assert batch.validate(data).compression == codec
    decoded = list(decode_entries(data))
    assert [r.offset for r in decoded] == list(range(100, 150))
    assert decoded[7] == Record(107, TS + 7, b"key7", b"value7" * 20, (Header("h", b"7"),))


# --- damage --------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", list(Codec))
def test_record_count_must_match(codec: Codec) -> None:
    data = build_batch([SimpleRecord(value=b"x", key=b"k")] * 3, codec=codec)
    payload = data[batch.HEADER_SIZE :]
    with pytest.raises(CorruptRecordError):
        decode_records(reframe(data, payload, record_count=4))
    with pytest.raises(CorruptRecordError, match="after its 2 records"):
        decode_records(reframe(data, payload, record_count=2))


def test_record_length_must_match_its_fields() -> None:
    data = build_batch([SimpleRecord(value=b"abc", key=b"k")])
    block = bytearray(data[batch.HEADER_SIZE :])
    assert block[0] == 2 * 10  # length 10: attributes, ts, offset, key 2, value 4, headers 1
    for length in (9, 11):
        block[0] = 2 * length
        with pytest.raises(CorruptRecordError):
            decode_records(reframe(data, bytes(block)))
    # A record one byte longer than its fields, with the byte actually there.
    padded = bytes([2 * 11]) + data[batch.HEADER_SIZE + 1 :] + b"\x00"
    with pytest.raises(CorruptRecordError, match="fields take 10 bytes"):
        decode_records(reframe(data, padded))


def test_bad_fields() -> None:
    base = build_batch([SimpleRecord(value=b"v", key=b"k", headers=[("h", b"x")])])

    def record(body: bytes) -> bytes:
        return reframe(base, bytes([2 * len(body)]) + body)

    ok = b"\x00\x00\x00" + b"\x02k" + b"\x02v"
    assert decode_records(record(ok + b"\x00"))[0].value == b"v"
    cases = {
        "negative field length": b"\x00\x00\x00\x03" + b"\x02v\x00",  # key length -2
        "header count": ok + b"\x7e",  # 63 headers in 0 bytes
        "negative header count": ok + b"\x03",
        "null key": ok + b"\x02\x01\x00",
        "UTF-8": ok + b"\x02\x02\xff\x00",
        "past the end of the record": ok + b"\x02\x02h\x0a",
    }
    for message, body in cases.items():
        with pytest.raises(CorruptRecordError, match=message):
            decode_records(record(body))


@pytest.mark.parametrize("codec", list(Codec))
def test_truncated_records_block_is_corrupt(codec: Codec) -> None:
    recs = [SimpleRecord(value=b"x" * 20, key=b"k", headers=[("h", None)])] * 3
    data = build_batch(recs)
    block = data[batch.HEADER_SIZE :]
    for cut in range(len(block)):
        # The CRC is right: only the records themselves tell the batch is cut.
        framed = reframe(data, compress(codec, block[:cut]), codec=codec)
        with pytest.raises(CorruptRecordError):
            decode_records(framed, check_crc=True)
    for cut in range(batch.HEADER_SIZE, len(data)):
        with pytest.raises(CorruptRecordError):
            decode_records(data[:cut])  # a batch cut short: its length says more


@settings(max_examples=200)
@given(
    recs=records,
    codec=st.sampled_from([Codec.NONE, Codec.GZIP]),
    where=st.integers(0),
    xor=st.integers(1, 255),
)
def test_any_damaged_byte_is_corrupt_or_decodes(
    recs: list[SimpleRecord], codec: Codec, where: int, xor: int
) -> None:
    data = build_batch(recs)
    block = bytearray(data[batch.HEADER_SIZE :])
    block[where % len(block)] ^= xor
    framed = reframe(data, compress(codec, block), codec=codec)
    with contextlib.suppress(CorruptRecordError):
        decode_records(framed)
        first_at_or_after(framed, 0, 0)


@given(st.binary(max_size=300))
def test_garbage_in_entries_raises_only_corrupt_record(data: bytes) -> None:
    with contextlib.suppress(CorruptRecordError):
        list(decode_entries(data))
    with contextlib.suppress(CorruptRecordError):
        decode_records(data, check_crc=False)


@given(
    recs=records,
    codec=codecs,
    data=st.data(),
    log_append=st.booleans(),
)
def test_first_at_or_after_matches_a_full_decode(
    recs: list[SimpleRecord], codec: Codec, data: st.DataObject, log_append: bool
) -> None:
    keep = data.draw(st.lists(st.booleans(), min_size=len(recs), max_size=len(recs)))
    original = bytearray(build_batch(recs, codec=codec, base_offset=1000))
    if log_append:
        batch.apply_log_append_time(original, 0, TS + 3)
    # Compaction drops some records and keeps the batch's span: gaps, maybe at the start.
    kept = [r for r, k in zip(decode_records(original), keep, strict=True) if k]
    compacted = rebuild_batch(batch.validate(original), kept)
    decoded = decode_records(compacted, check_crc=True)
    assert decoded == kept
    timestamp = data.draw(st.integers(TS - 10**9 - 1, TS + 10**9 + 1))
    min_offset = data.draw(st.integers(990, 1000 + len(recs) + 1))
    expected = next(
        (
            (r.offset, r.timestamp)
            for r in decoded
            if r.timestamp >= timestamp and r.offset >= min_offset
        ),
        None,
    )
    assert first_at_or_after(compacted, timestamp, min_offset) == expected
    # Where a walk finds it: inside a chunk, between other bytes.
    prefix = data.draw(st.binary(max_size=70))
    chunk = prefix + compacted + data.draw(st.binary(max_size=70))
    assert first_at_or_after(chunk, timestamp, min_offset, len(prefix)) == expected


@settings(max_examples=100)
@given(
    recs=records, where=st.integers(0, 10**6), xor=st.integers(1, 255), tail=st.binary(max_size=40)
)
def test_a_damaged_batch_inside_a_chunk_is_corrupt_or_answers_from_its_own_bytes(
    recs: list[SimpleRecord], where: int, xor: int, tail: bytes
) -> None:
    """A walk over a batch inside a larger chunk never reads an answer from the bytes after it."""
    data = build_batch(recs)
    block = bytearray(data[batch.HEADER_SIZE :])
    block[where % len(block)] ^= xor
    framed = reframe(data, bytes(block))
    try:
        alone = first_at_or_after(framed, 0, 0)
    except CorruptRecordError:
        alone = None
    with contextlib.suppress(CorruptRecordError):
        assert first_at_or_after(framed + tail, 0, 0) in (alone, None)
