"""A model-based test of the transaction coordinator: random InitProducerId,
AddPartitionsToTxn, produce, EndTxn, timeouts and restarts, checked against a
model of Kafka's transitions and of each partition's last stable offset."""

from __future__ import annotations

import itertools
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from seglog.coordinator.offset_store import OffsetStore
from seglog.coordinator.transaction_coordinator import TransactionCoordinator
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage.log_dir import LogDir
from tests.log_dirs import check_log_dirs

IDS = ("a", "b")
PARTITIONS = (("t", 0), ("t", 1))
TIMEOUT_MS = 10_000


@dataclass
class ModelTxn:
    """What Kafka's coordinator would hold for one id."""

    producer_id: int
    epoch: int
    state: str = "Empty"
    partitions: set[tuple[str, int]] = field(default_factory=set)
    #: Per partition: the first offset of this transaction's data there.
    first_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    sequences: dict[tuple[str, int], int] = field(default_factory=dict)
    started: float = 0.0


class TransactionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp())
        self.now = time.time()
        self.ids = itertools.count(100)
        self.log_dir = LogDir.open(self.root / "data")
        self.log_dir.create_topic("t", 2)
        self.coordinator = self._open()
        self.model: dict[str, ModelTxn] = {}

    def _open(self) -> TransactionCoordinator:
        offsets = OffsetStore(self.log_dir, partitions=1)
        offsets.load()
        coordinator = TransactionCoordinator(
            self.log_dir,
            offsets,
            new_producer_id=lambda: next(self.ids),
            clock=lambda: self.now,
            partitions=3,
        )
        coordinator.load()
        return coordinator

    def _abort_in_model(self, txn: ModelTxn) -> None:
        txn.state = "CompleteAbort"
        txn.partitions.clear()
        txn.first_offsets.clear()

    @rule(tid=st.sampled_from(IDS))
    def init(self, tid: str) -> None:
        result = self.coordinator.init_producer_id(tid, TIMEOUT_MS)
        assert result.error == "NONE"
        txn = self.model.get(tid)
        if txn is None:
            txn = self.model[tid] = ModelTxn(result.producer_id, 0)
        else:
            if txn.state == "Ongoing":
                txn.epoch += 1  # the fencing abort
                self._abort_in_model(txn)
            txn.epoch += 1
        assert (result.producer_id, result.producer_epoch) == (txn.producer_id, txn.epoch)
        txn.state = "Empty"
        txn.sequences.clear()

    @rule(
        tid=st.sampled_from(IDS),
        partition=st.sampled_from(PARTITIONS),
        stale=st.booleans(),
    )
    def add_partition(self, tid: str, partition: tuple[str, int], stale: bool) -> None:
        txn = self.model.get(tid)
        pid = txn.producer_id if txn else 1
        epoch = (txn.epoch if txn else 0) - (1 if stale else 0)
        errors = self.coordinator.add_partitions(tid, pid, epoch, [partition])
        if txn is None:
            assert errors[partition] == "INVALID_PRODUCER_ID_MAPPING"
        elif stale:
            assert errors[partition] == "PRODUCER_FENCED"
        else:
            assert errors[partition] == "NONE"
            if txn.state != "Ongoing":
                txn.partitions.clear()
                txn.first_offsets.clear()
                txn.started = self.now
            txn.state = "Ongoing"
            txn.partitions.add(partition)

    @precondition(lambda self: any(t.state == "Ongoing" for t in self.model.values()))
    @rule(data=st.data())
    def produce(self, data: st.DataObject) -> None:
        tid = data.draw(
            st.sampled_from(sorted(t for t, m in self.model.items() if m.state == "Ongoing"))
        )
        txn = self.model[tid]
        partition = data.draw(st.sampled_from(sorted(txn.partitions)))
        log = self.log_dir.log(*partition)
        sequence = txn.sequences.get(partition, 0)
        info = log.append(
            build_batch(
                [SimpleRecord(b"v", timestamp=int(self.now * 1000))],
                producer_id=txn.producer_id,
                producer_epoch=txn.epoch,
                base_sequence=sequence,
                is_transactional=True,
            )
        )
        txn.sequences[partition] = sequence + 1
        txn.first_offsets.setdefault(partition, info.first_offset)

    @rule(tid=st.sampled_from(IDS), commit=st.booleans())
    def end(self, tid: str, commit: bool) -> None:
        txn = self.model.get(tid)
        if txn is None:
            result = self.coordinator.end_txn(tid, 1, 0, commit)
            assert result.error == "INVALID_PRODUCER_ID_MAPPING"
            return
        result = self.coordinator.end_txn(tid, txn.producer_id, txn.epoch, commit)
        done = "CompleteCommit" if commit else "CompleteAbort"
        if txn.state == "Ongoing":
            assert result.error == "NONE"
            txn.state = done
            txn.partitions.clear()
            txn.first_offsets.clear()
        elif txn.state == done:
            assert result.error == "NONE"
        else:
            assert result.error == "INVALID_TXN_STATE"

    @rule(seconds=st.sampled_from([1.0, 11.0]))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds
        aborted = set(self.coordinator.abort_timed_out())
        expected = {
            tid
            for tid, txn in self.model.items()
            if txn.state == "Ongoing" and (self.now - txn.started) * 1000 > TIMEOUT_MS
        }
        assert aborted == expected
        for tid in expected:
            txn = self.model[tid]
            txn.epoch += 1
            self._abort_in_model(txn)
            txn.sequences.clear()

    @rule()
    def restart(self) -> None:
        self.log_dir.close()
        self.log_dir = LogDir.open(self.root / "data")
        self.coordinator = self._open()

    @invariant()
    def states_match_the_model(self) -> None:
        for tid, txn in self.model.items():
            meta = self.coordinator.txns[tid]
            assert meta.state.kafka_name == txn.state
            assert (meta.producer_id, meta.producer_epoch) == (txn.producer_id, txn.epoch)
            # Kafka's states: a complete transaction has no partitions left.
            assert meta.partitions == txn.partitions

    @invariant()
    def last_stable_offsets_wait_for_open_transactions(self) -> None:
        for partition in PARTITIONS:
            log = self.log_dir.log(*partition)
            firsts = [
                t.first_offsets[partition]
                for t in self.model.values()
                if partition in t.first_offsets
            ]
            expected = min(firsts) if firsts else log.log_end_offset
            assert log.last_stable_offset == expected

    def teardown(self) -> None:
        self.log_dir.close()
        try:
            check_log_dirs(self.root)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


TransactionMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=25, deadline=None
)
test_the_coordinator_follows_kafkas_transitions = TransactionMachine.TestCase
