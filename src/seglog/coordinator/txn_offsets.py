"""TxnOffsetCommit's offsets: held in ``__consumer_offsets`` until their transaction ends.

Offsets a transaction commits are appended to the group's
``__consumer_offsets`` partition as transactional records, invisible to the
group until the transaction's marker there commits them. Until then they are
held (:class:`PendingOffsets`):

* in the transactional id's state (``TxnMetadata.pending_offsets``) when this
  process coordinates the id;
* by producer id (``OffsetStore.pending_txn_offsets``) when another node
  does, or when they were found open at load before any id claimed them.

The marker in the offsets partition takes them (:meth:`PendingOffsets.take`):
a commit hands them to the group coordinator, an abort drops them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from seglog.coordinator.offset_store import TOPIC as OFFSETS_TOPIC
from seglog.coordinator.offset_store import (
    CommittedOffset,
    OffsetStore,
    offset_key,
    offset_value,
    parse_key,
    parse_offset_value,
)
from seglog.coordinator.txn_peers import Op, Verify, ask_verify
from seglog.coordinator.txn_state import NONE, TxnMetadata
from seglog.errors import CorruptRecordError, SeglogError

logger = logging.getLogger(__name__)

GroupOffsets = dict[str, dict[tuple[str, int], CommittedOffset]]


class PendingOffsets:
    """The offsets of open transactions, over an :class:`OffsetStore` and the ids' states."""

    def __init__(
        self,
        offsets: OffsetStore,
        txns: dict[str, TxnMetadata],
        *,
        now_ms: Callable[[], int],
        partition_exists: Callable[[str, int], bool],
    ) -> None:
        self.offsets = offsets
        self._txns = txns
        self._now_ms = now_ms
        self._partition_exists = partition_exists

    def store(
        self,
        meta: TxnMetadata,
        group_id: str,
        offsets: dict[tuple[str, int], CommittedOffset],
    ) -> dict[tuple[str, int], str]:
        """Append the offsets of ``meta``'s open transaction; an error name per partition.

        Not fsynced: like the transaction's data, the offsets are made durable
        by EndTxn's commit before its decision is.
        """
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
            self.offsets.append_transactional(
                group_id, records, self._now_ms(), meta.producer_id, meta.producer_epoch
            )
        except SeglogError as exc:
            logger.error("cannot store offsets of %s: %s", meta.transactional_id, exc)
            return dict.fromkeys(offsets, "COORDINATOR_NOT_AVAILABLE")
        meta.pending_offsets.setdefault(group_id, {}).update(accepted)
        return errors

    def store_for_peer(
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
                group_id, records, self._now_ms(), producer_id, epoch
            )
            self.offsets.flush(index, end)
        except SeglogError as exc:
            logger.error("cannot store offsets of %s: %s", transactional_id, exc)
            return dict.fromkeys(offsets, "COORDINATOR_NOT_AVAILABLE")
        held = self.offsets.pending_txn_offsets.setdefault(producer_id, [])
        held.extend((index, key, value) for key, value in records)
        return errors

    def take(self, producer_id: int, partition: int) -> GroupOffsets:
        """Remove the producer's open offsets held in ``__consumer_offsets`` ``partition``."""
        taken: GroupOffsets = {}
        known = False
        for meta in list(self._txns.values()):
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
                        restore(holder, key, value)
                for group, offsets in holder.pending_offsets.items():
                    taken.setdefault(group, {}).update(offsets)
            if rest:
                self.offsets.pending_txn_offsets[producer_id] = rest
            else:
                del self.offsets.pending_txn_offsets[producer_id]
        return taken

    def restore_loaded(self, meta: TxnMetadata) -> None:
        """Give ``meta`` back the offsets of its open transaction found at load."""
        for _partition, key, value in self.offsets.pending_txn_offsets.get(meta.producer_id, []):
            restore(meta, key, value)

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        """True if an open transaction holds an offset of ``group_id`` for the partition.

        Safe to call while the coordinator's thread runs an operation: it
        reads a copy of the id table.
        """
        for meta in list(self._txns.values()):
            pending = meta.pending_offsets.get(group_id)
            if pending is not None and (topic, partition) in pending:
                return True
        return False


def restore(meta: TxnMetadata, key: bytes, value: bytes | None) -> None:
    """Put one stored offset record back into ``meta``'s open offsets (skipping others)."""
    try:
        parsed = parse_key(key)
    except CorruptRecordError:
        return
    if isinstance(parsed, str) or value is None:
        return
    group, topic, partition = parsed
    meta.pending_offsets.setdefault(group, {})[(topic, partition)] = parse_offset_value(value)


__all__ = ["GroupOffsets", "PendingOffsets", "restore"]
