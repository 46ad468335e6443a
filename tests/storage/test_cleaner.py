from __future__ import annotations

import itertools
import logging
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.config import LogConfig
from seglog.records import batch, control, log_entries
from seglog.records.builder import SimpleRecord, build_batch
from seglog.records.compression import Codec
from seglog.records.record import decode_records
from seglog.storage.cleaner import Cleaner, cleanable_range
from seglog.storage.log import Log
from seglog.storage.verify import verify_log
from tests.storage.conftest import BASE_TS, LogFactory, make_batch
from tests.storage.test_log import read_all

COMPACT = LogConfig(cleanup_policy="compact", segment_bytes=700, min_cleanable_dirty_ratio=0.01)


def _latest(log) -> dict:  # type: ignore[no-untyped-def]
    return {r.key: (r.offset, r.value) for r in read_all(log)}


def _clean(log, now_ms: int = BASE_TS):  # type: ignore[no-untyped-def]
    target = cleanable_range(log, 0, now_ms)
    return Cleaner(1 << 20, clock=lambda: now_ms / 1000).clean(target)


def test_keeps_newest_value_per_key_and_offsets(open_log: LogFactory) -> None:
    log = open_log(COMPACT)
    for i in range(60):
        key = b"k%d" % (i % 5)
        log.append(make_batch([b"v%d" % i + b"." * 40], keys=[key]))
    before = _latest(log)
    segments_before = len(log.segments)
    stats = _clean(log)
    assert stats.records_kept < stats.records_read
    after = read_all(log)
    # Everything outside the active segment holds at most one record per key.
    active_base = log.active_segment.base_offset
    cleaned = [r for r in after if r.offset < active_base]
    assert len({r.key for r in cleaned}) == len(cleaned)
    assert _latest(log) == before
    offsets = [r.offset for r in after]
    assert offsets == sorted(offsets)
    # Segments are grouped by their size before cleaning: a second pass merges
    # the small segments the first one left.
    log.append(make_batch([b"last"], keys=[b"k0"]))
    _clean(log)
    assert len(log.segments) < segments_before
    assert _latest(log)[b"k0"][1] == b"last"
    assert log.log_end_offset == 61


def test_never_touches_the_active_segment(open_log: LogFactory) -> None:
    log = open_log(LogConfig(cleanup_policy="compact", min_cleanable_dirty_ratio=0.01))
    for i in range(10):
        log.append(make_batch([b"v%d" % i], keys=[b"same"]))
    assert len(log.segments) == 1
    target = cleanable_range(log, 0, BASE_TS)
    assert target.dirty_bytes == 0


def test_min_compaction_lag_protects_young_records(open_log: LogFactory) -> None:
    config = LogConfig(
        cleanup_policy="compact",
        segment_bytes=700,
        min_cleanable_dirty_ratio=0.01,
        min_compaction_lag_ms=10_000,
    )
    log = open_log(config)
    for i in range(30):
        log.append(
            make_batch([b"v" * 40], keys=[b"k"], timestamp=BASE_TS + i * 1000), now_ms=BASE_TS
        )
    young = cleanable_range(log, 0, BASE_TS + 5_000)
    assert young.dirty_bytes == 0
    old = cleanable_range(log, 0, BASE_TS + 10**9)
    assert old.dirty_bytes > 0


def test_tombstones_survive_one_cleaning_then_go_after_delete_retention(
    open_log: LogFactory,
) -> None:
    config = LogConfig(
        cleanup_policy="compact",
        segment_bytes=700,
        min_cleanable_dirty_ratio=0.01,
        delete_retention_ms=1000,
    )
    log = open_log(config)
    for i in range(20):
        log.append(make_batch([b"v" * 40], keys=[b"k%d" % (i % 3)]))
    log.append(make_batch([None], keys=[b"k0"]))
    for i in range(20):
        log.append(make_batch([b"w" * 40], keys=[b"other%d" % (i % 2)]))
    _clean(log, BASE_TS)
    records = read_all(log)
    assert any(r.key == b"k0" and r.value is None for r in records)
    assert not any(r.key == b"k0" and r.value is not None for r in records)
    # Before the horizon the tombstone stays; after it, it goes.
    _clean(log, BASE_TS + 500)
    assert any(r.key == b"k0" for r in read_all(log))
    _clean(log, BASE_TS + 2000)
    assert not any(r.key == b"k0" for r in read_all(log))
    assert {r.key for r in read_all(log)} >= {b"k1", b"k2"}


def test_cleaner_checkpoint_and_dirtiest_log(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from seglog.storage import checkpoints
    from seglog.storage.log_dir import LogDir, LogDirSettings

    with LogDir.open(tmp_path, settings=LogDirSettings(log_cleaner_enable=False)) as logs:
        logs.create_topic(
            "c",
            1,
            {
                "cleanup.policy": "compact",
                "internal.segment.bytes": "700",
                "min.cleanable.dirty.ratio": "0.01",
            },
        )
        for i in range(40):
            logs.append("c", 0, make_batch([b"v" * 40], keys=[b"k%d" % (i % 4)]))
        from seglog.storage.cleaner import LogCleaner

        cleaner = LogCleaner(logs)
        stats = cleaner.clean_once()
        assert stats is not None
        offsets = checkpoints.read_offset_checkpoint(tmp_path / "cleaner-offset-checkpoint")
        assert offsets[("c", 0)] == stats.end_offset
        # Nothing dirty is left until more is written.
        assert cleaner.clean_once() is None


@pytest.mark.parametrize(
    "garbage",
    [
        b"\xff\xfe\x00 not text",
        b"7\n1\nc 0 12\n",  # an unknown version
        b"0\n5\nc 0 12\n",  # a count that does not match
        b"0\n1\nc zero twelve\n",
        b"0\n1\n",  # cut short after the count
    ],
)
def test_an_unreadable_checkpoint_counts_as_empty(
    tmp_path: Path, garbage: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    from seglog.storage import checkpoints
    from seglog.storage.cleaner import LogCleaner
    from seglog.storage.log_dir import LogDir, LogDirSettings

    path = tmp_path / checkpoints.CLEANER_OFFSET_CHECKPOINT
    with LogDir.open(tmp_path, settings=LogDirSettings(log_cleaner_enable=False)) as logs:
        logs.create_topic("c", 1, {"cleanup.policy": "compact", "internal.segment.bytes": "700"})
        for i in range(40):
            logs.append("c", 0, make_batch([b"v" * 40], keys=[b"k%d" % (i % 4)]))
        before = logs.log("c", 0).size
        path.write_bytes(garbage)
        cleaner = LogCleaner(logs)
        with caplog.at_level(logging.WARNING, logger="seglog.storage.cleaner"):
            assert cleaner.grab_filthiest_log(BASE_TS) is not None
            stats = cleaner.clean_once()
        assert stats is not None and stats.start_offset == 0
        assert logs.log("c", 0).size < before
        # The file is rewritten valid, and the warning was given once.
        assert checkpoints.read_offset_checkpoint(path) == {("c", 0): stats.end_offset}
        warned = [r for r in caplog.records if "cannot be read" in r.getMessage()]
        assert len(warned) == 1 and str(path) in warned[0].getMessage()
        assert cleaner.clean_once() is None


def _idempotent_batch(pid: int, sequence: int, key: bytes) -> bytes:
    return build_batch(
        [SimpleRecord(b"v" * 40, key, BASE_TS), SimpleRecord(b"w" * 40, key, BASE_TS)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=sequence,
    )


def _batches_by_producer(log) -> dict[int, list[tuple[int, int]]]:  # type: ignore[no-untyped-def]
    """{producer id: [(last offset, record count)]} over every segment, in log order."""
    found: dict[int, list[tuple[int, int]]] = {}
    for segment in log.segments:
        for header in segment.batch_headers(0):
            if header.producer_id >= 0:
                found.setdefault(header.producer_id, []).append(
                    (header.last_offset, header.record_count)
                )
    return found


@pytest.mark.parametrize("keep_snapshots", [True, False])
def test_only_each_producers_last_batch_is_kept_empty(
    open_log: LogFactory, keep_snapshots: bool
) -> None:
    clock = lambda: BASE_TS / 1000  # noqa: E731  (producers expire a day after their last write)
    log = open_log(COMPACT, clock=clock)
    # Producer 1 writes keys a..c, producer 2 overwrites them all, then
    # producer 3 goes on overwriting them, with its last batch in the active segment.
    for pid, batches in ((1, 30), (2, 30), (3, 40)):
        for i in range(batches):
            log.append(_idempotent_batch(pid, 2 * i, b"abc"[i % 3 : i % 3 + 1]))
    last_offsets = {pid: entry.last_offset for pid, entry in log.producer_state.producers.items()}
    assert log.active_segment.base_offset > last_offsets[2]
    _clean(log)
    _clean(log)  # a second pass merges what the first emptied
    by_producer = _batches_by_producer(log)
    # Producers 1 and 2 lost every record: one empty batch each, their last.
    assert by_producer[1] == [(last_offsets[1], 0)]
    assert by_producer[2] == [(last_offsets[2], 0)]
    # Producer 3 has no empty batch: its last batch is in the active segment.
    assert all(count > 0 for _, count in by_producer[3])
    assert by_producer[3][-1][0] == last_offsets[3]
    directory = log.directory
    log.close()
    if not keep_snapshots:  # rebuilt from the batches alone
        for snapshot in directory.glob("*.snapshot"):
            snapshot.unlink()
    reopened = open_log(COMPACT, name=directory.name, clock=clock)
    producers = reopened.producer_state.producers
    assert {pid: producers[pid].last_sequence for pid in (1, 2, 3)} == {1: 59, 2: 59, 3: 79}
    assert {pid: producers[pid].last_offset for pid in (1, 2, 3)} == last_offsets
    # A retry of producer 1's last batch is still recognised as a duplicate.
    retry = reopened.append(_idempotent_batch(1, 58, b"b"))
    assert retry.duplicate and retry.last_offset == last_offsets[1]


@settings(max_examples=40, deadline=None)
@given(
    writes=st.lists(
        st.tuples(st.sampled_from([-1, 1, 2, 3]), st.sampled_from([b"a", b"b", b"c", b"d"])),
        min_size=1,
        max_size=60,
    )
)
def test_cleaning_keeps_values_and_each_producers_last_sequence(
    writes: list[tuple[int, bytes]],
) -> None:
    """Any interleaving of producers (-1: not idempotent) over a few keys."""
    from seglog.storage.log import Log
    from seglog.storage.verify import verify_log

    clock = lambda: BASE_TS / 1000  # noqa: E731
    with tempfile.TemporaryDirectory() as root:
        directory = Path(root) / "t-0"
        log = Log.open(directory, COMPACT, clock=clock)
        sequences: dict[int, int] = {}
        for pid, key in writes:
            if pid < 0:
                log.append(make_batch([b"x" * 40], keys=[key]))
            else:
                log.append(_idempotent_batch(pid, sequences.get(pid, 0), key))
                sequences[pid] = sequences.get(pid, 0) + 2
        log.append(make_batch([b"end" * 20], keys=[b"z"]))  # the writes are all cleanable
        log.roll()
        latest = _latest(log)
        last_offsets = {p: e.last_offset for p, e in log.producer_state.producers.items()}
        _clean(log)
        assert _latest(log) == latest
        for pid, batches in _batches_by_producer(log).items():
            empty = [last for last, count in batches if count == 0]
            assert empty in ([], [last_offsets[pid]]), (pid, batches)
            assert batches[-1][0] == last_offsets[pid]  # the last batch is never dropped
        report = verify_log(log)
        assert report.ok, report.problems
        log.close()
        for snapshot in directory.glob("*.snapshot"):
            snapshot.unlink()
        reopened = Log.open(directory, COMPACT, clock=clock)
        try:
            producers = reopened.producer_state.producers
            assert {p: producers[p].last_sequence for p in sequences} == {
                p: s - 1 for p, s in sequences.items()
            }
        finally:
            reopened.close()


@pytest.mark.leaves_damaged_log_dir(
    "a batch length is overwritten to show the cleaner refuses it; nothing recovers the log"
)
def test_a_damaged_batch_stops_the_cleaning_instead_of_dropping_what_follows(
    open_log: LogFactory,
) -> None:
    """The cleaner reads entries as the reader does: an impossible entry is an error, not
    the end of the segment (which would leave every batch after it out of the copy)."""
    from seglog.errors import CorruptRecordError

    log = open_log(LogConfig(cleanup_policy="compact", min_cleanable_dirty_ratio=0.01))
    for i in range(10):
        log.append(make_batch([b"v%d" % i], keys=[b"k%d" % i]))
    log.roll()
    log.append(make_batch([b"active"], keys=[b"a"]))
    segment = log.segments[0]
    found = segment.translate_offset(5)
    assert found is not None
    with open(segment.log_path, "r+b") as f:
        f.seek(found.position + 8)
        f.write((1).to_bytes(4, "big"))  # a batch length no entry can have
    size = segment.size
    with pytest.raises(CorruptRecordError, match="bad entry"):
        _clean(log)
    assert log.segments[0] is segment and segment.size == size
    log.close()


_DAY_MS = 86_400_000


@settings(max_examples=40, deadline=None)
@given(
    batches=st.lists(
        st.tuples(
            st.lists(
                st.tuples(
                    st.sampled_from([b"a", b"b", b"c", b"d"]), st.none() | st.binary(max_size=30)
                ),
                min_size=1,
                max_size=6,
            ),
            st.sampled_from(list(Codec)),
            st.sampled_from([batch.CREATE_TIME, batch.LOG_APPEND_TIME]),
        ),
        min_size=1,
        max_size=25,
    )
)
def test_cleaning_any_batches_keeps_the_newest_record_of_each_key(
    batches: list[tuple[list[tuple[bytes | None, bytes | None]], Codec, int]],
) -> None:
    """Whatever the codec and timestamp type, what stays is each key's newest record, with
    its offset, timestamp and value; its tombstones go after delete.retention.ms."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Log.open(Path(tmp) / "t-0", COMPACT)
        try:
            for i, (pairs, codec, timestamp_type) in enumerate(batches):
                log.append(
                    build_batch(
                        [
                            SimpleRecord(value, key, BASE_TS + 10 * i + j)
                            for j, (key, value) in enumerate(pairs)
                        ],
                        codec=codec,
                        timestamp_type=timestamp_type,
                    )
                )
            log.roll()
            before = read_all(log)
            newest = {r.key: r.offset for r in before if r.key is not None}
            expected = [r for r in before if r.key is not None and newest[r.key] == r.offset]
            _clean(log, BASE_TS)
            assert read_all(log) == expected
            _clean(log, BASE_TS + _DAY_MS + 1)
            assert read_all(log) == [r for r in expected if r.value is not None]
            report = verify_log(log)
            assert report.ok, report.problems
        finally:
            log.close()


@settings(max_examples=30, deadline=None)
@given(
    keys=st.lists(st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f"]), min_size=2, max_size=6),
    batches=st.integers(2, 30),
    slots=st.integers(1, 8),
)
def test_a_small_dedupe_buffer_cleans_a_prefix_and_keeps_every_newest_record(
    keys: list[bytes], batches: int, slots: int
) -> None:
    """With room for a few keys only, the cleaning stops early: what it keeps is a
    subsequence of the log holding every key's newest record."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Log.open(Path(tmp) / "t-0", COMPACT)
        try:
            for i in range(batches):
                log.append(
                    build_batch(
                        [
                            SimpleRecord(b"v%d" % i, key, BASE_TS + i)
                            for key in keys[i % len(keys) :] + keys[: i % len(keys)]
                        ]
                    )
                )
            log.roll()
            before = read_all(log)
            newest = {r.key: r for r in before}
            target = cleanable_range(log, 0, BASE_TS)
            stats = Cleaner(slots * 27, clock=lambda: BASE_TS / 1000).clean(target)
            after = read_all(log)
            assert stats.records_kept <= stats.records_read
            assert set(after) <= set(before)
            assert [r.offset for r in after] == sorted(r.offset for r in after)
            assert set(newest.values()) <= set(after)
            report = verify_log(log)
            assert report.ok, report.problems
        finally:
            log.close()


# ------------------------------------------------------------ transaction markers

TXN_COMPACT = LogConfig(
    cleanup_policy="compact",
    segment_bytes=700,
    min_cleanable_dirty_ratio=0.01,
    delete_retention_ms=1000,
)


def _txn(log, pid: int, seq: int, key: bytes, value: bytes, *, commit: bool) -> None:  # type: ignore[no-untyped-def]
    """A transaction of one record, ended by its marker."""
    log.append(
        build_batch(
            [SimpleRecord(value + b"." * 40, key, BASE_TS)],
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
            is_transactional=True,
        )
    )
    log.append_marker(pid, 0, commit=commit)


def _read_committed(log) -> list[tuple[int, bytes | None, bytes | None]]:  # type: ignore[no-untyped-def]
    """(offset, key, value) as a read_committed consumer sees them: Kafka's consumer rule.

    The aborted transactions of the fetch (from the ``.txnindex``) name producers
    whose transactional batches are skipped from the transaction's first offset
    until that producer's ABORT marker; control batches are never returned.
    """
    aborted = sorted(log.aborted_transactions(0, log.log_end_offset), key=lambda a: a.first_offset)
    skipping: set[int] = set()
    out = []
    offset = 0
    while offset < log.last_stable_offset:
        result = log.read(offset, 1 << 20)
        if result.data is None:
            break
        region = result.data.region
        data = os.pread(region.fd, region.length, region.position)
        entries = log_entries.scan(data).entries
        for entry in entries:
            header = batch.read_header(data, entry.position)
            if entry.last_offset < offset or header.base_offset >= log.last_stable_offset:
                continue
            while aborted and aborted[0].first_offset <= header.last_offset:
                skipping.add(aborted.pop(0).producer_id)
            if header.is_control:
                marker = control.read_marker(data, entry.position)
                if marker is not None and not marker.is_commit:
                    skipping.discard(header.producer_id)
                continue
            if header.is_transactional and header.producer_id in skipping:
                continue
            out.extend(
                (r.offset, r.key, r.value)
                for r in decode_records(data, entry.position)
                if r.offset >= offset
            )
        offset = entries[-1].next_offset
    return out


def _latest_committed(log) -> dict[bytes | None, bytes | None]:  # type: ignore[no-untyped-def]
    return {key: value for _, key, value in _read_committed(log)}


def _markers(log) -> list[batch.BatchHeader]:  # type: ignore[no-untyped-def]
    return [h for s in log.segments for h in s.batch_headers() if h.is_control]


def test_markers_go_after_delete_retention_once_their_transactions_data_is_gone(
    open_log: LogFactory,
) -> None:
    log = open_log(TXN_COMPACT)
    a, b = 4000, 4001
    _txn(log, a, 0, b"k1", b"a0", commit=True)  # 0-1: overwritten by offset 8 below
    _txn(log, b, 0, b"k1", b"b0", commit=False)  # 2-3: aborted
    _txn(log, a, 1, b"k2", b"a1", commit=True)  # 4-5: stays (k2's newest)
    _txn(log, b, 1, b"k3", b"b1", commit=True)  # 6-7: stays (k3's newest)
    log.append(make_batch([b"plain" + b"." * 40], keys=[b"k1"]))  # 8
    for i in range(12):
        log.append(make_batch([b"f" * 40], keys=[b"filler%d" % (i % 2)]))
    log.roll()
    expected = _latest_committed(log)
    assert expected[b"k1"].startswith(b"plain") and b"k3" in expected
    markers_before = [(h.last_offset, h.has_delete_horizon) for h in _markers(log)]
    assert markers_before == [(1, False), (3, False), (5, False), (7, False)]

    # 1st cleaning: the data of the first two transactions goes (overwritten,
    # aborted); having met it, the cleaning keeps every marker as it is.
    _clean(log, BASE_TS)
    assert [(h.last_offset, h.has_delete_horizon) for h in _markers(log)] == markers_before
    values = [value for _, _, value in _read_committed(log)]
    assert not any(v.startswith((b"a0", b"b0")) for v in values if v)
    assert _latest_committed(log) == expected
    assert [t.last_offset for t in log.aborted_transactions(0, log.log_end_offset)] == [3]

    # 2nd: no data of those two is left: their markers get a delete horizon.
    _clean(log, BASE_TS + 10)
    horizons = {h.last_offset: h.delete_horizon_ms for h in _markers(log) if h.has_delete_horizon}
    assert horizons == {1: BASE_TS + 10 + 1000, 3: BASE_TS + 10 + 1000}
    _clean(log, BASE_TS + 500)  # before the horizon: kept
    assert [h.last_offset for h in _markers(log)] == [1, 3, 5, 7]
    assert _latest_committed(log) == expected

    # After the horizon they go, the aborted transaction's index entry with them;
    # the markers of transactions whose data remains never do.
    _clean(log, BASE_TS + 1010)
    assert [h.last_offset for h in _markers(log)] == [5, 7]
    assert log.aborted_transactions(0, log.log_end_offset) == []
    for segment in log.segments:
        for header in segment.batch_headers():
            if header.is_control:  # a kept marker still reads as one
                found = segment.translate_offset(header.base_offset)
                assert found is not None
                data = segment.read_bytes(found.position, header.size)
                assert control.read_marker(data) is not None
    _clean(log, BASE_TS + 100_000)
    assert [h.last_offset for h in _markers(log)] == [5, 7]
    assert _latest_committed(log) == expected
    assert log.last_stable_offset == log.log_end_offset


def test_a_marker_that_is_its_producers_last_batch_is_kept(open_log: LogFactory) -> None:
    log = open_log(TXN_COMPACT)
    # Producer 4000 wrote nothing here: its abort marker is all the state has of it.
    log.append_marker(4000, 0, commit=False)
    for i in range(16):
        log.append(make_batch([b"f" * 40], keys=[b"filler%d" % (i % 2)]))
    log.roll()
    for now in (BASE_TS, BASE_TS + 10, BASE_TS + 5000):
        _clean(log, now)
    assert [h.producer_id for h in _markers(log)] == [4000]


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["commit", "abort", "plain"]),
            st.integers(0, 2),  # producer
            st.sampled_from([b"k0", b"k1", b"k2", b"k3"]),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_cleaning_keeps_exactly_what_read_committed_readers_see(
    writes: list[tuple[str, int, bytes]],
) -> None:
    with tempfile.TemporaryDirectory() as root:
        factory = LogFactory(Path(root))
        log = factory(TXN_COMPACT)
        sequences = [0, 0, 0]
        for i, (kind, producer, key) in enumerate(writes):
            value = b"%s-%d" % (kind.encode(), i)
            if kind == "plain":
                log.append(make_batch([value + b"." * 40], keys=[key]))
            else:
                pid = 5000 + producer
                _txn(log, pid, sequences[producer], key, value, commit=kind == "commit")
                sequences[producer] += 1
        for i in range(12):
            log.append(make_batch([b"f" * 40], keys=[b"filler%d" % (i % 2)]))
        log.roll()
        expected = _latest_committed(log)
        committed_before = set(_read_committed(log))
        for now in (BASE_TS, BASE_TS + 10, BASE_TS + 2000, BASE_TS + 4000):
            _clean(log, now)
            seen = _read_committed(log)
            assert _latest_committed(log) == expected
            assert set(seen) <= committed_before
            everything = [r.value or b"" for r in read_all(log)]
            assert not any(v.startswith(b"abort") for v in everything)
            assert log.last_stable_offset == log.log_end_offset
        # A marker is left only where its transaction still has data before it.
        by_producer: dict[int, list[batch.BatchHeader]] = {}
        for segment in log.segments:
            for header in segment.batch_headers():
                by_producer.setdefault(header.producer_id, []).append(header)
        for pid, headers in by_producer.items():
            if pid < 0:
                continue
            for before, marker in itertools.pairwise([None, *headers]):
                if marker is not None and marker.is_control and marker is not headers[-1]:
                    assert before is not None and not before.is_control, (
                        f"a marker of {pid} outlived its data"
                    )
        factory.check()
