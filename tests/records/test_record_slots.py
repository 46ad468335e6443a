"""Compaction's record walk: slots agree with decoded records, and a batch rebuilt from
slots is byte for byte the batch rebuilt from decoded values."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.errors import CorruptRecordError, InvalidRecordError
from seglog.records import batch
from seglog.records.builder import SimpleRecord, build_batch, rebuild_batch, rebuild_from_slots
from seglog.records.compression import Codec, decompress
from seglog.records.record import decode_records, records_block, scan_slots
from tests.records.strategies import BASE_TS, codecs, offset_deltas, records, wide_records


def _block(data: bytes) -> tuple[bytes, int, int, batch.BatchHeader]:
    header = batch.read_header(data, 0)
    if header.compression == Codec.NONE:
        return data, batch.HEADER_SIZE, len(data), header
    if header.record_count == 0:
        return b"", 0, 0, header
    block = bytes(records_block(data, 0, header))
    return block, 0, len(block), header


@st.composite
def batches(draw: st.DrawFn) -> bytes:
    recs = draw(records | wide_records)
    deltas = draw(offset_deltas(len(recs)))
    recs = [
        SimpleRecord(r.value, r.key, r.timestamp, r.headers, delta)
        for r, delta in zip(recs, deltas, strict=True)
    ]
    horizon = draw(st.none() | st.integers(BASE_TS - 10**9, BASE_TS + 10**9))
    try:
        return build_batch(
            recs,
            base_offset=draw(st.integers(0, 2**40)),
            codec=draw(codecs),
            producer_id=draw(st.sampled_from([-1, 7])),
            producer_epoch=3,
            base_sequence=draw(st.sampled_from([-1, 11])),
            is_transactional=draw(st.booleans()),
            delete_horizon_ms=horizon,
            last_offset_delta=(deltas[-1] if deltas else 0) + draw(st.integers(0, 5)),
        )
    except InvalidRecordError:  # wide timestamps whose deltas from a horizon leave int64
        return build_batch(recs, codec=draw(codecs))


@settings(max_examples=300, deadline=None)
@given(batches())
def test_slots_agree_with_decoded_records(data: bytes) -> None:
    block, start, end, header = _block(data)
    slots = scan_slots(block, start, end, header.base_offset, header.record_count)
    decoded = decode_records(data)
    assert [(s[0], s[1], s[2]) for s in slots] == [
        (r.offset, r.key, r.value is None) for r in decoded
    ]
    assert [header.base_timestamp + s[3] for s in slots] == [r.timestamp for r in decoded]
    # The slots tile the block.
    assert [s[4] for s in slots[1:]] == [s[7] for s in slots[:-1]]
    if slots:
        assert (slots[0][4], slots[-1][7]) == (start, end)


@settings(max_examples=300, deadline=None)
@given(batches(), st.data())
def test_rebuild_from_slots_is_rebuild_batch(data: bytes, draw: st.DataObject) -> None:
    block, start, end, header = _block(data)
    slots = scan_slots(block, start, end, header.base_offset, header.record_count)
    decoded = decode_records(data)
    chosen = draw.draw(st.lists(st.booleans(), min_size=len(slots), max_size=len(slots)))
    horizon = draw.draw(st.none() | st.just(header.base_timestamp) | st.integers(0, 2 * BASE_TS))
    kept = [s for s, keep in zip(slots, chosen, strict=True) if keep]
    kept_records = [r for r, keep in zip(decoded, chosen, strict=True) if keep]
    try:
        expected: bytes | type[Exception] = rebuild_batch(
            header,
            kept_records,
            base_offset=header.base_offset,
            last_offset=header.last_offset,
            delete_horizon_ms=horizon,
        )
    except InvalidRecordError as exc:  # then both raise it
        expected = type(exc)
    if isinstance(expected, bytes):
        assert rebuild_from_slots(header, block, kept, delete_horizon_ms=horizon) == expected
    else:
        with pytest.raises(expected):
            rebuild_from_slots(header, block, kept, delete_horizon_ms=horizon)


def test_a_key_running_past_its_record_is_corrupt() -> None:
    data = build_batch([SimpleRecord(b"v", key=b"k", timestamp=BASE_TS)])
    block = bytearray(data)
    # Record: length, attributes, timestamp delta, offset delta, then the key's length.
    block[batch.HEADER_SIZE + 4] = 2 * 40  # a key of 40 bytes in a record of 8
    with pytest.raises(CorruptRecordError):
        scan_slots(bytes(block), batch.HEADER_SIZE, len(block), 0, 1)


def test_bytes_after_the_last_record_are_corrupt() -> None:
    data = build_batch([SimpleRecord(b"v", key=b"k", timestamp=BASE_TS)]) + b"\0"
    with pytest.raises(CorruptRecordError, match="after its 1 records"):
        scan_slots(data, batch.HEADER_SIZE, len(data), 0, 1)


def test_decompress_is_what_the_walk_reads() -> None:
    recs = [SimpleRecord(b"v" * 300, key=b"k%d" % i, timestamp=BASE_TS + i) for i in range(20)]
    data = build_batch(recs, codec=Codec.ZSTD)
    header = batch.read_header(data, 0)
    block = decompress(header.compression, memoryview(data)[batch.HEADER_SIZE :])
    slots = scan_slots(block, 0, len(block), 0, 20)
    assert [s[1] for s in slots] == [b"k%d" % i for i in range(20)]
