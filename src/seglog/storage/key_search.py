"""Finding a key's records in one segment through its key index.

The index names candidates (records whose key *hashes* like the one sought);
each is read from the log and kept only when its key is the one sought, so a
hash collision never returns another key's record (RocketMQ's IndexFile once
did, apache/rocketmq#3613). Filters by offset and time are applied to the
records themselves; a batch whose max timestamp is before the time range is
not read at all.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from seglog.errors import CorruptRecordError
from seglog.records import batch
from seglog.records.record import decode_record, records_block
from seglog.storage.key_index import Candidate, key_hash

ReadAt = Callable[[int, int], bytes]


class KeyIndexLike(Protocol):
    """What a search needs of an index: :class:`~.key_index.KeyIndexBuilder` or ``KeyIndexFile``."""

    def candidates(self, hash_: int) -> Iterator[Candidate]:
        """The records whose key hashes to ``hash_``, newest first."""
        ...


@dataclass(frozen=True, slots=True)
class FoundRecord:
    """A record found by its key, with where it lies."""

    offset: int
    timestamp: int
    key: bytes
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    producer_id: int
    transactional: bool
    partition: int = -1
    topic: str = ""


def text_or_base64(data: bytes | None) -> tuple[str | None, str | None]:
    """``(text, "utf8")`` where ``data`` is UTF-8, else ``(base64, "base64")``; None: null."""
    if data is None:
        return None, None
    try:
        return data.decode("utf-8"), "utf8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def record_json(record: FoundRecord) -> dict[str, Any]:
    """A found record as JSON values, the shape the HTTP API and ``seglog find`` print:
    bytes as text where they are UTF-8, else base64, with their ``*_encoding``."""
    key, key_encoding = text_or_base64(record.key)
    value, value_encoding = text_or_base64(record.value)
    headers = []
    for name, header_value in record.headers:
        text, encoding = text_or_base64(header_value)
        headers.append({"key": name, "value": text, "value_encoding": encoding})
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": key,
        "key_encoding": key_encoding,
        "value": value,
        "value_encoding": value_encoding,
        "headers": headers,
    }


def search_segment(
    index: KeyIndexLike,
    read_at: ReadAt,
    key: bytes,
    *,
    start_offset: int | None = None,
    end_offset: int | None = None,
    from_ms: int | None = None,
    to_ms: int | None = None,
) -> Iterator[FoundRecord]:
    """The segment's records with ``key``, newest first.

    Offsets in ``[start_offset, end_offset)``, timestamps in ``[from_ms, to_ms]``
    (each bound optional). ``read_at(position, size)`` reads the segment's log.
    """
    # A batch holds many records of one key more often than not (a producer's
    # linger): decode each batch's block once per search.
    last_position = -1
    header: batch.BatchHeader | None = None
    block: memoryview | None = None
    array = None
    for candidate in index.candidates(key_hash(key)):
        offset = candidate.offset
        if start_offset is not None and offset < start_offset:
            break  # newest first: every later candidate is older
        if end_offset is not None and offset >= end_offset:
            continue
        if from_ms is not None and candidate.batch_max_timestamp < from_ms:
            continue
        if candidate.batch_position != last_position:
            header, block = _read_batch(read_at, candidate.batch_position)
            array = None
            last_position = candidate.batch_position
        if (
            header is None
            or block is None
            or not header.base_offset <= offset <= header.last_offset
        ):
            continue  # the log changed under a reader: nothing to find here
        if array is None:
            import numpy

            array = numpy.frombuffer(block, dtype=numpy.uint8)
        from seglog.storage import _key_scan

        start, end = _key_scan.find_record(
            array, 0, len(block), header.record_count, offset - header.base_offset
        )
        if start < 0:
            continue
        record = decode_record(block, start, end, header)
        if record.key != key:
            continue
        if (from_ms is not None and record.timestamp < from_ms) or (
            to_ms is not None and record.timestamp > to_ms
        ):
            continue
        yield FoundRecord(
            record.offset,
            record.timestamp,
            key,
            record.value,
            tuple((h.key, h.value) for h in record.headers),
            header.producer_id,
            header.is_transactional,
        )


def _read_batch(
    read_at: ReadAt, position: int
) -> tuple[batch.BatchHeader | None, memoryview | None]:
    try:
        _, size = batch.peek_offset_and_size(read_at(position, batch.LOG_OVERHEAD))
        data = read_at(position, size)
        if len(data) < max(size, batch.HEADER_SIZE):
            return None, None
        header = batch.read_header(data)
        if header.is_control:
            return None, None
        return header, records_block(data, 0, header)
    except CorruptRecordError:
        return None, None
