from __future__ import annotations

import contextlib
import struct

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.errors import CorruptRecordError, UnsupportedMagicError
from seglog.records import batch
from seglog.records.builder import SimpleRecord, build_batch
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


def test_golden_bytes() -> None:
    expected = hand_built_batch()
    built = build_batch([SimpleRecord(value=b"hello", key=b"k1", timestamp=TS)], base_offset=42)
    assert built == expected
    header = batch.validate(expected)
    assert (header.base_offset, header.last_offset, header.record_count) == (42, 42, 1)
    assert header.size == len(expected) == 75


def test_header_properties() -> None:
    data = build_batch(
        [SimpleRecord(value=b"a", timestamp=TS)] * 3,
        base_offset=10,
        producer_id=7,
        producer_epoch=1,
        base_sequence=2**31 - 2,
        is_transactional=True,
    )
    h = batch.validate(data)
    assert h.last_offset == 12 and h.next_offset == 13
    assert h.is_transactional and not h.is_control and h.has_producer_id
    assert h.last_sequence == 0  # wraps at 2**31


def test_flipped_byte_in_covered_part_fails_crc() -> None:
    data = build_batch([SimpleRecord(value=b"x" * 50, key=b"k", timestamp=TS)])
    for i in range(batch.ATTRIBUTES_OFFSET, len(data)):
        broken = bytearray(data)
        broken[i] ^= 0x01
        with pytest.raises(CorruptRecordError):
            batch.validate(broken)


def test_fields_outside_crc_can_change() -> None:
    data = bytearray(build_batch([SimpleRecord(value=b"x", timestamp=TS)]))
    batch.patch_base_offset(data, 0, 123456789)
    batch.patch_partition_leader_epoch(data, 0, 9)
    h = batch.validate(data)
    assert h.base_offset == 123456789 and h.partition_leader_epoch == 9
    assert [r.offset for r in decode_records(data)] == [123456789]


def test_log_append_time_keeps_crc_valid() -> None:
    data = bytearray(build_batch([SimpleRecord(value=b"x", timestamp=5)] * 2))
    batch.apply_log_append_time(data, 0, TS)
    h = batch.validate(data)
    assert h.timestamp_type == batch.LOG_APPEND_TIME and h.max_timestamp == TS
    assert [r.timestamp for r in decode_records(data)] == [TS, TS]


def test_truncation_at_every_byte_is_corrupt() -> None:
    data = build_batch(
        [SimpleRecord(value=b"value", key=b"key", timestamp=TS, headers=[("h", b"")])]
    )
    for cut in range(len(data)):
        with pytest.raises(CorruptRecordError):
            batch.validate(data[:cut])


def test_wrong_magic() -> None:
    data = bytearray(build_batch([SimpleRecord(value=b"x", timestamp=TS)]))
    data[16] = 3
    with pytest.raises(UnsupportedMagicError):
        batch.read_header(data)


@given(st.binary(max_size=200))
def test_garbage_raises_only_corrupt_record(data: bytes) -> None:
    with contextlib.suppress(CorruptRecordError):
        list(batch.iter_headers(data))
