"""Legacy message sets: reading kafka-python's v0/v1 bytes, offsets, damage, conversion to v2."""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from seglog.errors import CorruptRecordError, UnsupportedMagicError
from seglog.records import batch, legacy, log_entries
from seglog.records.compression import Codec, compress
from seglog.records.record import Record, decode_entries, decode_records, iter_batches
from tests.records.format_doc import worked_examples
from tests.records.legacy_encoder import TS, message, old_kafka_lz4

LEGACY_CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4]


def kafka_python_set(
    magic: int,
    codec: Codec,
    items: Sequence[tuple[bytes | None, bytes | None, int]],
    base: int = 0,
) -> bytes:
    """A message set written by kafka-python, with offsets as a broker stores them."""
    builder = LegacyRecordBatchBuilder(magic, int(codec), 1 << 22)
    for i, (key, value, ts) in enumerate(items):
        # v1 wrappers hold relative inner offsets; v0 (and uncompressed sets) absolute ones.
        builder.append(i if codec and magic == 1 else base + i, ts, key, value)
    data = bytearray(builder.build())
    if codec:
        # The wrapper's offset: that of its last message (outside the CRC).
        data[0:8] = (base + len(items) - 1).to_bytes(8, "big")
    return bytes(data)


def expected_records(
    magic: int, items: Sequence[tuple[bytes | None, bytes | None, int]], base: int
) -> list[Record]:
    return [
        Record(base + i, ts if magic == 1 else -1, key, value)
        for i, (key, value, ts) in enumerate(items)
    ]


ITEMS = [(b"k%d" % i, b"v%d" % i * 10, TS + i) for i in range(4)]


def test_the_test_encoder_matches_kafka_python() -> None:
    for magic in (0, 1):
        theirs = kafka_python_set(magic, Codec.NONE, [(b"k", b"v", TS)], base=5)
        assert theirs == message(5, b"k", b"v", magic=magic)


def test_worked_example_of_the_format_doc() -> None:
    example = worked_examples()[2]
    assert example == kafka_python_set(1, Codec.NONE, [(b"k", b"v", TS)])
    assert legacy.decode_legacy(example, check_crc=True) == [Record(0, TS, b"k", b"v")]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [Codec.NONE, Codec.GZIP, Codec.SNAPPY])
def test_kafka_python_message_sets(magic: int, codec: Codec) -> None:
    data = kafka_python_set(magic, codec, ITEMS, base=100)
    assert legacy.decode_legacy(data, check_crc=True) == expected_records(magic, ITEMS, 100)
    assert list(decode_entries(data)) == expected_records(magic, ITEMS, 100)
    if codec:
        info = legacy.describe_entry(memoryview(data))
        assert info == legacy.LegacyEntryInfo(100, 103, TS + 3 if magic else -1, 4)
    else:
        assert legacy.describe_entry(data[: len(data) // 4]) == (100, 100, TS if magic else -1, 1)


def test_kafka_python_lz4_magic_1() -> None:
    data = kafka_python_set(1, Codec.LZ4, ITEMS, base=7)
    assert legacy.decode_legacy(data) == expected_records(1, ITEMS, 7)


def test_lz4_magic_0_with_the_old_header_checksum() -> None:
    inner = b"".join(message(50 + i, b"k", b"v%d" % i, magic=0) for i in range(3))
    wrapper = message(52, None, old_kafka_lz4(inner), magic=0, attributes=Codec.LZ4)
    assert legacy.describe_entry(wrapper) == (50, 52, -1, 3)
    assert [r.offset for r in legacy.decode_legacy(wrapper)] == [50, 51, 52]
    # Kafka checks that byte from magic 1 on, and so does seglog.
    inner1 = b"".join(message(i, b"k", b"v", magic=1) for i in range(3))
    wrapper1 = message(2, None, old_kafka_lz4(inner1), magic=1, attributes=Codec.LZ4)
    with pytest.raises(CorruptRecordError, match="lz4"):
        legacy.describe_entry(wrapper1)


def test_wrapper_offsets() -> None:
    # Magic 1: relative inner offsets, the wrapper holds the last absolute one.
    inner = b"".join(message(i, b"k%d" % i, b"v") for i in range(4))
    wrapper = message(1003, None, compress(Codec.GZIP, inner), attributes=Codec.GZIP)
    assert [r.offset for r in legacy.decode_legacy(wrapper)] == [1000, 1001, 1002, 1003]
    # Magic 0: absolute inner offsets.
    inner0 = b"".join(message(500 + i, b"k", b"v", magic=0) for i in range(4))
    wrapper0 = message(503, None, compress(Codec.SNAPPY, inner0), magic=0, attributes=2)
    assert [r.offset for r in legacy.decode_legacy(wrapper0)] == [500, 501, 502, 503]
    assert legacy.describe_entry(wrapper0) == (500, 503, -1, 4)


def test_log_append_time_wrapper() -> None:
    inner = b"".join(message(i, b"k", b"v", timestamp=TS + i) for i in range(3))
    wrapper = message(
        9, None, compress(Codec.GZIP, inner), timestamp=TS + 500, attributes=Codec.GZIP | 0x08
    )
    assert [r.timestamp for r in legacy.decode_legacy(wrapper)] == [TS + 500] * 3
    assert legacy.describe_entry(wrapper) == (7, 9, TS + 500, 3)
    converted = legacy.convert_to_v2(wrapper)
    header = batch.validate(converted)
    assert header.timestamp_type == batch.LOG_APPEND_TIME and header.max_timestamp == TS + 500
    assert header.compression == Codec.GZIP
    assert [r.timestamp for r in decode_records(converted)] == [TS + 500] * 3


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_convert_to_v2(magic: int, codec: Codec) -> None:
    items = [(b"k", b"value" * 30, TS), (None, None, TS - 5), (b"", b"", TS + 5)]
    if codec == Codec.LZ4 and magic == 0:
        inner = b"".join(message(i, k, v, magic=0) for i, (k, v, _) in enumerate(items))
        data = message(2, None, old_kafka_lz4(inner), magic=0, attributes=Codec.LZ4)
    else:
        data = kafka_python_set(magic, codec, items)
    converted = legacy.convert_to_v2(memoryview(data))
    ((header, decoded),) = list(iter_batches(converted))  # one batch, valid CRC
    assert header.compression == codec and header.record_count == 3
    assert [(r.offset, r.key, r.value, r.timestamp) for r in decoded] == [
        (i, k, v, ts if magic else -1) for i, (k, v, ts) in enumerate(items)
    ]
    theirs = DefaultRecordBatch(converted)
    assert theirs.validate_crc()
    assert [(r.key, r.value) for r in theirs] == [(k, v) for k, v, _ in items]


def test_convert_groups_runs_of_the_same_codec() -> None:
    gzip_inner = message(0, b"g1", b"x") + message(1, b"g2", b"y")
    data = (
        message(0, b"a", b"1")
        + message(1, b"b", b"2")
        + message(1, None, compress(Codec.GZIP, gzip_inner), attributes=Codec.GZIP)
        + message(0, None, compress(Codec.GZIP, message(0, b"g3", b"z")), attributes=1)
        + message(0, b"c", b"3")
    )
    batches = list(iter_batches(legacy.convert_to_v2(data)))
    assert [(h.compression, [r.key for r in recs]) for h, recs in batches] == [
        (Codec.NONE, [b"a", b"b"]),
        (Codec.GZIP, [b"g1", b"g2", b"g3"]),
        (Codec.NONE, [b"c"]),
    ]
    assert legacy.convert_to_v2(b"") == b""


@given(
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from([Codec.NONE, Codec.GZIP, Codec.SNAPPY]),
    items=st.lists(
        st.tuples(
            st.none() | st.binary(max_size=20),
            st.none() | st.binary(max_size=50),
            st.integers(0, 2**62),
        ),
        min_size=1,
        max_size=15,
    ),
    base=st.integers(0, 2**40),
)
def test_read_and_convert_what_kafka_python_writes(
    magic: int, codec: Codec, items: list[tuple[bytes | None, bytes | None, int]], base: int
) -> None:
    data = kafka_python_set(magic, codec, items, base)
    expected = expected_records(magic, items, base)
    assert legacy.decode_legacy(data, check_crc=True) == expected
    converted = legacy.convert_to_v2(data)
    again = [r for _, recs in iter_batches(converted) for r in recs]
    assert [(r.key, r.value, r.timestamp) for r in again] == [
        (r.key, r.value, r.timestamp) for r in expected
    ]


# --- damage --------------------------------------------------------------------------------


def test_flipped_byte_fails_the_crc() -> None:
    entry = message(3, b"key", b"value")
    for i in range(16, len(entry)):
        broken = bytearray(entry)
        broken[i] ^= 0x01
        with pytest.raises(CorruptRecordError):
            legacy.describe_entry(memoryview(broken))
        with pytest.raises(CorruptRecordError):
            legacy.convert_to_v2(bytes(broken))
    assert legacy.describe_entry(message(3, b"k", b"v", crc=0), check_crc=False).record_count == 1


def test_inner_crc_is_checked() -> None:
    inner = message(0, b"k", b"v") + message(1, b"k", b"v", crc=0x12345678)
    wrapper = message(1, None, compress(Codec.GZIP, inner), attributes=Codec.GZIP)
    with pytest.raises(CorruptRecordError, match="CRC"):
        legacy.describe_entry(wrapper)
    with pytest.raises(CorruptRecordError, match="CRC"):
        legacy.decode_legacy(wrapper, check_crc=True)
    assert len(legacy.decode_legacy(wrapper)) == 2  # storage already checked the outer CRC


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.GZIP])
def test_truncation_at_every_byte_is_corrupt(codec: Codec) -> None:
    data = kafka_python_set(1, codec, ITEMS[:2])
    first_size = batch.peek_offset_and_size(data)[1]
    for cut in range(len(data)):
        if cut != first_size:
            with pytest.raises(CorruptRecordError):
                legacy.describe_entry(data[:cut])
        if cut not in (0, first_size):  # whole entries are a valid, shorter set
            with pytest.raises(CorruptRecordError):
                legacy.decode_legacy(data[:cut])
            with pytest.raises(CorruptRecordError):
                legacy.convert_to_v2(data[:cut])


def test_malformed_entries() -> None:
    gz = Codec.GZIP
    cases = {
        "nests another": message(
            0, None, compress(gz, message(0, None, b"x", attributes=1)), attributes=1
        ),
        "magic 0 but holds": message(
            0, None, compress(gz, message(0, b"k", b"v")), magic=0, attributes=1
        ),
        "is empty": message(0, None, compress(gz, b""), attributes=gz),
        "has no value": message(0, None, None, attributes=gz),
        "codec id 5": message(0, None, b"x", attributes=5),
        "length -2": message(0, b"k", None)[:-4] + b"\xff\xff\xff\xfe",
        "has size": message(0)[:12] + b"\x00" * 10,
        "bytes after its value": message(0, b"k", b"v")[:8]
        + (len(message(0, b"k", b"v")) - 11).to_bytes(4, "big")
        + message(0, b"k", b"v")[12:]
        + b"\x00",
        "buffer holds": message(0, b"k", b"v") + b"\x00",
    }
    for text, entry in cases.items():
        with pytest.raises(CorruptRecordError, match=text):
            legacy.describe_entry(entry, check_crc=False)
    v2_like = bytearray(message(0, b"k", b"v"))
    v2_like[16] = 2
    with pytest.raises(UnsupportedMagicError):
        legacy.describe_entry(v2_like)


@given(st.binary(max_size=120))
def test_garbage_raises_only_corrupt_record(data: bytes) -> None:
    for call in (
        lambda: legacy.describe_entry(data),
        lambda: legacy.decode_legacy(data, check_crc=True),
        lambda: legacy.decode_legacy(data),
        lambda: legacy.convert_to_v2(data),
    ):
        with contextlib.suppress(CorruptRecordError):
            call()


@settings(max_examples=200)
@given(where=st.integers(0), xor=st.integers(1, 255), codec=st.sampled_from(LEGACY_CODECS))
def test_damaged_wrapper_is_corrupt_or_decodes(where: int, xor: int, codec: Codec) -> None:
    data = bytearray(kafka_python_set(1, codec, ITEMS))
    data[where % len(data)] ^= xor
    with contextlib.suppress(CorruptRecordError):
        legacy.decode_legacy(data)


# --- hand-assembled bytes and the shallow reader ----------------------------------------------


def test_hand_assembled_v1_message() -> None:
    """One magic 1 message, every field written out, CRC-32 computed with zlib."""
    body = (
        b"\x01"  # magic
        + b"\x00"  # attributes: no codec, CreateTime
        + (TS + 3).to_bytes(8, "big")  # timestamp
        + (3).to_bytes(4, "big")
        + b"key"
        + (5).to_bytes(4, "big")
        + b"value"
    )
    entry = (
        (77).to_bytes(8, "big")  # offset
        + (4 + len(body)).to_bytes(4, "big")  # size: crc + body
        + zlib.crc32(body).to_bytes(4, "big")
        + body
    )
    tombstone_body = b"\x01\x00" + TS.to_bytes(8, "big") + b"\x00\x00\x00\x01k" + b"\xff" * 4
    tombstone = (
        (78).to_bytes(8, "big")
        + (4 + len(tombstone_body)).to_bytes(4, "big")
        + zlib.crc32(tombstone_body).to_bytes(4, "big")
        + tombstone_body
    )
    data = entry + tombstone
    assert legacy.decode_legacy(data, check_crc=True) == [
        Record(77, TS + 3, b"key", b"value"),
        Record(78, TS, b"k", None),
    ]
    assert legacy.describe_entry(entry) == legacy.LegacyEntryInfo(77, 77, TS + 3, 1)
    assert log_entries.read_entry(data, len(entry)) == log_entries.EntryInfo(
        len(entry), len(tombstone), 1, 78, 78, TS, 1
    )
    # kafka-python writes the same bytes for the same message.
    assert kafka_python_set(1, Codec.NONE, [(b"key", b"value", TS + 3)], base=77) == entry


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [Codec.NONE, Codec.GZIP])
def test_read_entry_on_kafka_python_message_sets(magic: int, codec: Codec) -> None:
    items = [(b"k%d" % i, b"v" * i, TS + 10 - i) for i in range(5)]
    data = kafka_python_set(magic, codec, items, base=40)
    result = log_entries.scan(data)
    assert result.error is None and result.valid_end == len(data)
    if codec:
        # One wrapper: its offsets span the inner messages, max timestamp of them all.
        (info,) = result.entries
        assert (info.magic, info.base_offset, info.last_offset, info.record_count) == (
            magic,
            40,
            44,
            5,
        )
        assert info.max_timestamp == (TS + 10 if magic else -1)
        assert info == log_entries.read_entry(data)
    else:
        assert [(e.base_offset, e.last_offset, e.max_timestamp) for e in result.entries] == [
            (40 + i, 40 + i, ts if magic else -1) for i, (_, _, ts) in enumerate(items)
        ]
        assert all(e.record_count == 1 and e.magic == magic for e in result.entries)
    assert legacy.decode_legacy(data, check_crc=True) == expected_records(magic, items, 40)
    converted = legacy.convert_to_v2(data)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in decode_records(converted)] == [
        (i, k, v, ts if magic else -1) for i, (k, v, ts) in enumerate(items)
    ]
    first_size = result.entries[0].size
    for cut in range(first_size):
        with pytest.raises(CorruptRecordError):
            log_entries.read_entry(data[:cut])
    broken = bytearray(data)
    broken[-1] ^= 0x20
    with pytest.raises(CorruptRecordError, match="CRC"):
        log_entries.read_entry(broken, result.entries[-1].position)


def test_timestamp_type_of_legacy_entries() -> None:
    assert legacy.timestamp_type(message(0, b"k", b"v", magic=0)) == legacy.NO_TIMESTAMP_TYPE
    assert legacy.timestamp_type(message(0, b"k", b"v", magic=1, timestamp=TS)) == 0
    stamped = message(0, b"k", b"v", magic=1, timestamp=TS, attributes=0x08)
    assert legacy.timestamp_type(stamped) == batch.LOG_APPEND_TIME
    with pytest.raises(CorruptRecordError):
        legacy.timestamp_type(stamped[:10])
