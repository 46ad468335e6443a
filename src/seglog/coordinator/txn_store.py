"""Where transactional ids' states are kept (``__transaction_state``), and in which order.

:class:`TxnStateLog` appends each state of an id (fsynced when the ordering
needs it) before the id's state changes in memory, and reads every id back
at start. :class:`TxnCompletion` ends a transaction: what must be on disk
before which answer, and in which order.
:func:`open_transactions` finds, at start, the transactions left open in the
data partitions that the stored states do not account for (a record lost in
a power cut), and aborts those nobody can end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from seglog.coordinator import txn_log
from seglog.coordinator.offset_store import partition_for
from seglog.coordinator.txn_log import TxnState
from seglog.coordinator.txn_markers import TxnMarkers
from seglog.coordinator.txn_offsets import GroupOffsets
from seglog.coordinator.txn_peers import Op, Peers
from seglog.coordinator.txn_state import TxnEvent, TxnMetadata, check_move, transition
from seglog.errors import CorruptRecordError, SeglogError
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage.log_dir import LogDir
from seglog.storage.topic_admin import TopicAdministration

logger = logging.getLogger(__name__)


class TxnStateLog:
    """The ``__transaction_state`` topic of a :class:`LogDir`: ids' states, durably."""

    def __init__(
        self,
        log_dir: LogDir,
        topic_admin: TopicAdministration,
        *,
        now_ms: Callable[[], int],
        partitions: int,
        segment_bytes: int,
        value_version: int,
    ) -> None:
        self.log_dir = log_dir
        self._topic_admin = topic_admin
        self._now_ms = now_ms
        self._wanted_partitions = partitions
        self._segment_bytes = segment_bytes
        self._value_version = value_version
        info = log_dir.topics().get(txn_log.TOPIC)
        #: The topic's partition count (the configured one until it exists).
        self.partitions = info.partitions if info is not None else partitions

    def ensure_topic(self) -> None:
        """Create ``__transaction_state`` (compacted) if it does not exist yet."""
        if txn_log.TOPIC in self.log_dir.topics():
            return
        key = "segment.bytes" if self._segment_bytes >= 1024 * 1024 else "internal.segment.bytes"
        try:
            self._topic_admin.create_topic(
                txn_log.TOPIC,
                self._wanted_partitions,
                {"cleanup.policy": "compact", key: str(self._segment_bytes)},
            )
        except SeglogError as exc:
            if exc.kafka_error != "TOPIC_ALREADY_EXISTS":
                raise
        self.partitions = self.log_dir.topics()[txn_log.TOPIC].partitions

    def partition_for(self, transactional_id: str) -> int:
        """The ``__transaction_state`` partition of ``transactional_id``."""
        return partition_for(transactional_id, self.partitions)

    def serves(self, transactional_id: str) -> bool:
        """Whether this process coordinates ``transactional_id`` (another node may)."""
        return self.log_dir.serves_partition(txn_log.TOPIC, self.partition_for(transactional_id))

    def store(self, meta: TxnMetadata, state: TxnState, *, sync: bool = True) -> None:
        """Move ``meta`` to ``state``: appended (and fsynced, with ``sync``) before it changes."""
        check_move(meta.state, state)
        self.ensure_topic()
        now = self._now_ms()
        previous = (meta.state, meta.last_update_ms)
        meta.state, meta.last_update_ms = state, now
        try:
            log = self.log_dir.log(txn_log.TOPIC, self.partition_for(meta.transactional_id))
            data = build_batch(
                [
                    SimpleRecord(
                        txn_log.encode_value(meta.value(), self._value_version),
                        txn_log.encode_key(meta.transactional_id),
                        now,
                    )
                ]
            )
            info = log.append(data)
            if sync:
                log.flush(info.last_offset + 1)
        except BaseException:
            meta.state, meta.last_update_ms = previous
            raise

    def move(self, meta: TxnMetadata, state: TxnState) -> None:
        """Move ``meta`` to ``state`` in memory only (a state nothing needs stored)."""
        check_move(meta.state, state)
        meta.state, meta.last_update_ms = state, self._now_ms()

    def store_tombstone(self, transactional_id: str) -> None:
        """Forget ``transactional_id`` durably (a null value: compaction drops the key)."""
        self.ensure_topic()
        log = self.log_dir.log(txn_log.TOPIC, self.partition_for(transactional_id))
        data = build_batch(
            [SimpleRecord(None, txn_log.encode_key(transactional_id), self._now_ms())]
        )
        info = log.append(data)
        log.flush(info.last_offset + 1)

    def read(self) -> dict[str, TxnMetadata]:
        """Every id this process coordinates, in its last stored state (blocking)."""
        txns: dict[str, TxnMetadata] = {}
        if txn_log.TOPIC not in self.log_dir.topics():
            return txns
        for partition in range(self.partitions):
            if not self.log_dir.serves_partition(txn_log.TOPIC, partition):
                continue  # another node's transactional ids
            for record in self.log_dir.read_records(txn_log.TOPIC, partition, 0, max_bytes=1 << 62):
                try:
                    _apply_record(txns, record.key, record.value)
                except CorruptRecordError as exc:
                    logger.warning(
                        "skipping the record at offset %d of %s-%d: %s",
                        record.offset,
                        txn_log.TOPIC,
                        partition,
                        exc,
                    )
        return txns


class TxnCompletion:
    """How a transaction ends: its decision and its markers, made durable in their order.

    What must be on disk before an answer, and in which order, is what keeps
    every transaction wholly visible or wholly invisible across a power cut:

    * InitProducerId fsyncs its record before answering: the new epoch fences
      zombies, and a lost one would let them back.
    * The Ongoing record of AddPartitionsToTxn and AddOffsetsToTxn is *not*
      fsynced. If a power cut loses it while data of the transaction survived,
      the load finds that data as an open transaction in its partition and puts
      the partition back into the id's open transaction (or, for a producer no
      id knows at that epoch, aborts it there), so nothing hangs.
    * A commit makes the transaction's data durable before its outcome can be:
      every partition is fsynced first (the offsets TxnOffsetCommit stored
      unsynced in ``__consumer_offsets`` included), then PrepareCommit is
      stored and fsynced, then the markers are written and fsynced, then
      CompleteCommit is stored.
      PrepareCommit on disk is the decision; with the data already durable, a
      crash at any later point completes the commit at start (the load) on
      every partition, and never over a partition whose data was lost.
    * A commit with one data partition and no offsets has no other partition to
      agree with: its COMMIT marker is the decision. The marker is written, then
      CompleteCommit stored; no Prepare record is written (the state is
      PrepareCommit in memory only). The marker is fsynced (with the data before
      it) only when the partition's ``flush.messages`` is reached, as a plain
      produce's records are: such a commit is as durable as the records it
      commits. Recovery keeps a prefix of the partition, so a cut leaves the
      marker with all the data before it, or an open transaction that
      the load puts back and the producer or the timeout ends (aborted, the
      transaction is then wholly invisible).
    * An abort stores PrepareAbort (fsynced), writes the markers and fsyncs them:
      a producer told "aborted" must not find its records committed by a later
      EndTxn after a cut.
    * A Complete record following a stored Prepare record is fsynced before the
      answer: were the Prepare record left the id's last on disk, the load
      would complete it again over the next transaction's data (same epoch).
      After a one-partition commit it is not: if a cut loses it, nothing is left
      to complete (a marker written twice is harmless anyway: with no open
      transaction it changes nothing); if a cut keeps it and loses the marker,
      the data is found open at start and put back into the transaction.
    """

    def __init__(self, state_log: TxnStateLog, markers: TxnMarkers) -> None:
        self.state_log = state_log
        self.markers = markers

    def prepare(self, meta: TxnMetadata, *, commit: bool) -> Op[GroupOffsets]:
        """The PREPARE action: the decision made durable in its order, then the markers."""
        if commit and len(meta.partitions) == 1 and not meta.pending_offsets:
            # One partition: its marker is the decision (see the module docstring).
            self.state_log.move(meta, TxnState.PREPARE_COMMIT)
            committed = yield from self.mark(meta, prepared=False)
            return committed
        if commit:
            yield from self.markers.flush_data(meta.partitions)
        self.state_log.store(meta, TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
        committed = yield from self.mark(meta)
        return committed

    def mark(self, meta: TxnMetadata, *, prepared: bool = True) -> Op[GroupOffsets]:
        """The MARK action: write the markers of a Prepare state, then store the Complete state.

        ``prepared``: the Prepare state is stored. Its Complete record is then
        fsynced too, or a cut could keep the Prepare record as the id's last
        and complete it again over the next transaction's data (same epoch).
        Without it (a one-partition commit), the local marker is a record like
        any other: fsynced when the partition's flush.messages says so, as a
        plain produce's records are (a power cut may lose it, and the data
        with it: the transaction is then wholly invisible, or found open and
        ended).
        """
        commit = meta.state == TxnState.PREPARE_COMMIT
        committed = yield from self.markers.mark(
            meta.transactional_id,
            meta.producer_id,
            meta.producer_epoch,
            meta.partitions,
            commit=commit,
            sync=prepared,
        )
        # Whatever was not marked (a deleted offsets partition) is gone with its transaction.
        meta.pending_offsets = {}
        # A complete transaction has no partitions, as Kafka stores and describes it.
        partitions, meta.partitions = meta.partitions, set()
        row = transition(meta.state, TxnEvent.MARKERS_WRITTEN)
        assert row is not None and row.next is not None
        try:
            # The markers are durable already (after a stored Prepare), so this
            # record can only ever become durable after them.
            self.state_log.store(meta, row.next, sync=prepared)
        except BaseException:
            meta.partitions = partitions
            raise
        return committed


def _apply_record(txns: dict[str, TxnMetadata], key: bytes | None, value: bytes | None) -> None:
    if key is None:
        raise CorruptRecordError("a record without a key")
    tid = txn_log.decode_key(key)
    if value is None:
        txns.pop(tid, None)
        return
    stored = txn_log.decode_value(value)
    txns[tid] = TxnMetadata(
        tid,
        stored.producer_id,
        stored.producer_epoch,
        stored.timeout_ms,
        stored.state,
        set(stored.partitions),
        stored.last_update_ms,
        stored.start_ms,
        client_transaction_version=stored.client_transaction_version,
    )


def open_transactions(
    log_dir: LogDir, txns: dict[str, TxnMetadata], peers: Peers
) -> dict[str, set[tuple[str, int]]]:
    """The partitions to put back into their id's open transaction, by id (at start).

    The Ongoing record is not fsynced, so a power cut can keep a
    transaction's data and lose the record naming its partition. Such a
    partition joins its producer's transaction again (restored as Ongoing
    if the stored state is a finished one), to be ended by the producer or
    by its timeout. After an unclean shutdown, a producer no transactional
    id knows at that epoch can never be ended by anyone: its transaction is
    aborted here.
    """
    by_producer = {meta.producer_id: meta for meta in txns.values()}
    adopted: dict[str, set[tuple[str, int]]] = {}
    for (topic, partition), log in sorted(log_dir.logs().items()):
        if topic == txn_log.TOPIC:
            continue
        open_txns = [
            (entry.producer_id, entry.epoch)
            for entry in list(log.producer_state.producers.values())
            if entry.current_txn_first_offset >= 0
        ]
        for producer_id, epoch in open_txns:
            meta = by_producer.get(producer_id)
            key = (topic, partition)
            if meta is None and (peers.may_coordinate(producer_id) or log_dir.had_clean_shutdown):
                # Another node may coordinate the producer's id: only it can end
                # the transaction. After a clean shutdown no record of ours was
                # lost: the transaction is hanging (written by a producer no
                # coordinator here knows), and ending it is the operator's call
                # (`seglog transactions abort`), as in Kafka.
                continue
            if (
                meta is None
                or meta.producer_epoch != epoch
                or (
                    meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
                    and key not in meta.partitions
                )
            ):
                logger.warning(
                    "aborting the open transaction of producer %d (epoch %d) in %s-%d:"
                    " no transactional id holds it",
                    producer_id,
                    epoch,
                    topic,
                    partition,
                )
                try:
                    info = log.append_marker(producer_id, epoch, commit=False)
                    log.flush(info.last_offset + 1)
                except SeglogError as exc:
                    logger.error("cannot abort it in %s-%d: %s", topic, partition, exc)
                continue
            if meta.state == TxnState.ONGOING and key in meta.partitions:
                continue
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                continue
            adopted.setdefault(meta.transactional_id, set()).add(key)
    return adopted


__all__ = ["TxnCompletion", "TxnStateLog", "open_transactions"]
