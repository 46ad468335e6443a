"""The share coordinator: share-partitions' durable state in ``__share_group_state``.

Theory of operation
-------------------
Each share-partition (group, topic id, partition) lives in one partition of
the topic, ``abs(java_hash(key.coordinator_key())) % partitions`` as Kafka's
``ShareCoordinatorService.partitionFor`` computes it (the helper that places
groups in ``__consumer_offsets``). Its records (:mod:`.state_records`) are:

* a **ShareSnapshot** (the whole state) when it is initialized, and instead
  of an update once ``share.coordinator.snapshot.update.records.per.snapshot``
  updates have followed the last snapshot (0: every write is a snapshot). A
  write's snapshot has the next snapshot epoch, keeps the state epoch, and is
  stamped with the time as both its create and its write timestamp, as
  Kafka's ``ShareCoordinatorShard`` writes it;
* a **ShareUpdate** for every other write: only the runs that changed, folded
  over the snapshot by :func:`seglog.share.state.fold`;
* a **tombstone** (null value) when the state is deleted.

Every operation appends its record before it changes the state in memory,
and the state in memory is what replaying the records gives (:meth:`start`
replays them; a write folds exactly as the replay will). A write that the
disk refuses raises :class:`~seglog.errors.StorageError` and leaves the state
as it was. :meth:`write` leaves the record written to the file (the page
cache), as an offset commit is; :meth:`flush` fsyncs the key's partition, for
a caller that answers only once the state is durable (the broker, off its
event loop, as it does for commits).

The topic is created as Kafka's share coordinator creates it:
``cleanup.policy=delete`` (not compacted: an update is a delta, the last
record of a key is not its state), ``retention.ms=-1`` and
``compression.type=producer``, with ``share.coordinator.state.topic.num.partitions``
partitions of ``share.coordinator.state.topic.segment.bytes`` segments. It is
kept short by pruning instead (:meth:`prune`, every
``share.coordinator.state.topic.prune.interval.ms``): below the latest
snapshot of every live key of a partition no record is needed any more, so
the partition's log start offset moves up to the lowest such snapshot, as
DeleteRecords moves it, and whole segments below it go.

Nodes: a state partition is led by one node of ``seglog serve --nodes N``;
that node loads, writes and prunes it (:meth:`serves` tells the broker whether
it is this one). Calls into one store are not concurrent: the broker makes
them from the share coordinator's one owner.

Kafka's rules this store keeps and where it differs, on purpose:

* a delete writes one ShareSnapshot tombstone, as Kafka does. A tombstone of
  either type is read as a delete, but none is written with a ShareUpdate
  key: Kafka's loader cannot read a ShareUpdate without a value;
* the snapshot rule counts the updates since the last snapshot, the same
  count after an initialization as after any other snapshot (Kafka's count
  allows one update more after an initialization than after a snapshot);
* an initialization over an existing state bumps its state epoch
  (:meth:`initialize` takes no state epoch; Kafka's caller passes the
  group's);
* a share-partition that is never written is snapshotted again after
  ``share.coordinator.cold.partition.snapshot.interval.ms``
  (:meth:`snapshot_cold`, Kafka's cold-partition snapshots), so that it does
  not hold pruning back for ever;
* pruning moves the log start only up to records that are fsynced, so that a
  power cut cannot take a key's latest snapshot after its earlier records
  were pruned.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace

from seglog.config import BrokerConfig
from seglog.coordinator.offset_store import partition_for
from seglog.errors import CorruptRecordError, SeglogError
from seglog.records.builder import SimpleRecord, build_batch
from seglog.share.state import PersistedState, SharePartitionKey, StateUpdate, fold
from seglog.share.state_records import (
    SNAPSHOT,
    UPDATE,
    ShareSnapshot,
    ShareUpdate,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from seglog.storage import retention
from seglog.storage.log import Log
from seglog.storage.log_dir import LogDir
from seglog.storage.topic_admin import TopicAdministration

__all__ = [
    "STATE_TOPIC",
    "ShareStateStore",
    "ShareStateUnavailableError",
    "UninitializedShareStateError",
]

logger = logging.getLogger(__name__)

STATE_TOPIC = "__share_group_state"

_MIB = 1024 * 1024


class UninitializedShareStateError(SeglogError):
    """A write to a share-partition whose state was never initialized (or was deleted)."""

    kafka_error = "INVALID_REQUEST"


class ShareStateUnavailableError(SeglogError):
    """The key's state partition could not be loaded: its state is unknown until a restart.

    Nothing is read or written for such a key, so that a state that exists on
    disk is never taken for a missing one (and initialized over).
    """

    kafka_error = "COORDINATOR_NOT_AVAILABLE"


@dataclass(frozen=True, slots=True)
class _Entry:
    """What the store keeps of one share-partition beside its state."""

    state: PersistedState
    snapshot_epoch: int
    create_timestamp: int
    write_timestamp: int
    updates_since_snapshot: int
    needed_from: int
    """The offset of its latest snapshot (of its first record without one): nothing
    of this key below it is needed to rebuild its state."""


class ShareStateStore:
    """``__share_group_state`` in a :class:`LogDir`: initialize, write, read, delete, prune.

    ``config`` is the broker's configuration (``share.coordinator.*``);
    ``now_ms`` the clock stamped on records and snapshots; ``topic_admin``
    where the topic is created (the log directory itself unless given: in
    nodes mode, the controller's administration).
    """

    def __init__(
        self,
        log_dir: LogDir,
        config: Mapping[str, object],
        *,
        now_ms: Callable[[], int],
        topic_admin: TopicAdministration | None = None,
    ) -> None:
        self.log_dir = log_dir
        settings = config if isinstance(config, BrokerConfig) else BrokerConfig(config)
        self._wanted_partitions = int(settings["share.coordinator.state.topic.num.partitions"])
        self._segment_bytes = int(settings["share.coordinator.state.topic.segment.bytes"])
        self._updates_per_snapshot = int(
            settings["share.coordinator.snapshot.update.records.per.snapshot"]
        )
        self._cold_snapshot_interval_ms = int(
            settings["share.coordinator.cold.partition.snapshot.interval.ms"]
        )
        self._now_ms = now_ms
        self._topic_admin: TopicAdministration = log_dir if topic_admin is None else topic_admin
        info = log_dir.topic(STATE_TOPIC)
        #: The topic's partition count: an existing topic keeps its own, whatever the
        #: configuration says now, since a key's partition is derived from it.
        self.partitions = info.partitions if info is not None else self._wanted_partitions
        #: Partitions the last :meth:`start` could not read, with the reason.
        self.failed_partitions: dict[int, str] = {}
        self._entries: dict[SharePartitionKey, _Entry] = {}

    # ------------------------------------------------------------------ topic

    @property
    def exists(self) -> bool:
        """Whether the topic has been created."""
        return self.log_dir.has_topic(STATE_TOPIC)

    def ensure_topic(self) -> None:
        """Create the topic with Kafka's settings if it does not exist yet (blocking)."""
        if self.exists:
            return
        # A segment size below segment.bytes' floor of 1 MiB goes in the internal
        # setting, as offsets.topic.segment.bytes does.
        segment_key = "segment.bytes" if self._segment_bytes >= _MIB else "internal.segment.bytes"
        try:
            self._topic_admin.create_topic(
                STATE_TOPIC,
                self._wanted_partitions,
                {
                    "cleanup.policy": "delete",
                    "retention.ms": "-1",
                    "compression.type": "producer",
                    segment_key: str(self._segment_bytes),
                },
            )
        except SeglogError as exc:
            if exc.kafka_error != "TOPIC_ALREADY_EXISTS":
                raise
        info = self.log_dir.topic(STATE_TOPIC)
        if info is not None:  # else another node created it and this one has yet to see it
            self.partitions = info.partitions

    def partition_for(self, key: SharePartitionKey) -> int:
        """The state partition of ``key`` (Kafka's ``Utils.abs(hashCode) % partitions``)."""
        return partition_for(key.coordinator_key(), self.partitions)

    def serves(self, key: SharePartitionKey) -> bool:
        """Whether this process leads ``key``'s state partition (another node may)."""
        return self.log_dir.serves_partition(STATE_TOPIC, self.partition_for(key))

    def _check_loaded(self, key: SharePartitionKey) -> None:
        partition = self.partition_for(key)
        reason = self.failed_partitions.get(partition)
        if reason is not None:
            raise ShareStateUnavailableError(
                f"the state of {key.coordinator_key()} is in {STATE_TOPIC}-{partition}, "
                f"which could not be loaded: {reason}"
            )

    # ------------------------------------------------------------------ start

    def start(self) -> None:
        """Create the topic if missing, then load every state partition this process leads.

        Each partition is replayed from its log start: a snapshot replaces a
        key's state, an update is folded over it, a tombstone deletes it. A
        record that cannot be read is skipped with a warning naming its
        partition and offset; a partition that cannot be read at all is left
        out whole and recorded in :attr:`failed_partitions`, as the offsets
        loader does: every call for one of its keys raises
        ShareStateUnavailableError until a restart reads it.
        """
        self.ensure_topic()
        self._entries.clear()
        self.failed_partitions = {}
        for partition in range(self.partitions):
            if not self.log_dir.serves_partition(STATE_TOPIC, partition):
                continue  # another node's share-partitions
            found: dict[SharePartitionKey, _Entry] = {}
            try:
                for offset, key, value in self._records(partition):
                    try:
                        self._replay(found, partition, offset, key, value)
                    except CorruptRecordError as exc:
                        logger.warning(
                            "skipping the unreadable record at offset %d of %s-%d: %s",
                            offset,
                            STATE_TOPIC,
                            partition,
                            exc,
                        )
            except Exception as exc:
                logger.error(
                    "cannot load %s-%d; its share-partitions are unavailable until it can be "
                    "read at a restart: %s",
                    STATE_TOPIC,
                    partition,
                    exc,
                    exc_info=exc,
                )
                self.failed_partitions[partition] = f"{type(exc).__name__}: {exc}"
                continue
            self._entries.update(found)

    def _records(self, partition: int) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        log = self.log_dir.log(STATE_TOPIC, partition)
        for record in self.log_dir.read_records(
            STATE_TOPIC, partition, log.log_start_offset, max_bytes=1 << 62
        ):
            yield record.offset, record.key, record.value

    def _replay(
        self,
        entries: dict[SharePartitionKey, _Entry],
        partition: int,
        offset: int,
        key_data: bytes | None,
        value_data: bytes | None,
    ) -> None:
        """Apply one record, as it was applied when written."""
        if key_data is None:
            raise CorruptRecordError("a record without a key")
        record_type, key = decode_key(key_data)
        if self.partition_for(key) != partition:
            # Nothing of this store writes it here, and Kafka's coordinator of its own
            # partition would never see it.
            raise CorruptRecordError(f"{key.coordinator_key()} belongs in another partition")
        if value_data is None:
            entries.pop(key, None)
            return
        value = decode_value(record_type, value_data)
        entry = entries.get(key)
        if isinstance(value, ShareSnapshot):
            entries[key] = _from_snapshot(value, offset)
        elif entry is None:
            # An update without a snapshot before it (pruned or lost): Kafka takes it
            # as the state; so does this store.
            entries[key] = _Entry(
                fold(PersistedState(), _as_update(value)),
                value.snapshot_epoch,
                0,
                0,
                1,
                offset,
            )
        else:
            entries[key] = replace(
                entry,
                state=fold(entry.state, _as_update(value)),
                updates_since_snapshot=entry.updates_since_snapshot + 1,
            )

    # ------------------------------------------------------------- operations

    def read(self, key: SharePartitionKey) -> PersistedState | None:
        """``key``'s state as last written, or None if it has none (never initialized, deleted).

        ShareStateUnavailableError if its state partition could not be loaded.
        """
        self._check_loaded(key)
        entry = self._entries.get(key)
        return None if entry is None else entry.state

    def keys_of(self, group_id: str) -> list[SharePartitionKey]:
        """The share-partitions of ``group_id`` with a state, by topic id and partition.

        Only those of the state partitions this process leads (:meth:`serves`).
        """
        keys = [key for key in self._entries if key.group_id == group_id]
        return sorted(keys, key=lambda k: (k.topic_id.bytes, k.partition))

    def keys_of_topics(self, topic_ids: set[uuid.UUID]) -> list[SharePartitionKey]:
        """Every key with a state in one of the topics of ``topic_ids`` (this process's)."""
        return [key for key in self._entries if key.topic_id in topic_ids]

    def initialize(self, key: SharePartitionKey, start_offset: int) -> PersistedState:
        """Start ``key``'s state afresh at ``start_offset``: a snapshot with nothing in flight.

        Over an existing state (AlterShareGroupOffsets) the snapshot epoch and
        the state epoch move on. Raises StorageError, with nothing changed, if
        the record cannot be written.
        """
        self._check_loaded(key)
        existing = self._entries.get(key)
        now = self._now_ms()
        state = PersistedState(
            state_epoch=0 if existing is None else existing.state.state_epoch + 1,
            leader_epoch=0,
            start_offset=start_offset,
        )
        snapshot = ShareSnapshot(
            snapshot_epoch=0 if existing is None else existing.snapshot_epoch + 1,
            state_epoch=state.state_epoch,
            leader_epoch=state.leader_epoch,
            start_offset=start_offset,
            create_timestamp=now,
            write_timestamp=now,
        )
        offset = self._append(key, SNAPSHOT, snapshot, now)
        self._entries[key] = _from_snapshot(snapshot, offset)
        return self._entries[key].state

    def write(self, key: SharePartitionKey, update: StateUpdate) -> None:
        """Persist ``update`` of ``key``: an update record, or a snapshot when one is due.

        The record is in the partition's file when this returns (:meth:`flush`
        makes it durable). Raises StorageError if the disk refuses it and
        UninitializedShareStateError for a key with no state; the state in
        memory is unchanged then.
        """
        self._check_loaded(key)
        entry = self._entries.get(key)
        if entry is None:
            raise UninitializedShareStateError(
                f"cannot write the state of {key.coordinator_key()}: it is not initialized"
            )
        folded = fold(entry.state, update)
        now = self._now_ms()
        if entry.updates_since_snapshot >= self._updates_per_snapshot:
            snapshot = ShareSnapshot(
                snapshot_epoch=entry.snapshot_epoch + 1,
                state_epoch=folded.state_epoch,
                leader_epoch=folded.leader_epoch,
                start_offset=folded.start_offset,
                create_timestamp=now,
                write_timestamp=now,
                batches=folded.batches,
            )
            offset = self._append(key, SNAPSHOT, snapshot, now)
            self._entries[key] = _from_snapshot(snapshot, offset)
            return
        record = ShareUpdate(
            snapshot_epoch=entry.snapshot_epoch,
            leader_epoch=update.leader_epoch,
            start_offset=update.start_offset,
            batches=update.batches,
        )
        self._append(key, UPDATE, record, now)
        self._entries[key] = replace(
            entry, state=folded, updates_since_snapshot=entry.updates_since_snapshot + 1
        )

    def delete(self, key: SharePartitionKey) -> None:
        """Delete ``key``'s state: a tombstone, then it is gone (nothing to do if it has none).

        Raises StorageError, with the state kept, if the tombstone cannot be written.
        """
        self._check_loaded(key)
        if key not in self._entries:
            return
        self._append(key, SNAPSHOT, None, self._now_ms())
        del self._entries[key]

    def flush(self, key: SharePartitionKey) -> None:
        """fsync ``key``'s state partition up to its end (blocking: off the event loop)."""
        self.log_dir.log(STATE_TOPIC, self.partition_for(key)).flush()

    def _append(
        self,
        key: SharePartitionKey,
        record_type: int,
        value: ShareSnapshot | ShareUpdate | None,
        now: int,
    ) -> int:
        """Append one record of ``key`` as its own batch; its offset."""
        self.ensure_topic()
        data = None if value is None else encode_value(value)
        batch = build_batch([SimpleRecord(data, encode_key(record_type, key), now)])
        info = self.log_dir.log(STATE_TOPIC, self.partition_for(key)).append(batch)
        return info.first_offset

    def snapshot_cold(self) -> None:
        """Snapshot again each share-partition whose snapshot is older than the interval.

        Kafka's cold-partition snapshots, for the broker to call every
        ``share.coordinator.cold.partition.snapshot.interval.ms``: a share-partition
        that is not written (nothing new in its topic) would otherwise keep
        its first snapshot, and every record after it, from being pruned. The
        new snapshot has the next snapshot epoch, keeps the state and its
        create timestamp, and is stamped with the time as its write timestamp.
        A state partition whose share-partitions were all snapshotted so already
        is quiet, and left alone (Kafka's rule). A snapshot the disk refuses is
        logged and tried again at the next pass.
        """
        now = self._now_ms()
        by_partition: dict[int, list[tuple[SharePartitionKey, _Entry]]] = {}
        for key, entry in self._entries.items():
            by_partition.setdefault(self.partition_for(key), []).append((key, entry))
        for partition, entries in by_partition.items():
            # A cold snapshot keeps the create timestamp: they differ only after one.
            if all(e.create_timestamp != e.write_timestamp for _, e in entries):
                continue
            for key, entry in entries:
                if now - entry.write_timestamp < self._cold_snapshot_interval_ms:
                    continue
                state = entry.state
                snapshot = ShareSnapshot(
                    snapshot_epoch=entry.snapshot_epoch + 1,
                    state_epoch=state.state_epoch,
                    leader_epoch=state.leader_epoch,
                    start_offset=state.start_offset,
                    create_timestamp=entry.create_timestamp,
                    write_timestamp=now,
                    batches=state.batches,
                )
                try:
                    offset = self._append(key, SNAPSHOT, snapshot, now)
                except SeglogError as exc:
                    logger.warning(
                        "cannot snapshot %s in %s-%d: %s",
                        key.coordinator_key(),
                        STATE_TOPIC,
                        partition,
                        exc,
                    )
                    break  # the partition refuses writes: the next pass tries again
                self._entries[key] = _from_snapshot(snapshot, offset)

    # ---------------------------------------------------------------- pruning

    def prune(self) -> None:
        """Move each state partition's log start past the records no live key needs (blocking).

        A key needs its latest snapshot and what follows; a partition with no
        live key needs nothing it holds. The partition is fsynced first, so
        that the snapshots the new start relies on survive a power cut; whole
        segments below the new start are removed at once, as DeleteRecords
        does. A partition this process does not lead, or could not load, is
        left alone.
        """
        if not self.exists:
            return
        needed: dict[int, int] = {}
        for key, entry in self._entries.items():
            partition = self.partition_for(key)
            needed[partition] = min(needed.get(partition, entry.needed_from), entry.needed_from)
        for partition in range(self.partitions):
            if partition in self.failed_partitions:
                continue
            if not self.log_dir.serves_partition(STATE_TOPIC, partition):
                continue
            try:
                self._prune_partition(
                    self.log_dir.log(STATE_TOPIC, partition), needed.get(partition)
                )
            except SeglogError as exc:
                # The next pass tries again; the other partitions are pruned meanwhile.
                logger.warning("cannot prune %s-%d: %s", STATE_TOPIC, partition, exc)

    @staticmethod
    def _prune_partition(log: Log, needed_from: int | None) -> None:
        end = log.log_end_offset
        target = end if needed_from is None else min(needed_from, end)
        if target <= log.log_start_offset:
            return
        log.flush(end)
        log.increment_log_start_offset(min(target, log.high_watermark))
        retention.delete_log_start_offset_breached(log)


def _as_update(value: ShareUpdate) -> StateUpdate:
    return StateUpdate(value.start_offset, value.batches, value.leader_epoch)


def _from_snapshot(value: ShareSnapshot, offset: int) -> _Entry:
    # Folding the snapshot over nothing puts its runs in the store's order (sorted, clipped
    # to the start, adjacent equal runs merged), as any later fold would.
    state = fold(
        PersistedState(value.state_epoch, value.leader_epoch, value.start_offset),
        StateUpdate(value.start_offset, value.batches, value.leader_epoch),
    )
    return _Entry(
        state, value.snapshot_epoch, value.create_timestamp, value.write_timestamp, 0, offset
    )
