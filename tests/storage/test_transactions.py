"""Transactions in one partition: control batches, the LSO and the ``.txnindex``."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.config import LogConfig
from seglog.errors import InvalidProducerEpochError
from seglog.records import batch, control
from seglog.records.builder import SimpleRecord, build_batch
from seglog.records.record import decode_records
from seglog.storage import filenames, txn_index
from seglog.storage.log import Log
from tests.storage.conftest import LogFactory

PID = 4000
NOW = int(time.time() * 1000)


def txn_batch(log: Log, seq: int, count: int = 2, *, pid: int = PID, epoch: int = 0) -> int:
    """Append a transactional batch of ``count`` records; returns its first offset."""
    data = build_batch(
        [SimpleRecord(b"v%d" % (seq + i), timestamp=NOW) for i in range(count)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )
    return log.append(data).first_offset


def test_marker_layout_is_kafkas() -> None:
    data = control.build_marker(7, 2, commit=True, coordinator_epoch=3, timestamp=5)
    header = batch.validate(data)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, -1)
    (record,) = decode_records(data)
    assert record.key == bytes.fromhex("00000001")
    assert record.value == bytes.fromhex("000000000003")
    assert control.read_marker(data) == control.EndTxnMarker(control.ControlType.COMMIT, 3)
    abort = control.build_marker(7, 2, commit=False, coordinator_epoch=0, timestamp=5)
    assert decode_records(abort)[0].key == bytes.fromhex("00000000")


def test_txn_index_entry_layout_is_kafkas() -> None:
    entry = txn_index.AbortedTxn(7, 10, 12, 13)
    assert entry.encode().hex() == (
        "00000000000000000007000000000000000a000000000000000c000000000000000d"
    )
    assert txn_index.ENTRY_SIZE == 34


@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**63 - 1),
            st.integers(-1, 2**63 - 1),
            st.integers(-1, 2**63 - 1),
            st.integers(-1, 2**63 - 1),
        ),
        max_size=20,
    ),
    st.integers(0, 33),
)
def test_txn_index_round_trips_and_ignores_a_torn_tail(
    rows: list[tuple[int, int, int, int]], torn: int
) -> None:
    entries = [txn_index.AbortedTxn(*row) for row in rows]
    data = b"".join(e.encode() for e in entries)
    assert txn_index.decode(data + b"\x00" * torn) == entries


def test_an_open_transaction_holds_the_lso(open_log: LogFactory) -> None:
    log = open_log()
    log.append(build_batch([SimpleRecord(b"plain", timestamp=1)]))
    first = txn_batch(log, 0)
    txn_batch(log, 2)
    assert log.high_watermark == 5
    assert log.last_stable_offset == first == 1
    info = log.append_marker(PID, 0, commit=True)
    assert info.first_offset == 5
    assert log.last_stable_offset == log.high_watermark == 6
    assert log.aborted_transactions(0, 6) == []
    assert not log.active_segment.txn_index_path.exists()


def test_an_abort_is_indexed_with_the_lso_after_it(open_log: LogFactory) -> None:
    log = open_log()
    txn_batch(log, 0, pid=PID)  # 0-1, stays open
    txn_batch(log, 0, pid=PID + 1)  # 2-3
    log.append_marker(PID + 1, 0, commit=False)  # 4
    expected = txn_index.AbortedTxn(PID + 1, 2, 4, 0)
    assert txn_index.read(log.active_segment.txn_index_path) == [expected]
    assert log.aborted_transactions(0, 5) == [expected]
    assert log.aborted_transactions(5, 6) == []
    assert log.last_stable_offset == 0
    log.append_marker(PID, 0, commit=False)  # 5: nothing else open, LSO is 6
    assert log.aborted_transactions(0, 6)[0] == txn_index.AbortedTxn(PID, 0, 5, 6)
    assert log.last_stable_offset == 6


def test_a_marker_from_an_old_epoch_is_refused(open_log: LogFactory) -> None:
    log = open_log()
    txn_batch(log, 0, epoch=3)
    with pytest.raises(InvalidProducerEpochError):
        log.append_marker(PID, 2, commit=True)
    # The coordinator's abort at a bumped epoch ends the transaction and fences.
    log.append_marker(PID, 4, commit=False)
    assert log.last_stable_offset == log.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        txn_batch(log, 2, epoch=3)


def test_after_a_crash_the_index_and_open_transactions_are_rebuilt(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=400)
    log = Log.open(tmp_path / "t-0", config)
    for i in range(6):
        txn_batch(log, 2 * i, pid=PID + i)
        if i % 2:
            log.append_marker(PID + i, 0, commit=False)
    txn_batch(log, 0, pid=PID + 10)
    lso = log.last_stable_offset
    aborted = log.aborted_transactions(0, log.log_end_offset)
    assert len(aborted) == 3
    assert len(log.segments) > 1
    # The crash: no final snapshot, and the active segment's index, which
    # the log had not synced, lost. (A snapshot is synced only with the data
    # and the indexes below it, so older segments keep theirs.)
    log.active_segment.txn_index_path.unlink(missing_ok=True)
    # A stale entry past the end (a torn tail the recovery cut away) goes too.
    txn_index.append(log.segments[0].txn_index_path, [txn_index.AbortedTxn(1, 100, 101, 102)])
    again = Log.open(tmp_path / "t-0", config, had_clean_shutdown=False)
    assert again.last_stable_offset == lso
    assert again.aborted_transactions(0, again.log_end_offset) == aborted
    again.close()
    log.close()


def test_truncation_and_deletion_take_index_entries_along(open_log: LogFactory) -> None:
    log = open_log()
    txn_batch(log, 0)
    log.append_marker(PID, 0, commit=False)  # 2
    txn_batch(log, 2)
    log.append_marker(PID, 0, commit=False)  # 5
    assert [e.last_offset for e in log.aborted_transactions(0, 6)] == [2, 5]
    log.truncate_to(4)
    assert [e.last_offset for e in log.aborted_transactions(0, 6)] == [2]
    assert log.last_stable_offset == 3  # the transaction at 3 is open again
    log.append_marker(PID, 0, commit=True)
    log.roll()
    first_segment = log.segments[0]
    path = first_segment.txn_index_path
    assert path.exists()
    log.delete_segments_prefix(1, "test")
    assert not path.exists()
    assert not list(log.directory.glob("*" + filenames.TXN_INDEX_SUFFIX + "*"))


def test_a_producer_with_an_open_transaction_never_expires(tmp_path: Path) -> None:
    from seglog.storage.producer_state import (
        BatchMetadata,
        ProducerEntry,
        ProducerStateManager,
        write_snapshot,
    )

    entry = ProducerEntry(PID, 0, current_txn_first_offset=5)
    entry.batches.append(BatchMetadata(1, 6, 1, 0))
    idle = ProducerEntry(PID + 1, 0)
    idle.batches.append(BatchMetadata(1, 8, 1, 0))
    write_snapshot(filenames.snapshot_path(tmp_path, 9), [entry, idle])
    state = ProducerStateManager(tmp_path, expiration_ms=1000)
    assert state.load_latest_snapshot(0, 9, now_ms=NOW) == 9
    assert list(state.producers) == [PID]
    assert state.first_unstable_offset() == 5
    assert state.remove_expired(NOW) == 0


def _keyed_txn_batch(log: Log, key: bytes, value: bytes, seq: int, pid: int) -> None:
    log.append(
        build_batch(
            [SimpleRecord(value + b"." * 60, key, NOW)],
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
            is_transactional=True,
        )
    )


def test_compaction_drops_aborted_records_and_keeps_markers(open_log: LogFactory) -> None:
    from seglog.storage.cleaner import Cleaner, cleanable_range
    from tests.storage.test_log import read_all

    config = LogConfig(cleanup_policy="compact", segment_bytes=600, min_cleanable_dirty_ratio=0.01)
    log = open_log(config)
    # Producer A commits k=committed; producer B then writes k=aborted and aborts.
    for round_ in range(4):
        _keyed_txn_batch(log, b"k", b"committed-%d" % round_, round_, PID)
        log.append_marker(PID, 0, commit=True)
        _keyed_txn_batch(log, b"k", b"aborted-%d" % round_, round_, PID + 1)
        log.append_marker(PID + 1, 0, commit=False)
    # An open transaction holds the cleaning back: nothing from it on is cleaned.
    _keyed_txn_batch(log, b"k", b"open", 4, PID)
    open_first = log.last_stable_offset
    for _ in range(8):
        log.append(build_batch([SimpleRecord(b"x" * 60, b"other", NOW)]))
    log.roll()
    aborted_before = log.aborted_transactions(0, log.log_end_offset)
    target = cleanable_range(log, 0, NOW)
    assert target.first_uncleanable_offset == open_first
    Cleaner(1 << 20, clock=lambda: NOW / 1000).clean(target)
    records = read_all(log)
    values = [r.value.rstrip(b".") for r in records if r.key == b"k" and r.value]
    assert not [v for v in values if v.startswith(b"aborted")]
    # The newest committed value survives (not hidden by the aborted one after it).
    assert b"committed-3" in values
    assert b"open" in values
    markers = [
        h
        for s in log.segments
        for h in s.batch_headers()
        if h.is_control and h.last_offset < open_first
    ]
    assert len(markers) == 8
    # Markers keep their records: a restart still ends every transaction.
    for segment in log.segments:
        for header in segment.batch_headers():
            if header.is_control:
                found = segment.translate_offset(header.base_offset)
                assert found is not None
                data = segment.read_bytes(found.position, header.size)
                assert control.read_marker(data) is not None
    assert log.aborted_transactions(0, log.log_end_offset) == aborted_before
    assert log.last_stable_offset == open_first


def test_the_lso_never_falls_below_the_log_start(open_log: LogFactory) -> None:
    log = open_log()
    txn_batch(log, 0)  # 0-1, left open
    log.append(build_batch([SimpleRecord(b"plain", timestamp=NOW)]))
    assert log.last_stable_offset == 0
    log.increment_log_start_offset(2)
    assert log.last_stable_offset == 2


def test_a_marker_does_not_expose_data_waiting_for_its_flush(open_log: LogFactory) -> None:
    log = open_log(LogConfig(flush_messages=1))
    data = build_batch(
        [SimpleRecord(b"v", timestamp=NOW)],
        producer_id=PID,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    info = log.append(data, defer_flush=True)
    assert info.flush_needed and log.high_watermark == 0
    log.append_marker(PID, 0, commit=True)
    assert log.high_watermark == 0  # the batch is not durable yet: neither is seen
    log.flush()
    assert log.high_watermark == log.last_stable_offset == 2
