"""Build v2 record batches from Python values: for producers, tools, tests and compaction.

Records are encoded into one buffer, the block is compressed when a codec is
asked for, and the 61-byte header is written in front with its CRC-32C.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from seglog.errors import InvalidRecordError
from seglog.records import batch
from seglog.records.compression import Codec, compress
from seglog.records.crc32c import crc32c
from seglog.records.record import Header, Record
from seglog.records.varint import encode_varint, size_of_varint


@dataclass(frozen=True, slots=True)
class SimpleRecord:
    """A record to write. ``timestamp`` None means "now" is the caller's business: 0 here."""

    value: bytes | None
    key: bytes | None = None
    timestamp: int | None = None
    headers: Sequence[Header | tuple[str, bytes | None]] = ()
    offset_delta: int | None = None


def _encode_bytes(data: bytes | None, out: bytearray) -> None:
    if data is None:
        encode_varint(-1, out)
    else:
        encode_varint(len(data), out)
        out += data


def _encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header | tuple[str, bytes | None]],
) -> None:
    body = bytearray(b"\x00")  # attributes
    encode_varint(timestamp_delta, body)
    encode_varint(offset_delta, body)
    _encode_bytes(key, body)
    _encode_bytes(value, body)
    encode_varint(len(headers), body)
    for item in headers:
        hkey, hvalue = (item.key, item.value) if isinstance(item, Header) else item
        _encode_bytes(hkey.encode("utf-8"), body)
        _encode_bytes(hvalue, body)
    encode_varint(len(body), out)
    out += body


def build_batch(
    records: Sequence[SimpleRecord],
    *,
    base_offset: int = 0,
    codec: Codec | int = Codec.NONE,
    timestamp_type: int = batch.CREATE_TIME,
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
    cleaner keeps original offsets, with gaps). ``last_offset_delta`` may be
    larger than the last record's delta, so a rebuilt batch keeps its span.
    With ``delete_horizon_ms`` the batch is flagged and the horizon becomes
    its base timestamp; record timestamps stay what they were.
    """
    timestamps = [0 if r.timestamp is None else r.timestamp for r in records]
    if delete_horizon_ms is not None:
        base_ts = delete_horizon_ms
    elif timestamps:
        base_ts = timestamps[0]
    else:
        base_ts = batch.NO_TIMESTAMP
    block = bytearray()
    deltas: list[int] = []
    previous = -1
    for i, rec in enumerate(records):
        delta = i if rec.offset_delta is None else rec.offset_delta
        if delta <= previous:
            raise InvalidRecordError("record offset deltas must increase within a batch")
        previous = delta
        deltas.append(delta)
        _encode_record(block, delta, timestamps[i] - base_ts, rec.key, rec.value, rec.headers)
    last_delta = deltas[-1] if deltas else 0
    if last_offset_delta is not None:
        if last_offset_delta < last_delta:
            raise InvalidRecordError("last offset delta is below the last record's offset delta")
        last_delta = last_offset_delta
    if max_timestamp is None:
        max_timestamp = max(timestamps) if timestamps else batch.NO_TIMESTAMP
    payload = compress(codec, block) if codec != Codec.NONE else bytes(block)
    attributes = int(codec) & batch.COMPRESSION_MASK
    if timestamp_type == batch.LOG_APPEND_TIME:
        attributes |= batch.TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= batch.TRANSACTIONAL_MASK
    if is_control:
        attributes |= batch.CONTROL_MASK
    if delete_horizon_ms is not None:
        attributes |= batch.DELETE_HORIZON_MASK
    size = batch.HEADER_SIZE + len(payload)
    out = bytearray(size)
    batch.HEADER.pack_into(
        out,
        0,
        base_offset,
        size - batch.LOG_OVERHEAD,
        partition_leader_epoch,
        batch.CURRENT_MAGIC,
        0,
        attributes,
        last_delta,
        base_ts,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    out[batch.HEADER_SIZE :] = payload
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
    when records were removed. A legacy entry has no header: pass None.
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
        max_timestamp=header.max_timestamp if log_append and header is not None else None,
    )


__all__ = ["SimpleRecord", "build_batch", "rebuild_batch", "size_of_varint"]
