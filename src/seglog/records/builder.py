"""Build v2 record batches from Python values: for producers, tools, tests and compaction.

One bytearray holds the whole batch: 61 bytes are reserved for the header,
the records are encoded after them, the records block alone is compressed
when a codec is asked for, and then the header is written in front with its
CRC-32C. See :mod:`seglog.records.batch` and :mod:`seglog.records.record`
for the layouts.

Choices that follow Kafka's own builder (MemoryRecordsBuilder):

* the base timestamp is the first record's timestamp, unless the batch
  carries a delete horizon, which then takes its place;
* the max timestamp is the largest record timestamp (for LogAppendTime the
  caller passes the append time as ``max_timestamp``);
* an empty batch (which only compaction writes, to keep a producer's offsets
  and sequence) has no payload and no codec.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from seglog.errors import InvalidRecordError
from seglog.records import batch
from seglog.records.compression import Codec, compress
from seglog.records.crc32c import crc32c
from seglog.records.record import Header, Record, RecordSlot
from seglog.records.varint import encode_varint, size_of_varint

INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

HeaderInput: TypeAlias = Header | tuple[str, bytes | None]
"""A record header as the builder accepts it."""


@dataclass(frozen=True, slots=True)
class SimpleRecord:
    """A record to write. ``timestamp`` None means "now" is the caller's business: 0 here.

    ``offset_delta`` None means "the next one" (0, 1, 2, ... by position);
    compaction passes the original deltas, which may leave gaps.
    """

    value: bytes | None
    key: bytes | None = None
    timestamp: int | None = None
    headers: Sequence[HeaderInput] = ()
    offset_delta: int | None = None


RecordInput: TypeAlias = (
    SimpleRecord
    | tuple[bytes | None, bytes | None]
    | tuple[bytes | None, bytes | None, int | None]
    | tuple[bytes | None, bytes | None, int | None, Sequence[HeaderInput]]
)
"""A :class:`SimpleRecord`, or a tuple ``(key, value[, timestamp[, headers]])``."""


def as_simple_record(item: RecordInput) -> SimpleRecord:
    """``item`` as a :class:`SimpleRecord` (tuples are ``(key, value[, timestamp[, headers]])``)."""
    if isinstance(item, SimpleRecord):
        return item
    if not 2 <= len(item) <= 4:
        raise InvalidRecordError(
            f"a record tuple is (key, value[, timestamp[, headers]]), got {len(item)} items"
        )
    key, value = item[0], item[1]
    timestamp = item[2] if len(item) > 2 else None
    headers = item[3] if len(item) > 3 else ()
    return SimpleRecord(value=value, key=key, timestamp=timestamp, headers=headers)


def _encode_bytes(data: bytes | None, out: bytearray) -> None:
    if data is None:
        out.append(1)  # zigzag(-1): null
    else:
        encode_varint(len(data), out)
        out += data


def _encode_record(
    out: bytearray,
    scratch: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[HeaderInput],
) -> None:
    # The length prefix comes first but is only known at the end: encode the body
    # into a scratch buffer that is reused for every record of the batch.
    scratch.clear()
    scratch.append(0)  # attributes
    encode_varint(timestamp_delta, scratch)
    encode_varint(offset_delta, scratch)
    _encode_bytes(key, scratch)
    _encode_bytes(value, scratch)
    encode_varint(len(headers), scratch)
    for item in headers:
        hkey, hvalue = (item.key, item.value) if isinstance(item, Header) else item
        if not isinstance(hkey, str):
            raise InvalidRecordError(f"a header key must be a str, not {type(hkey).__name__}")
        _encode_bytes(hkey.encode("utf-8"), scratch)
        _encode_bytes(hvalue, scratch)
    encode_varint(len(scratch), out)
    out += scratch


def _check_int64(what: str, value: int) -> None:
    if not INT64_MIN <= value <= INT64_MAX:
        raise InvalidRecordError(f"{what} {value} does not fit in int64")


def build_batch(
    records: Sequence[RecordInput],
    *,
    base_offset: int = 0,
    codec: Codec | int = Codec.NONE,
    timestamp_type: int = batch.CREATE_TIME,
    base_timestamp: int | None = None,
    producer_id: int = batch.NO_PRODUCER_ID,
    producer_epoch: int = batch.NO_PRODUCER_EPOCH,
    base_sequence: int = batch.NO_SEQUENCE,
    partition_leader_epoch: int = batch.NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    is_control: bool = False,
    delete_horizon_ms: int | None = None,
    last_offset_delta: int | None = None,
    max_timestamp: int | None = None,
) -> bytes:
    """Encode ``records`` as one v2 batch.

    Offset deltas default to 0, 1, 2...; records may carry their own (the
    cleaner keeps original offsets, with gaps), which must increase.
    ``last_offset_delta`` may be larger than the last record's delta, so a
    rebuilt batch keeps its span, even with no records left.

    ``base_timestamp`` defaults to the first record's timestamp (for an empty
    batch: ``max_timestamp``, else -1). With ``delete_horizon_ms`` the batch
    is flagged (attribute bit 6) and the horizon is stored as the base
    timestamp; record deltas are taken from it, so record timestamps are kept.
    ``max_timestamp`` defaults to the largest record timestamp.

    Raises InvalidRecordError for values the format cannot hold (decreasing
    offset deltas, deltas beyond int32, timestamps outside int64 or whose delta overflows it).
    """
    simple = [as_simple_record(r) for r in records]
    timestamps = [0 if r.timestamp is None else r.timestamp for r in simple]
    if max_timestamp is None:
        max_timestamp = max(timestamps) if timestamps else batch.NO_TIMESTAMP
    if delete_horizon_ms is not None:
        if base_timestamp is not None and base_timestamp != delete_horizon_ms:
            raise InvalidRecordError("a batch with a delete horizon stores it as base timestamp")
        base_ts = delete_horizon_ms
    elif base_timestamp is not None:
        base_ts = base_timestamp
    elif timestamps:
        base_ts = timestamps[0]
    else:
        # What Kafka writes for an empty batch: both timestamps are the max timestamp.
        base_ts = max_timestamp
    _check_int64("base timestamp", base_ts)
    _check_int64("max timestamp", max_timestamp)
    if timestamps:
        # Kafka reads base + delta as an int64: a record timestamp outside it would
        # come back as a different (wrapped) value.
        _check_int64("record timestamp", min(timestamps))
        _check_int64("record timestamp", max(timestamps))
    _check_int64("base offset", base_offset)

    codec = Codec(codec)
    if not simple:
        codec = Codec.NONE  # nothing to compress: Kafka writes empty batches bare
    out = bytearray(batch.HEADER_SIZE)
    scratch = bytearray()
    previous = -1
    for i, rec in enumerate(simple):
        delta = i if rec.offset_delta is None else rec.offset_delta
        if delta <= previous:
            raise InvalidRecordError("record offset deltas must increase within a batch")
        if delta > INT32_MAX:
            raise InvalidRecordError(f"offset delta {delta} does not fit in int32")
        previous = delta
        ts_delta = timestamps[i] - base_ts
        if not INT64_MIN <= ts_delta <= INT64_MAX:
            raise InvalidRecordError(
                f"timestamp {timestamps[i]} is too far from the base timestamp {base_ts}"
            )
        _encode_record(out, scratch, delta, ts_delta, rec.key, rec.value, rec.headers)
    last_delta = previous if simple else 0
    if last_offset_delta is not None:
        if last_offset_delta < last_delta:
            raise InvalidRecordError("last offset delta is below the last record's offset delta")
        if last_offset_delta > INT32_MAX:
            raise InvalidRecordError(f"last offset delta {last_offset_delta} exceeds int32")
        last_delta = last_offset_delta
    if codec != Codec.NONE:
        payload = compress(codec, memoryview(out)[batch.HEADER_SIZE :])
        del out[batch.HEADER_SIZE :]
        out += payload

    attributes = int(codec) & batch.COMPRESSION_MASK
    if timestamp_type == batch.LOG_APPEND_TIME:
        attributes |= batch.TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= batch.TRANSACTIONAL_MASK
    if is_control:
        attributes |= batch.CONTROL_MASK
    if delete_horizon_ms is not None:
        attributes |= batch.DELETE_HORIZON_MASK
    batch.HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - batch.LOG_OVERHEAD,
        partition_leader_epoch,
        batch.CURRENT_MAGIC,
        0,  # the CRC, written below once everything it covers is in place
        attributes,
        last_delta,
        base_ts,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(simple),
    )
    crc = crc32c(memoryview(out)[batch.ATTRIBUTES_OFFSET :])
    out[batch.CRC_OFFSET : batch.CRC_OFFSET + 4] = crc.to_bytes(4, "big")
    return bytes(out)


def rebuild_batch(
    header: batch.BatchHeader | None,
    records: Sequence[Record],
    *,
    codec: Codec | int | None = None,
    base_offset: int | None = None,
    last_offset: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Re-encode ``records`` (decoded from a batch with ``header``) as a new batch.

    Keeps the original base offset, producer fields, timestamp type and (unless
    ``codec`` is given) codec. ``last_offset`` keeps the batch's offset span
    when records were removed. A legacy entry has no header: pass None. With
    no records left, the batch keeps the original max timestamp, as Kafka's
    cleaner does for the empty batches it keeps.
    """
    base = (
        base_offset
        if base_offset is not None
        else (header.base_offset if header is not None else (records[0].offset if records else 0))
    )
    log_append = header is not None and header.timestamp_type == batch.LOG_APPEND_TIME
    simple = [
        SimpleRecord(
            value=r.value,
            key=r.key,
            timestamp=r.timestamp,
            headers=r.headers,
            offset_delta=r.offset - base,
        )
        for r in records
    ]
    if last_offset is None and header is not None:
        last_offset = header.last_offset
    keep_max = header is not None and (log_append or not records)
    return build_batch(
        simple,
        base_offset=base,
        codec=(header.compression if header is not None else Codec.NONE)
        if codec is None
        else codec,
        timestamp_type=batch.LOG_APPEND_TIME if log_append else batch.CREATE_TIME,
        producer_id=header.producer_id if header is not None else batch.NO_PRODUCER_ID,
        producer_epoch=header.producer_epoch if header is not None else batch.NO_PRODUCER_EPOCH,
        base_sequence=header.base_sequence if header is not None else batch.NO_SEQUENCE,
        partition_leader_epoch=(
            header.partition_leader_epoch if header is not None else batch.NO_PARTITION_LEADER_EPOCH
        ),
        is_transactional=header.is_transactional if header is not None else False,
        is_control=header.is_control if header is not None else False,
        delete_horizon_ms=delete_horizon_ms,
        last_offset_delta=None if last_offset is None else last_offset - base,
        max_timestamp=header.max_timestamp if keep_max and header is not None else None,
    )


def rebuild_from_slots(
    header: batch.BatchHeader,
    data: bytes,
    kept: Sequence[RecordSlot],
    *,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """The batch :func:`rebuild_batch` makes of the ``kept`` records, from their bytes.

    ``kept`` are slots of :func:`~seglog.records.record.scan_slots` over
    ``data``, the (decompressed) records block of a CreateTime v2 batch with
    ``header``. A kept record is copied as it is, runs of adjacent ones in one
    slice, when the batch's base timestamp stays; otherwise only its length and
    timestamp delta are written anew. The batch keeps its base offset, offset
    span, producer fields and codec, as :func:`rebuild_batch` keeps them.

    Raises InvalidRecordError where :func:`rebuild_batch` would.
    """
    old_base = header.base_timestamp
    if kept:
        timestamps = [old_base + slot[3] for slot in kept]
        max_timestamp = max(timestamps)
        _check_int64("record timestamp", min(timestamps))
        _check_int64("record timestamp", max_timestamp)
        base_ts = timestamps[0] if delete_horizon_ms is None else delete_horizon_ms
    else:
        max_timestamp = header.max_timestamp
        base_ts = max_timestamp if delete_horizon_ms is None else delete_horizon_ms
    _check_int64("base timestamp", base_ts)
    shift = old_base - base_ts
    out = bytearray(batch.HEADER_SIZE)
    if shift == 0:
        # Adjacent kept records leave the block as one slice.
        run_start = run_end = -1
        for slot in kept:
            if slot[4] != run_end:
                if run_end > 0:
                    out += data[run_start:run_end]
                run_start = slot[4]
            run_end = slot[7]
        if run_end > 0:
            out += data[run_start:run_end]
    else:
        scratch = bytearray()
        for slot in kept:
            delta = slot[3] + shift
            if not INT64_MIN <= delta <= INT64_MAX:
                raise InvalidRecordError(
                    f"timestamp {old_base + slot[3]} is too far from the base timestamp {base_ts}"
                )
            scratch.clear()
            scratch.append(data[slot[5]])  # attributes
            encode_varint(delta, scratch)
            scratch += data[slot[6] : slot[7]]
            encode_varint(len(scratch), out)
            out += scratch
    codec = header.compression if kept else Codec.NONE
    if codec != Codec.NONE:
        payload = compress(codec, memoryview(out)[batch.HEADER_SIZE :])
        del out[batch.HEADER_SIZE :]
        out += payload
    attributes = header.attributes & (
        batch.TIMESTAMP_TYPE_MASK | batch.TRANSACTIONAL_MASK | batch.CONTROL_MASK
    )
    attributes |= codec
    if delete_horizon_ms is not None:
        attributes |= batch.DELETE_HORIZON_MASK
    batch.HEADER.pack_into(
        out,
        0,
        header.base_offset,
        len(out) - batch.LOG_OVERHEAD,
        header.partition_leader_epoch,
        batch.CURRENT_MAGIC,
        0,
        attributes,
        header.last_offset_delta,
        base_ts,
        max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        len(kept),
    )
    crc = crc32c(memoryview(out)[batch.ATTRIBUTES_OFFSET :])
    out[batch.CRC_OFFSET : batch.CRC_OFFSET + 4] = crc.to_bytes(4, "big")
    return bytes(out)


__all__ = [
    "HeaderInput",
    "RecordInput",
    "SimpleRecord",
    "as_simple_record",
    "build_batch",
    "rebuild_batch",
    "rebuild_from_slots",
    "size_of_varint",
]
