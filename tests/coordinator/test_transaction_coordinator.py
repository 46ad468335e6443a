"""The transaction coordinator over a real log directory: states, fencing, markers,
``__transaction_state`` records and recovery of an interrupted commit."""

from __future__ import annotations

import errno
import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from seglog.coordinator import txn_log
from seglog.coordinator.offset_store import CommittedOffset, OffsetStore
from seglog.coordinator.transaction_coordinator import TransactionCoordinator, TxnState
from seglog.errors import SeglogError
from seglog.records import batch, control
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage.log_dir import LogDir
from tests.storage.faulty_env import FaultyEnv

_ids = itertools.count(1000)


class Broker:
    """A log directory with a transaction coordinator, reopenable like a restart."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.log_dir = LogDir.open(path)
        self.offsets = OffsetStore(self.log_dir, partitions=3)
        self.coordinator = self._coordinator()

    def _coordinator(self) -> TransactionCoordinator:
        return TransactionCoordinator(
            self.log_dir,
            self.offsets,
            new_producer_id=lambda: next(_ids),
            clock=time.time,
            max_timeout_ms=60_000,
            partitions=5,
        )

    def restart(self, *, clean: bool = True) -> dict[str, dict[tuple[str, int], CommittedOffset]]:
        """Close and reopen everything; returns the offsets the load committed.

        ``clean=False`` reopens as after a crash (no clean-shutdown marker).
        """
        self.log_dir.close()
        if not clean:
            (self.path / ".kafka_cleanshutdown").unlink()
        self.log_dir = LogDir.open(self.path)
        self.offsets = OffsetStore(self.log_dir, partitions=3)
        self.offsets.load()
        self.coordinator = self._coordinator()
        return self.coordinator.load()

    def headers(self, topic: str, partition: int = 0) -> list[batch.BatchHeader]:
        log = self.log_dir.log(topic, partition)
        return [h for s in log.segments for h in s.batch_headers()]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    made = Broker(tmp_path / "data")
    made.log_dir.create_topic("t", 2)
    made.coordinator.load()
    yield made
    made.log_dir.close()


def test_value_layout_matches_the_worked_example() -> None:
    value = txn_log.TxnLogValue(5, 1, 60_000, TxnState.ONGOING, frozenset({("a", 0)}), 7, 6)
    assert txn_log.encode_key("t").hex() == "0000000174"
    data = txn_log.encode_value(value)
    assert data.hex() == (
        "0000"
        "0000000000000005"
        "0001"
        "0000ea60"
        "01"
        "00000001"
        "000161"
        "00000001"
        "00000000"
        "0000000000000007"
        "0000000000000006"
    )
    assert txn_log.decode_value(data) == value
    assert txn_log.decode_key(txn_log.encode_key("t")) == "t"


def test_init_bumps_the_epoch_and_validates_the_timeout(broker: Broker) -> None:
    coordinator = broker.coordinator
    assert coordinator.init_producer_id("x", 60_001).error == "INVALID_TRANSACTION_TIMEOUT"
    assert coordinator.init_producer_id("x", 0).error == "INVALID_TRANSACTION_TIMEOUT"
    first = coordinator.init_producer_id("x", 10_000)
    second = coordinator.init_producer_id("x", 10_000)
    assert first.error == second.error == "NONE"
    assert second.producer_id == first.producer_id
    assert second.producer_epoch == first.producer_epoch + 1
    # KIP-360: a bump names the current epoch; its retry gets the same answer.
    pid = second.producer_id
    bumped = coordinator.init_producer_id("x", 10_000, pid, second.producer_epoch)
    assert (bumped.error, bumped.producer_epoch) == ("NONE", second.producer_epoch + 1)
    retry = coordinator.init_producer_id("x", 10_000, pid, second.producer_epoch)
    assert retry == bumped
    stale = coordinator.init_producer_id("x", 10_000, pid, first.producer_epoch)
    assert stale.error == "PRODUCER_FENCED"


def test_commit_writes_a_marker_to_every_partition(broker: Broker) -> None:
    coordinator = broker.coordinator
    init = coordinator.init_producer_id("x", 10_000)
    pid, epoch = init.producer_id, init.producer_epoch
    errors = coordinator.add_partitions("x", pid, epoch, [("t", 0), ("t", 1)])
    assert set(errors.values()) == {"NONE"}
    assert coordinator.add_partitions("x", pid, epoch, [("nope", 0)]) == {
        ("nope", 0): "UNKNOWN_TOPIC_OR_PARTITION"
    }
    assert coordinator.end_txn("x", pid, epoch, commit=True).error == "NONE"
    for partition in (0, 1):
        (marker,) = broker.headers("t", partition)
        assert marker.is_control and marker.producer_id == pid
    # A retried EndTxn succeeds; ending the other way is refused.
    assert coordinator.end_txn("x", pid, epoch, commit=True).error == "NONE"
    assert coordinator.end_txn("x", pid, epoch, commit=False).error == "INVALID_TXN_STATE"
    assert coordinator.txns["x"].state == TxnState.COMPLETE_COMMIT


def test_a_new_producer_fences_the_old_and_aborts_its_transaction(broker: Broker) -> None:
    coordinator = broker.coordinator
    old = coordinator.init_producer_id("x", 10_000)
    coordinator.add_partitions("x", old.producer_id, old.producer_epoch, [("t", 0)])
    new = coordinator.init_producer_id("x", 10_000)
    assert new.producer_epoch > old.producer_epoch
    (marker,) = broker.headers("t", 0)
    assert marker.is_control and marker.producer_epoch > old.producer_epoch
    data = broker.log_dir.log("t", 0).segments[0].read_bytes(0, marker.size)
    assert control.read_marker(data) == control.EndTxnMarker(control.ControlType.ABORT, 0)
    fenced = coordinator.add_partitions("x", old.producer_id, old.producer_epoch, [("t", 1)])
    assert fenced == {("t", 1): "PRODUCER_FENCED"}
    assert coordinator.end_txn("x", old.producer_id, old.producer_epoch, True).error == (
        "PRODUCER_FENCED"
    )


def test_offsets_wait_for_the_commit(broker: Broker) -> None:
    coordinator = broker.coordinator
    init = coordinator.init_producer_id("x", 10_000)
    pid, epoch = init.producer_id, init.producer_epoch
    offset = CommittedOffset(42, "", 1, -1, None)
    # TxnOffsetCommit before AddOffsetsToTxn is refused, as by Kafka.
    assert coordinator.commit_offsets("x", "g", pid, epoch, {("t", 0): offset}) == {
        ("t", 0): "INVALID_TXN_STATE"
    }
    assert coordinator.add_offsets("x", pid, epoch, "g") == "NONE"
    assert coordinator.commit_offsets("x", "g", pid, epoch, {("t", 0): offset}) == {
        ("t", 0): "NONE"
    }
    # Stored, but not committed: a restart now would not show it.
    broker.offsets.load()
    assert broker.offsets.pending_txn_offsets[pid]
    result = coordinator.end_txn("x", pid, epoch, commit=True)
    assert result.committed_offsets == {"g": {("t", 0): offset}}
    loaded = broker.offsets.load()
    assert loaded["g"].offsets[("t", 0)].offset == 42
    assert broker.offsets.pending_txn_offsets == {}


def test_a_commit_interrupted_by_a_crash_completes_at_start(broker: Broker) -> None:
    coordinator = broker.coordinator
    init = coordinator.init_producer_id("x", 10_000)
    pid, epoch = init.producer_id, init.producer_epoch
    coordinator.add_partitions("x", pid, epoch, [("t", 0)])
    coordinator.add_offsets("x", pid, epoch, "g")
    offset = CommittedOffset(5, "", 1, -1, None)
    coordinator.commit_offsets("x", "g", pid, epoch, {("t", 1): offset})
    # The crash: PrepareCommit stored, no marker written yet.
    meta = coordinator.txns["x"]
    coordinator.state_log.store(meta, TxnState.PREPARE_COMMIT)
    assert broker.headers("t", 0) == []
    committed = broker.restart()
    assert committed == {"g": {("t", 1): offset}}
    assert broker.coordinator.txns["x"].state == TxnState.COMPLETE_COMMIT
    (marker,) = broker.headers("t", 0)
    assert marker.is_control
    assert broker.offsets.load()["g"].offsets[("t", 1)].offset == 5


class _Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def test_a_stalled_transaction_is_aborted_and_its_producer_fenced(tmp_path: Path) -> None:
    clock = _Clock()
    log_dir = LogDir.open(tmp_path / "data")
    log_dir.create_topic("t", 1)
    coordinator = TransactionCoordinator(
        log_dir,
        OffsetStore(log_dir, partitions=3),
        new_producer_id=lambda: next(_ids),
        clock=clock,
        partitions=5,
        id_expiration_ms=100_000,
    )
    coordinator.load()
    init = coordinator.init_producer_id("x", 10_000)
    pid, epoch = init.producer_id, init.producer_epoch
    coordinator.add_partitions("x", pid, epoch, [("t", 0)])
    clock.now += 10.0
    assert coordinator.abort_timed_out() == []
    clock.now += 0.01
    assert coordinator.abort_timed_out() == ["x"]
    meta = coordinator.txns["x"]
    assert (meta.state, meta.producer_epoch) == (TxnState.COMPLETE_ABORT, epoch + 1)
    assert coordinator.end_txn("x", pid, epoch, commit=True).error == "PRODUCER_FENCED"
    log = log_dir.log("t", 0)
    assert log.last_stable_offset == log.log_end_offset == 1
    # An idle id is forgotten after transactional.id.expiration.ms, durably.
    assert coordinator.expire_transactional_ids() == []
    clock.now += 100.0
    assert coordinator.expire_transactional_ids() == ["x"]
    coordinator.load()
    assert "x" not in coordinator.txns
    log_dir.close()


def test_write_markers_reports_each_partitions_error(tmp_path: Path) -> None:
    env = FaultyEnv(tmp_path)
    log_dir = LogDir.open(tmp_path / "data", env=env)
    try:
        log_dir.create_topic("t", 3)
        coordinator = TransactionCoordinator(
            log_dir,
            OffsetStore(log_dir, partitions=3),
            new_producer_id=lambda: next(_ids),
            clock=time.time,
        )
        data = build_batch(
            [SimpleRecord(b"v", timestamp=int(time.time() * 1000))],
            producer_id=77,
            producer_epoch=2,
            base_sequence=0,
            is_transactional=True,
        )
        for p in range(3):
            log_dir.log("t", p).append(data, from_client=False)
        # An fsync of partition 1 fails: its marker is written but not durable.
        env.fail("fsync", error=errno.EIO, in_dir="t-1")
        wanted = [("t", 0), ("t", 1), ("t", 5), ("gone", 0)]
        errors, committed = coordinator.markers.write_markers(
            77, 2, wanted, commit=True, coordinator_epoch=3
        )
        assert errors == {
            ("t", 0): "NONE",
            ("t", 1): "KAFKA_STORAGE_ERROR",
            ("t", 5): "UNKNOWN_TOPIC_OR_PARTITION",
            ("gone", 0): "UNKNOWN_TOPIC_OR_PARTITION",
        }
        assert committed == {}
        done, _ = coordinator.markers.write_markers(
            77, 2, [("t", 2)], commit=True, coordinator_epoch=3
        )
        assert done == {("t", 2): "NONE"}
        older, _ = coordinator.markers.write_markers(
            77, 2, [("t", 2)], commit=True, coordinator_epoch=2
        )
        assert older == {("t", 2): "TRANSACTION_COORDINATOR_FENCED"}
        fenced, _ = coordinator.markers.write_markers(
            77, 1, [("t", 2)], commit=True, coordinator_epoch=3
        )
        assert fenced == {("t", 2): "INVALID_PRODUCER_EPOCH"}
        assert log_dir.log("t", 0).last_stable_offset == 2
    finally:
        env.clear_faults()
        log_dir.close()


def test_an_open_transaction_no_id_holds_is_aborted_at_start(broker: Broker) -> None:
    """Data of a producer no transactional id knows at its epoch (its records lost
    in a crash) would hold the partition's LSO for good: loading after an unclean
    shutdown aborts it there."""
    log = broker.log_dir.log("t", 1)
    log.append(
        build_batch(
            [SimpleRecord(b"orphan", timestamp=1_700_000_000_000)],
            producer_id=777,
            producer_epoch=3,
            base_sequence=0,
            is_transactional=True,
        )
    )
    assert log.last_stable_offset == 0
    broker.restart()
    # After a clean shutdown nothing was lost: the transaction is hanging, left
    # to the operator as in Kafka.
    assert broker.log_dir.log("t", 1).last_stable_offset == 0
    broker.restart(clean=False)
    log = broker.log_dir.log("t", 1)
    assert log.last_stable_offset == log.log_end_offset == 2
    marker = broker.headers("t", 1)[-1]
    assert marker.is_control and (marker.producer_id, marker.producer_epoch) == (777, 3)
    assert [a.producer_id for a in log.aborted_transactions(0, 2)] == [777]


class _OtherNodes:
    """The leaders of the partitions this node does not serve: what they were asked, in order."""

    def __init__(self) -> None:
        self.coordinator: TransactionCoordinator | None = None
        self.asked: list[tuple[str, list[tuple[str, int]], TxnState]] = []
        self.flush_error: str | None = None

    def _state(self) -> TxnState:
        assert self.coordinator is not None
        return self.coordinator.txns["tx"].state

    def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        partitions: list[tuple[str, int]],
        *,
        commit: bool,
        coordinator_epoch: int,
    ) -> dict[tuple[str, int], str]:
        self.asked.append(("markers", partitions, self._state()))
        return dict.fromkeys(partitions, "NONE")

    def verify_partition(
        self, transactional_id: str, producer_id: int, epoch: int, topic: str, partition: int
    ) -> str:
        return "NONE"

    def may_coordinate(self, producer_id: int) -> bool:
        return True

    def flush(self, partitions: list[tuple[str, int]]) -> None:
        self.asked.append(("flush", partitions, self._state()))
        if self.flush_error is not None:
            raise SeglogError(self.flush_error)


def test_a_commit_over_several_nodes_has_their_data_fsynced_before_it_is_decided(
    tmp_path: Path,
) -> None:
    """A power cut after PrepareCommit must not lose the data another node leads."""
    log_dir = LogDir.open(tmp_path / "data", owns=lambda info, p: (info.name, p) != ("t", 1))
    try:
        log_dir.create_topic("t", 2)
        coordinator = TransactionCoordinator(
            log_dir,
            OffsetStore(log_dir, partitions=3),
            new_producer_id=lambda: next(_ids),
            clock=time.time,
            partitions=5,
        )
        others = _OtherNodes()
        others.coordinator = coordinator
        coordinator.peers = others
        coordinator.load()
        init = coordinator.init_producer_id("tx", 60_000)
        pid, epoch = init.producer_id, init.producer_epoch
        added = coordinator.add_partitions("tx", pid, epoch, [("t", 0), ("t", 1)])
        assert set(added.values()) == {"NONE"}

        # The other node cannot fsync: nothing is decided, the client may retry.
        others.flush_error = "KAFKA_STORAGE_ERROR"
        assert coordinator.end_txn("tx", pid, epoch, commit=True).error == (
            "COORDINATOR_NOT_AVAILABLE"
        )
        assert coordinator.txns["tx"].state == TxnState.ONGOING
        others.flush_error = None
        assert coordinator.end_txn("tx", pid, epoch, commit=True).error == "NONE"
        assert others.asked == [
            ("flush", [("t", 1)], TxnState.ONGOING),
            ("flush", [("t", 1)], TxnState.ONGOING),
            ("markers", [("t", 1)], TxnState.PREPARE_COMMIT),
        ]
        assert coordinator.txns["tx"].state == TxnState.COMPLETE_COMMIT
    finally:
        log_dir.close()
