"""The transaction coordinator: transactional ids, their producers and their markers.

Theory of operation
-------------------
Each transactional id has one :class:`~seglog.coordinator.txn_state.TxnMetadata`:
its producer id and epoch, its timeout, the partitions of its current
transaction, and a state from Kafka's machine, whose (state, event) →
(action, next state) table is :mod:`~seglog.coordinator.txn_state`'s.

The coordinator composes the parts (Kafka's TransactionCoordinator over its
TransactionStateManager and marker channel):
:class:`~seglog.coordinator.txn_store.TxnStateLog` keeps the states in
``__transaction_state``; :class:`~seglog.coordinator.txn_markers.TxnMarkers`
writes markers and fsyncs data, here or through the other nodes
(:mod:`~seglog.coordinator.txn_peers`);
:class:`~seglog.coordinator.txn_offsets.PendingOffsets` holds TxnOffsetCommit's
offsets until their marker.

Every move is stored in ``__transaction_state``, in the order that keeps every
transaction wholly visible or wholly invisible across a power cut
(:class:`~seglog.coordinator.txn_store.TxnCompletion` says which record is
fsynced before which answer).

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

from seglog.coordinator import txn_log
from seglog.coordinator.offset_store import TOPIC as OFFSETS_TOPIC
from seglog.coordinator.offset_store import CommittedOffset, OffsetStore
from seglog.coordinator.txn_log import TxnState
from seglog.coordinator.txn_markers import MarkerWritten, TxnMarkers
from seglog.coordinator.txn_offsets import GroupOffsets, PendingOffsets
from seglog.coordinator.txn_peers import ClusterOfOne, Op, Peers, Verify, ask_verify, drive
from seglog.coordinator.txn_state import (
    MAX_EPOCH,
    NONE,
    Action,
    EndResult,
    InitResult,
    TxnEvent,
    TxnMetadata,
    matching,
    transition,
)
from seglog.coordinator.txn_store import TxnCompletion, TxnStateLog, open_transactions
from seglog.errors import SeglogError
from seglog.storage.log_dir import LogDir
from seglog.storage.topic_admin import TopicAdministration

logger = logging.getLogger(__name__)

_PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


class TransactionCoordinator:
    """Transactional ids over a :class:`LogDir`'s ``__transaction_state``."""

    def __init__(
        self,
        log_dir: LogDir,
        offsets: OffsetStore,
        *,
        new_producer_id: Callable[[], int],
        clock: Callable[[], float],
        topic_admin: TopicAdministration | None = None,
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
        self.offsets = offsets
        #: The other nodes, asked about the partitions and ids they lead (none
        #: for a broker alone: a cluster of one leads everything itself).
        self.peers: Peers = peers if peers is not None else ClusterOfOne()
        #: Offsets made visible by commits :meth:`abort_timed_out` completed, for
        #: the group coordinator (the caller takes them).
        self.late_commits: list[GroupOffsets] = []
        self._new_producer_id = new_producer_id
        self._clock = clock
        self.max_timeout_ms = max_timeout_ms
        #: How often :meth:`abort_timed_out` and :meth:`expire_transactional_ids` are due.
        self.abort_interval_ms = abort_interval_ms
        self.id_expiration_ms = id_expiration_ms
        self.expiration_interval_ms = expiration_interval_ms
        self.txns: dict[str, TxnMetadata] = {}
        self.loaded = False
        self.state_log = TxnStateLog(
            log_dir,
            # Where __transaction_state is created: the log directory itself, alone.
            log_dir if topic_admin is None else topic_admin,
            now_ms=self.now_ms,
            partitions=partitions,
            segment_bytes=segment_bytes,
            value_version=txn_log.value_version(transaction_version),
        )
        self.pending = PendingOffsets(
            offsets, self.txns, now_ms=self.now_ms, partition_exists=self._partition_exists
        )
        self.markers = TxnMarkers(log_dir, self.pending)
        self.completion = TxnCompletion(self.state_log, self.markers)

    # --------------------------------------------------------------- storage

    def now_ms(self) -> int:
        """The coordinator's clock in ms."""
        return int(self._clock() * 1000)

    @property
    def partitions(self) -> int:
        """The partition count of ``__transaction_state``."""
        return self.state_log.partitions

    def ensure_topic(self) -> None:
        """Create ``__transaction_state`` (compacted) if it does not exist yet."""
        self.state_log.ensure_topic()

    def partition_for(self, transactional_id: str) -> int:
        """The ``__transaction_state`` partition of ``transactional_id``."""
        return self.state_log.partition_for(transactional_id)

    def serves(self, transactional_id: str) -> bool:
        """Whether this process coordinates ``transactional_id`` (another node may)."""
        return self.state_log.serves(transactional_id)

    def _partition_exists(self, topic: str, partition: int) -> bool:
        info = self.log_dir.topics().get(topic)
        return info is not None and 0 <= partition < info.partitions

    @contextmanager
    def _busy(self, meta: TxnMetadata) -> Iterator[None]:
        """Mark the id busy while an operation on it may wait for other nodes."""
        meta.in_flight = True
        try:
            yield
        finally:
            meta.in_flight = False

    # --------------------------------------------------------------- loading

    def load(self) -> GroupOffsets:
        """:meth:`load_op` run to its end in this thread."""
        return drive(self.load_op(), self.peers)

    def load_op(self) -> Op[GroupOffsets]:
        """Read ``__transaction_state``, then finish what a crash left half done (blocking).

        Returns the offsets of the commits it finished, for the group coordinator.
        A transaction whose markers cannot all be written now (a node is down)
        stays prepared; the periodic pass (:meth:`abort_timed_out`) completes it.
        """
        committed: GroupOffsets = {}
        self.txns.clear()
        self.txns.update(self.state_log.read())
        for tid, partitions in open_transactions(self.log_dir, self.txns, self.peers).items():
            names = ", ".join(f"{t}-{p}" for t, p in sorted(partitions))
            logger.info("restoring the open transaction of %s in %s", tid, names)
            self._begin(self.txns[tid], partitions)
        for meta in list(self.txns.values()):
            self.pending.restore_loaded(meta)
            if meta.state in _PREPARED:
                logger.info(
                    "completing the transaction of %s left in %s",
                    meta.transactional_id,
                    meta.state.kafka_name,
                )
                try:
                    with self._busy(meta):
                        done = yield from self.completion.mark(meta)
                except SeglogError as exc:
                    logger.warning("cannot complete %s yet: %s", meta.transactional_id, exc)
                    continue
                for group, offsets in done.items():
                    committed.setdefault(group, {}).update(offsets)
        self.loaded = True
        logger.info("loaded %d transactional ids from %s", len(self.txns), txn_log.TOPIC)
        return committed

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
        row = transition(meta.state, TxnEvent.INIT_PRODUCER_ID)
        if meta.in_flight or row is None:
            return InitResult("CONCURRENT_TRANSACTIONS")
        if row.action == Action.REFUSE:
            return InitResult(row.error)
        with self._busy(meta):
            if row.action == Action.FENCE:
                # A new producer takes over an open transaction: fence the old one
                # by aborting at a bumped epoch (Kafka's PrepareEpochFence).
                try:
                    yield from self._fence(meta)
                except SeglogError as exc:
                    logger.error("cannot abort the transaction of %s: %s", transactional_id, exc)
                    return InitResult("COORDINATOR_NOT_AVAILABLE")
            return self._new_epoch(meta, timeout_ms, bumping=producer_id >= 0)

    def _new_epoch(self, meta: TxnMetadata, timeout_ms: int, *, bumping: bool) -> InitResult:
        bumped_from = (meta.producer_id, meta.producer_epoch)
        self._bump_epoch(meta)
        meta.bumped_from = bumped_from if bumping else None
        meta.timeout_ms = timeout_ms
        meta.partitions.clear()
        meta.pending_offsets.clear()
        meta.start_ms = -1
        try:
            self.state_log.store(meta, TxnState.EMPTY)
        except SeglogError as exc:
            logger.error("cannot store transactional id %s: %s", meta.transactional_id, exc)
            return InitResult("COORDINATOR_NOT_AVAILABLE")
        return InitResult(NONE, meta.producer_id, meta.producer_epoch)

    def _bump_epoch(self, meta: TxnMetadata) -> None:
        if meta.producer_epoch >= MAX_EPOCH:
            meta.producer_id = self._new_producer_id()
            meta.producer_epoch = 0
        else:
            meta.producer_epoch += 1

    def _fence(self, meta: TxnMetadata) -> Op[GroupOffsets]:
        """Abort the open transaction at a bumped epoch (the FENCE action)."""
        self._bump_epoch(meta)
        self.state_log.store(meta, TxnState.PREPARE_ABORT)
        aborted = yield from self.completion.mark(meta)
        return aborted

    # ------------------------------------------------------ adding partitions

    def _check_producer(self, transactional_id: str, producer_id: int, epoch: int) -> str:
        if not self.serves(transactional_id):
            return "NOT_COORDINATOR"
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return "INVALID_PRODUCER_ID_MAPPING"
        if epoch != meta.producer_epoch:
            return "PRODUCER_FENCED"
        row = transition(meta.state, TxnEvent.ADD_PARTITIONS)
        if meta.in_flight or row is None:
            return "CONCURRENT_TRANSACTIONS"
        return row.error

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
        """Store the transaction as Ongoing with ``new`` partitions added (the BEGIN action)."""
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
            self.state_log.store(meta, TxnState.ONGOING, sync=False)
        except SeglogError as exc:
            meta.partitions, meta.start_ms = before, start
            logger.error("cannot store transaction %s: %s", meta.transactional_id, exc)
            return "COORDINATOR_NOT_AVAILABLE"
        return NONE

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
            held = yield from self.pending.store_for_peer(
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
        return self.pending.store(meta, group_id, offsets)

    def has_pending_offset(self, group_id: str, topic: str, partition: int) -> bool:
        """True if an open transaction holds an offset of ``group_id`` for the partition."""
        return self.pending.has_pending(group_id, topic, partition)

    # ---------------------------------------------------------- verification

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
        """:meth:`verify_partition_op`'s check of an id coordinated here (else NOT_COORDINATOR)."""
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
        row = transition(meta.state, TxnEvent.END_COMMIT if commit else TxnEvent.END_ABORT)
        if row is None:
            return EndResult("INVALID_TXN_STATE")
        if row.action in (Action.REFUSE, Action.ANSWERED):
            return EndResult(row.error)
        try:
            with self._busy(meta):
                if row.action == Action.MARK:
                    # Its markers failed (a node was down): the retry writes them again.
                    committed = yield from self.completion.mark(meta)
                else:
                    committed = yield from self.completion.prepare(meta, commit=commit)
        except SeglogError as exc:
            logger.error("cannot end the transaction of %s: %s", transactional_id, exc)
            return EndResult("COORDINATOR_NOT_AVAILABLE")
        return EndResult(NONE, committed)

    # ------------------------------------------------------------ describing

    def describe(self, transactional_id: str) -> TxnMetadata | None:
        """A copy of the id's state (DescribeTransactions), or None if it is unknown."""
        meta = self.txns.get(transactional_id)
        return None if meta is None else meta.copy()

    def list_transactions(
        self, states: Iterable[str], producer_ids: Iterable[int], min_duration_ms: int = -1
    ) -> tuple[list[TxnMetadata], list[str]]:
        """ListTransactions: (matching ids, the state filters that name no state).

        Empty filters match everything; a duration filter of 0 or more keeps
        the transactions running for longer than that.
        """
        return matching(
            list(self.txns.values()), states, producer_ids, min_duration_ms, self.now_ms()
        )

    # ------------------------------------------------------------ expiration

    def abort_timed_out(self) -> list[str]:
        """:meth:`abort_timed_out_op` run to its end in this thread."""
        return drive(self.abort_timed_out_op(), self.peers)

    def abort_timed_out_op(self) -> Op[list[str]]:
        """Abort every transaction open longer than its timeout; returns their ids.

        As Kafka's coordinator does, the producer is fenced first: the epoch
        is bumped and the markers are written at the new epoch, so the
        stalled producer's later requests are refused. A transaction left
        prepared (its markers failed: a node was down) is marked again.
        """
        now = self.now_ms()
        aborted = []
        for meta in list(self.txns.values()):
            row = transition(meta.state, TxnEvent.TIMEOUT)
            if meta.in_flight or row is None:
                continue  # nothing to end, or an operation in progress ends it
            if row.action == Action.MARK:
                try:
                    with self._busy(meta):
                        committed = yield from self.completion.mark(meta)
                    if committed:
                        self.late_commits.append(committed)
                except SeglogError as exc:
                    logger.warning("cannot complete %s yet: %s", meta.transactional_id, exc)
                continue
            if meta.start_ms < 0 or now <= meta.start_ms + meta.timeout_ms:
                continue
            logger.info(
                "aborting the transaction of %s: open for more than %d ms",
                meta.transactional_id,
                meta.timeout_ms,
            )
            try:
                with self._busy(meta):
                    yield from self._fence(meta)
            except SeglogError as exc:
                logger.error("cannot abort the transaction of %s: %s", meta.transactional_id, exc)
                continue
            aborted.append(meta.transactional_id)
        return aborted

    def expire_transactional_ids(self) -> list[str]:
        """Forget ids idle for ``transactional.id.expiration.ms`` with no open transaction."""
        now = self.now_ms()
        expired = []
        for meta in list(self.txns.values()):
            row = transition(meta.state, TxnEvent.EXPIRATION)
            if meta.in_flight or row is None or now - meta.last_update_ms < self.id_expiration_ms:
                continue
            try:
                self.state_log.store_tombstone(meta.transactional_id)
            except SeglogError as exc:
                logger.error("cannot expire %s: %s", meta.transactional_id, exc)
                continue
            del self.txns[meta.transactional_id]
            expired.append(meta.transactional_id)
        return expired


def create_transaction_coordinator(
    log_dir: LogDir,
    offsets: OffsetStore,
    properties: dict[str, str],
    *,
    new_producer_id: Callable[[], int],
    clock: Callable[[], float],
    topic_admin: TopicAdministration | None = None,
) -> TransactionCoordinator:
    """A transaction coordinator configured by broker properties (Kafka's names).

    ``topic_admin`` creates ``__transaction_state`` (the log directory itself unless given).
    """
    from seglog.config import BrokerConfig

    config = BrokerConfig(properties)
    return TransactionCoordinator(
        log_dir,
        offsets,
        new_producer_id=new_producer_id,
        clock=clock,
        topic_admin=topic_admin,
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
    "TxnState",
    "create_transaction_coordinator",
]
