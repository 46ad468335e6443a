"""RecordBatch v2 headers: read, validate and patch them in place, no per-record work.

The layout (all integers big-endian; "records" is ``record_count`` records,
possibly compressed as one block)::

    RecordBatch =>
      base_offset            int64   @0
      batch_length           int32   @8    bytes after this field
      partition_leader_epoch int32   @12
      magic                  int8    @16   always 2 here
      crc                    uint32  @17   CRC-32C of bytes @21 .. end
      attributes             int16   @21   bits 0-2 codec, 3 timestamp type,
                                           4 transactional, 5 control, 6 delete horizon
      last_offset_delta      int32   @23
      base_timestamp         int64   @27
      max_timestamp          int64   @35
      producer_id            int64   @43
      producer_epoch         int16   @51
      base_sequence          int32   @53
      record_count           int32   @57
      records                bytes   @61

The CRC does not cover base_offset, batch_length or partition_leader_epoch, so a
broker assigns offsets by patching eight bytes and never recomputes it. Only a
change to the covered part (LogAppendTime, the delete horizon) needs a new CRC.

Every log entry format, v0, v1 and v2, starts with an int64 offset and an int32
size and has its magic byte at position 16; :func:`peek_magic` relies on that.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from seglog._typing import BytesLike
from seglog.errors import CorruptRecordError, UnsupportedMagicError
from seglog.records.crc32c import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base_offset + batch_length: what batch_length does not count
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43

CURRENT_MAGIC = 2
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_OFFSET_AND_SIZE = struct.Struct(">qi")


class BatchHeader(NamedTuple):
    """The fixed 61-byte header of a v2 record batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        """Offset of the batch's last record (as assigned)."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """The offset that follows this batch."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        """The codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 for CreateTime, 1 for LogAppendTime."""
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def is_transactional(self) -> bool:
        """True for batches written inside a transaction."""
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        """True for control batches (transaction markers)."""
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        """True when base_timestamp holds the compaction delete horizon."""
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int:
        """The delete horizon, or NO_TIMESTAMP when the flag is not set."""
        return self.base_timestamp if self.has_delete_horizon else NO_TIMESTAMP

    @property
    def has_producer_id(self) -> bool:
        """True for batches of an idempotent or transactional producer."""
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, wrapping at 2**31 as Kafka does."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (2**31)


def peek_magic(buf: BytesLike, position: int = 0) -> int:
    """The magic byte of the log entry at ``position`` (any format)."""
    view = memoryview(buf)
    if len(view) < position + MAGIC_OFFSET + 1:
        raise CorruptRecordError(
            f"truncated log entry at position {position}: "
            f"{len(view) - position} bytes, need at least {MAGIC_OFFSET + 1}"
        )
    return int(view[position + MAGIC_OFFSET])


def peek_offset_and_size(buf: BytesLike, position: int = 0) -> tuple[int, int]:
    """(offset, total size including the 12-byte prefix) of the entry at ``position``.

    Works for every magic. Raises :class:`CorruptRecordError` if fewer than 12
    bytes remain or the size field is impossible.
    """
    view = memoryview(buf)
    if len(view) < position + LOG_OVERHEAD:
        raise CorruptRecordError(f"truncated log entry prefix at position {position}")
    offset, length = _OFFSET_AND_SIZE.unpack_from(view, position)
    if length < MAGIC_OFFSET + 1 - LOG_OVERHEAD:
        raise CorruptRecordError(f"impossible entry size {length} at position {position}")
    return offset, length + LOG_OVERHEAD


def read_header(buf: BytesLike, position: int = 0) -> BatchHeader:
    """Parse the v2 header at ``position`` and check that the whole batch is present.

    Raises :class:`UnsupportedMagicError` for a magic other than 2 and
    :class:`CorruptRecordError` for a truncated or inconsistent header. The CRC
    is not checked here: see :func:`crc_is_valid`.
    """
    view = memoryview(buf)
    available = len(view) - position
    if available < HEADER_SIZE:
        if available >= MAGIC_OFFSET + 1 and view[position + MAGIC_OFFSET] != CURRENT_MAGIC:
            raise UnsupportedMagicError(
                f"record batch at position {position} has magic "
                f"{view[position + MAGIC_OFFSET]}, expected {CURRENT_MAGIC}"
            )
        raise CorruptRecordError(
            f"truncated record batch at position {position}: {available} bytes, "
            f"header needs {HEADER_SIZE}"
        )
    header = BatchHeader._make(HEADER.unpack_from(view, position))
    if header.magic != CURRENT_MAGIC:
        raise UnsupportedMagicError(
            f"record batch at position {position} has magic {header.magic}, "
            f"expected {CURRENT_MAGIC}"
        )
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(
            f"record batch at position {position} has length {header.batch_length}, "
            f"smaller than its header"
        )
    if header.size > available:
        raise CorruptRecordError(
            f"truncated record batch at position {position}: length {header.size}, "
            f"only {available} bytes present"
        )
    if header.last_offset_delta < 0 or header.record_count < 0:
        raise CorruptRecordError(
            f"record batch at position {position} has negative last offset delta or record count"
        )
    return header


def compute_crc(buf: BytesLike, position: int, size: int) -> int:
    """CRC-32C over the covered part (attributes to end) of the batch at ``position``."""
    view = memoryview(buf)
    return crc32c(view[position + ATTRIBUTES_OFFSET : position + size])


def crc_is_valid(buf: BytesLike, position: int, header: BatchHeader) -> bool:
    """True when the stored CRC matches the batch bytes."""
    return compute_crc(buf, position, header.size) == header.crc


def validate(buf: BytesLike, position: int = 0) -> BatchHeader:
    """Read the header at ``position`` and check its CRC; raise CorruptRecordError if bad."""
    header = read_header(buf, position)
    if not crc_is_valid(buf, position, header):
        raise CorruptRecordError(
            f"record batch at position {position} (base offset {header.base_offset}) "
            f"is corrupt: stored CRC {header.crc:#010x}, computed "
            f"{compute_crc(buf, position, header.size):#010x}"
        )
    return header


def iter_headers(buf: BytesLike, *, check_crc: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each v2 batch in ``buf``, which must hold whole batches.

    Raises :class:`CorruptRecordError` at the first batch that is truncated,
    inconsistent or (with ``check_crc``) fails its CRC.
    """
    view = memoryview(buf)
    position = 0
    end = len(view)
    while position < end:
        header = validate(view, position) if check_crc else read_header(view, position)
        yield position, header
        position += header.size


def patch_base_offset(buf: bytearray | memoryview, position: int, base_offset: int) -> None:
    """Write ``base_offset`` into the batch at ``position`` (outside the CRC)."""
    _INT64.pack_into(buf, position, base_offset)


def patch_partition_leader_epoch(buf: bytearray | memoryview, position: int, epoch: int) -> None:
    """Write the partition leader epoch into the batch at ``position`` (outside the CRC)."""
    _INT32.pack_into(buf, position + 12, epoch)


def _rewrite_crc(buf: bytearray | memoryview, position: int, size: int) -> None:
    _UINT32.pack_into(buf, position + CRC_OFFSET, compute_crc(buf, position, size))


def apply_log_append_time(buf: bytearray | memoryview, position: int, timestamp: int) -> None:
    """Mark the batch at ``position`` as LogAppendTime with ``timestamp`` and fix its CRC.

    As Kafka does, only the max timestamp and the timestamp-type bit change; the
    records keep their deltas and readers use the max timestamp for each record.
    """
    header = read_header(buf, position)
    attributes = header.attributes | TIMESTAMP_TYPE_MASK
    _INT16.pack_into(buf, position + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buf, position + MAX_TIMESTAMP_OFFSET, timestamp)
    _rewrite_crc(buf, position, header.size)
