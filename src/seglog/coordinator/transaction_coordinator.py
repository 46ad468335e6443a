"""The transaction coordinator: transactional ids, their producers and their markers.

Theory of operation
-------------------
Each transactional id has one :class:`TxnMetadata`: its producer id and epoch,
its timeout, the partitions of its current transaction, and a state from
Kafka's machine. The allowed moves, as (state before → state after):

==================  =====================================================
to                  allowed from
==================  =====================================================
Empty               Empty, CompleteCommit, CompleteAbort (InitProducerId)
Ongoing             Empty, Ongoing, CompleteCommit, CompleteAbort
                    (AddPartitionsToTxn, AddOffsetsToTxn)
PrepareCommit       Ongoing (EndTxn commit)
PrepareAbort        Ongoing (EndTxn abort, or a fencing InitProducerId)
CompleteCommit      PrepareCommit (every marker written)
CompleteAbort       PrepareAbort (every marker written)
==================  =====================================================

Every move is stored in ``__transaction_state`` (:mod:`txn_log`); what must
be on disk before an answer, and in which order, is what keeps every
transaction wholly visible or wholly invisible across a power cut:

* InitProducerId fsyncs its record before answering: the new epoch fences
  zombies, and a lost one would let them back.
* The Ongoing record of AddPartitionsToTxn and AddOffsetsToTxn is *not*
  fsynced. If a power cut loses it while data of the transaction survived,
  :meth:`load` finds that data as an open transaction in its partition and
  puts the partition back into the id's open transaction (or, for a producer
  no id knows at that epoch, aborts it there), so nothing hangs.
* A commit makes the transaction's data durable before its outcome can be:
  every partition is fsynced first (the offsets TxnOffsetCommit stored
  unsynced in ``__consumer_offsets`` included), then PrepareCommit is stored and fsynced,
  then the markers are written and fsynced, then CompleteCommit is stored.
  PrepareCommit on disk is the decision; with the data already durable, a
  crash at any later point completes the commit at start (:meth:`load`) on
  every partition, and never over a partition whose data was lost.
* A commit with one data partition and no offsets has no other partition to
  agree with: its COMMIT marker is the decision. The marker is written, then
  CompleteCommit stored; no Prepare record is written (the state is
  PrepareCommit in memory only). The marker is fsynced (with the data before
  it) only when the partition's ``flush.messages`` is reached, as a plain
  produce's records are: such a commit is as durable as the records it
  commits. Recovery keeps a prefix of the partition, so a cut leaves the
  marker with all the data before it, or an open transaction that
  :meth:`load` puts back and the producer or the timeout ends (aborted, the
  transaction is then wholly invisible).
* An abort stores PrepareAbort (fsynced), writes the markers and fsyncs them:
  a producer told "aborted" must not find its records committed by a later
  EndTxn after a cut.
* A Complete record following a stored Prepare record is fsynced before the
  answer: were the Prepare record left the id's last on disk, :meth:`load`
  would complete it again over the next transaction's data (same epoch).
  After a one-partition commit it is not: if a cut loses it, nothing is left
  to complete (a marker written twice is harmless anyway: with no open
  transaction it changes nothing); if a cut keeps it and loses the marker,
  the data is found open at start and put back into the transaction.

Fencing: InitProducerId for an id bumps its epoch (a new producer id once the
epoch would overflow); requests carrying an older epoch get PRODUCER_FENCED,
and a transaction left open by the fenced producer is aborted, its markers
written at the new epoch, so that the zombie's later writes are refused by
the partitions themselves.

Every method is blocking (it appends and fsyncs), and they run one at a
time: the broker hands each to the coordinator's own thread, whoever asks
(a client, another node, a timer). An operation that needs other nodes
(markers, fsyncs or checks of partitions and ids they lead) is an
:data:`~seglog.coordinator.txn_peers.Op`: it yields those requests and is
resumed with the answers, other operations running meanwhile; the id is
marked busy (``in_flight``) until it ends, so that they answer
CONCURRENT_TRANSACTIONS for it. The plain methods of the same names run an
operation to its end in the caller's thread (:func:`txn_peers.drive`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from seglog.coordinator import txn_log
from seglog.coordinator.offset_store import (
    TOPIC as OFFSETS_TOPIC,
)
from seglog.coordinator.offset_store import (
    CommittedOffset,
    OffsetStore,
    offset_key,
    offset_value,
    parse_key,
    parse_offset_value,
    partition_for,
)
from seglog.coordinator.txn_log import TxnLogValue, TxnState
from seglog.coordinator.txn_peers import (
    ClusterOfOne,
    FlushData,
    Op,
    Peers,
    Verify,
    WriteMarkers,
    ask_flush,
    ask_markers,
    ask_verify,
    drive,
)
from seglog.errors import CorruptRecordError, SeglogError
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage.log import Log
from seglog.storage.log_dir import LogDir

logger = logging.getLogger(__name__)

NONE = "NONE"
MAX_EPOCH = 32_767 - 1  # Short.MaxValue - 1: the last epoch handed out before a new id
#: The epoch of this coordinator's markers: one broker leads every
#: ``__transaction_state`` partition, at Kafka's first leader epoch.
COORDINATOR_EPOCH = 0
#: Marker errors that leave nothing to mark (a deleted partition, a transaction a
#: newer epoch or coordinator ended already): the coordinator completes anyway.
_MARKER_SETTLED = frozenset(
    {
        NONE,
        "UNKNOWN_TOPIC_OR_PARTITION",
        "INVALID_PRODUCER_EPOCH",
        "PRODUCER_FENCED",
        "TRANSACTION_COORDINATOR_FENCED",
    }
)

_ALLOWED_FROM: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset(
        {TxnState.EMPTY, TxnState.ONGOING, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}
    ),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
}


@dataclass
class TxnMetadata:
    """A transactional id's current state (Kafka's ``TransactionMetadata``)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    last_update_ms: int = -1
    start_ms: int = -1
    #: The producer id and epoch a KIP-360 bump came from (kept in memory), so
    #: that a retry of that bump is answered rather than fenced.
    bumped_from: tuple[int, int] | None = None
    #: Offsets committed in the open transaction: group → (topic, partition) → offset.
    pending_offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = field(default_factory=dict)
    #: The transaction version of the id's client, as Kafka stores it (value version 1).
    client_transaction_version: int = 0
    #: An operation on the id waits for other nodes (Kafka's pending state):
    #: others answer CONCURRENT_TRANSACTIONS until it ends.
    in_flight: bool = False

    def value(self) -> TxnLogValue:
        """What is stored for this state."""
        return TxnLogValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            self.state,
            frozenset(self.partitions),
            self.last_update_ms,
            self.start_ms,
            client_transaction_version=self.client_transaction_version,
        )


@dataclass(frozen=True, slots=True)
class InitResult:
    """InitProducerId's answer."""

    error: str
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class MarkerWritten:
    """What :meth:`TransactionCoordinator.write_marker` did to one partition."""

    error: str
    #: The partition's log and the offset after the marker, to fsync (when written).
    log: Log | None = None
    end_offset: int = -1
    #: For a commit in ``__consumer_offsets``: the offsets it makes visible.
    committed_offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = field(
        default_factory=dict
    )
    message: str = ""


@dataclass(frozen=True, slots=True)
class EndResult:
    """EndTxn's answer, and the offsets its commit made visible (group → offsets)."""

    error: str
    committed_offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = field(
        default_factory=dict
    )


class TransactionCoordinator:
    """Transactional ids over a :class:`LogDir`'s ``__transaction_state``."""

    def __init__(
        self,
        log_dir: LogDir,
        offsets: OffsetStore,
        *,
        new_producer_id: Callable[[], int],
        clock: Callable[[], float],
        max_timeout_ms: int = 900_000,
        partitions: int = 50,
        segment_bytes: int = 104_857_600,
        abort_interval_ms: int = 10_000,
        id_expiration_ms: int = 604_800_000,
        expiration_interval_ms: int = 3_600_000,
        transaction_version: int = 0,
        peers: Peers | None = None,
    ) -> None:
        self.log_dir = log_dir
        #: The ``transaction.version`` feature level in use; it picks the value
        #: version of the records written, as Kafka's does.
        self.transaction_version = transaction_version
        self._value_version = txn_log.value_version(transaction_version)
        self.offsets = offsets
        #: The other nodes, asked about the partitions and ids they lead (none
        #: for a broker alone: a cluster of one leads everything itself).
        self.peers: Peers = peers if peers is not None else ClusterOfOne()
        #: Offsets made visible by commits :meth:`abort_timed_out` completed, for
        #: the group coordinator (the caller takes them).
        self.late_commits: list[dict[str, dict[tuple[str, int], CommittedOffset]]] = []
        self._new_producer_id = new_producer_id
        self._clock = clock
        self.max_timeout_ms = max_timeout_ms
        #: How often :meth:`abort_timed_out` and :meth:`expire_transactional_ids` are due.
        self.abort_interval_ms = abort_interval_ms
        self.id_expiration_ms = id_expiration_ms
        self.expiration_interval_ms = expiration_interval_ms
        self._wanted_partitions = partitions
        self._segment_bytes = segment_bytes
        info = log_dir.topics().get(txn_log.TOPIC)
        self.partitions = info.partitions if info is not None else partitions
        self.txns: dict[str, TxnMetadata] = {}
        self.loaded = False

    # --------------------------------------------------------------- storage

    def now_ms(self) -> int:
        """The coordinator's clock in ms."""
        return int(self._clock() * 1000)

    def ensure_topic(self) -> None:
        """Create ``__transaction_state`` (compacted) if it does not exist yet."""
        if txn_log.TOPIC in self.log_dir.topics():
            return
        key = "segment.bytes" if self._segment_bytes >= 1024 * 1024 else "internal.segment.bytes"
        try:
            self.log_dir.create_topic(
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

    def _store(self, meta: TxnMetadata, state: TxnState, *, sync: bool = True) -> None:
        """Move ``meta`` to ``state``: appended (and fsynced, with ``sync``) before it changes."""
        if meta.state not in _ALLOWED_FROM.get(state, frozenset()) and meta.state != state:
            raise AssertionError(f"{meta.state.kafka_name} -> {state.kafka_name} is not allowed")
        self.ensure_topic()
        now = self.now_ms()
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

    def _move(self, meta: TxnMetadata, state: TxnState) -> None:
        """Move ``meta`` to ``state`` in memory only (a state nothing needs stored)."""
        if meta.state not in _ALLOWED_FROM.get(state, frozenset()):
            raise AssertionError(f"{meta.state.kafka_name} -> {state.kafka_name} is not allowed")
        meta.state, meta.last_update_ms = state, self.now_ms()

    @contextmanager
    def _busy(self, meta: TxnMetadata) -> Iterator[None]:
        """Mark the id busy while an operation on it may wait for other nodes."""
        meta.in_flight = True
        try:
            yield
        finally:
            meta.in_flight = False

    def _flush_partitions(self, meta: TxnMetadata) -> Op[None]:
        """fsync the data of every partition of the transaction (before its decision is stored).

        Another node's partitions are fsynced by their leader, asked first: a
        failure there leaves the transaction open (EndTxn is answered with a
        retriable error) rather than deciding over data a power cut may lose.
        """
        others = [tp for tp in sorted(meta.partitions) if not self.log_dir.serves_partition(*tp)]
        if others:
            yield from ask_flush(FlushData(others))
        for topic, partition in sorted(meta.partitions):
            if not self.log_dir.serves_partition(topic, partition):
                continue
            try:
                log = self.log_dir.log(topic, partition)
            except SeglogError as exc:
                logger.warning("cannot flush %s-%d: %s", topic, partition, exc)
                continue
            log.flush()

    def _store_tombstone(self, transactional_id: str) -> None:
        """Forget ``transactional_id`` durably (a null value: compaction drops the key)."""
        self.ensure_topic()
        log = self.log_dir.log(txn_log.TOPIC, self.partition_for(transactional_id))
        data = build_batch(
            [SimpleRecord(None, txn_log.encode_key(transactional_id), self.now_ms())]
        )
        info = log.append(data)
        log.flush(info.last_offset + 1)

    # --------------------------------------------------------------- loading

    def load(self) -> dict[str, dict[tuple[str, int], CommittedOffset]]:
        """:meth:`load_op` run to its end in this thread."""
        return drive(self.load_op(), self.peers)

    def load_op(self) -> Op[dict[str, dict[tuple[str, int], CommittedOffset]]]:
        """Read ``__transaction_state``, then finish what a crash left half done (blocking).

        Returns the offsets of the commits it finished, for the group coordinator.
        A transaction whose markers cannot all be written now (a node is down)
        stays prepared; the periodic pass (:meth:`abort_timed_out`) completes it.
        """
        committed: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        self.txns.clear()
        if txn_log.TOPIC in self.log_dir.topics():
            for partition in range(self.partitions):
                if not self.log_dir.serves_partition(txn_log.TOPIC, partition):
                    continue  # another node's transactional ids
                for record in self.log_dir.read_records(
                    txn_log.TOPIC, partition, 0, max_bytes=1 << 62
                ):
                    try:
                        self._apply_record(record.key, record.value)
                    except CorruptRecordError as exc:
                        logger.warning(
                            "skipping the record at offset %d of %s-%d: %s",
                            record.offset,
                            txn_log.TOPIC,
                            partition,
                            exc,
                        )
        self._adopt_open_transactions()
        pending = self.offsets.pending_txn_offsets
        for meta in list(self.txns.values()):
            for _partition, key, value in pending.get(meta.producer_id, []):
                self._restore_pending_offset(meta, key, value)
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                logger.info(
                    "completing the transaction of %s left in %s",
                    meta.transactional_id,
                    meta.state.kafka_name,
                )
                try:
                    with self._busy(meta):
                        done = yield from self._complete(
                            meta, commit=meta.state == TxnState.PREPARE_COMMIT
                        )
                except SeglogError as exc:
                    logger.warning("cannot complete %s yet: %s", meta.transactional_id, exc)
                    continue
                for group, offsets in done.items():
                    committed.setdefault(group, {}).update(offsets)
        self.loaded = True
        logger.info("loaded %d transactional ids from %s", len(self.txns), txn_log.TOPIC)
        return committed

    def _apply_record(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            raise CorruptRecordError("a record without a key")
        tid = txn_log.decode_key(key)
        if value is None:
            self.txns.pop(tid, None)
            return
        stored = txn_log.decode_value(value)
        self.txns[tid] = TxnMetadata(
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

    def _adopt_open_transactions(self) -> None:
        """Give every transaction left open in a partition an owner that will end it.

        The Ongoing record is not fsynced, so a power cut can keep a
        transaction's data and lose the record naming its partition. Such a
        partition joins its producer's transaction again (restored as Ongoing
        if the stored state is a finished one), to be ended by the producer or
        by its timeout. After an unclean shutdown, a producer no transactional
        id knows at that epoch can never be ended by anyone: its transaction is
        aborted here.
        """
        by_producer = {meta.producer_id: meta for meta in self.txns.values()}
        adopted: dict[str, set[tuple[str, int]]] = {}
        for (topic, partition), log in sorted(self.log_dir.logs().items()):
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
                if meta is None and (
                    self.peers.may_coordinate(producer_id) or self.log_dir.had_clean_shutdown
                ):
                    # With several nodes the producer's id may be another node's: only
                    # its coordinator can end the transaction. After a clean shutdown
                    # no record of ours was lost: the transaction is hanging (written
                    # by a producer no coordinator here knows), and ending it is the
                    # operator's call (`seglog transactions abort`), as in Kafka.
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
        for tid, partitions in adopted.items():
            names = ", ".join(f"{t}-{p}" for t, p in sorted(partitions))
            logger.info("restoring the open transaction of %s in %s", tid, names)
            self._begin(self.txns[tid], partitions)

    @staticmethod
    def _restore_pending_offset(meta: TxnMetadata, key: bytes, value: bytes | None) -> None:
        try:
            parsed = parse_key(key)
        except CorruptRecordError:
            return
        if isinstance(parsed, str) or value is None:
            return
        group, topic, partition = parsed
        meta.pending_offsets.setdefault(group, {})[(topic, partition)] = parse_offset_value(value)

    # -------------------------------------------------------- InitProducerId

    def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int = -1, epoch: int = -1
    ) -> InitResult:
        """:meth:`init_producer_id_op` run to its end in this thread."""
        return drive(
            self.init_producer_id_op(transactional_id, timeout_ms, producer_id, epoch), self.peers
        )

    def init_producer_id_op(
        self, transactional_id: str, timeout_ms: int, producer_id: int = -1, epoch: int = -1
    ) -> Op[InitResult]:
        """InitProducerId with a transactional id: a new epoch, fencing earlier producers."""
        if not transactional_id:
            return InitResult("INVALID_REQUEST")
        if not self.serves(transactional_id):
            return InitResult("NOT_COORDINATOR")
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return InitResult("INVALID_TRANSACTION_TIMEOUT")
        meta = self.txns.get(transactional_id)
        if meta is None:
            meta = TxnMetadata(transactional_id, self._new_producer_id(), -1, timeout_ms)
            self.txns[transactional_id] = meta
        elif producer_id >= 0 and (producer_id, epoch) != (meta.producer_id, meta.producer_epoch):
            if (producer_id, epoch) == meta.bumped_from and meta.state == TxnState.EMPTY:
                # KIP-360: the retry of a bump whose answer was lost gets that answer.
                return InitResult(NONE, meta.producer_id, meta.producer_epoch)
            # A producer bumping its epoch must name the current one.
            return InitResult("PRODUCER_FENCED")
        if meta.in_flight or meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return InitResult("CONCURRENT_TRANSACTIONS")
        with self._busy(meta):
            result = yield from self._init_producer_id(meta, timeout_ms, producer_id)
        return result

    def _init_producer_id(
        self, meta: TxnMetadata, timeout_ms: int, producer_id: int
    ) -> Op[InitResult]:
        transactional_id = meta.transactional_id
        if meta.state == TxnState.ONGOING:
            # A new producer takes over an open transaction: fence the old one
            # by aborting at a bumped epoch (Kafka's PrepareEpochFence).
            self._bump_epoch(meta)
            try:
                self._store(meta, TxnState.PREPARE_ABORT)
                yield from self._complete(meta, commit=False)
            except SeglogError as exc:
                logger.error("cannot abort the transaction of %s: %s", transactional_id, exc)
                return InitResult("COORDINATOR_NOT_AVAILABLE")
        bumped_from = (meta.producer_id, meta.producer_epoch)
        self._bump_epoch(meta)
        meta.bumped_from = bumped_from if producer_id >= 0 else None
        meta.timeout_ms = timeout_ms
        meta.partitions.clear()
        meta.pending_offsets.clear()
        meta.start_ms = -1
        try:
            self._store(meta, TxnState.EMPTY)
        except SeglogError as exc:
            logger.error("cannot store transactional id %s: %s", transactional_id, exc)
            return InitResult("COORDINATOR_NOT_AVAILABLE")
        return InitResult(NONE, meta.producer_id, meta.producer_epoch)

    def _bump_epoch(self, meta: TxnMetadata) -> None:
        if meta.producer_epoch >= MAX_EPOCH:
            meta.producer_id = self._new_producer_id()
            meta.producer_epoch = 0
        else:
            meta.producer_epoch += 1

    # ------------------------------------------------------ adding partitions

    def _check_producer(self, transactional_id: str, producer_id: int, epoch: int) -> str:
        if not self.serves(transactional_id):
            return "NOT_COORDINATOR"
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return "INVALID_PRODUCER_ID_MAPPING"
        if epoch != meta.producer_epoch:
            return "PRODUCER_FENCED"
        if meta.in_flight or meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return "CONCURRENT_TRANSACTIONS"
        return NONE

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[tuple[str, int]],
        *,
        verify_only: bool = False,
    ) -> dict[tuple[str, int], str]:
        """AddPartitionsToTxn: an error name per partition (NONE when added)."""
        wanted = list(partitions)
        error = self._check_producer(transactional_id, producer_id, epoch)
        if error != NONE:
            return dict.fromkeys(wanted, error)
        meta = self.txns[transactional_id]
        if verify_only:
            return {
                p: NONE
                if meta.state == TxnState.ONGOING and p in meta.partitions
                else "INVALID_TXN_STATE"
                for p in wanted
            }
        unknown = [p for p in wanted if not self._partition_exists(*p)]
        if unknown:
            return {
                p: "UNKNOWN_TOPIC_OR_PARTITION" if p in unknown else "OPERATION_NOT_ATTEMPTED"
                for p in wanted
            }
        # A finished transaction's partitions are not this one's.
        current = meta.partitions if meta.state == TxnState.ONGOING else set()
        new = set(wanted) - current
        if new or meta.state != TxnState.ONGOING:
            error = self._begin(meta, new)
        return dict.fromkeys(wanted, error)

    def add_offsets(
        self, transactional_id: str, producer_id: int, epoch: int, group_id: str
    ) -> str:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction."""
        error = self._check_producer(transactional_id, producer_id, epoch)
        if error != NONE:
            return error
        if not group_id:
            return "INVALID_GROUP_ID"
        try:
            self.offsets.ensure_topic()
        except SeglogError as exc:
            logger.error("cannot create %s: %s", OFFSETS_TOPIC, exc)
            return "COORDINATOR_NOT_AVAILABLE"
        meta = self.txns[transactional_id]
        partition = (OFFSETS_TOPIC, self.offsets.partition_for(group_id))
        if partition in meta.partitions and meta.state == TxnState.ONGOING:
            return NONE
        return self._begin(meta, {partition})

    def _begin(self, meta: TxnMetadata, new: set[tuple[str, int]]) -> str:
        """Store the transaction as Ongoing with ``new`` partitions added."""
        before = set(meta.partitions)
        start = meta.start_ms
        if meta.state != TxnState.ONGOING:
            meta.partitions.clear()
            before = set()
            meta.start_ms = self.now_ms()
        meta.partitions |= new
        try:
            # Not fsynced: a partition whose data outlives this record in a power
            # cut is put back into the transaction by load().
            self._store(meta, TxnState.ONGOING, sync=False)
        except SeglogError as exc:
            meta.partitions, meta.start_ms = before, start
            logger.error("cannot store transaction %s: %s", meta.transactional_id, exc)
            return "COORDINATOR_NOT_AVAILABLE"
        return NONE

    def _partition_exists(self, topic: str, partition: int) -> bool:
        info = self.log_dir.topics().get(topic)
        return info is not None and 0 <= partition < info.partitions

    # -------------------------------------------------------- TxnOffsetCommit

    def commit_offsets(
        self,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        epoch: int,
        offsets: dict[tuple[str, int], CommittedOffset],
        *,
        group_error: str = NONE,
    ) -> dict[tuple[str, int], str]:
        """:meth:`commit_offsets_op` run to its end in this thread."""
        return drive(
            self.commit_offsets_op(
                transactional_id, group_id, producer_id, epoch, offsets, group_error=group_error
            ),
            self.peers,
        )

    def commit_offsets_op(
        self,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        epoch: int,
        offsets: dict[tuple[str, int], CommittedOffset],
        *,
        group_error: str = NONE,
    ) -> Op[dict[tuple[str, int], str]]:
        """TxnOffsetCommit: store the offsets in the transaction, visible at its commit.

        ``group_error``: the group coordinator's verdict on the committing
        member, answered after the producer's own checks, as Kafka orders them.
        """
        if not self.serves(transactional_id):
            held = yield from self._commit_offsets_for_peer(
                transactional_id, group_id, producer_id, epoch, offsets
            )
            return held
        error = self._check_producer(transactional_id, producer_id, epoch)
        meta = self.txns.get(transactional_id)
        if error == NONE and meta is not None:
            joined = (OFFSETS_TOPIC, self.offsets.partition_for(group_id))
            if meta.state != TxnState.ONGOING or joined not in meta.partitions:
                # Kafka's coordinator answers so when AddOffsetsToTxn did not come first.
                error = "INVALID_TXN_STATE"
            else:
                error = group_error
        if error != NONE or meta is None:
            return dict.fromkeys(offsets, error)
        errors: dict[tuple[str, int], str] = {}
        accepted: dict[tuple[str, int], CommittedOffset] = {}
        for key, committed in offsets.items():
            if self._partition_exists(*key):
                accepted[key] = committed
                errors[key] = NONE
            else:
                errors[key] = "UNKNOWN_TOPIC_OR_PARTITION"
        if not accepted:
            return errors
        records: list[tuple[bytes, bytes | None]] = [
            (offset_key(group_id, t, p), offset_value(c)) for (t, p), c in accepted.items()
        ]
        try:
            # Not fsynced: like the transaction's data, the offsets are made
            # durable by EndTxn's commit before its decision is.
            self.offsets.append_transactional(group_id, records, self.now_ms(), producer_id, epoch)
        except SeglogError as exc:
            logger.error("cannot store offsets of %s: %s", transactional_id, exc)
            return dict.fromkeys(offsets, "COORDINATOR_NOT_AVAILABLE")
        meta.pending_offsets.setdefault(group_id, {}).update(accepted)
        return errors

    def _commit_offsets_for_peer(
        self,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        epoch: int,
        offsets: dict[tuple[str, int], CommittedOffset],
    ) -> Op[dict[tuple[str, int], str]]:
        """TxnOffsetCommit of a group coordinated here in a transaction another node coordinates.

        That node checks the group's partition joined the transaction; the
        offsets are then held here, by producer, as those of a transaction
        found open at load are, until its marker settles them.
        """
        partition = self.offsets.partition_for(group_id)
        error = yield from ask_verify(
            Verify(transactional_id, producer_id, epoch, OFFSETS_TOPIC, partition)
        )
        if error != NONE:
            return dict.fromkeys(offsets, error)
        errors = {
            key: NONE if self._partition_exists(*key) else "UNKNOWN_TOPIC_OR_PARTITION"
            for key in offsets
        }
        records: list[tuple[bytes, bytes | None]] = [
            (offset_key(group_id, t, p), offset_value(c))
            for (t, p), c in offsets.items()
            if errors[(t, p)] == NONE
        ]
        if not records:
            return errors
        try:
            index, end = self.offsets.append_transactional(
                group_id, records, self.now_ms(), producer_id, epoch
            )
            self.offsets.flush(index, end)
        except SeglogError as exc:
            logger.error("cannot store offsets of %s: %s", transactional_id, exc)
            return dict.fromkeys(offsets, "COORDINATOR_NOT_AVAILABLE")
        held = self.offsets.pending_txn_offsets.setdefault(producer_id, [])
        held.extend((index, key, value) for key, value in records)
        return errors

    def verify_partition(
        self, transactional_id: str, producer_id: int, epoch: int, topic: str, partition: int
    ) -> str:
        """:meth:`verify_partition_op` run to its end in this thread."""
        return drive(
            self.verify_partition_op(transactional_id, producer_id, epoch, topic, partition),
            self.peers,
        )

    def verify_partition_op(
        self, transactional_id: str, producer_id: int, epoch: int, topic: str, partition: int
    ) -> Op[str]:
        """May the producer write transactional data to the partition? (KIP-890's check.)

        Only a partition added to the producer's open transaction may take
        its data: a batch written anywhere else would never get a marker and
        would hold the partition's LSO for good (a "hanging" transaction).
        An id another node coordinates is checked there.
        """
        if not self.serves(transactional_id):
            error = yield from ask_verify(
                Verify(transactional_id, producer_id, epoch, topic, partition)
            )
            return error
        return self.check_partition(transactional_id, producer_id, epoch, topic, partition)

    def check_partition(
        self, transactional_id: str, producer_id: int, epoch: int, topic: str, partition: int
    ) -> str:
        """The check of :meth:`verify_partition_op` for an id coordinated here (NOT_COORDINATOR
        for another node's)."""
        if not self.serves(transactional_id):
            return "NOT_COORDINATOR"
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return "INVALID_PRODUCER_ID_MAPPING"
        if epoch != meta.producer_epoch:
            return "INVALID_PRODUCER_EPOCH"
        if meta.state != TxnState.ONGOING or (topic, partition) not in meta.partitions:
            return "INVALID_TXN_STATE"
        return NONE

    def has_pending_offset(self, group_id: str, topic: str, partition: int) -> bool:
        """True if an open transaction holds an offset of ``group_id`` for the partition.

        Safe to call while a worker thread runs a coordinator call: it reads
        a copy of the id table.
        """
        for meta in list(self.txns.values()):
            pending = meta.pending_offsets.get(group_id)
            if pending is not None and (topic, partition) in pending:
                return True
        return False

    # ------------------------------------------------------------------ EndTxn

    def end_txn(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool
    ) -> EndResult:
        """:meth:`end_txn_op` run to its end in this thread."""
        return drive(self.end_txn_op(transactional_id, producer_id, epoch, commit), self.peers)

    def end_txn_op(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool
    ) -> Op[EndResult]:
        """EndTxn: commit or abort the open transaction, markers written before the answer."""
        if not self.serves(transactional_id):
            return EndResult("NOT_COORDINATOR")
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return EndResult("INVALID_PRODUCER_ID_MAPPING")
        if epoch != meta.producer_epoch:
            return EndResult("PRODUCER_FENCED")
        if meta.in_flight:
            return EndResult("CONCURRENT_TRANSACTIONS")
        with self._busy(meta):
            result = yield from self._end_txn(meta, commit)
        return result

    def _end_txn(self, meta: TxnMetadata, commit: bool) -> Op[EndResult]:
        transactional_id = meta.transactional_id
        state = meta.state
        if state == TxnState.ONGOING:
            try:
                if commit and len(meta.partitions) == 1 and not meta.pending_offsets:
                    # One partition: its marker is the decision (see the module docstring).
                    self._move(meta, TxnState.PREPARE_COMMIT)
                    committed = yield from self._complete(meta, commit=True, prepared=False)
                    return EndResult(NONE, committed)
                if commit:
                    yield from self._flush_partitions(meta)
                self._store(meta, TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
                committed = yield from self._complete(meta, commit=commit)
                return EndResult(NONE, committed)
            except SeglogError as exc:
                logger.error("cannot end the transaction of %s: %s", transactional_id, exc)
                return EndResult("COORDINATOR_NOT_AVAILABLE")
        if (state == TxnState.COMPLETE_COMMIT and commit) or (
            state == TxnState.COMPLETE_ABORT and not commit
        ):
            return EndResult(NONE)  # a retry of an EndTxn that was done
        if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            if (state == TxnState.PREPARE_COMMIT) == commit:
                # Its markers failed (a node was down): the retry tries again.
                try:
                    committed = yield from self._complete(meta, commit=commit)
                    return EndResult(NONE, committed)
                except SeglogError as exc:
                    logger.error("cannot end the transaction of %s: %s", transactional_id, exc)
                    return EndResult("COORDINATOR_NOT_AVAILABLE")
            return EndResult("CONCURRENT_TRANSACTIONS")
        return EndResult("INVALID_TXN_STATE")

    # ------------------------------------------------------------ describing

    def describe(self, transactional_id: str) -> TxnMetadata | None:
        """A copy of the id's state (DescribeTransactions), or None if it is unknown."""
        meta = self.txns.get(transactional_id)
        if meta is None:
            return None
        return TxnMetadata(
            meta.transactional_id,
            meta.producer_id,
            meta.producer_epoch,
            meta.timeout_ms,
            meta.state,
            set(meta.partitions),
            meta.last_update_ms,
            meta.start_ms,
            client_transaction_version=meta.client_transaction_version,
        )

    def list_transactions(
        self, states: Iterable[str], producer_ids: Iterable[int], min_duration_ms: int = -1
    ) -> tuple[list[TxnMetadata], list[str]]:
        """ListTransactions: (matching ids, the state filters that name no state).

        Empty filters match everything; a duration filter of 0 or more keeps
        the transactions running for longer than that.
        """
        names = {state.kafka_name: state for state in TxnState}
        wanted_states = set(states)
        unknown = sorted(name for name in wanted_states if name not in names)
        wanted_pids = set(producer_ids)
        now = self.now_ms()
        found = []
        for meta in list(self.txns.values()):
            if wanted_states and meta.state.kafka_name not in wanted_states:
                continue
            if wanted_pids and meta.producer_id not in wanted_pids:
                continue
            if min_duration_ms >= 0 and (
                meta.start_ms < 0
                or meta.state != TxnState.ONGOING
                or now - meta.start_ms <= min_duration_ms
            ):
                continue
            found.append(meta)
        return found, unknown

    # ------------------------------------------------------------ expiration

    def abort_timed_out(self) -> list[str]:
        """:meth:`abort_timed_out_op` run to its end in this thread."""
        return drive(self.abort_timed_out_op(), self.peers)

    def abort_timed_out_op(self) -> Op[list[str]]:
        """Abort every transaction open longer than its timeout; returns their ids.

        As Kafka's coordinator does, the producer is fenced first: the epoch
        is bumped and the markers are written at the new epoch, so the
        stalled producer's later requests are refused. A transaction left
        prepared (its markers failed: a node was down) is completed again.
        """
        now = self.now_ms()
        aborted = []
        for meta in list(self.txns.values()):
            if meta.in_flight:
                continue  # an operation in progress ends it
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                try:
                    with self._busy(meta):
                        committed = yield from self._complete(
                            meta, commit=meta.state == TxnState.PREPARE_COMMIT
                        )
                    if committed:
                        self.late_commits.append(committed)
                except SeglogError as exc:
                    logger.warning("cannot complete %s yet: %s", meta.transactional_id, exc)
                continue
            if meta.state != TxnState.ONGOING or meta.start_ms < 0:
                continue
            if now <= meta.start_ms + meta.timeout_ms:
                continue
            logger.info(
                "aborting the transaction of %s: open for more than %d ms",
                meta.transactional_id,
                meta.timeout_ms,
            )
            try:
                with self._busy(meta):
                    self._bump_epoch(meta)
                    self._store(meta, TxnState.PREPARE_ABORT)
                    yield from self._complete(meta, commit=False)
            except SeglogError as exc:
                logger.error("cannot abort the transaction of %s: %s", meta.transactional_id, exc)
                continue
            aborted.append(meta.transactional_id)
        return aborted

    def expire_transactional_ids(self) -> list[str]:
        """Forget ids idle for ``transactional.id.expiration.ms`` with no open transaction."""
        now = self.now_ms()
        idle_states = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        expired = []
        for meta in list(self.txns.values()):
            if meta.in_flight or meta.state not in idle_states:
                continue
            if now - meta.last_update_ms >= self.id_expiration_ms:
                try:
                    self._store_tombstone(meta.transactional_id)
                except SeglogError as exc:
                    logger.error("cannot expire %s: %s", meta.transactional_id, exc)
                    continue
                del self.txns[meta.transactional_id]
                expired.append(meta.transactional_id)
        return expired

    def _complete(
        self, meta: TxnMetadata, *, commit: bool, prepared: bool = True
    ) -> Op[dict[str, dict[tuple[str, int], CommittedOffset]]]:
        """Write the markers of a Prepare state, then store the Complete state.

        ``prepared``: the Prepare state is stored. Its Complete record is then
        fsynced too, or a cut could keep the Prepare record as the id's last
        and complete it again over the next transaction's data (same epoch).
        Without it (a one-partition commit), the local marker is a record like
        any other: fsynced when the partition's flush.messages says so, as a
        plain produce's records are (a power cut may lose it, and the data
        with it: the transaction is then wholly invisible, or found open and
        ended).
        """
        ordered = sorted(meta.partitions)
        others = [tp for tp in ordered if not self.log_dir.serves_partition(*tp)]
        errors, committed = self.write_markers(
            meta.producer_id,
            meta.producer_epoch,
            [tp for tp in ordered if tp not in others],
            commit=commit,
            coordinator_epoch=COORDINATOR_EPOCH,
            sync=prepared,
        )
        if others:
            # Partitions other nodes lead: their leaders write the markers.
            answered = yield from ask_markers(
                WriteMarkers(
                    meta.producer_id, meta.producer_epoch, others, commit, COORDINATOR_EPOCH
                )
            )
            errors.update(answered)
        failed = {tp: error for tp, error in errors.items() if error not in _MARKER_SETTLED}
        if failed:
            raise SeglogError(
                "cannot write the markers of "
                f"{meta.transactional_id}: "
                + ", ".join(f"{t}-{p}: {error}" for (t, p), error in sorted(failed.items()))
            )
        for (topic, partition), error in errors.items():
            if error != NONE:
                # A partition deleted since it joined, or a newer epoch already ended
                # this producer's transaction there: nothing left to mark.
                logger.warning("no marker for %s-%d: %s", topic, partition, error)
        # Whatever was not marked (a deleted offsets partition) is gone with its transaction.
        meta.pending_offsets = {}
        # A complete transaction has no partitions, as Kafka stores and describes it.
        partitions, meta.partitions = meta.partitions, set()
        try:
            # The markers are durable already (after a stored Prepare), so this
            # record can only ever become durable after them.
            self._store(
                meta,
                TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
                sync=prepared,
            )
        except BaseException:
            meta.partitions = partitions
            raise
        return committed

    # --------------------------------------------------------------- markers

    def write_marker(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        coordinator_epoch: int,
    ) -> MarkerWritten:
        """Append a COMMIT or ABORT marker of the producer to a local partition (no fsync).

        The one way a marker is written, for the coordinator's own
        transactions and for WriteTxnMarkers alike. In a ``__consumer_offsets``
        partition the marker also settles the producer's offsets held there:
        a commit hands them back (visible once the marker is durable), an
        abort drops them. Errors are Kafka's names: UNKNOWN_TOPIC_OR_PARTITION,
        INVALID_PRODUCER_EPOCH for an epoch older than the partition's,
        TRANSACTION_COORDINATOR_FENCED for a coordinator epoch older than the
        last marker's, KAFKA_STORAGE_ERROR.
        """
        try:
            log = self.log_dir.log(topic, partition)
            info = log.append_marker(
                producer_id,
                producer_epoch,
                commit=commit,
                coordinator_epoch=coordinator_epoch,
            )
        except SeglogError as exc:
            return MarkerWritten(exc.kafka_error, message=str(exc))
        except OSError as exc:
            return MarkerWritten("KAFKA_STORAGE_ERROR", message=str(exc))
        offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        if topic == OFFSETS_TOPIC:
            offsets = self._take_pending_offsets(producer_id, partition)
        return MarkerWritten(NONE, log, info.last_offset + 1, offsets if commit else {})

    def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
        *,
        commit: bool,
        coordinator_epoch: int,
        sync: bool = True,
    ) -> tuple[dict[tuple[str, int], str], dict[str, dict[tuple[str, int], CommittedOffset]]]:
        """Write the producer's marker to each local partition, then fsync them all.

        With ``sync`` false a partition is fsynced only when its
        ``flush.messages`` is reached, as for any other record. Returns an
        error name per partition (NONE once the marker is written, and fsynced
        if due) and, for a commit, the offsets the markers made visible
        (group → offsets), for the group coordinator.
        """
        errors: dict[tuple[str, int], str] = {}
        written: list[tuple[tuple[str, int], MarkerWritten]] = []
        for topic, partition in partitions:
            result = self.write_marker(
                topic,
                partition,
                producer_id,
                producer_epoch,
                commit=commit,
                coordinator_epoch=coordinator_epoch,
            )
            errors[(topic, partition)] = result.error
            if result.log is not None:
                written.append(((topic, partition), result))
            elif result.error == "KAFKA_STORAGE_ERROR":
                logger.error("cannot write a marker to %s-%d: %s", topic, partition, result.message)
        committed: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        for key, result in written:
            assert result.log is not None
            try:
                if sync or result.log.unflushed_messages >= result.log.config.flush_messages:
                    result.log.flush(result.end_offset)
            except SeglogError as exc:
                logger.error("cannot fsync the marker in %s-%d: %s", *key, exc)
                errors[key] = exc.kafka_error
                continue
            for group, offsets in result.committed_offsets.items():
                committed.setdefault(group, {}).update(offsets)
        return errors, committed

    def _take_pending_offsets(
        self, producer_id: int, partition: int
    ) -> dict[str, dict[tuple[str, int], CommittedOffset]]:
        """Remove the producer's open offsets held in ``__consumer_offsets`` ``partition``."""
        taken: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        known = False
        for meta in list(self.txns.values()):
            if meta.producer_id != producer_id:
                continue
            known = True
            for group in [
                g for g in meta.pending_offsets if self.offsets.partition_for(g) == partition
            ]:
                taken.setdefault(group, {}).update(meta.pending_offsets.pop(group))
        # Offsets found at load: restored into their transactional id's state
        # when the coordinator knows it, else only here (a hanging transaction).
        held = self.offsets.pending_txn_offsets.get(producer_id)
        if held:
            rest = [entry for entry in held if entry[0] != partition]
            if not known:
                holder = TxnMetadata("", producer_id, -1, 0)
                for _partition, key, value in held:
                    if _partition == partition:
                        self._restore_pending_offset(holder, key, value)
                for group, offsets in holder.pending_offsets.items():
                    taken.setdefault(group, {}).update(offsets)
            if rest:
                self.offsets.pending_txn_offsets[producer_id] = rest
            else:
                del self.offsets.pending_txn_offsets[producer_id]
        return taken


def create_transaction_coordinator(
    log_dir: LogDir,
    offsets: OffsetStore,
    properties: dict[str, str],
    *,
    new_producer_id: Callable[[], int],
    clock: Callable[[], float],
) -> TransactionCoordinator:
    """A transaction coordinator configured by broker properties (Kafka's names)."""
    from seglog.config import BrokerConfig

    config = BrokerConfig(properties)
    return TransactionCoordinator(
        log_dir,
        offsets,
        new_producer_id=new_producer_id,
        clock=clock,
        max_timeout_ms=int(config["transaction.max.timeout.ms"]),
        partitions=int(config["transaction.state.log.num.partitions"]),
        segment_bytes=int(config["transaction.state.log.segment.bytes"]),
        abort_interval_ms=int(
            config["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
        ),
        id_expiration_ms=int(config["transactional.id.expiration.ms"]),
        expiration_interval_ms=int(
            config["transaction.remove.expired.transaction.cleanup.interval.ms"]
        ),
    )


__all__ = [
    "EndResult",
    "InitResult",
    "MarkerWritten",
    "TransactionCoordinator",
    "TxnMetadata",
    "create_transaction_coordinator",
]
