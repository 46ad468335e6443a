"""Idempotent producers' state of one partition, and its ``.snapshot`` files.

Theory of operation
-------------------
An idempotent producer stamps every batch with its producer id, an epoch and
the sequence number of the batch's first record. Per producer id the partition
remembers the epoch and the metadata of the last five batches it appended
(Kafka's ``NUM_BATCHES_TO_RETAIN``). An incoming batch is then one of:

================================  ==========================================
batch                             answer
================================  ==========================================
epoch below the known epoch       INVALID_PRODUCER_EPOCH (a fenced producer)
one of the five, same epoch       a duplicate: the original offsets, nothing
                                  is written
next sequence (last + 1, or 0     appended
after ``2**31 - 1``), same epoch
a new epoch starting at 0         appended; the producer's history restarts
a new epoch not at 0              OUT_OF_ORDER_SEQUENCE_NUMBER
anything else                     OUT_OF_ORDER_SEQUENCE_NUMBER
unknown producer id               appended whatever its sequence (its state
                                  may have expired or been deleted with the
                                  segments that held it)
================================  ==========================================

:meth:`ProducerStateManager.check` decides before anything is written and
:meth:`ProducerStateManager.update` records the batches once they are in the
log, so a failed write leaves the state untouched.

Snapshots
---------
The state is rebuilt on start from the newest snapshot at or below the log
end offset plus a replay of the batch headers after it. Snapshots are taken
when a segment rolls (named after the new segment's base offset) and at a
clean shutdown (named after the log end offset), so a replay reads at most the
active segment. The file is Kafka's, version 1, integers big-endian::

    snapshot := version:int16 crc:uint32 count:int32 entry{count}
    entry    := producer_id:int64 epoch:int16 last_sequence:int32
                last_offset:int64 offset_delta:int32 timestamp:int64
                coordinator_epoch:int32 current_txn_first_offset:int64

``crc`` is the CRC-32C of everything after it. Only each producer's last batch
is kept, so after a restart a retry of that batch is still recognised. A
snapshot that fails its CRC or does not parse is deleted and the next older one
is tried, as Kafka does.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from seglog.errors import (
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    StorageError,
    TransactionCoordinatorFencedError,
)
from seglog.records.batch import BatchHeader
from seglog.records.crc32c import crc32c
from seglog.storage import filenames, io

logger = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_VERSION = 1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
MAX_SEQUENCE = 2**31 - 1

_SNAPSHOT_HEADER = struct.Struct(">hIi")
_CRC_START = 6
_ENTRY = struct.Struct(">qhiqiqiq")


class ProducerBatch(NamedTuple):
    """What an appended batch says about its producer, with its assigned offsets."""

    producer_id: int
    epoch: int
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int
    #: A batch of a transaction (the attribute bit): it opens the producer's
    #: transaction in this partition if none is open.
    is_transactional: bool = False

    @classmethod
    def from_header(
        cls, header: BatchHeader, first_offset: int, last_offset: int, max_timestamp: int
    ) -> ProducerBatch:
        """The producer fields of ``header``, with the offsets the batch was given."""
        first = header.base_sequence
        delta = header.last_offset_delta
        # Sequence numbers wrap from 2**31 - 1 to 0.
        last = first + delta if first <= MAX_SEQUENCE - delta else first + delta - MAX_SEQUENCE - 1
        return cls(
            header.producer_id,
            header.producer_epoch,
            first,
            last,
            first_offset,
            last_offset,
            max_timestamp,
            header.is_transactional,
        )


class CompletedTxn(NamedTuple):
    """A transaction a marker ended in this partition (Kafka's ``CompletedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class BatchMetadata(NamedTuple):
    """One remembered batch of a producer (Kafka's ``BatchMetadata``)."""

    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_sequence(self) -> int:
        """The batch's first sequence number, across the wrap at 2**31 - 1."""
        first = self.last_sequence - self.offset_delta
        return first if first >= 0 else first + MAX_SEQUENCE + 1

    @property
    def first_offset(self) -> int:
        """The batch's first offset in the log."""
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerEntry:
    """One producer's epoch and its last batches, newest last."""

    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def last_sequence(self) -> int:
        """The last sequence appended, or -1."""
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        """The offset of the last record appended, or -1."""
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_timestamp(self) -> int:
        """The max timestamp of the last batch, or -1."""
        return self.batches[-1].timestamp if self.batches else -1

    def find_duplicate(self, batch: ProducerBatch) -> BatchMetadata | None:
        """The remembered batch ``batch`` repeats, if any."""
        if batch.epoch != self.epoch:
            return None
        for kept in self.batches:
            if (
                kept.first_sequence == batch.first_sequence
                and kept.last_sequence == batch.last_sequence
            ):
                return kept
        return None

    def add(self, batch: ProducerBatch) -> None:
        """Remember an appended batch; a new epoch forgets the old one's batches."""
        if batch.epoch != self.epoch:
            self.epoch = batch.epoch
            self.batches.clear()
        self.batches.append(
            BatchMetadata(
                batch.last_sequence,
                batch.last_offset,
                batch.last_offset - batch.first_offset,
                batch.max_timestamp,
            )
        )


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    """True if ``next_sequence`` directly follows ``last_sequence``."""
    return next_sequence == last_sequence + 1 or (
        next_sequence == 0 and last_sequence == MAX_SEQUENCE
    )


class ProducerStateManager:
    """Per-producer sequence state of one partition (Kafka's ``ProducerStateManager``).

    Not thread-safe on its own: the owning :class:`~seglog.storage.log.Log`
    calls it under its writer lock.
    """

    def __init__(
        self, directory: Path, *, expiration_ms: int = 86_400_000, env: io.Env | None = None
    ) -> None:
        self._env = io.env_or_default(env)
        self.directory = directory
        self.expiration_ms = expiration_ms
        self._producers: dict[int, ProducerEntry] = {}
        # First offset of each open transaction by producer id: the LSO is read by
        # every fetch, which must not walk every producer the partition remembers
        # (Kafka's ongoingTxns). Kept in step with current_txn_first_offset.
        self._ongoing: dict[int, int] = {}
        self._last_snapshot_offset = -1
        # Snapshots written without fsync, by offset: the log's next flush
        # syncs them, from whatever thread runs it (hence their own lock).
        self._unsynced: dict[int, Path] = {}
        self._unsynced_lock = threading.Lock()

    # ------------------------------------------------------------ state

    @property
    def producers(self) -> dict[int, ProducerEntry]:
        """The live producers by id (read-only by convention)."""
        return self._producers

    def check(
        self, batches: Sequence[ProducerBatch], *, client: bool = True
    ) -> BatchMetadata | None:
        """Check an append's batches; return the original if it is a retry.

        Appends made by the broker itself (``client`` False) are checked for
        their epoch only.

        Raises :class:`InvalidProducerEpochError` or
        :class:`OutOfOrderSequenceError`; changes nothing either way.
        """
        pending: dict[int, tuple[int, int]] = {}
        for batch in batches:
            pid = batch.producer_id
            entry = self._producers.get(pid)
            if client and pid not in pending and entry is not None:
                duplicate = entry.find_duplicate(batch)
                if duplicate is not None:
                    return duplicate
            if pid in pending:
                epoch, last_sequence = pending[pid]
            elif entry is not None:
                epoch, last_sequence = entry.epoch, entry.last_sequence
            else:
                epoch, last_sequence = NO_PRODUCER_EPOCH, NO_SEQUENCE
            if batch.epoch < epoch:
                raise InvalidProducerEpochError(
                    f"producer {pid} has epoch {batch.epoch}, below the current epoch {epoch}"
                )
            if not client:
                # Written by the broker itself (a transaction's offsets in
                # __consumer_offsets): no sequence to check, as in Kafka for
                # appends whose origin is not a client.
                pass
            elif batch.epoch != epoch:
                if batch.first_sequence != 0 and epoch != NO_PRODUCER_EPOCH:
                    raise OutOfOrderSequenceError(
                        f"producer {pid} starts its new epoch {batch.epoch} at sequence "
                        f"{batch.first_sequence}, not 0"
                    )
            elif last_sequence != NO_SEQUENCE and not in_sequence(
                last_sequence, batch.first_sequence
            ):
                raise OutOfOrderSequenceError(
                    f"producer {pid} sent sequence {batch.first_sequence} after "
                    f"{last_sequence} (epoch {epoch})"
                )
            pending[pid] = (batch.epoch, batch.last_sequence)
        return None

    def update(self, batches: Iterable[ProducerBatch]) -> None:
        """Record batches that are now in the log."""
        producers = self._producers
        for batch in batches:
            entry = producers.get(batch.producer_id)
            if entry is None:
                entry = producers[batch.producer_id] = ProducerEntry(batch.producer_id, batch.epoch)
            entry.add(batch)
            if batch.is_transactional and entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = batch.first_offset
                self._ongoing[batch.producer_id] = batch.first_offset

    # ----------------------------------------------------- transactions

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int = -1) -> None:
        """Refuse a marker from an epoch older than the producer's (a fenced coordinator call),
        or from a coordinator epoch older than the last marker's (a stale coordinator's).
        """
        entry = self._producers.get(producer_id)
        if entry is None:
            return
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"a transaction marker of producer {producer_id} has epoch {epoch}, "
                f"below the current epoch {entry.epoch}"
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"a transaction marker of producer {producer_id} has coordinator epoch "
                f"{coordinator_epoch}, below the last one seen, {entry.coordinator_epoch}"
            )

    def complete_txn(
        self,
        producer_id: int,
        epoch: int,
        marker_offset: int,
        timestamp: int,
        *,
        commit: bool,
        coordinator_epoch: int = -1,
    ) -> CompletedTxn | None:
        """Apply a COMMIT or ABORT marker written at ``marker_offset``.

        Returns the transaction it ended, or None when the producer had none
        open in this partition (a marker for a transaction that wrote nothing
        here, or a retry). A marker of a newer epoch (the coordinator fenced
        the producer and aborted for it) moves the producer to that epoch.
        """
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerEntry(producer_id, epoch)
        if epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        if not entry.batches:
            # Keep the producer alive for snapshots and expiry: an empty batch
            # record at the marker's offset, sequence unknown.
            entry.batches.append(BatchMetadata(NO_SEQUENCE, marker_offset, 0, timestamp))
        entry.coordinator_epoch = coordinator_epoch
        first = entry.current_txn_first_offset
        if first < 0:
            return None
        entry.current_txn_first_offset = -1
        del self._ongoing[producer_id]
        return CompletedTxn(producer_id, first, marker_offset, not commit)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, or None if none is open."""
        return min(self._ongoing.values()) if self._ongoing else None

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is done: Kafka's ``lastStableOffset(completedTxn)``."""
        others = [first for pid, first in self._ongoing.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms``; returns how many."""
        expired = [
            pid
            for pid, entry in self._producers.items()
            if entry.current_txn_first_offset < 0
            and now_ms - entry.last_timestamp >= self.expiration_ms
        ]
        for pid in expired:
            del self._producers[pid]
        return len(expired)

    def clear(self) -> None:
        """Forget every producer."""
        self._producers.clear()
        self._ongoing.clear()

    # -------------------------------------------------------- snapshots

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files on disk, ascending."""
        offsets = []
        for name in self._env.listdir(self.directory):
            if name.endswith(filenames.SNAPSHOT_SUFFIX):
                base = filenames.parse_base_offset(name)
                if base is not None:
                    offsets.append(base)
        return sorted(offsets)

    def take_snapshot(self, offset: int, *, sync: bool = False) -> Path | None:
        """Write the state, which reflects the log up to ``offset`` (its end), as
        ``<offset>.snapshot``; None if that snapshot was already written."""
        if offset == self._last_snapshot_offset:
            return None
        path = filenames.snapshot_path(self.directory, offset)
        write_snapshot(path, self._producers.values(), sync=sync, env=self._env)
        self._last_snapshot_offset = offset
        if not sync:
            with self._unsynced_lock:
                self._unsynced[offset] = path
        return path

    def sync_snapshots(self, up_to: int) -> int:
        """fsync the snapshots written without it at offsets up to ``up_to``; how many.

        A snapshot deleted since (retention, truncation) is skipped. Blocking:
        the log calls it from :meth:`~seglog.storage.log.Log.flush`.
        """
        with self._unsynced_lock:
            due = sorted(offset for offset in self._unsynced if offset <= up_to)
        synced = 0
        for offset in due:
            with self._unsynced_lock:
                path = self._unsynced.get(offset)
            if path is None:
                continue
            try:
                fd = self._env.open(path, os.O_RDONLY)
            except FileNotFoundError:
                pass
            else:
                try:
                    self._env.fsync(fd)
                finally:
                    self._env.close(fd)
                synced += 1
            with self._unsynced_lock:
                if self._unsynced.get(offset) == path:
                    del self._unsynced[offset]
        return synced

    def delete_snapshots_outside(self, low: int, high: int) -> None:
        """Delete snapshots below ``low`` or above ``high`` (log start and end)."""
        for offset in self.snapshot_offsets():
            if offset < low or offset > high:
                self._env.unlink(filenames.snapshot_path(self.directory, offset))
                if offset == self._last_snapshot_offset:
                    self._last_snapshot_offset = -1

    def load_latest_snapshot(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> int:
        """Load the newest valid snapshot in [log start, log end]; returns its offset.

        Snapshots above the log end are stale (the log was truncated) and go;
        corrupt ones go too. Without one, the state starts empty at the log
        start offset and the return value says where the replay begins.
        """
        self.clear()
        self.delete_snapshots_outside(0, log_end_offset)
        for offset in reversed(self.snapshot_offsets()):
            if offset < log_start_offset:
                break
            path = filenames.snapshot_path(self.directory, offset)
            try:
                entries = read_snapshot(path, env=self._env)
            except StorageError as exc:
                logger.warning("deleting producer snapshot %s: %s", path, exc)
                self._env.unlink(path)
                continue
            for entry in entries:
                # A producer with an open transaction never expires: the LSO
                # waits on it until its marker comes.
                if (
                    entry.current_txn_first_offset >= 0
                    or now_ms - entry.last_timestamp < self.expiration_ms
                ):
                    self._producers[entry.producer_id] = entry
                    if entry.current_txn_first_offset >= 0:
                        self._ongoing[entry.producer_id] = entry.current_txn_first_offset
            self._last_snapshot_offset = offset
            return offset
        return log_start_offset


def encode_snapshot(entries: Iterable[ProducerEntry]) -> bytes:
    """The bytes of a version-1 snapshot of ``entries``."""
    body = bytearray()
    count = 0
    for entry in entries:
        if not entry.batches:
            continue
        last = entry.batches[-1]
        body += _ENTRY.pack(
            entry.producer_id,
            entry.epoch,
            last.last_sequence,
            last.last_offset,
            last.offset_delta,
            last.timestamp,
            entry.coordinator_epoch,
            entry.current_txn_first_offset,
        )
        count += 1
    counted = struct.pack(">i", count) + body
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c(counted)) + counted


def decode_snapshot(data: bytes | memoryview, name: object = "snapshot") -> list[ProducerEntry]:
    """Parse a snapshot; raises :class:`StorageError` naming what is wrong."""
    if len(data) < _SNAPSHOT_HEADER.size:
        raise StorageError(f"{name} is {len(data)} bytes, shorter than a snapshot header")
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise StorageError(f"{name} has snapshot version {version}, expected {SNAPSHOT_VERSION}")
    actual = crc32c(memoryview(data)[_CRC_START:])
    if actual != crc:
        raise StorageError(f"{name} fails its CRC-32C check ({actual:#010x} != {crc:#010x})")
    if count < 0 or _SNAPSHOT_HEADER.size + count * _ENTRY.size != len(data):
        raise StorageError(f"{name} declares {count} entries in {len(data)} bytes")
    entries = []
    for i in range(count):
        (pid, epoch, last_seq, last_offset, delta, timestamp, coord_epoch, txn_first) = (
            _ENTRY.unpack_from(data, _SNAPSHOT_HEADER.size + i * _ENTRY.size)
        )
        entry = ProducerEntry(pid, epoch, coordinator_epoch=coord_epoch)
        entry.current_txn_first_offset = txn_first
        entry.batches.append(BatchMetadata(last_seq, last_offset, delta, timestamp))
        entries.append(entry)
    return entries


def write_snapshot(
    path: Path, entries: Iterable[ProducerEntry], *, sync: bool = False, env: io.Env | None = None
) -> None:
    """Write a snapshot file; a torn one is caught by its CRC when read back."""
    io.env_or_default(env).write_file(path, encode_snapshot(entries), sync=sync)


def read_snapshot(path: Path, *, env: io.Env | None = None) -> list[ProducerEntry]:
    """Read and check a snapshot file."""
    data = io.env_or_default(env).read_file(path)
    if data is None:
        raise StorageError(f"cannot read {path}: it does not exist")
    return decode_snapshot(data, path)


__all__ = [
    "NUM_BATCHES_TO_RETAIN",
    "BatchMetadata",
    "CompletedTxn",
    "ProducerBatch",
    "ProducerEntry",
    "ProducerStateManager",
    "decode_snapshot",
    "encode_snapshot",
    "in_sequence",
    "read_snapshot",
    "write_snapshot",
]
