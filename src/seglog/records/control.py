"""Control records: the COMMIT and ABORT markers that end a transaction.

A transaction marker is a v2 batch with the *transactional* and *control*
attribute bits set, the producer's id and epoch, no sequence (-1), and exactly
one record whose key and value are Kafka's ``ControlRecordType`` and
``EndTransactionMarker`` (integers big-endian)::

    key   := version:int16 (0) type:int16        type: 0 ABORT, 1 COMMIT
    value := version:int16 (0) coordinator_epoch:int32

A reader of a later key or value version reads these leading fields and
ignores the rest, as Kafka does. Example: the COMMIT marker of coordinator
epoch 3 has key ``00 00 00 01`` and value ``00 00 00 00 00 03``.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from seglog.errors import CorruptRecordError
from seglog.records import batch
from seglog.records.builder import SimpleRecord, build_batch
from seglog.records.record import decode_records

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
CURRENT_KEY_VERSION = 0
CURRENT_VALUE_VERSION = 0


class ControlType(IntEnum):
    """Kafka's ``ControlRecordType`` (the transaction markers and the unknown rest)."""

    ABORT = 0
    COMMIT = 1


class EndTxnMarker(NamedTuple):
    """A decoded transaction marker."""

    control_type: int
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        """True for a COMMIT marker."""
        return self.control_type == ControlType.COMMIT


def encode_key(control_type: int) -> bytes:
    """The key of a control record of ``control_type``."""
    return _KEY.pack(CURRENT_KEY_VERSION, control_type)


def encode_value(coordinator_epoch: int) -> bytes:
    """The value of a transaction marker (``EndTransactionMarker``)."""
    return _VALUE.pack(CURRENT_VALUE_VERSION, coordinator_epoch)


def decode_key(key: bytes | memoryview | None) -> int:
    """The control type a control record's key names; CorruptRecordError if unreadable."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError("a control record's key is shorter than 4 bytes")
    version, control_type = _KEY.unpack_from(key, 0)
    if version < 0:
        raise CorruptRecordError(f"a control record key has version {version}")
    return int(control_type)


def decode_value(value: bytes | memoryview | None) -> int:
    """The coordinator epoch of a transaction marker's value."""
    if value is None or len(value) < _VALUE.size:
        raise CorruptRecordError("a transaction marker's value is shorter than 6 bytes")
    version, coordinator_epoch = _VALUE.unpack_from(value, 0)
    if version < 0:
        raise CorruptRecordError(f"a transaction marker value has version {version}")
    return int(coordinator_epoch)


def build_marker(
    producer_id: int,
    producer_epoch: int,
    *,
    commit: bool,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
) -> bytes:
    """One control batch holding a COMMIT or ABORT marker of a producer's transaction."""
    control_type = ControlType.COMMIT if commit else ControlType.ABORT
    record = SimpleRecord(encode_value(coordinator_epoch), encode_key(control_type), timestamp)
    return build_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=batch.NO_SEQUENCE,
        is_transactional=True,
        is_control=True,
    )


def read_marker(buf: bytes | bytearray | memoryview, position: int = 0) -> EndTxnMarker | None:
    """The marker in the control batch at ``position``; None if it is no transaction marker."""
    records = decode_records(buf, position)
    if not records:
        return None
    control_type = decode_key(records[0].key)
    if control_type not in (ControlType.ABORT, ControlType.COMMIT):
        return None
    return EndTxnMarker(control_type, decode_value(records[0].value))


__all__ = [
    "ControlType",
    "EndTxnMarker",
    "build_marker",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "read_marker",
]
