"""Transaction markers: written to the partitions led here, asked of the nodes leading the rest.

Kafka's coordinator hands a transaction's markers to its marker channel,
which sends WriteTxnMarkers to each partition's leader. Here
:meth:`TxnMarkers.mark` writes those of the partitions this process leads
itself (:meth:`TxnMarkers.write_markers`, the same function that serves
WriteTxnMarkers) and yields the rest to the coordinator's peers
(:mod:`~seglog.coordinator.txn_peers`), by leader. :meth:`TxnMarkers.flush_data`
does the same for the fsync of a transaction's data before its commit is
decided.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from seglog.coordinator.offset_store import TOPIC as OFFSETS_TOPIC
from seglog.coordinator.offset_store import CommittedOffset
from seglog.coordinator.txn_offsets import GroupOffsets, PendingOffsets
from seglog.coordinator.txn_peers import FlushData, Op, WriteMarkers, ask_flush, ask_markers
from seglog.coordinator.txn_state import NONE
from seglog.errors import SeglogError
from seglog.storage.log import Log
from seglog.storage.log_dir import LogDir

logger = logging.getLogger(__name__)

#: The epoch of this coordinator's markers: one broker leads every
#: ``__transaction_state`` partition, at Kafka's first leader epoch.
COORDINATOR_EPOCH = 0
#: Marker errors that leave nothing to mark (a deleted partition, a transaction a
#: newer epoch or coordinator ended already): the coordinator completes anyway.
MARKER_SETTLED = frozenset(
    {
        NONE,
        "UNKNOWN_TOPIC_OR_PARTITION",
        "INVALID_PRODUCER_EPOCH",
        "PRODUCER_FENCED",
        "TRANSACTION_COORDINATOR_FENCED",
    }
)


@dataclass(frozen=True, slots=True)
class MarkerWritten:
    """What :meth:`TxnMarkers.write_marker` did to one partition."""

    error: str
    #: The partition's log and the offset after the marker, to fsync (when written).
    log: Log | None = None
    end_offset: int = -1
    #: For a commit in ``__consumer_offsets``: the offsets it makes visible.
    committed_offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = field(
        default_factory=dict
    )
    message: str = ""


class TxnMarkers:
    """The markers and data fsyncs of transactions, here and on the other nodes."""

    def __init__(self, log_dir: LogDir, pending: PendingOffsets) -> None:
        self.log_dir = log_dir
        self._pending = pending

    def _split(self, partitions: Iterable[tuple[str, int]]) -> tuple[list[tuple[str, int]], ...]:
        """The partitions led here and those other nodes lead, each sorted."""
        ordered = sorted(partitions)
        here = [tp for tp in ordered if self.log_dir.serves_partition(*tp)]
        return here, [tp for tp in ordered if tp not in here]

    def flush_data(self, partitions: Iterable[tuple[str, int]]) -> Op[None]:
        """fsync the data of the partitions (before a commit's decision is stored).

        Another node's partitions are fsynced by their leader, asked first: a
        failure there raises SeglogError, leaving the transaction open rather
        than deciding over data a power cut may lose.
        """
        here, others = self._split(partitions)
        if others:
            yield from ask_flush(FlushData(others))
        for topic, partition in here:
            try:
                log = self.log_dir.log(topic, partition)
            except SeglogError as exc:
                logger.warning("cannot flush %s-%d: %s", topic, partition, exc)
                continue
            log.flush()

    def mark(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
        *,
        commit: bool,
        sync: bool,
    ) -> Op[GroupOffsets]:
        """Write the transaction's markers everywhere; the offsets a commit made visible.

        Raises SeglogError if a partition still needs its marker (its leader
        is down, its disk failed): the transaction stays prepared, and is
        marked again later.
        """
        here, others = self._split(partitions)
        errors, committed = self.write_markers(
            producer_id,
            producer_epoch,
            here,
            commit=commit,
            coordinator_epoch=COORDINATOR_EPOCH,
            sync=sync,
        )
        if others:
            answered = yield from ask_markers(
                WriteMarkers(producer_id, producer_epoch, others, commit, COORDINATOR_EPOCH)
            )
            errors.update(answered)
        failed = {tp: error for tp, error in errors.items() if error not in MARKER_SETTLED}
        if failed:
            raise SeglogError(
                f"cannot write the markers of {transactional_id}: "
                + ", ".join(f"{t}-{p}: {error}" for (t, p), error in sorted(failed.items()))
            )
        for (topic, partition), error in errors.items():
            if error != NONE:
                # A partition deleted since it joined, or a newer epoch already ended
                # this producer's transaction there: nothing left to mark.
                logger.warning("no marker for %s-%d: %s", topic, partition, error)
        return committed

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
        offsets: GroupOffsets = {}
        if topic == OFFSETS_TOPIC:
            offsets = self._pending.take(producer_id, partition)
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
    ) -> tuple[dict[tuple[str, int], str], GroupOffsets]:
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
        committed: GroupOffsets = {}
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


__all__ = ["COORDINATOR_EPOCH", "MARKER_SETTLED", "MarkerWritten", "TxnMarkers"]
