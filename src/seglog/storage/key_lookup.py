"""Lookups by key over a log directory's files, read in place and read-only.

The directory may belong to a running broker, so this module follows
:mod:`seglog.storage.reader`'s rules: nothing is written or locked, a
``.log`` is read with ``pread`` from a descriptor opened read-only, and the
only file mapped is a sealed ``.keyindex``, which the broker never truncates
(it writes one whole under another name and renames it into place; a map
outlives the rename or the deletion of the file it maps).

For each segment the lookup uses the segment's ``.keyindex`` when it covers
the segment's ``.log`` exactly (:meth:`.KeyIndexFile.load` refuses a stale or
missing one). Otherwise the index is built in memory from the log's bytes, up
to the end of its last whole batch: the active segment always (its index lives
in the broker's memory only), a rolled segment the broker has not sealed yet,
and every segment of a topic that keeps no key index (a scan, which
:func:`topic_keeps_key_index` lets a caller tell its user about).

What is returned is what :meth:`seglog.storage.log.Log.find` would return,
bounded by what the files say rather than by a broker's memory: offsets from
the log start offset (``log-start-offset-checkpoint``, else the first segment)
up to the end of the log (``read_uncommitted``; a reader of the files knows no
high watermark) or the last stable offset (``read_committed``, which also
skips the records of aborted transactions, from the ``.txnindex`` files).
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import os
from collections.abc import Collection, Iterator
from pathlib import Path

from seglog.errors import CorruptIndexError, CorruptRecordError, SeglogError
from seglog.records import batch
from seglog.storage import filenames, key_index, reader
from seglog.storage.key_index import key_hash
from seglog.storage.key_search import FoundRecord, KeyIndexLike, search_segment
from seglog.storage.reader import PartitionReader, SegmentReader

__all__ = [
    "UnknownTopicError",
    "find_in_log_dir",
    "find_in_partition",
    "find_keys_in_range",
    "topic_keeps_key_index",
    "topic_partitions",
]

#: The topic config that turns key indexes on.
KEY_INDEX_ENABLE = "key.index.enable"


class UnknownTopicError(SeglogError, LookupError):
    """The log directory holds no such topic or partition."""


def topic_partitions(root: Path, topic: str) -> list[int]:
    """The partitions of ``topic`` this directory holds or defines, in order.

    UnknownTopicError when it neither holds nor defines any.
    """
    held = {p for (t, p) in reader.partition_dirs(root) if t == topic}
    spec = reader.topic_definitions(root).get(topic)
    defined = set(range(spec.partitions)) if spec is not None else set()
    partitions = sorted(held | defined)
    if not partitions:
        raise UnknownTopicError(f"{root} has no topic '{topic}'")
    return partitions


def topic_keeps_key_index(root: Path, topic: str) -> bool:
    """Whether ``topic`` keeps key indexes: its ``key.index.enable`` override, else whether
    any of its segments has a ``.keyindex`` (the broker's default is not in the directory)."""
    spec = reader.topic_definitions(root).get(topic)
    if spec is not None and KEY_INDEX_ENABLE in spec.configs:
        return spec.configs[KEY_INDEX_ENABLE].strip().lower() == "true"
    for (name, _), directory in reader.partition_dirs(root).items():
        if name != topic:
            continue
        try:
            if any(n.endswith(filenames.KEY_INDEX_SUFFIX) for n in os.listdir(directory)):
                return True
        except FileNotFoundError:
            continue  # deleted since the listing
    return False


def find_in_log_dir(
    path: str | os.PathLike[str],
    topic: str,
    key: bytes,
    *,
    partition: int | None = None,
    limit: int | None = None,
    start_offset: int | None = None,
    end_offset: int | None = None,
    from_ms: int | None = None,
    to_ms: int | None = None,
    read_committed: bool = False,
) -> list[FoundRecord]:
    """The records of ``topic`` with ``key`` in the log directory ``path``, newest first.

    One partition (newest first by offset), or every partition of the topic
    merged newest first by timestamp, then offset (as the broker's HTTP API
    merges them), at most ``limit`` (None: all). Offsets in
    ``[start_offset, end_offset)`` and timestamps in ``[from_ms, to_ms]``,
    each optional. UnknownTopicError for a topic or
    partition the directory neither holds nor defines.
    """
    root = Path(path)
    if not root.is_dir():
        raise UnknownTopicError(f"{root} is not a log directory")
    partitions = topic_partitions(root, topic)
    if partition is not None:
        if partition not in partitions:
            raise UnknownTopicError(f"{root} has no partition {topic}-{partition}")
        partitions = [partition]
    starts = reader.log_start_offsets(root)
    parts: list[list[FoundRecord]] = []
    for number in partitions:
        directory = root / filenames.partition_dir_name(topic, number)
        try:
            part = PartitionReader(directory)
        except FileNotFoundError:
            continue  # defined, not written yet: nothing to find
        parts.append(
            find_in_partition(
                part,
                key,
                log_start=starts.get((topic, number), 0),
                limit=limit,
                start_offset=start_offset,
                end_offset=end_offset,
                from_ms=from_ms,
                to_ms=to_ms,
                read_committed=read_committed,
                topic=topic,
                partition=number,
            )
        )
    # Each partition keeps its own order (by offset, whatever the timestamps): a merge.
    merged = heapq.merge(*parts, key=lambda r: (-r.timestamp, -r.offset, r.partition))
    return list(itertools.islice(merged, limit))


class _ListingChanged(Exception):
    """A segment listed by the reader is gone (retention, or the cleaner's swap)."""


#: How often a lookup lists a partition's segments again when one of them went
#: while it read: a cleaner's swap replaces segments, and the records it kept are
#: in the new ones. After this many, a vanished segment is passed over.
_RELISTS = 5


def find_in_partition(
    part: PartitionReader,
    key: bytes,
    *,
    log_start: int = 0,
    limit: int | None = None,
    start_offset: int | None = None,
    end_offset: int | None = None,
    from_ms: int | None = None,
    to_ms: int | None = None,
    read_committed: bool = False,
    topic: str = "",
    partition: int = -1,
) -> list[FoundRecord]:
    """One partition's records with ``key``, newest first (see :func:`find_in_log_dir`).

    ``log_start`` is the partition's ``log-start-offset-checkpoint`` entry (0
    when it has none): no record below it, nor below the first segment, is
    returned.
    """
    for attempt in range(_RELISTS + 1):
        try:
            return _find_in_partition(
                part,
                key,
                log_start,
                limit,
                start_offset,
                end_offset,
                from_ms,
                to_ms,
                read_committed,
                topic,
                partition,
                relist=attempt < _RELISTS,
            )
        except _ListingChanged:
            part = PartitionReader(part.directory)
    raise AssertionError("unreachable: the last attempt passes vanished segments over")


def _find_in_partition(
    part: PartitionReader,
    key: bytes,
    log_start: int,
    limit: int | None,
    start_offset: int | None,
    end_offset: int | None,
    from_ms: int | None,
    to_ms: int | None,
    read_committed: bool,
    topic: str,
    partition: int,
    *,
    relist: bool,
) -> list[FoundRecord]:
    lower, upper = _bounds(part, log_start, start_offset, end_offset, read_committed)
    if lower >= upper or (limit is not None and limit <= 0):
        return []
    aborted = reader.AbortedTransactions(part, lower) if read_committed else None
    found: list[FoundRecord] = []
    for segment, index in _segments_newest_first(part, lower, upper, relist=relist):
        for record in search_segment(
            index,
            segment.read,
            key,
            start_offset=lower,
            end_offset=upper,
            from_ms=from_ms,
            to_ms=to_ms,
        ):
            if _aborted(aborted, record):
                continue
            found.append(record)
            if limit is not None and len(found) >= limit:
                break
        if limit is not None and len(found) >= limit:
            break
    return [dataclasses.replace(r, topic=topic, partition=partition) for r in found]


def find_keys_in_range(
    part: PartitionReader,
    keys: Collection[bytes],
    start_offset: int,
    end_offset: int,
    *,
    log_start: int = 0,
    read_committed: bool = False,
) -> list[tuple[FoundRecord, int]]:
    """Every record of ``[start_offset, end_offset)`` whose key is one of ``keys``, in offset
    order, each with its batch's timestamp type (what a reader of every batch would give).

    What Spark's files mode reads for a ``key = ...`` / ``key IN (...)`` filter;
    bounds, isolation and the log start as :func:`find_in_partition`.
    """
    for attempt in range(_RELISTS + 1):
        try:
            return _find_keys_in_range(
                part,
                keys,
                start_offset,
                end_offset,
                log_start,
                read_committed,
                relist=attempt < _RELISTS,
            )
        except _ListingChanged:
            part = PartitionReader(part.directory)
    raise AssertionError("unreachable: the last attempt passes vanished segments over")


def _find_keys_in_range(
    part: PartitionReader,
    keys: Collection[bytes],
    start_offset: int,
    end_offset: int,
    log_start: int,
    read_committed: bool,
    *,
    relist: bool,
) -> list[tuple[FoundRecord, int]]:
    lower, upper = _bounds(part, log_start, start_offset, end_offset, read_committed)
    if lower >= upper or not keys:
        return []
    aborted = reader.AbortedTransactions(part, lower) if read_committed else None
    found: dict[int, tuple[FoundRecord, int]] = {}
    for segment, index in _segments_newest_first(part, lower, upper, relist=relist):
        batch_types: dict[int, int] = {}
        for key in set(keys):
            positions = {c.offset: c.batch_position for c in index.candidates(key_hash(key))}
            for record in search_segment(
                index, segment.read, key, start_offset=lower, end_offset=upper
            ):
                if _aborted(aborted, record):
                    continue
                position = positions[record.offset]
                if position not in batch_types:
                    # The header alone (read_header wants the whole batch): the search
                    # just read and checked this batch.
                    head = segment.read(position, batch.HEADER_SIZE)
                    header = batch.BatchHeader._make(batch.HEADER.unpack_from(head))
                    batch_types[position] = header.timestamp_type
                found[record.offset] = (record, batch_types[position])
    return [found[offset] for offset in sorted(found)]


def _bounds(
    part: PartitionReader,
    log_start: int,
    start_offset: int | None,
    end_offset: int | None,
    read_committed: bool,
) -> tuple[int, int]:
    """``[lower, upper)``: from the log start, up to the end of the log or the last stable
    offset, within the bounds asked for (empty when the partition has no segment)."""
    if not part.bases:
        return 0, 0
    tail = part.next_offset()
    lower = min(max(part.bases[0], log_start), tail)
    upper = reader.last_stable_offset(part, tail) if read_committed else tail
    if start_offset is not None:
        lower = max(lower, start_offset)
    if end_offset is not None:
        upper = min(upper, end_offset)
    return lower, upper


def _aborted(aborted: reader.AbortedTransactions | None, record: FoundRecord) -> bool:
    return (
        aborted is not None
        and record.transactional
        and aborted.holds_offset(record.producer_id, record.offset)
    )


def _segments_newest_first(
    part: PartitionReader, lower: int, upper: int, *, relist: bool = False
) -> Iterator[tuple[SegmentReader, KeyIndexLike]]:
    """The segments that may hold offsets in ``[lower, upper)``, newest first, each open with
    its key index while the caller searches it.

    A listed segment that is gone raises _ListingChanged with ``relist`` (the
    caller lists again: a swap's new segments hold what it kept), else is passed over.
    """
    bases = part.bases
    for i in range(len(bases) - 1, -1, -1):
        base = bases[i]
        segment_end = bases[i + 1] if i + 1 < len(bases) else None
        if segment_end is not None and segment_end <= lower:
            return  # this one and every older one lie below the range
        if base >= upper:
            continue
        try:
            segment = part.open_segment(base)
        except FileNotFoundError:
            if relist:
                raise _ListingChanged from None
            continue  # removed (retention, compaction) since the listing
        with segment:
            index = _segment_index(segment, is_last=segment_end is None)
            if index is None:
                continue
            try:
                yield segment, index
            finally:
                if isinstance(index, key_index.KeyIndexFile):
                    index.close()


def _segment_index(segment: SegmentReader, *, is_last: bool) -> KeyIndexLike | None:
    """The segment's sealed ``.keyindex`` when it covers the log, else one built in memory.

    None when the log's bytes cannot be indexed (a batch that does not parse,
    damage a reader of the files cannot repair): it is passed over.
    """
    if not is_last:
        path = filenames.key_index_path(segment.path.parent, segment.base_offset)
        try:
            return key_index.KeyIndexFile.load(path, segment.base_offset, segment.size)
        except CorruptIndexError:
            pass  # missing or stale: built below
    # Only whole batches: the active segment may end in one being written.
    end = segment.tail().position
    try:
        return key_index.build(segment.base_offset, segment.read, end)
    except CorruptRecordError:
        return None
