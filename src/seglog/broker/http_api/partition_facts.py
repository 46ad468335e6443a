"""What a partition's leader tells about it: a summary, its segments, a page of its records.

Each is a question of :mod:`.partition_query`, answered by the leader as JSON
values (blocking; on a worker or channel thread).

* ``summary``: offsets and sizes from what the log keeps in memory (no file
  read), so that listing a thousand topics costs no I/O.
* ``segments``: each segment with its indexes, and what retention and the
  cleaner would do to it next, by the same rules they apply
  (:func:`seglog.storage.retention.due_segments`,
  :func:`seglog.storage.cleaner.cleanable_range`).
* ``records``: up to ``limit`` records from an offset (or the first at or after
  a timestamp), read_committed optionally: below the last stable offset,
  without control records or the records of aborted transactions.
"""

from __future__ import annotations

import time
from typing import Any

from seglog.broker.http_api import partition_query
from seglog.errors import OffsetOutOfRangeError, StorageError, UnknownTopicOrPartitionError
from seglog.records import batch
from seglog.records import record as record_codec
from seglog.storage import checkpoints, retention
from seglog.storage.cleaner import cleanable_range
from seglog.storage.key_search import text_or_base64
from seglog.storage.log import Log
from seglog.storage.log_dir import LogDir

SUMMARY = "summary"
SEGMENTS = "segments"
RECORDS = "records"

READ_BYTES = 1 << 20
"""Bytes of log read at a time while gathering a page of records."""
PAGE_BYTES = 4 << 20
"""A page stops at the record that brings its keys, values and headers to this many bytes
(it holds one record at least): a page is held whole in memory, sent between nodes and
answered as JSON, so its size is bounded whatever the records' sizes and ``limit``."""


def summary(
    log_dir: LogDir, topic: str, partition: int, args: dict[str, Any]
) -> dict[str, Any] | None:
    """The partition's offsets and sizes (from memory).

    With ``args["tolerant"]``, None for a partition that cannot be read
    (offline, or deleted meanwhile) instead of its error: one such partition
    does not hide a whole list of topics.
    """
    try:
        log = log_dir.log(topic, partition)
    except (StorageError, UnknownTopicOrPartitionError):
        if args.get("tolerant"):
            return None
        raise
    return {
        "log_start_offset": log.log_start_offset,
        "high_watermark": log.high_watermark,
        "last_stable_offset": log.last_stable_offset,
        "log_end_offset": log.log_end_offset,
        "size_bytes": log.size,
        "segment_count": len(log.segments),
    }


def _cleaner_checkpoint(log_dir: LogDir, topic: str, partition: int) -> int:
    """Where the last cleaning of the partition stopped (0: never cleaned)."""
    path = log_dir.path / checkpoints.CLEANER_OFFSET_CHECKPOINT
    try:
        offsets = checkpoints.read_offset_checkpoint(path, env=log_dir.env)
    except StorageError:  # absent or unreadable: the cleaner starts from the log start too
        return 0
    return offsets.get((topic, partition), 0)


def segments(log_dir: LogDir, topic: str, partition: int, args: dict[str, Any]) -> dict[str, Any]:
    """The partition's segments, and what retention and the cleaner would do to them next."""
    log = log_dir.log(topic, partition)
    now_ms = int(args.get("now_ms") or time.time() * 1000)
    config = log.config
    all_segments = log.segments
    due = retention.due_segments(log, now_ms)
    dirty_ratio: float | None = None
    first_dirty = first_uncleanable = -1
    eligible = False
    if config.compact:
        cleanable = cleanable_range(log, _cleaner_checkpoint(log_dir, topic, partition), now_ms)
        dirty_ratio = cleanable.dirty_ratio
        first_dirty = cleanable.first_dirty_offset
        first_uncleanable = cleanable.first_uncleanable_offset
        # The cleaner's own test (LogCleaner.grab_filthiest_log).
        eligible = cleanable.dirty_bytes > 0 and (
            dirty_ratio > config.min_cleanable_dirty_ratio or cleanable.max_lag_exceeded
        )
    rows = []
    for i, segment in enumerate(all_segments):
        active = i == len(all_segments) - 1
        next_offset = all_segments[i + 1].base_offset if not active else log.log_end_offset
        cleaner: str | None = None
        if config.compact and not active:
            if next_offset <= first_dirty:
                cleaner = "cleaned"
            elif eligible and segment.base_offset < first_uncleanable:
                cleaner = "next"
        max_timestamp = segment.max_timestamp_so_far
        rows.append(
            {
                "base_offset": segment.base_offset,
                "next_offset": next_offset,
                "size_bytes": segment.size,
                "max_timestamp": None if max_timestamp == batch.NO_TIMESTAMP else max_timestamp,
                "index_entries": segment.offset_index.entries,
                "index_max_entries": segment.offset_index.max_entries,
                "time_index_entries": segment.time_index.entries,
                "time_index_max_entries": segment.time_index.max_entries,
                "key_index": segment.key_index_enabled
                and (active or segment.key_index_path.exists()),
                "active": active,
                "past_retention": i < due,
                "cleaner": cleaner,
            }
        )
    return {
        "log_start_offset": log.log_start_offset,
        "high_watermark": log.high_watermark,
        "last_stable_offset": log.last_stable_offset,
        "now_ms": now_ms,
        "retention_ms": config.retention_ms,
        "retention_bytes": config.retention_bytes,
        "cleanup_policy": ",".join(
            p for p, on in (("compact", config.compact), ("delete", config.delete)) if on
        ),
        "dirty_ratio": dirty_ratio,
        "min_cleanable_dirty_ratio": config.min_cleanable_dirty_ratio,
        "segments": rows,
    }


def _record_json(topic: str, partition: int, record: record_codec.Record) -> dict[str, Any]:
    """A record in the shape of the key lookup's (its key may be null here)."""
    key, key_encoding = text_or_base64(record.key)
    value, value_encoding = text_or_base64(record.value)
    headers = []
    for header in record.headers:
        text, encoding = text_or_base64(header.value)
        headers.append({"key": header.key, "value": text, "value_encoding": encoding})
    return {
        "topic": topic,
        "partition": partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": key,
        "key_encoding": key_encoding,
        "value": value,
        "value_encoding": value_encoding,
        "headers": headers,
    }


def _size(record: record_codec.Record) -> int:
    """The bytes a record's key, value and headers take."""
    return (
        len(record.key or b"")
        + len(record.value or b"")
        + sum(len(h.key) + len(h.value or b"") for h in record.headers)
    )


def _aborted(log: Log, start: int, end: int) -> dict[int, list[tuple[int, int]]]:
    spans: dict[int, list[tuple[int, int]]] = {}
    for txn in log.aborted_transactions(start, end):
        spans.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    return spans


def _entries(data: bytes) -> list[tuple[batch.BatchHeader | None, list[record_codec.Record]]]:
    """Each whole entry of ``data``: its v2 header (None for a legacy one) and records."""
    view = memoryview(data)
    out: list[tuple[batch.BatchHeader | None, list[record_codec.Record]]] = []
    position = 0
    while position + batch.LOG_OVERHEAD <= len(view):
        _, size = batch.peek_offset_and_size(view, position)
        if position + size > len(view):
            break
        entry = view[position : position + size]
        header = None
        if batch.peek_magic(entry, 0) == batch.CURRENT_MAGIC:
            header = next(iter(batch.iter_headers(entry, check_crc=False)))[1]
        out.append((header, record_codec.decode_entry(entry)))
        position += size
    return out


def records(log_dir: LogDir, topic: str, partition: int, args: dict[str, Any]) -> dict[str, Any]:
    """Up to ``args["limit"]`` records from ``args["offset"]`` or ``args["timestamp"]``."""
    log = log_dir.log(topic, partition)
    limit = int(args["limit"])
    read_committed = bool(args.get("read_committed"))
    log_start = log.log_start_offset
    end = log.last_stable_offset if read_committed else log.high_watermark
    if args.get("timestamp") is not None:
        found = log.find_offset_by_timestamp(int(args["timestamp"]))
        position = end if found is None else found.offset
    else:
        position = int(args["offset"])
    position = max(position, log_start)
    out: list[dict[str, Any]] = []
    size = 0
    aborted = _aborted(log, position, end) if read_committed and position < end else {}
    while len(out) < limit and size < PAGE_BYTES and position < end:
        try:
            result = log.read(position, READ_BYTES, max_offset=end)
        except OffsetOutOfRangeError:
            break  # retention moved the log start past ``position`` meanwhile
        if result.data is None:
            break
        # The region holds its segment's file open until released: a segment that
        # retention or the cleaner removes meanwhile is still read whole.
        with result.data.region as region:
            data = log_dir.env.pread(region.fd, region.length, region.position, name=region.path)
        moved = False
        for header, batch_records in _entries(data):
            skip = False
            if header is not None and read_committed:
                skip = header.is_control or (
                    header.is_transactional
                    and any(
                        first <= header.base_offset <= last
                        for first, last in aborted.get(header.producer_id, ())
                    )
                )
            for rec in batch_records:
                if rec.offset < position or rec.offset >= end:
                    continue
                if not skip and not (header is not None and header.is_control):
                    out.append(_record_json(topic, partition, rec))
                    size += _size(rec)
                position = rec.offset + 1
                moved = True
                if len(out) >= limit or size >= PAGE_BYTES:
                    break
            full = len(out) >= limit or size >= PAGE_BYTES
            if header is not None and header.last_offset >= position and not full:
                # A batch emptied by compaction, or a control batch: past it.
                position = min(header.last_offset + 1, end)
                moved = True
            if full:
                break
        if not moved:
            break
    return {
        "records": out,
        "next_offset": position,
        "log_start_offset": log_start,
        "high_watermark": log.high_watermark,
    }


partition_query.register(SUMMARY, summary)
partition_query.register(SEGMENTS, segments)
partition_query.register(RECORDS, records)
