"""Idempotent producers: sequence checks, duplicates, epochs and ``.snapshot`` files."""

from __future__ import annotations

import struct
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.config import LogConfig
from seglog.errors import InvalidProducerEpochError, OutOfOrderSequenceError, StorageError
from seglog.records.builder import SimpleRecord, build_batch
from seglog.records.crc32c import crc32c
from seglog.storage import filenames
from seglog.storage.log import Log
from seglog.storage.producer_state import (
    MAX_SEQUENCE,
    BatchMetadata,
    ProducerBatch,
    ProducerEntry,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
    in_sequence,
)
from tests.storage.conftest import LogFactory

PID = 4000
NOW = int(time.time() * 1000)


def records(*values: bytes) -> list[SimpleRecord]:
    return [SimpleRecord(value, timestamp=NOW) for value in values]


def produce(
    log: Log, sequence: int, *, count: int = 2, epoch: int = 0, pid: int = PID
) -> tuple[int, int]:
    data = build_batch(
        records(*(f"v{sequence + i}".encode() for i in range(count))),
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
    )
    info = log.append(data)
    return info.first_offset, info.last_offset


def pbatch(first_seq: int, last_seq: int, first_offset: int, *, epoch: int = 0) -> ProducerBatch:
    span = (last_seq - first_seq) % (MAX_SEQUENCE + 1)
    return ProducerBatch(PID, epoch, first_seq, last_seq, first_offset, first_offset + span, 1000)


# ---------------------------------------------------------------- the rules


def test_in_sequence_wraps_at_int_max() -> None:
    assert in_sequence(4, 5)
    assert not in_sequence(4, 6)
    assert in_sequence(MAX_SEQUENCE, 0)
    assert not in_sequence(MAX_SEQUENCE - 1, 0)


def test_an_unknown_producer_may_start_anywhere(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    assert state.check([pbatch(17, 18, 0)]) is None


def test_sequences_must_follow_each_other(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    state.update([pbatch(0, 1, 0)])
    assert state.check([pbatch(2, 3, 2)]) is None
    with pytest.raises(OutOfOrderSequenceError, match="sequence 4 after 1"):
        state.check([pbatch(4, 5, 2)])


def test_one_append_of_several_batches_is_checked_in_order(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    state.update([pbatch(0, 1, 0)])
    assert state.check([pbatch(2, 3, 2), pbatch(4, 4, 4)]) is None
    with pytest.raises(OutOfOrderSequenceError):
        state.check([pbatch(2, 3, 2), pbatch(5, 5, 4)])


def test_the_last_five_batches_are_recognised_as_duplicates(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    for i in range(7):
        state.update([pbatch(2 * i, 2 * i + 1, 10 * i)])
    for i in range(2, 7):
        duplicate = state.check([pbatch(2 * i, 2 * i + 1, 999)])
        assert duplicate == BatchMetadata(2 * i + 1, 10 * i + 1, 1, 1000)
    # Older than the five kept: neither a duplicate nor in sequence.
    with pytest.raises(OutOfOrderSequenceError):
        state.check([pbatch(2, 3, 999)])
    # A partial overlap is not a duplicate either.
    with pytest.raises(OutOfOrderSequenceError):
        state.check([pbatch(12, 12, 999)])


def test_a_lower_epoch_is_fenced(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    state.update([pbatch(0, 0, 0, epoch=3)])
    with pytest.raises(InvalidProducerEpochError, match="below the current epoch 3"):
        state.check([pbatch(1, 1, 1, epoch=2)])


def test_a_new_epoch_starts_at_sequence_zero(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    state.update([pbatch(0, 9, 0)])
    with pytest.raises(OutOfOrderSequenceError, match="new epoch 1 at sequence 10"):
        state.check([pbatch(10, 10, 10, epoch=1)])
    assert state.check([pbatch(0, 0, 10, epoch=1)]) is None
    state.update([pbatch(0, 0, 10, epoch=1)])
    # The old epoch's batches are forgotten: their retry is fenced, not a duplicate.
    with pytest.raises(InvalidProducerEpochError):
        state.check([pbatch(0, 9, 0)])


def test_sequence_numbers_wrap(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    state.update([pbatch(MAX_SEQUENCE - 1, MAX_SEQUENCE, 0)])
    assert state.check([pbatch(0, 1, 2)]) is None


def test_idle_producers_expire(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path, expiration_ms=100)
    state.update([pbatch(0, 0, 0)])  # timestamp 1000
    assert state.remove_expired(1099) == 0
    assert state.remove_expired(1100) == 1
    assert state.check([pbatch(5, 5, 1)]) is None


# ------------------------------------------------------------ the file format


def test_snapshot_layout_is_kafkas(tmp_path: Path) -> None:
    entry = ProducerEntry(7, 2)
    entry.batches.append(BatchMetadata(41, 1000, 4, 1_700_000_000_000))
    data = encode_snapshot([entry])
    body = struct.pack(">i", 1) + struct.pack(
        ">qhiqiqiq", 7, 2, 41, 1000, 4, 1_700_000_000_000, -1, -1
    )
    assert data == struct.pack(">hI", 1, crc32c(body)) + body
    assert len(data) == 6 + 4 + 46


entries_strategy = st.lists(
    st.builds(
        lambda pid, epoch, seq, offset, delta, ts: (pid, epoch, seq, offset, delta, ts),
        st.integers(0, 2**63 - 1),
        st.integers(0, 32767),
        st.integers(0, MAX_SEQUENCE),
        st.integers(0, 2**62),
        st.integers(0, 1000),
        st.integers(-1, 2**62),
    ),
    max_size=20,
    unique_by=lambda t: t[0],
)


@given(entries_strategy)
def test_snapshots_round_trip(rows: list[tuple[int, int, int, int, int, int]]) -> None:
    entries = []
    for pid, epoch, seq, offset, delta, ts in rows:
        entry = ProducerEntry(pid, epoch)
        entry.batches.append(BatchMetadata(seq, offset, delta, ts))
        entries.append(entry)
    decoded = decode_snapshot(encode_snapshot(entries))
    assert [(e.producer_id, e.epoch, list(e.batches)) for e in decoded] == [
        (e.producer_id, e.epoch, list(e.batches)) for e in entries
    ]


@given(st.data())
def test_damaged_snapshots_are_refused(data: st.DataObject) -> None:
    entry = ProducerEntry(7, 2)
    entry.batches.append(BatchMetadata(41, 1000, 4, 5))
    good = encode_snapshot([entry, ProducerEntry(8, 0, coordinator_epoch=1)])
    cut = data.draw(st.integers(0, len(good) - 1))
    with pytest.raises(StorageError):
        decode_snapshot(good[:cut])
    flip = data.draw(st.integers(0, len(good) - 1))
    damaged = bytearray(good)
    damaged[flip] ^= 0x01
    with pytest.raises(StorageError):
        decode_snapshot(bytes(damaged))


# ---------------------------------------------------------------- in the log


def test_a_retried_batch_gets_its_original_offsets_and_is_not_written(
    open_log: LogFactory,
) -> None:
    log = open_log()
    assert produce(log, 0) == (0, 1)
    assert produce(log, 2) == (2, 3)
    size = log.size
    retry = log.append(
        build_batch(records(b"v0", b"v1"), producer_id=PID, producer_epoch=0, base_sequence=0)
    )
    assert (retry.first_offset, retry.last_offset, retry.duplicate) == (0, 1, True)
    assert log.size == size
    assert log.log_end_offset == 4


def test_out_of_order_appends_write_nothing(open_log: LogFactory) -> None:
    log = open_log()
    produce(log, 0)
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 5)
    assert log.log_end_offset == 2
    assert produce(log, 2) == (2, 3)


def test_a_roll_snapshots_the_state_under_the_new_base(open_log: LogFactory) -> None:
    log = open_log(LogConfig(segment_bytes=300))
    for i in range(6):
        produce(log, 2 * i)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 1
    snapshots = log.producer_state.snapshot_offsets()
    assert snapshots == bases[1:]


def test_a_clean_restart_keeps_the_last_batch_of_each_producer(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig())
    produce(log, 0)
    produce(log, 2)
    produce(log, 0, pid=PID + 1)
    log.close()
    assert filenames.snapshot_path(log.directory, 6).exists()
    again = Log.open(tmp_path / "t-0", LogConfig(), had_clean_shutdown=True)
    retry = again.append(
        build_batch(records(b"v2", b"v3"), producer_id=PID, producer_epoch=0, base_sequence=2)
    )
    assert (retry.first_offset, retry.duplicate) == (2, True)
    with pytest.raises(OutOfOrderSequenceError):
        produce(again, 7)
    assert produce(again, 4) == (6, 7)
    again.close()


def test_after_a_crash_the_state_is_replayed_from_the_log(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300)
    log = Log.open(tmp_path / "t-0", config)
    for i in range(9):
        produce(log, 2 * i)
    end = log.log_end_offset
    # No close: the process died. Only the roll snapshots are on disk.
    assert end not in log.producer_state.snapshot_offsets()
    again = Log.open(tmp_path / "t-0", config, had_clean_shutdown=False)
    assert again.log_end_offset == end
    # The roll snapshot keeps each producer's last batch; the replay adds the rest.
    active_base = again.segments[-1].base_offset
    assert active_base > 0
    for i in range(active_base // 2 - 1, 9):
        info = again.append(
            build_batch(
                records(b"a", b"b"),
                producer_id=PID,
                producer_epoch=0,
                base_sequence=2 * i,
            )
        )
        assert (info.first_offset, info.duplicate) == (2 * i, True)
    assert produce(again, 18) == (end, end + 1)
    again.close()
    log.close()


def test_a_corrupt_snapshot_falls_back_to_an_older_one(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300)
    log = Log.open(tmp_path / "t-0", config)
    for i in range(9):
        produce(log, 2 * i)
    end = log.log_end_offset
    log.close()
    newest = filenames.snapshot_path(log.directory, end)
    newest.write_bytes(newest.read_bytes()[:-3])
    again = Log.open(tmp_path / "t-0", config, had_clean_shutdown=True)
    assert not newest.exists()
    assert produce(again, 18) == (end, end + 1)
    with pytest.raises(OutOfOrderSequenceError):
        produce(again, 30)
    again.close()


def test_truncation_rebuilds_the_state(open_log: LogFactory) -> None:
    log = open_log(LogConfig(segment_bytes=300))
    for i in range(9):
        produce(log, 2 * i)
    log.truncate_to(10)
    assert all(offset <= 10 for offset in log.producer_state.snapshot_offsets())
    # The producer's state is that of offset 9 (sequence 9): 10 follows.
    assert produce(log, 10) == (10, 11)


def test_deleted_segments_take_their_snapshots_along(open_log: LogFactory) -> None:
    log = open_log(LogConfig(segment_bytes=300))
    for i in range(9):
        produce(log, 2 * i)
    log.delete_segments_prefix(2, "test")
    first = log.segments[0].base_offset
    assert all(offset >= first for offset in log.producer_state.snapshot_offsets())
    assert produce(log, 18)[0] == log.log_end_offset - 2


def test_starting_over_forgets_every_producer(open_log: LogFactory) -> None:
    log = open_log(LogConfig(segment_bytes=300))
    for i in range(9):
        produce(log, 2 * i)
    log.truncate_fully_and_start_at(100)
    assert log.producer_state.snapshot_offsets() == []
    assert log.producer_state.producers == {}
    assert produce(log, 40) == (100, 101)


operations = st.lists(
    st.one_of(
        st.tuples(st.just("next"), st.integers(1, 3)),
        st.tuples(st.just("retry"), st.integers(0, 7)),
        st.tuples(st.just("gap"), st.integers(2, 5)),
        st.tuples(st.just("restart"), st.just(0)),
    ),
    max_size=30,
)


@given(operations)
def test_the_log_agrees_with_a_model_of_the_rules(ops: list[tuple[str, int]]) -> None:
    """Appends, retries, gaps and clean restarts, checked against a list of batches."""
    with tempfile.TemporaryDirectory() as root:
        directory = Path(root) / "t-0"
        log = Log.open(directory, LogConfig(segment_bytes=400))
        appended: list[tuple[int, int, int]] = []  # (first sequence, count, first offset)
        remembered = 0  # how many of the newest batches the state still knows
        try:
            for op, arg in ops:
                next_sequence = appended[-1][0] + appended[-1][1] if appended else 0
                if op == "next":
                    first, last = produce(log, next_sequence, count=arg)
                    assert (first, last) == (log.log_end_offset - arg, log.log_end_offset - 1)
                    appended.append((next_sequence, arg, first))
                    remembered = min(remembered + 1, 5)
                elif op == "retry" and arg < len(appended):
                    sequence, count, offset = appended[-1 - arg]
                    end = log.log_end_offset
                    if arg < remembered:
                        info = log.append(
                            build_batch(
                                records(*([b"r"] * count)),
                                producer_id=PID,
                                producer_epoch=0,
                                base_sequence=sequence,
                            )
                        )
                        assert (info.first_offset, info.duplicate) == (offset, True)
                    else:
                        with pytest.raises(OutOfOrderSequenceError):
                            produce(log, sequence, count=count)
                    assert log.log_end_offset == end
                elif op == "gap" and appended:
                    with pytest.raises(OutOfOrderSequenceError):
                        produce(log, next_sequence + arg - 1)
                elif op == "restart":
                    log.close()
                    log = Log.open(directory, LogConfig(segment_bytes=400), had_clean_shutdown=True)
                    remembered = min(remembered, 1)
        finally:
            log.close()
