"""The key index's native loops: walk a segment's batches and records, hash keys, link chains.

A segment of 100-byte records holds ten million of them; a Python loop over
each record's varints would index a few hundred thousand a second. These
loops are compiled by numba (``nogil``: an index can be built on one core while
the broker serves on the other) and cached beside this file, so only the first
process that ever indexes pays the compile.

Only :mod:`seglog.storage.key_index` imports this module, and only when a key
index is used: numba is not loaded by a broker whose topics have none.

The record layout walked here is the one in :mod:`seglog.records.record`;
the batch header's is in :mod:`seglog.records.batch`.
"""

# numba needs numpy's fixed-width integers where Python's would overflow its
# inferred types; mypy sees them as other types than the ints they become.
# mypy: disable-error-code="assignment, arg-type"

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numba
import numpy as np

# Outcomes of scan_batches: why it returned.
REACHED_END = 0  # no whole batch left before ``end``
COMPRESSED = 1  # the batch at the returned position is compressed: decompress it, then scan_block
ENTRIES_FULL = 2  # the entry arrays are full: grow them and call again
CORRUPT = 3  # the batch at the returned position does not parse

_HEADER_SIZE = 61
_LOG_OVERHEAD = 12
_CONTROL = 0x20
_CODEC_MASK = 0x07

_F = TypeVar("_F", bound=Callable[..., Any])
_jit: Callable[[_F], _F] = numba.njit(nogil=True, cache=True)


@_jit
def murmur2(data: Any, start: int, length: int) -> int:
    """Kafka's murmur2 (seed 0x9747b28c) of ``data[start:start+length]``, unsigned 32-bit."""
    m = 0x5BD1E995
    mask = 0xFFFFFFFF
    h = (0x9747B28C ^ length) & mask
    i = start
    whole = start + (length & ~3)
    while i < whole:
        k = (
            np.int64(data[i])
            | (np.int64(data[i + 1]) << 8)
            | (np.int64(data[i + 2]) << 16)
            | (np.int64(data[i + 3]) << 24)
        )
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
        i += 4
    rest = length & 3
    if rest == 3:
        h ^= np.int64(data[whole + 2]) << 16
    if rest >= 2:
        h ^= np.int64(data[whole + 1]) << 8
    if rest >= 1:
        h ^= np.int64(data[whole])
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h


@_jit
def _uvarint(data: Any, pos: int, end: int) -> tuple[int, int]:
    """(value, next position); next position -1 when the varint is cut or too long."""
    value = 0
    shift = 0
    while pos < end and shift < 70:
        byte = np.int64(data[pos])
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    return 0, -1


@_jit
def _varint(data: Any, pos: int, end: int) -> tuple[int, int]:
    raw, pos = _uvarint(data, pos, end)
    return (raw >> 1) ^ -(raw & 1), pos


@_jit
def scan_block(
    data: Any,
    start: int,
    end: int,
    count: int,
    offset_base: int,
    hashes: Any,
    deltas: Any,
    n: int,
) -> tuple[int, int]:
    """Index the ``count`` records in ``data[start:end]`` (a batch's records, uncompressed).

    ``offset_base`` is the batch's base offset less the segment's. Each keyed
    record adds (murmur2 of its key, its offset less the segment's base) at
    entry ``n`` onwards; null keys add nothing. Returns (entries now, 0), or
    (n unchanged, -1) when the records do not parse (nothing is added then).
    The caller guarantees room for ``count`` more entries.
    """
    first = n
    pos = start
    for _ in range(count):
        length, pos = _varint(data, pos, end)
        if pos < 0 or length < 0 or pos + length > end:
            return first, -1
        record_end = pos + length
        pos += 1  # attributes
        _, pos = _uvarint(data, pos, record_end)  # timestamp delta
        if pos < 0:
            return first, -1
        offset_delta, pos = _varint(data, pos, record_end)
        if pos < 0:
            return first, -1
        key_length, pos = _varint(data, pos, record_end)
        if pos < 0 or key_length < -1 or pos + key_length > record_end:
            return first, -1
        if key_length >= 0:
            hashes[n] = murmur2(data, pos, key_length)
            deltas[n] = offset_base + offset_delta
            n += 1
        pos = record_end
    if pos != end:
        return first, -1
    return n, 0


@_jit
def scan_batches(
    data: Any,
    pos: int,
    end: int,
    position_base: int,
    segment_base: int,
    hashes: Any,
    deltas: Any,
    n: int,
    batch_positions: Any,
    batch_last_deltas: Any,
    batch_max_timestamps: Any,
    nb: int,
) -> tuple[int, int, int, int]:
    """Index the uncompressed batches of ``data[pos:end]`` until something needs the caller.

    ``data[0]`` lies at log position ``position_base``. Each batch that holds a
    keyed record also gets a row in the batch table (its log position, last
    offset less the segment's base, max timestamp). Control batches are
    stepped over. Returns (position, entries, batches, outcome): the position
    of the first batch not indexed, and why the scan stopped there.
    """
    capacity = hashes.shape[0]
    while pos + _HEADER_SIZE <= end:
        base_offset = (
            (np.int64(data[pos]) << 56)
            | (np.int64(data[pos + 1]) << 48)
            | (np.int64(data[pos + 2]) << 40)
            | (np.int64(data[pos + 3]) << 32)
            | (np.int64(data[pos + 4]) << 24)
            | (np.int64(data[pos + 5]) << 16)
            | (np.int64(data[pos + 6]) << 8)
            | np.int64(data[pos + 7])
        )
        batch_length = (
            (np.int64(data[pos + 8]) << 24)
            | (np.int64(data[pos + 9]) << 16)
            | (np.int64(data[pos + 10]) << 8)
            | np.int64(data[pos + 11])
        )
        size = _LOG_OVERHEAD + batch_length
        if batch_length < _HEADER_SIZE - _LOG_OVERHEAD or data[pos + 16] != 2:
            return pos, n, nb, CORRUPT
        if pos + size > end:
            return pos, n, nb, REACHED_END
        attributes = np.int64(data[pos + 22])  # the low byte of the int16 at 21
        count = (
            (np.int64(data[pos + 57]) << 24)
            | (np.int64(data[pos + 58]) << 16)
            | (np.int64(data[pos + 59]) << 8)
            | np.int64(data[pos + 60])
        )
        if attributes & _CONTROL or count == 0:
            pos += size
            continue
        if attributes & _CODEC_MASK:
            return pos, n, nb, COMPRESSED
        if n + count > capacity or nb >= batch_positions.shape[0]:
            return pos, n, nb, ENTRIES_FULL
        before = n
        n, status = scan_block(
            data,
            pos + _HEADER_SIZE,
            pos + size,
            count,
            base_offset - segment_base,
            hashes,
            deltas,
            n,
        )
        if status < 0:
            return pos, n, nb, CORRUPT
        if n > before:
            last_delta = (
                (np.int64(data[pos + 23]) << 24)
                | (np.int64(data[pos + 24]) << 16)
                | (np.int64(data[pos + 25]) << 8)
                | np.int64(data[pos + 26])
            )
            max_timestamp = np.int64(0)
            for i in range(8):
                max_timestamp = (max_timestamp << 8) | np.int64(data[pos + 35 + i])
            batch_positions[nb] = position_base + pos
            batch_last_deltas[nb] = base_offset - segment_base + last_delta
            batch_max_timestamps[nb] = max_timestamp
            nb += 1
        pos += size
    return pos, n, nb, REACHED_END


@_jit
def link(hashes: Any, n: int, slots: Any, prev: Any, start: int) -> None:
    """Chain entries ``start`` to ``n`` into ``slots`` (a power-of-two table, 1-based, 0 empty)."""
    mask = slots.shape[0] - 1
    for i in range(start, n):
        slot = hashes[i] & mask
        prev[i] = slots[slot]
        slots[slot] = i + 1


@_jit
def find_record(data: Any, start: int, end: int, count: int, offset_delta: int) -> tuple[int, int]:
    """(start, end) of the record whose offset delta is ``offset_delta`` among a batch's
    ``count`` records in ``data[start:end]``; (-1, -1) when there is none or they do not parse."""
    pos = start
    for _ in range(count):
        length, pos = _varint(data, pos, end)
        if pos < 0 or length < 0 or pos + length > end:
            return -1, -1
        record_start = pos
        record_end = pos + length
        pos += 1
        _, pos = _uvarint(data, pos, record_end)
        if pos < 0:
            return -1, -1
        delta, pos = _varint(data, pos, record_end)
        if pos < 0:
            return -1, -1
        if delta == offset_delta:
            return record_start, record_end
        pos = record_end
    return -1, -1
