"""Committed offsets and group metadata as records of the compacted topic ``__consumer_offsets``.

Record layouts (Kafka's own, from its ``group-coordinator`` message
specifications; big-endian, ``string`` = int16 length + UTF-8, ``nstring`` the
same with -1 for null, ``bytes`` = int32 length + data)::

    key            = version:int16 body
    body (v0, v1)  = group:string topic:string partition:int32        ; an offset commit
    body (v2)      = group:string                                     ; group metadata

    offset value v0 = offset:int64 metadata:string commit_timestamp:int64
    offset value v1 = offset:int64 metadata:string commit_timestamp:int64 expire_timestamp:int64
    offset value v2 = offset:int64 metadata:string commit_timestamp:int64
    offset value v3 = offset:int64 leader_epoch:int32 metadata:string commit_timestamp:int64

    group value    = version:int16 protocol_type:string generation:int32
                     protocol:nstring leader:nstring
                     [current_state_timestamp:int64]                  ; v2+
                     member_count:int32 member*
    member         = member_id:string [group_instance_id:nstring]    ; v3+
                     client_id:string client_host:string
                     [rebalance_timeout:int32]                        ; v1+
                     session_timeout:int32 subscription:bytes assignment:bytes

A null value is a tombstone: the offset (or the whole group) was deleted, and
compaction drops the key once ``delete.retention.ms`` has passed.

seglog writes offset keys v1, offset values v3 (v1 when the commit carries an
explicit expiry, as Kafka does), group keys v2 and group values v3; it reads
every version above, and the share group records of key versions 10 to 15
(:mod:`seglog.coordinator.share_group_records`). Flexible versions (offset
value v4, group value v4) and other key versions (KIP-848 records) are refused as corrupt
rather than guessed at; the loader skips such a record with a warning naming
its partition and offset, so that one unreadable record (a disk error, a log
directory from a newer Kafka) cannot keep every group from loading.

Worked example: group ``g`` commits offset 42 of ``t`` partition 0 at
1700000000000 without metadata or leader epoch::

    key   00 01  00 01 67  00 01 74  00 00 00 00
    value 00 03  00 00 00 00 00 00 00 2a  ff ff ff ff  00 00
          00 00 01 8b cf e5 68 00

A group lives in partition ``abs(java_hash(group)) % partitions``, where
``java_hash`` is Java's ``String.hashCode`` over UTF-16 code units, so that a
log directory written by Kafka maps groups to the same partitions.

:class:`OffsetStore` writes these records through seglog's storage (one batch
per request, appended to the group's partition) and reads them all back at
start (:meth:`OffsetStore.load`), last record per key winning.

Offsets committed in a transaction (TxnOffsetCommit) are written as a
transactional batch of the producer; the loader holds them aside until the
producer's COMMIT marker (then they apply) or ABORT marker (then they go).
Those still open at the end are left in :attr:`OffsetStore.pending_txn_offsets`
for the transaction coordinator.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from seglog.coordinator import share_group_records
from seglog.coordinator.share_group_records import LoadedShareGroup
from seglog.errors import CorruptRecordError, SeglogError
from seglog.records import batch, control, log_entries
from seglog.records.builder import SimpleRecord, build_batch
from seglog.records.record import decode_entry, decode_records
from seglog.storage.log import Log
from seglog.storage.log_dir import LogDir
from seglog.storage.topic_admin import TopicAdministration

logger = logging.getLogger(__name__)

TOPIC = "__consumer_offsets"

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


# ------------------------------------------------------------------ values


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """One partition's committed position."""

    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class MemberRecord:
    """A member as group metadata stores it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A group's generation, protocol and members as group metadata stores it."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberRecord, ...] = ()


@dataclass
class LoadedGroup:
    """What :meth:`OffsetStore.load` found for one group."""

    metadata: GroupRecord | None = None
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    share: LoadedShareGroup | None = None
    """The group's share group records (:mod:`.share_group_records`), if any."""


# ------------------------------------------------------------ byte helpers


def _string(value: str | None, out: bytearray) -> None:
    if value is None:
        out += _INT16.pack(-1)
        return
    data = value.encode()
    out += _INT16.pack(len(data))
    out += data


def _bytes(value: bytes, out: bytearray) -> None:
    out += _INT32.pack(len(value))
    out += value


class _Reader:
    """Reads the fields of one key or value; any overrun is a CorruptRecordError."""

    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _take(self, size: int) -> memoryview:
        if size < 0 or self.pos + size > len(self.data):
            raise CorruptRecordError(f"{TOPIC} record ends early at byte {self.pos}")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def int16(self) -> int:
        return int(_INT16.unpack(self._take(2))[0])

    def int32(self) -> int:
        return int(_INT32.unpack(self._take(4))[0])

    def int64(self) -> int:
        return int(_INT64.unpack(self._take(8))[0])

    def nstring(self) -> str | None:
        size = self.int16()
        if size == -1:
            return None
        data = self._take(size)
        try:
            return bytes(data).decode()
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"{TOPIC} record has a string that is not UTF-8") from exc

    def string(self) -> str:
        value = self.nstring()
        if value is None:
            raise CorruptRecordError(f"{TOPIC} record has a null string where none is allowed")
        return value

    def bytes_(self) -> bytes:
        size = self.int32()
        return b"" if size == -1 else bytes(self._take(size))


# ------------------------------------------------------------ keys, values


def offset_key(group: str, topic: str, partition: int) -> bytes:
    """The key of an offset commit (version 1)."""
    out = bytearray(_INT16.pack(OFFSET_KEY_VERSION))
    _string(group, out)
    _string(topic, out)
    out += _INT32.pack(partition)
    return bytes(out)


def group_key(group: str) -> bytes:
    """The key of a group's metadata (version 2)."""
    out = bytearray(_INT16.pack(GROUP_KEY_VERSION))
    _string(group, out)
    return bytes(out)


def parse_key(data: bytes) -> tuple[str, str, int] | str:
    """(group, topic, partition) of an offset key, or the group of a group key.

    Any other key version (KIP-848 records, which seglog does not write; share
    group records are read apart) is a CorruptRecordError, as is a key cut short.
    """
    reader = _Reader(data)
    version = reader.int16()
    if version in (0, 1):
        parsed: tuple[str, str, int] | str = (reader.string(), reader.string(), reader.int32())
    elif version == GROUP_KEY_VERSION:
        parsed = reader.string()
    else:
        raise CorruptRecordError(f"unknown {TOPIC} key version {version}")
    return parsed


def offset_value(committed: CommittedOffset) -> bytes:
    """An offset commit's value: v3, or v1 when the commit carries an expiry."""
    if committed.expire_timestamp is not None:
        out = bytearray(_INT16.pack(OFFSET_VALUE_WITH_EXPIRY))
        out += _INT64.pack(committed.offset)
        _string(committed.metadata, out)
        out += _INT64.pack(committed.commit_timestamp)
        out += _INT64.pack(committed.expire_timestamp)
        return bytes(out)
    out = bytearray(_INT16.pack(OFFSET_VALUE_VERSION))
    out += _INT64.pack(committed.offset)
    out += _INT32.pack(committed.leader_epoch)
    _string(committed.metadata, out)
    out += _INT64.pack(committed.commit_timestamp)
    return bytes(out)


def parse_offset_value(data: bytes) -> CommittedOffset:
    """Decode an offset commit value of version 0 to 3."""
    reader = _Reader(data)
    version = reader.int16()
    if not 0 <= version <= 3:
        raise CorruptRecordError(f"unsupported offset commit value version {version}")
    offset = reader.int64()
    epoch = reader.int32() if version >= 3 else -1
    metadata = reader.string()
    commit_timestamp = reader.int64()
    expire = reader.int64() if version == 1 else None
    return CommittedOffset(offset, metadata, commit_timestamp, epoch, expire)


def group_value(record: GroupRecord) -> bytes:
    """A group metadata value, version 3."""
    out = bytearray(_INT16.pack(GROUP_VALUE_VERSION))
    _string(record.protocol_type, out)
    out += _INT32.pack(record.generation)
    _string(record.protocol, out)
    _string(record.leader, out)
    out += _INT64.pack(record.current_state_timestamp)
    out += _INT32.pack(len(record.members))
    for member in record.members:
        _string(member.member_id, out)
        _string(member.group_instance_id, out)
        _string(member.client_id, out)
        _string(member.client_host, out)
        out += _INT32.pack(member.rebalance_timeout_ms)
        out += _INT32.pack(member.session_timeout_ms)
        _bytes(member.subscription, out)
        _bytes(member.assignment, out)
    return bytes(out)


def parse_group_value(data: bytes) -> GroupRecord:
    """Decode a group metadata value of version 0 to 3."""
    reader = _Reader(data)
    version = reader.int16()
    if not 0 <= version <= 3:
        raise CorruptRecordError(f"unsupported group metadata value version {version}")
    protocol_type = reader.string()
    generation = reader.int32()
    protocol = reader.nstring()
    leader = reader.nstring()
    state_timestamp = reader.int64() if version >= 2 else -1
    members = []
    for _ in range(reader.int32()):
        member_id = reader.string()
        instance_id = reader.nstring() if version >= 3 else None
        client_id = reader.string()
        client_host = reader.string()
        first = reader.int32()
        if version >= 1:  # the rebalance timeout, then the session timeout
            rebalance_timeout, session_timeout = first, reader.int32()
        else:  # v0 has only the session timeout
            rebalance_timeout = session_timeout = first
        members.append(
            MemberRecord(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                reader.bytes_(),
                reader.bytes_(),
            )
        )
    return GroupRecord(protocol_type, generation, protocol, leader, state_timestamp, tuple(members))


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, wrapping at 32 bits."""
    value = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        value = (31 * value + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def partition_for(group: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group`` (Kafka's ``Utils.abs(hash) % n``)."""
    hashed = java_string_hash(group)
    return (0 if hashed == -(1 << 31) else abs(hashed)) % partitions


# -------------------------------------------------------------------- store


class OffsetStore:
    """``__consumer_offsets`` in a :class:`LogDir`: append, flush, load.

    The topic is created on first use (as Kafka creates it on the first
    FindCoordinator) with ``cleanup.policy=compact``; an existing topic keeps
    its partition count whatever ``offsets.topic.num.partitions`` says now,
    since a group's partition is derived from it.
    """

    def __init__(
        self,
        log_dir: LogDir,
        *,
        partitions: int = 50,
        segment_bytes: int = 104_857_600,
        topic_admin: TopicAdministration | None = None,
    ) -> None:
        self.log_dir = log_dir
        # Where the topic is created: the log directory itself, alone.
        self._topic_admin: TopicAdministration = log_dir if topic_admin is None else topic_admin
        self._wanted_partitions = partitions
        self._segment_bytes = segment_bytes
        info = log_dir.topics().get(TOPIC)
        self.partitions = info.partitions if info is not None else partitions
        #: After :meth:`load`: the offset records of transactions with no
        #: marker yet, by producer id: (partition, key, value) in log order.
        self.pending_txn_offsets: dict[int, list[tuple[int, bytes, bytes | None]]] = {}
        #: Partitions the last :meth:`load` could not read, with the reason.
        self.failed_partitions: dict[int, str] = {}

    @property
    def _segment_key(self) -> str:
        # offsets.topic.segment.bytes may be below segment.bytes' floor of 1 MiB:
        # the internal setting carries such a size, as Kafka's does.
        return "segment.bytes" if self._segment_bytes >= 1024 * 1024 else "internal.segment.bytes"

    @property
    def exists(self) -> bool:
        """Whether the topic has been created."""
        return TOPIC in self.log_dir.topics()

    def ensure_topic(self) -> None:
        """Create the topic if it does not exist yet."""
        if self.exists:
            return
        try:
            self._topic_admin.create_topic(
                TOPIC,
                self._wanted_partitions,
                {"cleanup.policy": "compact", self._segment_key: str(self._segment_bytes)},
            )
        except SeglogError as exc:
            if exc.kafka_error != "TOPIC_ALREADY_EXISTS":
                raise
        self.partitions = self.log_dir.topics()[TOPIC].partitions

    def partition_for(self, group: str) -> int:
        """The partition holding ``group``'s records."""
        return partition_for(group, self.partitions)

    def serves(self, group: str) -> bool:
        """Whether this process leads ``group``'s partition (another node may)."""
        return self.log_dir.serves_partition(TOPIC, self.partition_for(group))

    def _log(self, group: str) -> Log:
        self.ensure_topic()
        return self.log_dir.log(TOPIC, self.partition_for(group))

    def append(
        self, group: str, records: Iterable[tuple[bytes, bytes | None]], now_ms: int
    ) -> tuple[int, int]:
        """Append (key, value) records of ``group`` as one batch; (partition, next offset).

        A value of None is a tombstone.
        """
        batch_records = [SimpleRecord(value, key, now_ms) for key, value in records]
        log = self._log(group)
        info = log.append(build_batch(batch_records))
        return self.partition_for(group), info.last_offset + 1

    def append_transactional(
        self,
        group: str,
        records: Iterable[tuple[bytes, bytes | None]],
        now_ms: int,
        producer_id: int,
        producer_epoch: int,
    ) -> tuple[int, int]:
        """Append a transaction's offset records of ``group``; (partition, next offset).

        The batch carries the producer's id and epoch and the transactional
        flag, so that the transaction's marker commits or aborts it (Kafka's
        layout; the sequence is not checked for the broker's own appends).
        """
        batch_records = [SimpleRecord(value, key, now_ms) for key, value in records]
        log = self._log(group)
        data = build_batch(
            batch_records,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=0,
            is_transactional=True,
        )
        info = log.append(data, from_client=False)
        return self.partition_for(group), info.last_offset + 1

    def flush(self, partition: int, offset: int) -> None:
        """fsync ``partition`` up to ``offset`` (blocking: run it off the event loop)."""
        self.log_dir.log(TOPIC, partition).flush(offset)

    def load(self) -> dict[str, LoadedGroup]:
        """Every group's last metadata and offsets, from the whole topic (blocking).

        A record that cannot be read (no key, an unknown key or value version,
        a key or value cut short, text that is not UTF-8) is skipped with a warning
        naming its partition and offset: one bad record must not keep every
        group from loading. Kafka's loader likewise ignores record types it
        does not know.

        A partition that cannot be read at all (offline, or a batch that
        cannot be decoded: disk corruption) is left out whole, logged, and
        recorded in :attr:`failed_partitions`; the groups of the other
        partitions load. Kafka's coordinator runtime likewise fails only the
        partition whose load failed.
        """
        groups: dict[str, LoadedGroup] = {}
        self.pending_txn_offsets = {}
        self.failed_partitions = {}
        if not self.exists:
            return groups
        skipped = 0
        for partition in range(self.partitions):
            if not self.log_dir.serves_partition(TOPIC, partition):
                continue  # another node's groups
            # A group lives in one partition: a partition that fails part-way
            # contributes nothing rather than a group's state cut short.
            found: dict[str, LoadedGroup] = {}
            try:
                for offset, key, value in self._committed_records(partition):
                    try:
                        self._apply(found, key, value)
                    except CorruptRecordError as exc:
                        skipped += 1
                        logger.warning(
                            "skipping the unreadable record at offset %d of %s-%d: %s",
                            offset,
                            TOPIC,
                            partition,
                            exc,
                        )
            except Exception as exc:
                logger.error(
                    "cannot load %s-%d; its groups are unavailable until it can be read "
                    "at a restart: %s",
                    TOPIC,
                    partition,
                    exc,
                    exc_info=exc,
                )
                self.failed_partitions[partition] = f"{type(exc).__name__}: {exc}"
                continue
            for group in [g for g in found if self.partition_for(g) != partition]:
                # Not this partition's group: nothing writes it here, and Kafka's
                # coordinator of its own partition would never see it.
                del found[group]
                logger.warning("ignoring records of group %s in %s-%d", group, TOPIC, partition)
            groups.update(found)
        if skipped:
            logger.warning("skipped %d unreadable records of %s", skipped, TOPIC)
        return {
            name: found
            for name, found in groups.items()
            if found.metadata or found.offsets or (found.share is not None and found.share.exists)
        }

    def _committed_records(
        self, partition: int
    ) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        """The partition's records in commit order: a transaction's at its COMMIT marker."""
        log = self.log_dir.log(TOPIC, partition)
        pending: dict[int, list[tuple[int, bytes | None, bytes | None]]] = {}
        position = log.log_start_offset
        while True:
            result = log.read(position, 1 << 30)
            if result.data is None or result.data.region.length == 0:
                break
            region = result.data.region
            data = log.env.pread(region.fd, region.length, region.position, name=region.path)
            last = position - 1
            for entry in log_entries.scan(data, check_crc=False).entries:
                last = entry.last_offset
                if entry.last_offset < position:
                    continue
                if entry.magic != batch.CURRENT_MAGIC:
                    # Legacy messages (an old Kafka's offsets): never transactional.
                    chunk = memoryview(data)[entry.position : entry.position + entry.size]
                    for r in decode_entry(chunk):
                        yield r.offset, r.key, r.value
                    continue
                at = entry.position
                header = batch.read_header(data, at)
                pid = header.producer_id
                records = decode_records(data, at)
                if header.is_control:
                    marker = control.read_marker(data, at)
                    held = pending.pop(pid, [])
                    if marker is not None and marker.is_commit:
                        yield from held
                elif header.is_transactional:
                    pending.setdefault(pid, []).extend((r.offset, r.key, r.value) for r in records)
                else:
                    for r in records:
                        yield r.offset, r.key, r.value
            if last < position:
                break
            position = last + 1
        for pid, held in pending.items():
            self.pending_txn_offsets.setdefault(pid, []).extend(
                (partition, key, value) for _, key, value in held if key is not None
            )

    def _records(self, partition: int) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        log = self.log_dir.log(TOPIC, partition)
        for record in self.log_dir.read_records(
            TOPIC, partition, log.log_start_offset, max_bytes=1 << 62
        ):
            yield record.offset, record.key, record.value

    @staticmethod
    def _apply(groups: dict[str, LoadedGroup], key: bytes | None, value: bytes | None) -> None:
        if key is None:
            raise CorruptRecordError("a record without a key")
        if len(key) >= 2 and _INT16.unpack_from(key)[0] in share_group_records.KEY_TYPES:
            _, group_id, _ = share_group_records.parse_key(key)
            loaded = groups.setdefault(group_id, LoadedGroup())
            if loaded.share is None:
                loaded.share = LoadedShareGroup()
            share_group_records.apply({group_id: loaded.share}, key, value)
            return
        parsed = parse_key(key)
        if isinstance(parsed, str):
            loaded = groups.setdefault(parsed, LoadedGroup())
            loaded.metadata = None if value is None else parse_group_value(value)
            return
        group, topic, partition = parsed
        loaded = groups.setdefault(group, LoadedGroup())
        if value is None:
            loaded.offsets.pop((topic, partition), None)
        else:
            loaded.offsets[(topic, partition)] = parse_offset_value(value)
