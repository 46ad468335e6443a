"""The records of ``__share_group_state``, byte for byte as Kafka's share coordinator writes them.

Every record is a coordinator record: its key starts with an int16 that names
the record type (Kafka calls it the key's version), then the key's fields,
not flexible; its value starts with an int16 version (always 0), then the
value's fields, flexible (compact lengths, a tagged-field section after every
struct). Kafka's schemas are ``ShareSnapshotKey``/``ShareSnapshotValue``
(type 0) and ``ShareUpdateKey``/``ShareUpdateValue`` (type 1) in its
share-coordinator; here they are tables of the protocol layer's field model
(:mod:`seglog.protocol.schema`), encoded and decoded by its one codec::

    key            = type:int16 group_id:string topic_id:uuid partition:int32
    snapshot value = 0:int16 snapshot_epoch:int32 state_epoch:int32
                     leader_epoch:int32 start_offset:int64
                     create_timestamp:int64 write_timestamp:int64
                     (count + 1):uvarint batch* tagged_fields
    update value   = 0:int16 snapshot_epoch:int32 leader_epoch:int32
                     start_offset:int64 (count + 1):uvarint batch* tagged_fields
    batch          = first_offset:int64 last_offset:int64 delivery_state:int8
                     delivery_count:int16 tagged_fields
    string         = length:int16 UTF-8     (keys are not flexible)
    tagged_fields  = count:uvarint ...      (none are defined; unknown ones are skipped)

A ShareSnapshot holds a share-partition's whole state; a ShareUpdate only the
runs that changed since (its start offset -1 when it does not move), folded
over the last snapshot in log order. A null value is a tombstone: the
share-partition's state is deleted. The topic is not compacted (an update is
a delta, so a key's last record alone is not its state): the share
coordinator prunes it instead, moving the log start offset past the records
no key needs any more.

Worked example: group ``g``, topic id ``00010203-0405-0607-0809-0a0b0c0d0e0f``,
partition 3; a snapshot at snapshot epoch 1, state epoch 2, leader epoch 5,
start offset 10, created at 1000 and written at 2000, offsets 10-12 acknowledged
once::

    key   00 00  00 01 67  00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f
          00 00 00 03
    value 00 00  00 00 00 01  00 00 00 02  00 00 00 05
          00 00 00 00 00 00 00 0a
          00 00 00 00 00 00 03 e8  00 00 00 00 00 00 07 d0
          02  00 00 00 00 00 00 00 0a  00 00 00 00 00 00 00 0c  02  00 01  00
          00

A record that cannot be decoded (an unknown type or version, a field cut
short, text that is not UTF-8, a delivery state Kafka does not define) raises
:class:`~seglog.errors.CorruptRecordError`; the store's loader skips it with a
warning, as the offsets loader does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Final

from seglog.errors import CorruptRecordError
from seglog.protocol.errors import DecodeError
from seglog.protocol.schema import F, Message, decode, encode
from seglog.share.state import RecordState, SharePartitionKey, StateBatch

__all__ = [
    "SNAPSHOT",
    "UPDATE",
    "VALUE_VERSION",
    "ShareSnapshot",
    "ShareUpdate",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
]

SNAPSHOT: Final = 0
"""The record type (key version) of a ShareSnapshot."""
UPDATE: Final = 1
"""The record type (key version) of a ShareUpdate."""
VALUE_VERSION: Final = 0
"""The only value version Kafka defines for either type."""

_INT16 = struct.Struct(">h")

# -- the tables (Kafka's JSON schemas, as the protocol layer's field model) ------------------

_KEY_FIELDS = (
    F("group_id", "string"),
    F("topic_id", "uuid"),
    F("partition", "int32"),
)

_STATE_BATCH = (
    F("first_offset", "int64"),
    F("last_offset", "int64"),
    F("delivery_state", "int8"),
    F("delivery_count", "int16"),
)

# Both key types have the same fields; Kafka's key schemas are not flexible.
_SNAPSHOT_KEY = Message(SNAPSHOT, "ShareSnapshotKey", (0, 0), None, _KEY_FIELDS)
_UPDATE_KEY = Message(UPDATE, "ShareUpdateKey", (0, 0), None, _KEY_FIELDS)

_SNAPSHOT_VALUE = Message(
    SNAPSHOT,
    "ShareSnapshotValue",
    (0, 0),
    0,
    (
        F("snapshot_epoch", "int32"),
        F("state_epoch", "int32"),
        F("leader_epoch", "int32"),
        F("start_offset", "int64"),
        F("create_timestamp", "int64"),
        F("write_timestamp", "int64"),
        F("state_batches", "[]struct", fields=_STATE_BATCH),
    ),
)

_UPDATE_VALUE = Message(
    UPDATE,
    "ShareUpdateValue",
    (0, 0),
    0,
    (
        F("snapshot_epoch", "int32"),
        F("leader_epoch", "int32"),
        F("start_offset", "int64"),
        F("state_batches", "[]struct", fields=_STATE_BATCH),
    ),
)

_KEYS: Final = {SNAPSHOT: _SNAPSHOT_KEY, UPDATE: _UPDATE_KEY}
_VALUES: Final = {SNAPSHOT: _SNAPSHOT_VALUE, UPDATE: _UPDATE_VALUE}


# -- values -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    """A ShareSnapshot value: a share-partition's whole state at one moment."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    batches: tuple[StateBatch, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareUpdate:
    """A ShareUpdate value: what changed since the snapshot of ``snapshot_epoch``.

    ``start_offset`` -1 leaves the start where it was.
    """

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...] = ()


# -- encoding -----------------------------------------------------------------------------------


def encode_key(record_type: int, key: SharePartitionKey) -> bytes:
    """The key of ``key``'s record of ``record_type`` (:data:`SNAPSHOT` or :data:`UPDATE`)."""
    message = _KEYS.get(record_type)
    if message is None:
        raise ValueError(f"no {record_type} record type in __share_group_state")
    body = {"group_id": key.group_id, "topic_id": key.topic_id, "partition": key.partition}
    return _INT16.pack(record_type) + encode(message, 0, body)


def encode_value(value: ShareSnapshot | ShareUpdate) -> bytes:
    """The value of a snapshot or an update (version 0)."""
    batches = [
        {
            "first_offset": b.first_offset,
            "last_offset": b.last_offset,
            "delivery_state": int(b.delivery_state),
            "delivery_count": b.delivery_count,
        }
        for b in value.batches
    ]
    body: dict[str, Any]
    if isinstance(value, ShareSnapshot):
        message = _SNAPSHOT_VALUE
        body = {
            "snapshot_epoch": value.snapshot_epoch,
            "state_epoch": value.state_epoch,
            "leader_epoch": value.leader_epoch,
            "start_offset": value.start_offset,
            "create_timestamp": value.create_timestamp,
            "write_timestamp": value.write_timestamp,
            "state_batches": batches,
        }
    else:
        message = _UPDATE_VALUE
        body = {
            "snapshot_epoch": value.snapshot_epoch,
            "leader_epoch": value.leader_epoch,
            "start_offset": value.start_offset,
            "state_batches": batches,
        }
    return _INT16.pack(VALUE_VERSION) + encode(message, VALUE_VERSION, body)


# -- decoding -----------------------------------------------------------------------------------


def _version(data: bytes, what: str) -> int:
    if len(data) < 2:
        raise CorruptRecordError(f"a __share_group_state {what} is shorter than 2 bytes")
    return int(_INT16.unpack_from(data, 0)[0])


def _body(message: Message, data: bytes) -> dict[str, Any]:
    try:
        return decode(message, 0, memoryview(data)[2:])
    except DecodeError as exc:
        # The protocol's error says INVALID_REQUEST; on disk the same bytes are a corrupt record.
        raise CorruptRecordError(f"__share_group_state: {exc}") from None


def decode_key(data: bytes) -> tuple[int, SharePartitionKey]:
    """The record type and share-partition a key names; CorruptRecordError if it is not one."""
    record_type = _version(data, "key")
    message = _KEYS.get(record_type)
    if message is None:
        raise CorruptRecordError(f"unknown __share_group_state record type {record_type}")
    body = _body(message, data)
    return record_type, SharePartitionKey(body["group_id"], body["topic_id"], body["partition"])


def decode_value(record_type: int, data: bytes) -> ShareSnapshot | ShareUpdate:
    """The value of a record of ``record_type``; CorruptRecordError if it is not one."""
    message = _VALUES.get(record_type)
    if message is None:
        raise CorruptRecordError(f"unknown __share_group_state record type {record_type}")
    version = _version(data, "value")
    if version != VALUE_VERSION:
        raise CorruptRecordError(f"unsupported {message.name} version {version}")
    body = _body(message, data)
    batches = tuple(_batch(b) for b in body["state_batches"])
    if record_type == SNAPSHOT:
        return ShareSnapshot(
            snapshot_epoch=body["snapshot_epoch"],
            state_epoch=body["state_epoch"],
            leader_epoch=body["leader_epoch"],
            start_offset=body["start_offset"],
            create_timestamp=body["create_timestamp"],
            write_timestamp=body["write_timestamp"],
            batches=batches,
        )
    return ShareUpdate(
        snapshot_epoch=body["snapshot_epoch"],
        leader_epoch=body["leader_epoch"],
        start_offset=body["start_offset"],
        batches=batches,
    )


def _batch(body: dict[str, Any]) -> StateBatch:
    try:
        state = RecordState(body["delivery_state"])
    except ValueError:
        raise CorruptRecordError(
            f"__share_group_state: unknown delivery state {body['delivery_state']}"
        ) from None
    if body["first_offset"] > body["last_offset"]:
        raise CorruptRecordError(
            f"__share_group_state: a state batch from {body['first_offset']} "
            f"to {body['last_offset']}"
        )
    return StateBatch(body["first_offset"], body["last_offset"], state, body["delivery_count"])
