"""Share group records of ``__consumer_offsets``, in Kafka 4.2's layout.

Kafka's group coordinator keeps a share group as six record types (its
``group-coordinator`` message specifications); the key's version field is
the record type. Keys are not flexible; values are version 0 and flexible
(``cstring`` = uvarint(length + 1) + UTF-8, 0 for null; ``carray`` =
uvarint(count + 1) items; ``tags`` = uvarint count of tagged fields, always 0
when written, skipped when read; ``uuid`` = 16 bytes)::

    key            = type:int16 group:string [member:string]     ; member: types 10, 13, 14
    type 10  ShareGroupMemberMetadata          (group, member)
             value = 0:int16 rack:cstring client_id:cstring client_host:cstring
                     subscribed:carray(cstring) tags
    type 11  ShareGroupMetadata                (group)
             value = 0:int16 epoch:int32 metadata_hash:int64 tags
    type 12  ShareGroupTargetAssignmentMetadata (group)
             value = 0:int16 assignment_epoch:int32 tags
    type 13  ShareGroupTargetAssignmentMember  (group, member)
             value = 0:int16 carray(topic_id:uuid partitions:carray(int32) tags) tags
    type 14  ShareGroupCurrentMemberAssignment (group, member)
             value = 0:int16 member_epoch:int32 previous_member_epoch:int32 state:int8
                     carray(topic_id:uuid partitions:carray(int32) tags) tags
    type 15  ShareGroupStatePartitionMetadata  (group)
             value = 0:int16 initializing:carray(topic_info) initialized:carray(topic_info)
                     deleting:carray(topic_id:uuid name:cstring tags) tags
             topic_info = topic_id:uuid name:cstring partitions:carray(int32) tags

A null value is a tombstone. Assignments name topics by id, so loading needs
the topics' current ids (a topic deleted and recreated under the same name
has a new id: its old assignment is dropped).

Worked example: group ``g``'s epoch 3 with metadata hash 0::

    key   00 0b  00 01 67
    value 00 00  00 00 00 03  00 00 00 00 00 00 00 00  00

``metadata_hash`` is Kafka's hash of the subscribed topics' metadata; seglog
writes its own hash of (topic, partition count) pairs, so a Kafka reading
these records would see a different hash and just bump the group epoch once.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from seglog.errors import CorruptRecordError
from seglog.protocol.errors import DecodeError
from seglog.protocol.primitives import (
    read_compact_nullable_string,
    read_compact_string,
    read_length,
    read_string,
    read_uuid,
    read_uvarint,
    take,
    write_string,
    write_uuid,
    write_uvarint,
)

MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_METADATA = 12
TARGET_MEMBER = 13
CURRENT_MEMBER = 14
STATE_PARTITIONS = 15
KEY_TYPES = frozenset(range(MEMBER_METADATA, STATE_PARTITIONS + 1))
"""The key versions (record types) of share group records."""
_WITH_MEMBER = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_MEMBER})

VALUE_VERSION = 0

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")

TopicIds = list[tuple[uuid.UUID, list[int]]]
"""Partitions by topic id, as assignments are stored."""


# ------------------------------------------------------------------ keys


def key(record_type: int, group: str, member: str | None = None) -> bytes:
    """The key of a share group record of ``record_type`` (10 to 15)."""
    out = bytearray(_INT16.pack(record_type))
    write_string(out, group)
    if record_type in _WITH_MEMBER:
        write_string(out, member or "")
    return bytes(out)


def parse_key(data: bytes) -> tuple[int, str, str | None]:
    """(record type, group, member or None) of a share group key."""
    view = memoryview(data)
    try:
        (record_type,) = _INT16.unpack_from(view, 0)
        if record_type not in KEY_TYPES:
            raise CorruptRecordError(f"not a share group key: type {record_type}")
        group, pos = read_string(view, 2)
        member = None
        if record_type in _WITH_MEMBER:
            member, pos = read_string(view, pos)
    except (struct.error, DecodeError) as exc:
        raise CorruptRecordError(f"a share group key does not parse: {exc}") from None
    if pos != len(data):
        raise CorruptRecordError("a share group key has bytes left over")
    return record_type, group, member


# ---------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """ShareGroupMemberMetadataValue."""

    rack_id: str | None
    client_id: str
    client_host: str
    subscribed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    """ShareGroupCurrentMemberAssignmentValue."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    partitions: TopicIds


@dataclass(frozen=True, slots=True)
class TopicPartitionsInfo:
    """One topic of ShareGroupStatePartitionMetadataValue."""

    topic_id: uuid.UUID
    name: str
    partitions: tuple[int, ...]


def _header() -> bytearray:
    return bytearray(_INT16.pack(VALUE_VERSION))


def _ints(out: bytearray, values: Iterable[int]) -> None:
    items = list(values)
    write_uvarint(out, len(items) + 1)
    for value in items:
        out += _INT32.pack(value)


def _topic_ids(out: bytearray, partitions: TopicIds) -> None:
    write_uvarint(out, len(partitions) + 1)
    for topic_id, numbers in partitions:
        write_uuid(out, topic_id)
        _ints(out, sorted(numbers))
        write_uvarint(out, 0)


def member_metadata_value(value: MemberMetadata) -> bytes:
    """A ShareGroupMemberMetadataValue."""
    out = _header()
    write_string(out, value.rack_id, compact=True)
    write_string(out, value.client_id, compact=True)
    write_string(out, value.client_host, compact=True)
    write_uvarint(out, len(value.subscribed) + 1)
    for name in value.subscribed:
        write_string(out, name, compact=True)
    write_uvarint(out, 0)
    return bytes(out)


def group_metadata_value(epoch: int, metadata_hash: int) -> bytes:
    """A ShareGroupMetadataValue."""
    out = _header()
    out += _INT32.pack(epoch)
    out += _INT64.pack(metadata_hash)
    write_uvarint(out, 0)
    return bytes(out)


def target_metadata_value(assignment_epoch: int) -> bytes:
    """A ShareGroupTargetAssignmentMetadataValue."""
    out = _header()
    out += _INT32.pack(assignment_epoch)
    write_uvarint(out, 0)
    return bytes(out)


def target_member_value(partitions: TopicIds) -> bytes:
    """A ShareGroupTargetAssignmentMemberValue."""
    out = _header()
    _topic_ids(out, partitions)
    write_uvarint(out, 0)
    return bytes(out)


def current_member_value(value: CurrentAssignment) -> bytes:
    """A ShareGroupCurrentMemberAssignmentValue."""
    out = _header()
    out += _INT32.pack(value.member_epoch)
    out += _INT32.pack(value.previous_member_epoch)
    out += _INT8.pack(value.state)
    _topic_ids(out, value.partitions)
    write_uvarint(out, 0)
    return bytes(out)


def state_partitions_value(initialized: Iterable[TopicPartitionsInfo]) -> bytes:
    """A ShareGroupStatePartitionMetadataValue with only initialized topics.

    seglog initializes a partition's share state at once (no initializing
    phase) and deletes it with its group (no deleting phase).
    """
    out = _header()
    write_uvarint(out, 1)  # initializing: none
    items = list(initialized)
    write_uvarint(out, len(items) + 1)
    for info in items:
        write_uuid(out, info.topic_id)
        write_string(out, info.name, compact=True)
        _ints(out, sorted(info.partitions))
        write_uvarint(out, 0)
    write_uvarint(out, 1)  # deleting: none
    write_uvarint(out, 0)
    return bytes(out)


# ---------------------------------------------------------------- reading


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.view = memoryview(data)
        (version,) = _INT16.unpack_from(self.view, 0)
        if version != VALUE_VERSION:
            raise CorruptRecordError(f"unsupported share group value version {version}")
        self.pos = 2

    def fixed(self, layout: struct.Struct) -> int:
        (value,) = layout.unpack_from(self.view, self.pos)
        self.pos += layout.size
        return int(value)

    def count(self) -> int:
        count, self.pos = read_length(self.view, self.pos, compact=True, wide=True)
        return max(count, 0)

    def string(self) -> str:
        value, self.pos = read_compact_string(self.view, self.pos)
        return value

    def nstring(self) -> str | None:
        value, self.pos = read_compact_nullable_string(self.view, self.pos)
        return value

    def uuid(self) -> uuid.UUID:
        value, self.pos = read_uuid(self.view, self.pos)
        return value

    def ints(self) -> list[int]:
        return [self.fixed(_INT32) for _ in range(self.count())]

    def tags(self) -> None:
        # Unknown tagged fields are skipped, as flexible versions require.
        fields, self.pos = read_uvarint(self.view, self.pos)
        for _ in range(fields):
            _, self.pos = read_uvarint(self.view, self.pos)
            size, self.pos = read_uvarint(self.view, self.pos)
            take(self.view, self.pos, size, "a tagged field")
            self.pos += size

    def topic_ids(self) -> TopicIds:
        out: TopicIds = []
        for _ in range(self.count()):
            topic_id = self.uuid()
            out.append((topic_id, self.ints()))
            self.tags()
        return out

    def end(self) -> None:
        self.tags()
        if self.pos != len(self.view):
            raise CorruptRecordError("a share group value has bytes left over")


@dataclass
class LoadedShareGroup:
    """What ``__consumer_offsets`` holds of one share group (last value per key)."""

    epoch: int | None = None
    metadata_hash: int = 0
    assignment_epoch: int = 0
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    targets: dict[str, TopicIds] = field(default_factory=dict)
    current: dict[str, CurrentAssignment] = field(default_factory=dict)
    initialized: list[TopicPartitionsInfo] = field(default_factory=list)
    records: dict[bytes, bytes] = field(default_factory=dict)
    """Every live record read: key → value (what is written over on the next change)."""

    @property
    def exists(self) -> bool:
        """Whether the group is alive: its ShareGroupMetadata record was not tombstoned."""
        return self.epoch is not None


def apply(found: dict[str, LoadedShareGroup], data: bytes, value: bytes | None) -> str:
    """Fold one share group record (key ``data``) into ``found``; returns its group id.

    A record that does not parse raises CorruptRecordError.
    """
    record_type, group, member = parse_key(data)
    loaded = found.setdefault(group, LoadedShareGroup())
    try:
        _fold(loaded, record_type, member or "", value)
    except (struct.error, DecodeError) as exc:
        raise CorruptRecordError(f"a share group value does not parse: {exc}") from None
    if value is None:
        loaded.records.pop(data, None)
    else:
        loaded.records[data] = value
    return group


def _fold(loaded: LoadedShareGroup, record_type: int, member: str, value: bytes | None) -> None:
    if record_type == GROUP_METADATA:
        if value is None:
            loaded.epoch = None
            return
        reader = _Reader(value)
        loaded.epoch = reader.fixed(_INT32)
        loaded.metadata_hash = reader.fixed(_INT64)
        reader.end()
    elif record_type == TARGET_METADATA:
        if value is None:
            loaded.assignment_epoch = 0
            return
        reader = _Reader(value)
        loaded.assignment_epoch = reader.fixed(_INT32)
        reader.end()
    elif record_type == MEMBER_METADATA:
        if value is None:
            loaded.members.pop(member, None)
            return
        reader = _Reader(value)
        rack = reader.nstring()
        client_id = reader.string()
        client_host = reader.string()
        subscribed = tuple(reader.string() for _ in range(reader.count()))
        reader.end()
        loaded.members[member] = MemberMetadata(rack, client_id, client_host, subscribed)
    elif record_type == TARGET_MEMBER:
        if value is None:
            loaded.targets.pop(member, None)
            return
        reader = _Reader(value)
        loaded.targets[member] = reader.topic_ids()
        reader.end()
    elif record_type == CURRENT_MEMBER:
        if value is None:
            loaded.current.pop(member, None)
            return
        reader = _Reader(value)
        epoch = reader.fixed(_INT32)
        previous = reader.fixed(_INT32)
        state = reader.fixed(_INT8)
        partitions = reader.topic_ids()
        reader.end()
        loaded.current[member] = CurrentAssignment(epoch, previous, state, partitions)
    else:  # STATE_PARTITIONS
        if value is None:
            loaded.initialized = []
            return
        reader = _Reader(value)
        topics: list[list[TopicPartitionsInfo]] = []
        for _ in range(2):  # initializing, then initialized
            infos = []
            for _ in range(reader.count()):
                topic_id = reader.uuid()
                name = reader.string()
                infos.append(TopicPartitionsInfo(topic_id, name, tuple(reader.ints())))
                reader.tags()
            topics.append(infos)
        for _ in range(reader.count()):  # deleting: nothing to do here
            reader.uuid()
            reader.string()
            reader.tags()
        reader.end()
        # A partition still initializing when written is initialized now: seglog's
        # broker initializes a share-partition's state when told, and again is harmless.
        loaded.initialized = topics[0] + topics[1]


__all__ = [
    "CURRENT_MEMBER",
    "GROUP_METADATA",
    "KEY_TYPES",
    "MEMBER_METADATA",
    "STATE_PARTITIONS",
    "TARGET_MEMBER",
    "TARGET_METADATA",
    "CurrentAssignment",
    "LoadedShareGroup",
    "MemberMetadata",
    "TopicPartitionsInfo",
    "apply",
    "current_member_value",
    "group_metadata_value",
    "key",
    "member_metadata_value",
    "parse_key",
    "state_partitions_value",
    "target_member_value",
    "target_metadata_value",
]
