"""The v2 batch header: golden bytes, validation, corruption, and in-place patches."""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable
from functools import partial

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from seglog.errors import CorruptRecordError, UnsupportedMagicError
from seglog.records import batch, log_entries
from seglog.records.builder import SimpleRecord, build_batch
from seglog.records.compression import Codec
from seglog.records.record import decode_records

TS = 1_700_000_000_000


def hand_built_batch() -> bytes:
    """One record (key k1, value hello) at base offset 42, assembled field by field."""
    record_body = (
        b"\x00"  # attributes
        + b"\x00"  # timestamp delta 0
        + b"\x00"  # offset delta 0
        + b"\x04k1"  # key length 2 (zigzag 4)
        + b"\x0ahello"  # value length 5 (zigzag 10)
        + b"\x00"  # no headers
    )
    records = bytes([len(record_body) * 2]) + record_body
    covered = (
        struct.pack(">hiqqqhii", 0, 0, TS, TS, -1, -1, -1, 1) + records
    )  # attributes .. records
    crc = crc32c.crc32c(covered)
    length = 4 + 1 + 4 + len(covered)  # epoch, magic, crc, covered
    return struct.pack(">qiibI", 42, length, -1, 2, crc) + covered


GOLDEN_HEX = (
    "000000000000002a 0000003f ffffffff 02 5028da91 0000 00000000"
    " 0000018bcfe56800 0000018bcfe56800 ffffffffffffffff ffff ffffffff 00000001"
    " 1a 00 00 00 04 6b31 0a 68656c6c6f 00"
)


def test_golden_bytes() -> None:
    expected = hand_built_batch()
    assert expected == bytes.fromhex(GOLDEN_HEX)  # the worked example of docs/format.md
    built = build_batch([SimpleRecord(value=b"hello", key=b"k1", timestamp=TS)], base_offset=42)
    assert built == expected
    header = batch.validate(expected)
    assert (header.base_offset, header.last_offset, header.record_count) == (42, 42, 1)
    assert header.size == len(expected) == 75
    assert header.crc == 0x5028DA91


def test_header_properties() -> None:
    data = build_batch(
        [SimpleRecord(value=b"a", timestamp=TS)] * 3,
        base_offset=10,
        producer_id=7,
        producer_epoch=1,
        base_sequence=2**31 - 2,
        is_transactional=True,
        partition_leader_epoch=5,
    )
    h = batch.validate(data)
    assert h.last_offset == 12 and h.next_offset == 13
    assert h.is_transactional and not h.is_control and h.has_producer_id
    assert h.last_sequence == 0  # wraps at 2**31
    assert h.partition_leader_epoch == 5 and h.magic == 2
    assert h.compression == 0 and h.timestamp_type == batch.CREATE_TIME
    assert not h.has_delete_horizon and h.delete_horizon_ms == batch.NO_TIMESTAMP
    plain = batch.validate(build_batch([SimpleRecord(value=b"a")]))
    assert plain.last_sequence == batch.NO_SEQUENCE and not plain.has_producer_id


@pytest.mark.parametrize("codec", list(Codec))
def test_flipped_byte_in_covered_part_fails_crc(codec: Codec) -> None:
    data = build_batch([SimpleRecord(value=b"x" * 50, key=b"k", timestamp=TS)], codec=codec)
    for i in range(batch.ATTRIBUTES_OFFSET, len(data)):
        broken = bytearray(data)
        broken[i] ^= 0x01
        with pytest.raises(CorruptRecordError):
            batch.validate(broken)
    broken = bytearray(data)
    broken[batch.CRC_OFFSET] ^= 0x80  # the stored CRC itself
    with pytest.raises(CorruptRecordError, match="CRC"):
        batch.validate(broken)


def test_fields_outside_crc_can_change() -> None:
    data = bytearray(build_batch([SimpleRecord(value=b"x", timestamp=TS)]))
    batch.patch_base_offset(data, 0, 123456789)
    batch.patch_partition_leader_epoch(data, 0, 9)
    h = batch.validate(data)
    assert h.base_offset == 123456789 and h.partition_leader_epoch == 9
    assert [r.offset for r in decode_records(data)] == [123456789]


@pytest.mark.parametrize("codec", list(Codec))
def test_patch_base_offset_in_a_buffer_of_batches(codec: Codec) -> None:
    first = build_batch([SimpleRecord(value=b"a", timestamp=TS)] * 2, codec=codec)
    second = build_batch([SimpleRecord(value=b"b", timestamp=TS)] * 3, codec=codec)
    buf = bytearray(first + second)
    batch.patch_base_offset(buf, 0, 1000)
    batch.patch_base_offset(memoryview(buf), len(first), 1002)
    headers = list(batch.iter_headers(buf))
    assert [(p, h.base_offset, h.last_offset) for p, h in headers] == [
        (0, 1000, 1001),
        (len(first), 1002, 1004),
    ]
    assert [r.offset for r in decode_records(buf, len(first))] == [1002, 1003, 1004]
    assert DefaultRecordBatch(bytes(buf[len(first) :])).validate_crc()


@pytest.mark.parametrize("codec", list(Codec))
def test_log_append_time_keeps_crc_valid(codec: Codec) -> None:
    data = bytearray(
        b"\x00" * 7 + build_batch([SimpleRecord(value=b"x", timestamp=5)] * 2, codec=codec)
    )
    batch.apply_log_append_time(data, 7, TS)
    h = batch.validate(data, 7)
    assert h.timestamp_type == batch.LOG_APPEND_TIME and h.max_timestamp == TS
    assert h.base_timestamp == 5 and h.compression == codec
    assert [r.timestamp for r in decode_records(data, 7)] == [TS, TS]
    theirs = DefaultRecordBatch(bytes(data[7:]))
    assert theirs.validate_crc()
    assert [r.timestamp for r in theirs] == [TS, TS]


def test_log_append_time_on_a_delete_horizon_batch() -> None:
    data = bytearray(
        build_batch([SimpleRecord(value=None, key=b"k", timestamp=TS)], delete_horizon_ms=TS + 9)
    )
    batch.apply_log_append_time(data, 0, TS + 100)
    h = batch.validate(data)
    assert h.has_delete_horizon and h.delete_horizon_ms == TS + 9
    assert [r.timestamp for r in decode_records(data)] == [TS + 100]


def test_truncation_at_every_byte_is_corrupt() -> None:
    data = build_batch(
        [SimpleRecord(value=b"value", key=b"key", timestamp=TS, headers=[("h", b"")])]
    )
    for cut in range(len(data)):
        with pytest.raises(CorruptRecordError):
            batch.validate(data[:cut])
        with pytest.raises(CorruptRecordError):
            batch.read_header(memoryview(data)[:cut])
        if cut:  # a whole batch followed by part of one
            with pytest.raises(CorruptRecordError):
                list(batch.iter_headers(data + data[:cut]))


def test_impossible_header_fields() -> None:
    good = build_batch([SimpleRecord(value=b"x", timestamp=TS)])

    def with_field(offset: int, fmt: str, value: int) -> bytearray:
        data = bytearray(good)
        struct.pack_into(fmt, data, offset, value)
        return data

    with pytest.raises(CorruptRecordError, match="smaller than its header"):
        batch.read_header(with_field(8, ">i", 10))
    with pytest.raises(CorruptRecordError, match="negative"):
        batch.read_header(with_field(23, ">i", -1))  # last offset delta
    with pytest.raises(CorruptRecordError, match="negative"):
        batch.read_header(with_field(57, ">i", -1))  # record count
    with pytest.raises(CorruptRecordError, match="truncated"):
        batch.read_header(with_field(8, ">i", len(good)))


def test_wrong_magic() -> None:
    data = bytearray(build_batch([SimpleRecord(value=b"x", timestamp=TS)]))
    data[16] = 3
    with pytest.raises(UnsupportedMagicError):
        batch.read_header(data)
    with pytest.raises(UnsupportedMagicError):
        batch.read_header(data[:20])  # short, but the magic is already wrong
    assert batch.peek_magic(data) == 3


def test_peeks() -> None:
    data = build_batch([SimpleRecord(value=b"x", timestamp=TS)], base_offset=77)
    assert batch.peek_offset_and_size(data) == (77, len(data))
    assert batch.peek_magic(data) == 2
    with pytest.raises(CorruptRecordError):
        batch.peek_offset_and_size(data[:11])
    with pytest.raises(CorruptRecordError):
        batch.peek_magic(data[:16])
    with pytest.raises(CorruptRecordError, match="impossible"):
        batch.peek_offset_and_size(b"\x00" * 8 + b"\x00\x00\x00\x04")


@given(st.binary(max_size=200))
def test_garbage_raises_only_corrupt_record(data: bytes) -> None:
    with contextlib.suppress(CorruptRecordError):
        list(batch.iter_headers(data))


def _raises_only_corrupt(call: Callable[[], object]) -> None:
    """``call`` must raise CorruptRecordError (or a subclass), and nothing else."""
    try:
        call()
    except CorruptRecordError:
        return
    raise AssertionError("no CorruptRecordError raised")


@pytest.mark.parametrize("codec", list(Codec))
def test_every_reader_rejects_a_batch_cut_at_every_length(codec: Codec) -> None:
    data = build_batch(
        [
            SimpleRecord(value=b"value %d" % i, key=b"k", timestamp=TS + i, headers=[("h", None)])
            for i in range(3)
        ],
        codec=codec,
        base_offset=9,
    )
    assert batch.validate(data).compression == codec
    for cut in range(len(data)):
        piece = data[:cut]
        _raises_only_corrupt(partial(batch.read_header, piece))
        _raises_only_corrupt(partial(batch.validate, piece))
        _raises_only_corrupt(partial(log_entries.read_entry, piece))
        _raises_only_corrupt(partial(decode_records, piece))
        _raises_only_corrupt(partial(decode_records, piece, check_crc=True))
        # Cut off at the end of a larger buffer, after a whole batch.
        _raises_only_corrupt(partial(log_entries.read_entry, data + piece, len(data)))
        _raises_only_corrupt(partial(decode_records, data + piece, len(data)))
    assert log_entries.read_entry(data).record_count == 3


def test_hand_assembled_batch_with_header_and_two_records() -> None:
    """A second golden batch: two records, a header, a timestamp delta, producer fields."""
    first = b"\x00" + b"\x00" + b"\x00" + b"\x01" + b"\x06abc" + b"\x02" + b"\x02h" + b"\x01"
    second = b"\x00" + b"\x0a" + b"\x02" + b"\x02k" + b"\x00" + b"\x00"  # delta 5, empty value
    block = bytes([2 * len(first)]) + first + bytes([2 * len(second)]) + second
    covered = (
        (0).to_bytes(2, "big")  # attributes: no codec, CreateTime
        + (1).to_bytes(4, "big")  # last offset delta
        + TS.to_bytes(8, "big")  # base timestamp
        + (TS + 5).to_bytes(8, "big")  # max timestamp
        + (12345).to_bytes(8, "big")  # producer id
        + (6).to_bytes(2, "big")  # producer epoch
        + (77).to_bytes(4, "big")  # base sequence
        + (2).to_bytes(4, "big")  # record count
        + block
    )
    crc = crc32c.crc32c(covered)
    expected = (
        (1000).to_bytes(8, "big")  # base offset
        + (4 + 1 + 4 + len(covered)).to_bytes(4, "big")  # batch length
        + (3).to_bytes(4, "big")  # partition leader epoch
        + b"\x02"  # magic
        + crc.to_bytes(4, "big")
        + covered
    )
    built = build_batch(
        [
            SimpleRecord(value=b"abc", key=None, timestamp=TS, headers=[("h", None)]),
            SimpleRecord(value=b"", key=b"k", timestamp=TS + 5),
        ],
        base_offset=1000,
        producer_id=12345,
        producer_epoch=6,
        base_sequence=77,
        partition_leader_epoch=3,
    )
    assert built == expected
    assert DefaultRecordBatch(expected).validate_crc()
