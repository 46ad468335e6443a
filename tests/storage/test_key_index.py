"""The key index file and its builder: lookups equal a scan of the segment's records."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.errors import CorruptIndexError
from seglog.records import batch
from seglog.records.builder import build_batch
from seglog.records.compression import Codec
from seglog.records.record import decode_records
from seglog.storage import key_index
from seglog.storage.key_index import KeyIndexBuilder, KeyIndexFile, build, key_hash
from seglog.storage.key_search import search_segment


def _read_at(data: bytes):  # type: ignore[no-untyped-def]
    return lambda position, size: data[position : position + size]


def _log(batches: list[list[tuple[bytes | None, bytes | None, int]]], codecs: list[Codec]) -> bytes:
    out = bytearray()
    offset = 100
    for records, codec in zip(batches, codecs, strict=True):
        out += build_batch(records, base_offset=offset, codec=codec)
        offset += len(records)
    return bytes(out)


def _scan(log: bytes, key: bytes) -> list[int]:
    found = []
    for position, _ in batch.iter_headers(log):
        found += [r.offset for r in decode_records(log, position) if r.key == key]
    return sorted(found, reverse=True)


def test_kafka_murmur2_vectors() -> None:
    # Values Kafka's Utils.murmur2 returns (its own unit test's inputs).
    assert key_hash(b"21") == (-973932308) & 0xFFFFFFFF
    assert key_hash(b"foobar") == (-790332482) & 0xFFFFFFFF
    assert key_hash(b"a-little-bit-long-string") == (-985981536) & 0xFFFFFFFF
    assert key_hash(b"a-little-bit-longer-string") == (-1486304829) & 0xFFFFFFFF
    assert key_hash(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == (-58897971) & 0xFFFFFFFF
    assert key_hash(b"abc") == 479470107


batches_strategy = st.lists(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.sampled_from([b"a", b"b", b"k" * 40, b"", b"\xff\x00"])),
            st.one_of(st.none(), st.binary(max_size=30)),
            st.integers(min_value=0, max_value=10**13),
        ),
        min_size=1,
        max_size=12,
    ),
    max_size=10,
)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    batches=batches_strategy,
    codecs=st.lists(st.sampled_from(list(Codec)), min_size=10, max_size=10),
    slot_count=st.sampled_from([1, 2, 16, None]),
    cut=st.integers(min_value=0, max_value=5),
)
def test_lookups_equal_a_scan(
    tmp_path_factory: pytest.TempPathFactory,
    batches: list[list[tuple[bytes | None, bytes | None, int]]],
    codecs: list[Codec],
    slot_count: int | None,
    cut: int,
) -> None:
    log = _log(batches, codecs[: len(batches)])
    # Index in pieces, as an active segment is: a few appends at a time.
    builder = KeyIndexBuilder(100, slot_count)
    ends = sorted({p for p, _ in batch.iter_headers(log)} | {len(log)})
    for end in [*ends[:: max(1, cut)], len(log)]:
        builder.catch_up(_read_at(log), end)
    assert builder.indexed_bytes == len(log)
    path = tmp_path_factory.mktemp("k") / "00000000000000000100.keyindex"
    builder.write(path)
    sealed = KeyIndexFile.load(path, 100, len(log))
    for key in (b"a", b"b", b"k" * 40, b"", b"\xff\x00", b"never"):
        expected = _scan(log, key)
        for index in (builder, sealed):
            assert [r.offset for r in search_segment(index, _read_at(log), key)] == expected
    sealed.close()


def test_collisions_in_one_slot_stay_exact(tmp_path: Path) -> None:
    keys = [f"key-{i}".encode() for i in range(300)]
    records = [(k, k + b"!", 1000 + i) for i, k in enumerate(keys)]
    log = build_batch(records[:150], base_offset=0) + build_batch(
        records[150:], base_offset=150, codec=Codec.ZSTD
    )
    index = build(0, _read_at(log), len(log), slot_count=1)
    path = tmp_path / "00000000000000000000.keyindex"
    index.write(path)
    sealed = KeyIndexFile.load(path, 0, len(log))
    for i, key in enumerate(keys):
        for idx in (index, sealed):
            found = list(search_segment(idx, _read_at(log), key))
            assert [(r.offset, r.value, r.timestamp) for r in found] == [(i, key + b"!", 1000 + i)]
    sealed.close()


def test_filters_by_offset_and_time() -> None:
    log = b"".join(
        build_batch([(b"k", str(i).encode(), 1000 * i)], base_offset=i) for i in range(10)
    )
    index = build(0, _read_at(log), len(log))
    search = lambda **kw: [r.offset for r in search_segment(index, _read_at(log), b"k", **kw)]  # noqa: E731
    assert search() == list(range(9, -1, -1))
    assert search(start_offset=3, end_offset=6) == [5, 4, 3]
    assert search(from_ms=2000, to_ms=4000) == [4, 3, 2]


def test_control_batches_and_null_keys_are_not_indexed() -> None:
    log = build_batch([(None, b"v", 1)], base_offset=0) + build_batch(
        [(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", 1)],
        base_offset=1,
        is_control=True,
        producer_id=7,
        producer_epoch=0,
        is_transactional=True,
    )
    index = build(0, _read_at(log), len(log))
    assert index.entry_count == 0
    assert list(search_segment(index, _read_at(log), b"\x00\x00\x00\x00")) == []


def test_a_batch_cut_by_the_size_waits_for_the_next_catch_up() -> None:
    first = build_batch([(b"a", b"1", 1)], base_offset=0)
    second = build_batch([(b"a", b"2", 2)], base_offset=1)
    log = first + second
    builder = KeyIndexBuilder(0)
    builder.catch_up(_read_at(log), len(first) + 10)
    assert builder.indexed_bytes == len(first)
    builder.catch_up(_read_at(log), len(log))
    assert [r.offset for r in search_segment(builder, _read_at(log), b"a")] == [1, 0]


def test_batches_larger_than_a_read_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(key_index, "READ_CHUNK", 100)
    log = b"".join(
        build_batch([(f"k{i}".encode(), b"x" * 80, i) for i in range(5)], base_offset=5 * n)
        for n in range(4)
    )
    index = build(0, _read_at(log), len(log))
    assert index.entry_count == 20
    assert [r.offset for r in search_segment(index, _read_at(log), b"k3")] == [18, 13, 8, 3]


def test_many_entries_grow_the_arrays_and_slots() -> None:
    rng = random.Random(5)
    keys = [f"{rng.random()}".encode() for _ in range(5000)]
    log = b"".join(
        build_batch([(k, None, 0) for k in keys[i : i + 500]], base_offset=i)
        for i in range(0, 5000, 500)
    )
    index = build(0, _read_at(log), len(log))
    assert index.entry_count == 5000
    for i in (0, 1234, 4999):
        assert [r.offset for r in search_segment(index, _read_at(log), keys[i])] == [i]


def _written(tmp_path: Path) -> tuple[Path, bytes]:
    log = build_batch([(b"a", b"1", 1), (b"b", b"2", 2)], base_offset=0)
    path = tmp_path / "00000000000000000000.keyindex"
    build(0, _read_at(log), len(log)).write(path)
    return path, log


def test_missing_torn_and_stale_files_are_refused(tmp_path: Path) -> None:
    path, log = _written(tmp_path)
    KeyIndexFile.load(path, 0, len(log)).close()
    with pytest.raises(CorruptIndexError, match="stale"):
        KeyIndexFile.load(path, 0, len(log) + 1)
    with pytest.raises(CorruptIndexError, match="base offset"):
        KeyIndexFile.load(path, 5, len(log))
    data = path.read_bytes()
    path.write_bytes(data[:-1])
    with pytest.raises(CorruptIndexError, match="torn"):
        KeyIndexFile.load(path, 0, len(log))
    path.write_bytes(data[:30])
    with pytest.raises(CorruptIndexError, match="torn"):
        KeyIndexFile.load(path, 0, len(log))
    damaged = bytearray(data)
    damaged[20] ^= 1
    path.write_bytes(bytes(damaged))
    with pytest.raises(CorruptIndexError, match="torn"):
        KeyIndexFile.load(path, 0, len(log))
    path.unlink()
    with pytest.raises(CorruptIndexError, match="missing"):
        KeyIndexFile.load(path, 0, len(log))


def test_a_chain_that_points_forward_does_not_loop(tmp_path: Path) -> None:
    path, log = _written(tmp_path)
    data = bytearray(path.read_bytes())
    header = key_index.HEADER.unpack_from(data)
    slots, entries = header[7], header[8]
    assert entries == 2
    first_entry = key_index.HEADER_SIZE + 4 * slots
    for e in range(entries):  # every entry's previous points at itself
        struct.pack_into(">i", data, first_entry + 12 * e + 8, e + 1)
    path.write_bytes(bytes(data))
    sealed = KeyIndexFile.load(path, 0, len(log))
    assert [r.offset for r in search_segment(sealed, _read_at(log), b"a")] == [0]
    sealed.close()


def test_the_file_layout(tmp_path: Path) -> None:
    path, log = _written(tmp_path)
    data = path.read_bytes()
    magic, version, _, base, indexed, last, max_ts, slots, entries, batches, _ = (
        key_index.HEADER.unpack_from(data)
    )
    assert (magic, version, base, indexed, last, max_ts) == (b"SLKX", 1, 0, len(log), 1, 2)
    assert (slots, entries, batches) == (16, 2, 1)
    assert len(data) == 64 + 4 * slots + 12 * entries + 16 * batches
    h, delta, previous = key_index.ENTRY.unpack_from(data, 64 + 4 * slots + 12)
    assert (h, delta, previous) == (key_hash(b"b"), 1, 0)
    slot = key_index.SLOT.unpack_from(data, 64 + 4 * (key_hash(b"b") & 15))[0]
    assert slot == 2
    assert key_index.BATCH.unpack_from(data, 64 + 4 * slots + 24) == (0, 1, 2)


def test_reading_into_a_reused_buffer_indexes_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(key_index, "READ_CHUNK", 4096)
    log = b"".join(
        build_batch(
            [(f"k{i % 7}".encode(), b"x" * (i % 50), i) for i in range(n, n + 20)],
            base_offset=n,
            codec=Codec.LZ4 if n % 40 else Codec.NONE,
        )
        for n in range(0, 400, 20)
    ) + build_batch([(b"big", b"y" * 9000, 1)], base_offset=400)

    def read_into(view: memoryview, position: int) -> int:
        data = log[position : position + len(view)]
        view[: len(data)] = data
        return len(data)

    by_read = build(0, _read_at(log), len(log))
    by_buffer = build(0, _read_at(log), len(log), read_into=read_into)
    assert by_buffer.to_bytes() == by_read.to_bytes()
    for key in (b"k3", b"big"):
        assert [r.offset for r in search_segment(by_buffer, _read_at(log), key)] == _scan(log, key)
