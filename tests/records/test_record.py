from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.errors import CorruptRecordError
from seglog.records.builder import SimpleRecord, build_batch, rebuild_batch
from seglog.records.compression import Codec
from seglog.records.record import (
    Header,
    decode_entries,
    decode_records,
    first_at_or_after,
    first_record_timestamp,
)
from tests.records.strategies import records

TS = 1_700_000_000_000


@given(recs=records, codec=st.sampled_from(list(Codec)), base=st.integers(0, 2**40))
def test_round_trip(recs: list[SimpleRecord], codec: Codec, base: int) -> None:
    decoded = decode_records(build_batch(recs, codec=codec, base_offset=base))
    assert [r.offset for r in decoded] == list(range(base, base + len(recs)))
    assert [(r.key, r.value, r.timestamp) for r in decoded] == [
        (s.key, s.value, s.timestamp) for s in recs
    ]
    assert [r.headers for r in decoded] == [tuple(s.headers) for s in recs]


def test_decode_entries_ignores_a_cut_tail() -> None:
    a = build_batch([SimpleRecord(value=b"a", timestamp=TS)], base_offset=0)
    b = build_batch([SimpleRecord(value=b"b", timestamp=TS)], base_offset=1)
    assert [r.value for r in decode_entries(a + b[:-5])] == [b"a"]


def test_rebuild_keeps_offsets_span_and_producer() -> None:
    original = build_batch(
        [SimpleRecord(value=b"%d" % i, key=b"k", timestamp=TS + i) for i in range(5)],
        base_offset=100,
        producer_id=3,
        producer_epoch=2,
        base_sequence=50,
        codec=Codec.LZ4,
    )
    from seglog.records import batch

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


def test_delete_horizon_keeps_record_timestamps() -> None:
    from seglog.records import batch

    recs = [
        SimpleRecord(value=None, key=b"k", timestamp=TS),
        SimpleRecord(value=b"v", key=b"j", timestamp=TS + 9),
    ]
    data = build_batch(recs, delete_horizon_ms=TS + 86_400_000)
    h = batch.validate(data)
    assert h.has_delete_horizon and h.delete_horizon_ms == TS + 86_400_000
    assert [r.timestamp for r in decode_records(data)] == [TS, TS + 9]


def test_time_search_within_a_batch() -> None:
    data = build_batch(
        [SimpleRecord(value=b"x", timestamp=TS + t) for t in (0, 0, 5, 5, 9)], base_offset=10
    )
    assert first_record_timestamp(data) == (10, TS)
    assert first_at_or_after(data, TS + 1, 0) == (12, TS + 5)
    assert first_at_or_after(data, TS + 5, 13) == (13, TS + 5)
    assert first_at_or_after(data, TS + 10, 0) is None


def test_header_value_may_be_null() -> None:
    data = build_batch([SimpleRecord(value=b"x", headers=[Header("a", None), ("b", b"1")])])
    assert decode_records(data)[0].headers == (Header("a", None), Header("b", b"1"))


def test_truncated_record_block_is_corrupt() -> None:
    data = build_batch([SimpleRecord(value=b"x" * 20, key=b"k")])
    from seglog.records import batch

    for cut in range(batch.HEADER_SIZE, len(data)):
        with pytest.raises(CorruptRecordError):
            decode_records(data[:cut])


@given(st.binary(max_size=300))
def test_garbage_in_entries_raises_only_corrupt_record(data: bytes) -> None:
    with contextlib.suppress(CorruptRecordError):
        list(decode_entries(data))
