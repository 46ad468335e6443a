"""Transaction metadata as records of the compacted topic ``__transaction_state``.

Record layouts (Kafka's ``TransactionLogKey`` and ``TransactionLogValue``;
big-endian, ``string`` = int16 length + UTF-8)::

    key          = version:int16 (0) transactional_id:string
    value v0     = version:int16 (0) producer_id:int64 producer_epoch:int16
                   transaction_timeout_ms:int32 status:int8
                   partition_count:int32 topic_partitions*
                   last_update_timestamp_ms:int64 start_timestamp_ms:int64
    topic_partitions = topic:string partition_count:int32 partition:int32*

    value v1     = version:int16 (1) producer_id:int64 producer_epoch:int16
                   transaction_timeout_ms:int32 status:int8
                   (partition_count + 1):uvarint topic_partitions_v1*
                   last_update_timestamp_ms:int64 start_timestamp_ms:int64
                   tagged_fields
    topic_partitions_v1 = (length + 1):uvarint topic:utf8
                   (partition_count + 1):uvarint partition:int32* tagged_fields
    tagged_fields = count:uvarint (tag:uvarint size:uvarint data)*
        tag 0  previous_producer_id:int64       (default -1)
        tag 1  next_producer_id:int64           (default -1)
        tag 2  client_transaction_version:int16 (default 0)

``status`` is Kafka's ``TransactionState`` id (0 Empty, 1 Ongoing,
2 PrepareCommit, 3 PrepareAbort, 4 CompleteCommit, 5 CompleteAbort, 6 Dead,
7 PrepareEpochFence). The partition list is null (count -1, or 0 in v1) in the
Empty state, as Kafka writes it, and ignored there when read. A tagged field
is written only when it differs from its default; tags the reader does not
know are skipped (Kafka's rule for flexible versions). A null value is a
tombstone (an expired transactional id).

Kafka 4 writes version 0 while the ``transaction.version`` feature is 0 and
version 1 from feature level 1 on (:func:`value_version`); both are read.
Versions above 1 are refused as corrupt (the loader skips them with a warning;
Kafka's refuses to load).

A transactional id lives in partition ``abs(java_hash(id)) % partitions``,
as a group does in ``__consumer_offsets``.

Worked example: ``t`` with producer 5, epoch 1, timeout 60000, Ongoing over
``a``-0 at times 7 and 6::

    key   00 00  00 01 74
    value 00 00  00 00 00 00 00 00 00 05  00 01  00 00 ea 60  01
          00 00 00 01  00 01 61  00 00 00 01  00 00 00 00
          00 00 00 00 00 00 00 07  00 00 00 00 00 00 00 06

The same in version 1, by a client of transaction version 2::

    value 00 01  00 00 00 00 00 00 00 05  00 01  00 00 ea 60  01
          02  02 61  02 00 00 00 00  00
          00 00 00 00 00 00 00 07  00 00 00 00 00 00 00 06
          01  02 02 00 02
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from seglog.errors import CorruptRecordError
from seglog.protocol.errors import DecodeError
from seglog.protocol.primitives import (
    read_compact_string,
    read_length,
    read_string,
    read_uvarint,
    take,
    write_string,
    write_uvarint,
)

TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0
#: The flexible value version, written from transaction.version 1 on.
FLEXIBLE_VALUE_VERSION = 1

_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2

_HEAD = struct.Struct(">qhib")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_TIMES = struct.Struct(">qq")


class TxnState(IntEnum):
    """Kafka's ``TransactionState`` ids, as stored."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The state as Kafka's tools print it (``CompleteCommit``)."""
        return "".join(part.capitalize() for part in self.name.split("_"))


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    """One stored state of a transactional id."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    last_update_ms: int
    start_ms: int
    #: Version 1's tagged fields (their defaults in version 0).
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def value_version(transaction_version: int) -> int:
    """The value version Kafka 4 writes at a ``transaction.version`` feature level."""
    return FLEXIBLE_VALUE_VERSION if transaction_version >= 1 else VALUE_VERSION


def _string(text: str) -> bytes:
    data = text.encode()
    return _INT16.pack(len(data)) + data


def encode_key(transactional_id: str) -> bytes:
    """The record key of ``transactional_id``."""
    return _INT16.pack(KEY_VERSION) + _string(transactional_id)


def decode_key(data: bytes) -> str:
    """The transactional id a key names; CorruptRecordError if it is not a v0 key."""
    if len(data) < 4:
        raise CorruptRecordError("a __transaction_state key is shorter than 4 bytes")
    (version,) = _INT16.unpack_from(data, 0)
    if version != KEY_VERSION:
        raise CorruptRecordError(f"unknown __transaction_state key version {version}")
    (length,) = _INT16.unpack_from(data, 2)
    if length < 0 or 4 + length != len(data):
        raise CorruptRecordError("a __transaction_state key has a bad string length")
    try:
        return data[4:].decode()
    except UnicodeDecodeError:
        raise CorruptRecordError("a transactional id is not UTF-8") from None


def encode_value(value: TxnLogValue, version: int = VALUE_VERSION) -> bytes:
    """The record value of ``value`` in ``version`` (0 or 1)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(value.partitions):
        by_topic.setdefault(topic, []).append(partition)
    # Kafka stores no partitions (null) for Empty, and refuses to store any there.
    null = value.state == TxnState.EMPTY
    out = bytearray(_INT16.pack(version))
    out += _HEAD.pack(value.producer_id, value.producer_epoch, value.timeout_ms, int(value.state))
    if version == VALUE_VERSION:
        out += _INT32.pack(-1 if null else len(by_topic))
        for topic, partitions in by_topic.items():
            out += _string(topic) + _INT32.pack(len(partitions))
            out += b"".join(_INT32.pack(p) for p in partitions)
        out += _TIMES.pack(value.last_update_ms, value.start_ms)
        return bytes(out)
    if version != FLEXIBLE_VALUE_VERSION:
        raise ValueError(f"no __transaction_state value version {version}")
    write_uvarint(out, 0 if null else len(by_topic) + 1)
    for topic, partitions in ({} if null else by_topic).items():
        write_string(out, topic, compact=True)
        write_uvarint(out, len(partitions) + 1)
        out += b"".join(_INT32.pack(p) for p in partitions)
        write_uvarint(out, 0)  # the partition struct's tagged fields
    out += _TIMES.pack(value.last_update_ms, value.start_ms)
    tagged: list[tuple[int, bytes]] = []
    if value.previous_producer_id != -1:
        tagged.append((_TAG_PREVIOUS_PRODUCER_ID, _INT64.pack(value.previous_producer_id)))
    if value.next_producer_id != -1:
        tagged.append((_TAG_NEXT_PRODUCER_ID, _INT64.pack(value.next_producer_id)))
    if value.client_transaction_version != 0:
        tagged.append(
            (_TAG_CLIENT_TRANSACTION_VERSION, _INT16.pack(value.client_transaction_version))
        )
    write_uvarint(out, len(tagged))
    for tag, data in tagged:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data
    return bytes(out)


def decode_value(data: bytes) -> TxnLogValue:
    """Parse a version 0 or 1 value; CorruptRecordError if it does not parse."""
    view = memoryview(data)
    previous_pid = next_pid = -1
    client_version = 0
    try:
        (version,) = _INT16.unpack_from(view, 0)
        if version not in (VALUE_VERSION, FLEXIBLE_VALUE_VERSION):
            raise CorruptRecordError(f"unsupported __transaction_state value version {version}")
        pid, epoch, timeout, status = _HEAD.unpack_from(view, 2)
        pos = 2 + _HEAD.size
        partitions: set[tuple[str, int]] = set()
        if version == VALUE_VERSION:
            (count,) = _INT32.unpack_from(view, pos)
            pos += 4
            for _ in range(max(count, 0)):
                topic, pos = read_string(view, pos)
                (n,) = _INT32.unpack_from(view, pos)
                pos += 4
                for _ in range(n):
                    partitions.add((topic, _INT32.unpack_from(view, pos)[0]))
                    pos += 4
            last_update, start = _TIMES.unpack_from(view, pos)
            pos += _TIMES.size
        else:
            count, pos = read_length(view, pos, compact=True, wide=True)
            for _ in range(max(count, 0)):
                topic, pos = read_compact_string(view, pos)
                n, pos = read_length(view, pos, compact=True, wide=True)
                for _ in range(max(n, 0)):
                    partitions.add((topic, _INT32.unpack_from(view, pos)[0]))
                    pos += 4
                pos = _skip_tagged_fields(view, pos)
            last_update, start = _TIMES.unpack_from(view, pos)
            pos += _TIMES.size
            fields, pos = read_uvarint(view, pos)
            for _ in range(fields):
                tag, pos = read_uvarint(view, pos)
                size, pos = read_uvarint(view, pos)
                field = take(view, pos, size, "a tagged field")
                pos += size
                if tag == _TAG_PREVIOUS_PRODUCER_ID:
                    (previous_pid,) = _INT64.unpack(field)
                elif tag == _TAG_NEXT_PRODUCER_ID:
                    (next_pid,) = _INT64.unpack(field)
                elif tag == _TAG_CLIENT_TRANSACTION_VERSION:
                    (client_version,) = _INT16.unpack(field)
    except (struct.error, DecodeError) as exc:
        raise CorruptRecordError(f"a __transaction_state value does not parse: {exc}") from None
    if pos != len(data):
        raise CorruptRecordError("a __transaction_state value has bytes left over")
    try:
        state = TxnState(status)
    except ValueError:
        raise CorruptRecordError(f"unknown transaction state {status}") from None
    if state == TxnState.EMPTY:
        partitions.clear()  # Kafka ignores them there
    return TxnLogValue(
        pid,
        epoch,
        timeout,
        state,
        frozenset(partitions),
        last_update,
        start,
        previous_pid,
        next_pid,
        client_version,
    )


def _skip_tagged_fields(view: memoryview, pos: int) -> int:
    """Past a tagged-field section none of whose tags this reader knows."""
    fields, pos = read_uvarint(view, pos)
    for _ in range(fields):
        _, pos = read_uvarint(view, pos)
        size, pos = read_uvarint(view, pos)
        take(view, pos, size, "a tagged field")
        pos += size
    return pos


__all__ = [
    "TOPIC",
    "TxnLogValue",
    "TxnState",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "value_version",
]
