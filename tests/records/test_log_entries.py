"""Shallow entry scans over buffers that mix v0, v1 and v2 entries."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from seglog.errors import CorruptRecordError, UnsupportedMagicError
from seglog.records import legacy, log_entries
from seglog.records.builder import SimpleRecord, build_batch
from seglog.records.compression import Codec, compress
from seglog.records.log_entries import EntryInfo
from seglog.records.record import decode_entries
from tests.records.legacy_encoder import TS, message


def mixed_log() -> tuple[bytes, list[EntryInfo]]:
    """A v0 message, a v1 gzip wrapper, a v2 batch from seglog and one from kafka-python."""
    v0 = message(0, b"a", b"1", magic=0)
    inner = b"".join(message(i, b"k", b"v", timestamp=TS + i) for i in range(3))
    v1 = message(3, None, compress(Codec.GZIP, inner), timestamp=TS + 2, attributes=Codec.GZIP)
    v2 = build_batch(
        [SimpleRecord(value=b"x", timestamp=TS + 10)] * 2, base_offset=4, codec=Codec.LZ4
    )
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for i in range(4):
        builder.append(i, TS + 20 + i, None, b"y", [])
    theirs = bytearray(builder.build())
    theirs[0:8] = (6).to_bytes(8, "big")  # base offset: outside the CRC
    parts = [v0, v1, v2, bytes(theirs)]
    expected = [
        (0, 0, 0, -1, 1),  # magic, base offset, last offset, max timestamp, count
        (1, 1, 3, TS + 2, 3),
        (2, 4, 5, TS + 10, 2),
        (2, 6, 9, TS + 23, 4),
    ]
    entries = []
    position = 0
    for part, (magic, base, last, max_ts, count) in zip(parts, expected, strict=True):
        entries.append(EntryInfo(position, len(part), magic, base, last, max_ts, count))
        position += len(part)
    return b"".join(parts), entries


def test_read_entry_of_every_format() -> None:
    data, expected = mixed_log()
    for info in expected:
        assert log_entries.read_entry(data, info.position) == info
        assert log_entries.read_entry(data, info.position, check_crc=False) == info
    assert expected[1].next_offset == 4


def test_scan_a_mixed_log() -> None:
    data, expected = mixed_log()
    result = log_entries.scan(data)
    assert result.entries == expected
    assert result.valid_end == len(data) and result.error is None
    middle = log_entries.scan(data, start=expected[1].position, end=expected[3].position)
    assert middle.entries == expected[1:3] and middle.valid_end == expected[3].position


def test_scan_stops_at_the_first_bad_entry() -> None:
    data, expected = mixed_log()
    for broken_entry in range(len(expected)):
        broken = bytearray(data)
        broken[expected[broken_entry].position + expected[broken_entry].size - 1] ^= 0x40
        result = log_entries.scan(bytes(broken))
        assert result.entries == expected[:broken_entry]
        assert result.valid_end == expected[broken_entry].position
        assert isinstance(result.error, CorruptRecordError)
        with pytest.raises(CorruptRecordError):
            log_entries.read_entry(broken, expected[broken_entry].position)
        # Without CRC checks the v2 batches pass (their headers are intact).
        unchecked = log_entries.scan(bytes(broken), check_crc=False)
        assert len(unchecked.entries) >= broken_entry


def test_scan_cut_at_every_byte() -> None:
    data, expected = mixed_log()
    ends = [e.position + e.size for e in expected]
    for cut in range(len(data) + 1):
        result = log_entries.scan(data[:cut])
        whole = [e for e, end in zip(expected, ends, strict=True) if end <= cut]
        assert result.entries == whole
        assert result.valid_end == (whole[-1].position + whole[-1].size if whole else 0)
        assert (result.error is None) == (cut in (0, *ends))


def test_unknown_magic() -> None:
    entry = bytearray(message(0, b"k", b"v"))
    entry[16] = 7
    with pytest.raises(UnsupportedMagicError):
        log_entries.read_entry(entry)
    assert isinstance(log_entries.scan(bytes(entry)).error, UnsupportedMagicError)


@given(st.binary(max_size=300), st.booleans())
def test_scan_never_raises(data: bytes, check_crc: bool) -> None:
    result = log_entries.scan(data, check_crc=check_crc)
    assert 0 <= result.valid_end <= len(data)
    position = 0
    for entry in result.entries:
        assert entry.position == position
        position += entry.size
    assert position == result.valid_end
    assert (result.error is None) == (result.valid_end == len(data))


@settings(max_examples=150)
@given(
    where=st.integers(0),
    garbage=st.binary(min_size=1, max_size=40),
    mode=st.sampled_from(["flip", "overwrite", "cut_and_append"]),
)
def test_scan_stops_at_the_first_damaged_entry(where: int, garbage: bytes, mode: str) -> None:
    data, expected = mixed_log()
    broken = bytearray(data)
    spot = where % len(data)
    if mode == "flip":
        broken[spot] ^= garbage[0] or 1
    elif mode == "overwrite":
        broken[spot : spot + len(garbage)] = garbage[: len(data) - spot]
    else:
        broken = broken[:spot] + bytearray(garbage)
    result = log_entries.scan(bytes(broken))
    # Every entry before the damage is found; scanning stops at an entry boundary.
    untouched = [e for e in expected if e.position + e.size <= spot]
    assert result.entries[: len(untouched)] == untouched
    assert result.valid_end in {0} | {e.position + e.size for e in result.entries}
    for entry in result.entries:
        assert log_entries.read_entry(bytes(broken), entry.position) == entry
    if result.error is not None:
        assert isinstance(result.error, CorruptRecordError)
        with pytest.raises(CorruptRecordError):
            log_entries.read_entry(bytes(broken), result.valid_end)
    else:
        assert result.valid_end == len(broken)


@given(st.binary(max_size=300))
def test_garbage_to_the_record_readers(data: bytes) -> None:
    with contextlib.suppress(CorruptRecordError):
        for record in decode_entries(data):
            assert isinstance(record.offset, int)
    with contextlib.suppress(CorruptRecordError):
        for record in legacy.decode_legacy(data, check_crc=True):
            assert isinstance(record.offset, int)
    # The same garbage behind a valid v2 prefix reaches the same code at a position.
    prefix = build_batch([SimpleRecord(value=b"ok", timestamp=TS)])
    result = log_entries.scan(prefix + data)
    assert result.entries[0].size == len(prefix)
    assert result.valid_end >= len(prefix)
