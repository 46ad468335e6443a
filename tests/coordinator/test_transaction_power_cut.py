"""Transactions across power cuts: what a cut keeps is exactly what was decided.

Random transactions (committed, aborted, left open) run on a log directory over
the faulty file system of ``tests/storage/faulty_env.py``; the power is cut
(dropping every unsynced byte, or a random share of them); the directory and
the coordinator are reopened and every transactional id re-initialised (which
aborts what was left open). Then, read as a read_committed consumer reads:

* every transaction is wholly visible or wholly invisible;
* every transaction whose EndTxn commit was answered is wholly visible when
  its partitions fsync every record (``flush.messages=1``); with the default
  flush policy a commit over one partition is as durable as plain produce's
  records (it may be lost, whole), one over several is always kept;
* no record of an aborted or unfinished transaction is visible;
* no transaction is left hanging: every partition's LSO is its log end.
"""

from __future__ import annotations

import itertools
import random
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.coordinator import txn_log
from seglog.coordinator.offset_store import OffsetStore
from seglog.coordinator.transaction_coordinator import TransactionCoordinator
from seglog.records.builder import SimpleRecord, build_batch
from seglog.records.record import decode_records
from seglog.storage.log import Log
from seglog.storage.log_dir import LogDir, LogDirSettings
from tests.storage.faulty_env import Files, installed

IDS = ("a", "b", "c")
PARTITIONS = 2
SETTINGS = LogDirSettings(log_cleaner_enable=False)


def _coordinator(log_dir: LogDir, ids: itertools.count[int]) -> TransactionCoordinator:
    offsets = OffsetStore(log_dir, partitions=1)
    offsets.load()
    coordinator = TransactionCoordinator(
        log_dir, offsets, new_producer_id=lambda: next(ids), clock=lambda: 1.7e9, partitions=2
    )
    coordinator.load()
    return coordinator


def _committed_view(log: Log) -> set[bytes]:
    """The values a read_committed consumer gets from ``log``."""
    lso = log.last_stable_offset
    aborted = log.aborted_transactions(log.log_start_offset, lso)
    seen: set[bytes] = set()
    for segment in log.segments:
        for header in segment.batch_headers():
            if header.base_offset >= lso or header.is_control:
                continue
            if header.is_transactional and any(
                a.producer_id == header.producer_id
                and a.first_offset <= header.base_offset <= a.last_offset
                for a in aborted
            ):
                continue
            found = segment.translate_offset(header.base_offset)
            assert found is not None
            data = segment.read_bytes(found.position, header.size)
            seen.update(r.value for r in decode_records(data) if r.value is not None)
    return seen


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    mode=st.sampled_from(["synced", "mixed"]),
    flush_every_record=st.booleans(),
)
def test_a_power_cut_keeps_exactly_the_decided_transactions(
    seed: int, mode: str, flush_every_record: bool
) -> None:
    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp())
    ids = itertools.count(500)
    with installed(root) as env:
        log_dir = LogDir.open(root, settings=SETTINGS)
        log_dir.create_topic("t", PARTITIONS, {"flush.messages": "1"} if flush_every_record else {})
        coordinator = _coordinator(log_dir, ids)
        sequences: dict[tuple[int, int], int] = {}
        committed: set[bytes] = set()
        #: The values of each committed transaction, and whether it must survive.
        transactions: list[tuple[set[bytes], bool]] = []
        producers = {}
        for tid in IDS:
            init = coordinator.init_producer_id(tid, 60_000)
            producers[tid] = (init.producer_id, init.producer_epoch)
        for n in range(rng.randint(1, 12)):
            tid = rng.choice(IDS)
            pid, epoch = producers[tid]
            chosen = sorted(rng.sample(range(PARTITIONS), rng.randint(1, PARTITIONS)))
            errors = coordinator.add_partitions(tid, pid, epoch, [("t", p) for p in chosen])
            assert set(errors.values()) == {"NONE"}
            values = []
            for p in chosen:
                value = f"{n}-{p}".encode()
                sequence = sequences.get((pid, p), 0)
                log_dir.log("t", p).append(
                    build_batch(
                        [SimpleRecord(value, timestamp=1_700_000_000_000)],
                        producer_id=pid,
                        producer_epoch=epoch,
                        base_sequence=sequence,
                        is_transactional=True,
                    )
                )
                sequences[(pid, p)] = sequence + 1
                values.append(value)
            outcome = rng.choice(["commit", "abort", "open"])
            if outcome == "open":
                break  # the producer of an open transaction stops here
            result = coordinator.end_txn(tid, pid, epoch, commit=outcome == "commit")
            assert result.error == "NONE"
            if outcome == "commit":
                committed.update(values)
                transactions.append((set(values), flush_every_record or len(chosen) > 1))
        chooser = random.Random(seed + 1)
        env.power_cut(keep_unsynced=None if mode == "synced" else lambda _: chooser.random() < 0.5)
        log_dir = LogDir.open(root, settings=SETTINGS)
        try:
            coordinator = _coordinator(log_dir, ids)
            for tid in IDS:
                assert coordinator.init_producer_id(tid, 60_000).error == "NONE"
            visible: set[bytes] = set()
            for p in range(PARTITIONS):
                log = log_dir.log("t", p)
                assert log.last_stable_offset == log.log_end_offset
                visible |= _committed_view(log)
            assert visible <= committed
            for values, durable in transactions:
                kept = values & visible
                assert kept == values if durable else kept in (set(), values)
        finally:
            log_dir.close()
            shutil.rmtree(root, ignore_errors=True)


def _transactional_batch(value: bytes, pid: int, epoch: int, sequence: int) -> bytes:
    return build_batch(
        [SimpleRecord(value, timestamp=1_700_000_000_000)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=True,
    )


def test_a_cut_during_a_commit_keeps_it_whole_whatever_the_page_cache_kept(
    tmp_path: Path,
) -> None:
    """The data is durable before PrepareCommit: completing it after the cut finds it all.

    The commit stops right after its decision (the first marker's write fails);
    the cut keeps the unsynced bytes of one partition and drops the other's.
    """
    ids = itertools.count(500)
    with installed(tmp_path) as env:
        log_dir = LogDir.open(tmp_path, settings=SETTINGS)
        log_dir.create_topic("t", PARTITIONS)
        coordinator = _coordinator(log_dir, ids)
        init = coordinator.init_producer_id("a", 60_000)
        pid, epoch = init.producer_id, init.producer_epoch
        coordinator.add_partitions("a", pid, epoch, [("t", 0), ("t", 1)])
        for p in range(PARTITIONS):
            log_dir.log("t", p).append(_transactional_batch(f"v{p}".encode(), pid, epoch, 0))
        env.fail("pwritev", in_dir="t-0")
        assert coordinator.end_txn("a", pid, epoch, commit=True).error != "NONE"
        env.power_cut(keep_unsynced=Files(in_dir="t-0"))
    log_dir = LogDir.open(tmp_path, settings=SETTINGS)
    try:
        coordinator = _coordinator(log_dir, ids)
        assert coordinator.txns["a"].state.kafka_name == "CompleteCommit"
        visible: set[bytes] = set()
        for p in range(PARTITIONS):
            log = log_dir.log("t", p)
            assert log.last_stable_offset == log.log_end_offset
            visible |= _committed_view(log)
        assert visible == {b"v0", b"v1"}
    finally:
        log_dir.close()


@pytest.mark.parametrize("flush_every_record", [False, True])
def test_a_one_partition_commit_fsyncs_as_plain_produce_does(
    tmp_path: Path, flush_every_record: bool
) -> None:
    """The fast path: AddPartitionsToTxn does not wait for the disk, and a one-partition
    commit fsyncs its partition only where a plain produce would (``flush.messages``)."""
    ids = itertools.count(500)
    with installed(tmp_path) as env:
        log_dir = LogDir.open(tmp_path, settings=SETTINGS)
        try:
            config = {"flush.messages": "1"} if flush_every_record else {}
            log_dir.create_topic("t", PARTITIONS, config)
            coordinator = _coordinator(log_dir, ids)
            init = coordinator.init_producer_id("a", 60_000)
            pid, epoch = init.producer_id, init.producer_epoch
            for n in range(3):
                before = env.calls["fsync"]
                coordinator.add_partitions("a", pid, epoch, [("t", 0)])
                assert env.calls["fsync"] == before
                log_dir.log("t", 0).append(_transactional_batch(b"v%d" % n, pid, epoch, n))
                appended = env.calls["fsync"]
                assert coordinator.end_txn("a", pid, epoch, commit=True).error == "NONE"
                if n > 0:  # the first one also syncs the new segment's directory
                    # The data's own fsync at append, then the marker's.
                    expected = (before + 2, before + 1) if flush_every_record else (before, before)
                    assert (env.calls["fsync"], appended) == expected
            states = [
                txn_log.decode_value(record.value).state.kafka_name
                for record in log_dir.read_records(
                    txn_log.TOPIC, coordinator.partition_for("a"), 0, max_bytes=1 << 30
                )
                if record.value is not None
            ]
            assert states == ["Empty"] + ["Ongoing", "CompleteCommit"] * 3
        finally:
            log_dir.close()


def test_data_of_a_transaction_whose_ongoing_record_was_lost_is_adopted(tmp_path: Path) -> None:
    """A cut keeps a transaction's data but not the Ongoing record naming its partition:
    the partition joins the id's transaction again, which its producer can still end."""
    ids = itertools.count(500)
    with installed(tmp_path) as env:
        log_dir = LogDir.open(tmp_path, settings=SETTINGS)
        log_dir.create_topic("t", PARTITIONS)
        coordinator = _coordinator(log_dir, ids)
        init = coordinator.init_producer_id("a", 60_000)
        pid, epoch = init.producer_id, init.producer_epoch
        coordinator.add_partitions("a", pid, epoch, [("t", 1)])
        log_dir.log("t", 1).append(_transactional_batch(b"kept", pid, epoch, 0))
        env.power_cut(keep_unsynced=Files(in_dir="t-1"))
    log_dir = LogDir.open(tmp_path, settings=SETTINGS)
    try:
        coordinator = _coordinator(log_dir, ids)
        meta = coordinator.txns["a"]
        assert (meta.state.kafka_name, meta.partitions) == ("Ongoing", {("t", 1)})
        log = log_dir.log("t", 1)
        assert log.last_stable_offset == 0
        assert coordinator.end_txn("a", pid, epoch, commit=True).error == "NONE"
        assert log.last_stable_offset == log.log_end_offset
        assert _committed_view(log) == {b"kept"}
    finally:
        log_dir.close()
