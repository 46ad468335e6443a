"""Checks an append against the log's rules and assigns its offsets, in place.

This is the produce hot path. For each v2 batch it reads the 61-byte header,
checks the CRC-32C, the sizes and the offset span, then patches the base
offset: eight bytes outside the CRC. Records are decoded only when a rule
needs them: keys on a compacted topic, the lower timestamp bound when
``message.timestamp.before.max.ms`` is set, and a topic
``compression.type`` that differs from the producer's codec.

Legacy (magic 0 and 1) message sets are converted to v2 first, as a Kafka
4.x broker does for the old clients it still accepts.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from seglog.config import LONG_MAX, LogConfig
from seglog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    UnsupportedMagicError,
)
from seglog.records import batch, legacy
from seglog.records.compression import Codec
from seglog.records.crc32c import crc32c, crc32c_raw
from seglog.records.log_entries import EntryInfo
from seglog.storage.producer_state import MAX_SEQUENCE, ProducerBatch

_BASE_OFFSET = struct.Struct(">q")
_HEADER_SIZE = batch.HEADER_SIZE
_LOG_OVERHEAD = batch.LOG_OVERHEAD
_CRC_START = batch.ATTRIBUTES_OFFSET
_MAGIC_OFFSET = batch.MAGIC_OFFSET
_V2 = batch.CURRENT_MAGIC
_CLIENT_FORBIDDEN_ATTRIBUTES = batch.CONTROL_MASK | batch.DELETE_HORIZON_MASK
_CODEC_MASK = batch.COMPRESSION_MASK
_TRANSACTIONAL_MASK = batch.TRANSACTIONAL_MASK
_NO_TIMESTAMP = batch.NO_TIMESTAMP
_unpack_header = batch.HEADER.unpack_from
_crc32c = crc32c_raw

_CODEC_BY_TOPIC_COMPRESSION = {
    "uncompressed": Codec.NONE,
    "gzip": Codec.GZIP,
    "snappy": Codec.SNAPPY,
    "lz4": Codec.LZ4,
    "zstd": Codec.ZSTD,
}


class ValidatedAppend(NamedTuple):
    """An append ready to be written: the bytes, their entries and a summary.

    A named tuple: one is built per append, and a frozen dataclass's
    ``__init__`` costs several times as much.
    """

    chunks: list[bytes | bytearray | memoryview]
    size: int
    entries: list[EntryInfo]
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    record_count: int
    log_append_time: int
    #: The batches written by idempotent producers, for their sequence checks.
    producer_batches: list[ProducerBatch]


def validate_and_assign(
    records: bytes | bytearray | memoryview,
    config: LogConfig,
    next_offset: int,
    now_ms: int,
    partition: str = "",
) -> ValidatedAppend:
    """Validate a producer's ``records`` and assign offsets from ``next_offset``.

    Raises a :class:`~seglog.errors.SeglogError` subclass naming Kafka's error
    (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_RECORD, INVALID_TIMESTAMP);
    nothing is written in that case. A batch refused for some of its records
    raises with ``record_errors`` naming each of them, in Kafka's words, where
    ``partition`` ("topic-0") names the log. Callers try
    :func:`validate_single_batch` first.
    """
    if len(records) == 0:
        raise InvalidRecordError("the append holds no record batches")
    magic = batch.peek_magic(records, 0)
    if magic in (0, 1):
        records = legacy.convert_to_v2(memoryview(records))
    elif magic != batch.CURRENT_MAGIC:
        raise UnsupportedMagicError(f"the append has unknown record batch magic {magic}")
    view = memoryview(records)
    log_append = config.message_timestamp_type == "LogAppendTime"
    target_codec = _CODEC_BY_TOPIC_COMPRESSION.get(config.compression_type)

    headers: list[tuple[int, batch.BatchHeader]] = []
    position = 0
    end = len(view)
    # The fast path's bounds: a batch inside them breaks no rule checked below.
    max_size = config.max_message_bytes
    after = config.message_timestamp_after_max_ms
    max_timestamp_allowed = LONG_MAX if log_append or after == LONG_MAX else now_ms + after
    check_before = not log_append and config.message_timestamp_before_max_ms != LONG_MAX
    compact = config.compact
    unpack_header = batch.HEADER.unpack_from
    make_header = batch.BatchHeader._make
    while position < end:
        # The common case first: a whole v2 batch with a valid CRC that breaks no
        # rule, judged from its header unpacked once (batch.BatchHeader, without
        # read_header's checks, which raise). Anything else takes the checks
        # below, which raise the precise error.
        if end - position >= _HEADER_SIZE and view[position + _MAGIC_OFFSET] == _V2:
            header = make_header(unpack_header(view, position))
            size = header.batch_length + _LOG_OVERHEAD
            count = header.record_count
            if (
                _HEADER_SIZE <= size <= max_size
                and position + size <= end
                and count > 0
                and count == header.last_offset_delta + 1
                and not header.attributes & _CLIENT_FORBIDDEN_ATTRIBUTES
                and header.max_timestamp <= max_timestamp_allowed
                and crc32c(view[position + _CRC_START : position + size]) == header.crc
            ):
                # The rules that need the records decoded (the batch's max
                # timestamp already bounds every record from above).
                if check_before or compact:
                    _check_records(
                        view, position, header, config, now_ms, compact, check_before, partition
                    )
                headers.append((position, header))
                position += size
                continue
        if batch.peek_magic(view, position) != batch.CURRENT_MAGIC:
            raise InvalidRecordError(
                "an append mixes record batch formats: only magic 2 may follow magic 2"
            )
        header = batch.validate(view, position)
        if header.size > config.max_message_bytes:
            raise RecordTooLargeError(
                f"the record batch at position {position} is {header.size} bytes, "
                f"larger than max.message.bytes ({config.max_message_bytes})"
            )
        if header.is_control:
            raise InvalidRecordError("clients may not write control batches")
        if header.record_count <= 0:
            raise InvalidRecordError("a record batch must hold at least one record")
        if header.record_count != header.last_offset_delta + 1:
            raise InvalidRecordError(
                f"inconsistent batch offset range: {header.record_count} records but "
                f"last offset delta {header.last_offset_delta}"
            )
        if header.has_delete_horizon:
            raise InvalidRecordError("clients may not set the delete horizon flag")
        check_timestamps = not log_append and (
            check_before or config.message_timestamp_after_max_ms != LONG_MAX
        )
        if check_timestamps or compact:
            _check_records(
                view, position, header, config, now_ms, compact, check_timestamps, partition
            )
        headers.append((position, header))
        position += header.size

    rewritten = False
    if target_codec is not None and any(h.compression != target_codec for _, h in headers):
        view = memoryview(_recompress(view, headers, target_codec))
        headers = list(batch.iter_headers(view, check_crc=False))
        rewritten = True
    if log_append and not rewritten:
        # LogAppendTime changes CRC-covered bytes: work on a copy we own.
        view = memoryview(bytearray(view))
        rewritten = True

    # The caller's buffer is never modified: without a rewrite, each batch goes
    # out as its patched 8-byte base offset plus a view of the rest (pwritev).
    chunks: list[bytes | bytearray | memoryview] = []
    entries: list[EntryInfo] = []
    offset = next_offset
    max_timestamp = batch.NO_TIMESTAMP
    offset_of_max = next_offset
    record_count = 0
    producer_batches: list[ProducerBatch] = []
    for position, header in headers:
        if rewritten:
            batch.patch_base_offset(view, position, offset)
            if log_append:
                batch.apply_log_append_time(view, position, now_ms)
        else:
            chunks.append(_BASE_OFFSET.pack(offset))
            chunks.append(view[position + 8 : position + header.size])
        batch_max = now_ms if log_append else header.max_timestamp
        last = offset + header.last_offset_delta
        entries.append(
            EntryInfo(position, header.size, 2, offset, last, batch_max, header.record_count)
        )
        if header.producer_id >= 0:
            producer_batches.append(_producer_batch(header, offset, last, batch_max))
        if batch_max > max_timestamp:
            max_timestamp, offset_of_max = batch_max, last
        record_count += header.record_count
        offset = last + 1
    if rewritten:
        chunks = [view]
    return ValidatedAppend(
        chunks=chunks,
        size=len(view),
        entries=entries,
        first_offset=next_offset,
        last_offset=offset - 1,
        max_timestamp=max_timestamp,
        offset_of_max_timestamp=offset_of_max,
        record_count=record_count,
        log_append_time=now_ms if log_append else batch.NO_TIMESTAMP,
        producer_batches=producer_batches,
    )


class FastRules(NamedTuple):
    """What the single-batch fast path checks, drawn from a config once."""

    #: max.message.bytes
    max_size: int
    #: message.timestamp.after.max.ms, or None when it bounds nothing (Long.MAX_VALUE).
    after_ms: int | None
    #: The codec the topic requires (compression.type), or None for "producer".
    codec: int | None


def fast_rules(config: LogConfig) -> FastRules | None:
    """The fast path's rules under ``config``, or None if it needs the records decoded
    or rewritten (compaction's keys, message.timestamp.before.max.ms, LogAppendTime)."""
    if (
        config.compact
        or config.message_timestamp_type == "LogAppendTime"
        or config.message_timestamp_before_max_ms != LONG_MAX
    ):
        return None
    after = config.message_timestamp_after_max_ms
    return FastRules(
        config.max_message_bytes,
        None if after == LONG_MAX else after,
        _CODEC_BY_TOPIC_COMPRESSION.get(config.compression_type),
    )


def validate_single_batch(
    records: bytes | bytearray | memoryview, rules: FastRules, next_offset: int, now_ms: int
) -> ValidatedAppend | None:
    """The append of ``records`` if it is one whole v2 batch that breaks no rule of
    ``rules`` (:func:`fast_rules` of the log's config; the CRC included) and needs no
    rewrite; else None, and :func:`validate_and_assign` finds the same answer or
    raises the precise error.

    The one-batch append is what producers send, one per partition and request:
    this is the produce path's per-append cost, so it reads the header once into
    locals and builds no intermediate objects.
    """
    view = memoryview(records)
    size = len(view)
    if size < _HEADER_SIZE or view[_MAGIC_OFFSET] != _V2:
        return None
    (
        _,
        batch_length,
        _,
        _,
        crc,
        attributes,
        last_delta,
        _,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = _unpack_header(view, 0)
    codec = rules.codec
    after = rules.after_ms
    if not (
        batch_length + _LOG_OVERHEAD == size <= rules.max_size
        and count > 0
        and count == last_delta + 1
        and not attributes & _CLIENT_FORBIDDEN_ATTRIBUTES
        and (after is None or max_timestamp <= now_ms + after)
        and (codec is None or attributes & _CODEC_MASK == codec)
        and (producer_id < 0 or base_sequence >= 0)
        and _crc32c(view[_CRC_START:]) == crc
    ):
        return None
    last = next_offset + last_delta
    if producer_id < 0:
        producer_batches: list[ProducerBatch] = []
    else:
        # Sequence numbers wrap from 2**31 - 1 to 0.
        last_sequence = base_sequence + last_delta
        if last_sequence > MAX_SEQUENCE:
            last_sequence -= MAX_SEQUENCE + 1
        producer_batches = [
            ProducerBatch(
                producer_id,
                producer_epoch,
                base_sequence,
                last_sequence,
                next_offset,
                last,
                max_timestamp,
                bool(attributes & _TRANSACTIONAL_MASK),
            )
        ]
    entries = [EntryInfo(0, size, _V2, next_offset, last, max_timestamp, count)]
    if max_timestamp > _NO_TIMESTAMP:
        offset_of_max = last
    else:  # as the full path: a batch without timestamps sets no maximum
        max_timestamp, offset_of_max = _NO_TIMESTAMP, next_offset
    return ValidatedAppend(
        [_BASE_OFFSET.pack(next_offset), view[8:]],
        size,
        entries,
        next_offset,
        last,
        max_timestamp,
        offset_of_max,
        count,
        batch.NO_TIMESTAMP,
        producer_batches,
    )


def _producer_batch(
    header: batch.BatchHeader, first_offset: int, last_offset: int, max_timestamp: int
) -> ProducerBatch:
    if header.base_sequence < 0:
        raise InvalidRecordError(
            f"a batch of producer {header.producer_id} has the invalid sequence number "
            f"{header.base_sequence}"
        )
    return ProducerBatch.from_header(header, first_offset, last_offset, max_timestamp)


def _java_long(value: int) -> int:
    """``value`` wrapped to a signed 64-bit integer, as Kafka's arithmetic shows it."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def _check_records(
    view: memoryview,
    position: int,
    header: batch.BatchHeader,
    config: LogConfig,
    now_ms: int,
    check_keys: bool,
    check_timestamps: bool,
    partition: str,
) -> None:
    """Kafka's per-record rules (LogValidator.validateRecord): every bad record is named.

    Each record is judged on its key (a compacted topic needs one), then on
    its timestamp (within ``message.timestamp.before.max.ms`` behind and
    ``message.timestamp.after.max.ms`` ahead of the broker's time). The batch
    is refused with one (index, message) per bad record; with INVALID_TIMESTAMP
    if any record's timestamp is out of range, else INVALID_RECORD.
    """
    from seglog.records import record as record_codec

    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    errors: list[tuple[int, str]] = []
    bad_timestamp = False
    for index, rec in enumerate(record_codec.decode_records(view, position)):
        if check_keys and rec.key is None:
            errors.append(
                (
                    index,
                    "Compacted topic cannot accept message without key in topic partition "
                    + partition,
                )
            )
        elif (
            check_timestamps
            and rec.timestamp != batch.NO_TIMESTAMP
            and (now_ms - rec.timestamp > before or rec.timestamp - now_ms > after)
        ):
            bad_timestamp = True
            errors.append(
                (
                    index,
                    f"Timestamp {rec.timestamp} of message with offset {rec.offset} is out of "
                    f"range. The timestamp should be within [{_java_long(now_ms - before)}, "
                    f"{_java_long(now_ms + after)}]",
                )
            )
    if not errors:
        return
    record_errors = tuple(errors)
    if bad_timestamp:
        raise InvalidTimestampError(
            "One or more records have been rejected due to invalid timestamp", record_errors
        )
    shown = ", ".join(
        f"RecordError(batchIndex={index}, message='{message}')" for index, message in errors[:3]
    )
    raise InvalidRecordError(
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]",
        record_errors,
    )


def _recompress(
    view: memoryview, headers: list[tuple[int, batch.BatchHeader]], codec: Codec
) -> bytearray:
    from seglog.records import builder
    from seglog.records import record as record_codec

    out = bytearray()
    for position, header in headers:
        if header.compression == codec:
            out += view[position : position + header.size]
            continue
        records = record_codec.decode_records(view, position)
        out += builder.rebuild_batch(header, records, codec=codec)
    if not out:
        raise CorruptRecordError("recompression produced no data")
    return out
