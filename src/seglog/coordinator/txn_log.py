"""Transaction metadata as records of the compacted topic ``__transaction_state``.

Record layouts (Kafka's ``TransactionLogKey`` and ``TransactionLogValue``;
big-endian, ``string`` = int16 length + UTF-8)::

    key          = version:int16 (0) transactional_id:string
    value v0     = version:int16 (0) producer_id:int64 producer_epoch:int16
                   transaction_timeout_ms:int32 status:int8
                   partition_count:int32 topic_partitions*
                   last_update_timestamp_ms:int64 start_timestamp_ms:int64
    topic_partitions = topic:string partition_count:int32 partition:int32*

``status`` is Kafka's ``TransactionState`` id (0 Empty, 1 Ongoing,
2 PrepareCommit, 3 PrepareAbort, 4 CompleteCommit, 5 CompleteAbort, 6 Dead,
7 PrepareEpochFence). A null value is a tombstone (an expired transactional
id). seglog writes value version 0, which every Kafka reads; version 1 (the
flexible one Kafka writes for transaction version 2 clients) is refused as
corrupt and skipped by the loader with a warning.

A transactional id lives in partition ``abs(java_hash(id)) % partitions``,
as a group does in ``__consumer_offsets``.

Worked example: ``t`` with producer 5, epoch 1, timeout 60000, Ongoing over
``a``-0 at times 7 and 6::

    key   00 00  00 01 74
    value 00 00  00 00 00 00 00 00 00 05  00 01  00 00 ea 60  01
          00 00 00 01  00 01 61  00 00 00 01  00 00 00 00
          00 00 00 00 00 00 00 07  00 00 00 00 00 00 00 06
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from seglog.errors import CorruptRecordError

TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0

_HEAD = struct.Struct(">qhib")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
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


def encode_value(value: TxnLogValue) -> bytes:
    """The record value (version 0) of ``value``."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(value.partitions):
        by_topic.setdefault(topic, []).append(partition)
    out = bytearray(_INT16.pack(VALUE_VERSION))
    out += _HEAD.pack(value.producer_id, value.producer_epoch, value.timeout_ms, int(value.state))
    out += _INT32.pack(len(by_topic))
    for topic, partitions in by_topic.items():
        out += _string(topic) + _INT32.pack(len(partitions))
        out += b"".join(_INT32.pack(p) for p in partitions)
    out += _TIMES.pack(value.last_update_ms, value.start_ms)
    return bytes(out)


def decode_value(data: bytes) -> TxnLogValue:
    """Parse a version-0 value; CorruptRecordError if it does not parse."""
    try:
        (version,) = _INT16.unpack_from(data, 0)
        if version != VALUE_VERSION:
            raise CorruptRecordError(f"unsupported __transaction_state value version {version}")
        pid, epoch, timeout, status = _HEAD.unpack_from(data, 2)
        pos = 2 + _HEAD.size
        (count,) = _INT32.unpack_from(data, pos)
        pos += 4
        partitions: set[tuple[str, int]] = set()
        for _ in range(max(count, 0)):
            (length,) = _INT16.unpack_from(data, pos)
            topic = bytes(data[pos + 2 : pos + 2 + length]).decode()
            pos += 2 + length
            (n,) = _INT32.unpack_from(data, pos)
            pos += 4
            for _ in range(n):
                partitions.add((topic, _INT32.unpack_from(data, pos)[0]))
                pos += 4
        last_update, start = _TIMES.unpack_from(data, pos)
        pos += _TIMES.size
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"a __transaction_state value does not parse: {exc}") from None
    if pos != len(data):
        raise CorruptRecordError("a __transaction_state value has bytes left over")
    try:
        state = TxnState(status)
    except ValueError:
        raise CorruptRecordError(f"unknown transaction state {status}") from None
    return TxnLogValue(pid, epoch, timeout, state, frozenset(partitions), last_update, start)


__all__ = [
    "TOPIC",
    "TxnLogValue",
    "TxnState",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
]
