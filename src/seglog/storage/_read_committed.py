"""What a read_committed reader of the files needs: the last stable offset and aborted batches.

Spark's files mode and the mirror read a partition's files as a
``read_committed`` consumer would: only up to the first offset of the oldest
transaction with no marker yet (:func:`last_stable_offset`, from the newest
producer snapshot and the batch headers after it), and without the data
batches of aborted transactions (:class:`AbortedTransactions`, from the
``.txnindex`` files). Re-exported by :mod:`seglog.storage.reader`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from seglog.errors import SeglogError
from seglog.records import batch
from seglog.storage import filenames, producer_state, txn_index

if TYPE_CHECKING:  # the reader re-exports this module: a runtime import would be circular
    from seglog.storage.reader import PartitionReader


class AbortedTransactions:
    """The aborted transactions of a partition from ``start`` on (its ``.txnindex`` files)."""

    def __init__(self, part: PartitionReader, start: int) -> None:
        self._spans: dict[int, list[tuple[int, int]]] = {}
        for base in part.segments_between(start, 2**63 - 1):
            path = part.directory / f"{filenames.offset_name(base)}{filenames.TXN_INDEX_SUFFIX}"
            try:
                entries = txn_index.read(path)
            except SeglogError:
                continue
            for entry in entries:
                if entry.last_offset >= start:
                    self._spans.setdefault(entry.producer_id, []).append(
                        (entry.first_offset, entry.last_offset)
                    )

    def holds(self, header: batch.BatchHeader) -> bool:
        """True for a data batch of an aborted transaction."""
        if not header.is_transactional or header.is_control:
            return False
        return self.holds_offset(header.producer_id, header.base_offset)

    def holds_offset(self, producer_id: int, offset: int) -> bool:
        """True when ``offset`` of a transactional batch of ``producer_id`` was aborted.

        A transactional batch never straddles its marker, so any of its offsets
        answers as its base offset does (a lookup by key knows only the record's).
        """
        spans = self._spans.get(producer_id)
        return spans is not None and any(first <= offset <= last for first, last in spans)


def open_transactions(part: PartitionReader, latest: int) -> dict[int, int]:
    """The transactions with no marker below ``latest``: producer id → first offset.

    Those of the newest producer snapshot at or below ``latest``, then updated
    by the batch headers after it (a marker ends its producer's transaction, a
    transactional batch opens one).
    """
    open_txns: dict[int, int] = {}
    since = part.bases[0] if part.bases else 0
    snapshots = sorted(
        offset
        for name in os.listdir(part.directory)
        if name.endswith(filenames.SNAPSHOT_SUFFIX)
        and (offset := filenames.parse_base_offset(name)) is not None
        and offset <= latest
    )
    for offset in reversed(snapshots):
        try:
            entries = producer_state.read_snapshot(filenames.snapshot_path(part.directory, offset))
        except (SeglogError, FileNotFoundError):
            continue
        open_txns = {
            e.producer_id: e.current_txn_first_offset
            for e in entries
            if e.current_txn_first_offset >= 0
        }
        since = max(offset, since)
        break
    for base in part.segments_between(since, latest):
        try:
            segment = part.open_segment(base)
        except FileNotFoundError:
            continue
        with segment:
            position = segment.position_for(since) if base <= since else 0
            for entry in segment.read_entries(position):
                header = entry.header
                if header is None or header.last_offset < since:
                    continue
                if header.base_offset >= latest:
                    break
                if header.is_control:
                    open_txns.pop(header.producer_id, None)
                elif header.is_transactional:
                    open_txns.setdefault(header.producer_id, header.base_offset)
    return open_txns


def last_stable_offset(part: PartitionReader, latest: int) -> int:
    """The first offset of the oldest transaction with no marker yet, else ``latest``."""
    return min(open_transactions(part, latest).values(), default=latest)
