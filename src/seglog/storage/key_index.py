"""A segment's key index: RocketMQ's IndexFile, beside Kafka's ``.index`` and ``.timeindex``.

A hash table of record keys kept on disk: a header, a fixed table of hash
slots, each holding the newest entry whose key hashes to it, and entries
chained backwards to the previous entry of the same slot. Finding a key is
one slot read and a walk down its chain; every entry whose hash matches names
a record, whose key the caller still compares (two keys may share a hash).

Grammar of ``<base offset>.keyindex`` (big-endian, like Kafka's files)::

    key-index := header slot{slot_count} entry{entry_count} batch{batch_count}
    header    := magic "SLKX"  version int16 (1)  flags int16 (0)
                 base_offset int64        the segment's
                 indexed_bytes int64      the .log bytes [0, n) this file covers
                 last_offset int64        the last keyed record's offset (base - 1: none)
                 max_timestamp int64      the greatest batch max timestamp (-1: none)
                 slot_count int32         a power of two
                 entry_count int32
                 batch_count int32
                 reserved int32 (0)
                 crc uint32               CRC-32C of the 56 bytes before it
                 reserved int32 (0)       64 bytes in all
    slot      := int32                    1 + the newest entry of the slot; 0: empty
    entry     := key_hash uint32          Kafka's murmur2 of the key (its partitioner's)
                 offset_delta int32       the record's offset less the segment's base
                 previous int32           1 + the previous entry of the same slot; 0: none
    batch     := position int32           a batch holding a keyed record: its .log position
                 last_offset_delta int32  its last offset less the segment's base
                 max_timestamp int64      its max timestamp

An entry's slot is ``key_hash & (slot_count - 1)``. The batch table is the
entries' positions and times: RocketMQ stores both in every 20-byte entry; a
Kafka batch holds many records, so seglog stores them once per batch (sorted,
found by binary search on the offset), which keeps the index near a tenth of
a segment of 100-byte records. Null keys are not indexed; control batches
neither.

Lifecycle: the active segment's index lives in memory (:class:`KeyIndexBuilder`,
grown by reading what was appended: appends pay nothing) and is written whole
when the segment is sealed, as a new file renamed over the old one, so a file
on disk is always whole. A file is *stale* when it covers fewer or more bytes
than its ``.log`` holds (a crash after appends, a truncation): the loader
refuses it (:class:`~seglog.errors.CorruptIndexError`) and the owner rebuilds
it from the log. Kafka's tools ignore the file.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import os
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from seglog.errors import CorruptIndexError, CorruptRecordError, StorageError
from seglog.records import batch
from seglog.records.crc32c import crc32c
from seglog.records.record import records_block
from seglog.storage import io

MAGIC = b"SLKX"
VERSION = 1
HEADER = struct.Struct(">4shhqqqqiiii")
HEADER_SIZE = 64
SLOT = struct.Struct(">i")
ENTRY = struct.Struct(">Iii")
BATCH = struct.Struct(">iiq")
#: Entries per slot in a written file, at least (fewer than twice as many): a
#: lookup walks a chain this long, and the table costs at most half a byte an entry.
ENTRIES_PER_SLOT = 8
_MEMORY_ENTRIES_PER_SLOT = 2
_MIN_SLOTS = 16
#: How much of the log a catch-up reads at a time.
READ_CHUNK = 4 << 20

ReadAt = Callable[[int, int], bytes]
ReadInto = Callable[[memoryview, int], int]

_buffers = threading.local()


def _chunk_buffer() -> memoryview:
    """This thread's read buffer (one per thread that indexes, of READ_CHUNK bytes)."""
    buffer: memoryview | None = getattr(_buffers, "chunk", None)
    if buffer is None or len(buffer) < READ_CHUNK:
        buffer = memoryview(bytearray(READ_CHUNK))
        _buffers.chunk = buffer
    return buffer


class Candidate(NamedTuple):
    """An entry whose key hash matched: a record that may hold the key."""

    offset: int
    batch_position: int
    batch_max_timestamp: int


def _kernels() -> Any:
    from seglog.storage import _key_scan

    return _key_scan


def _np() -> Any:
    import numpy

    return numpy


def key_hash(key: bytes) -> int:
    """Kafka's murmur2 of ``key`` (what its default partitioner hashes), unsigned 32-bit."""
    np = _np()
    return int(_kernels().murmur2(np.frombuffer(key, dtype=np.uint8), 0, len(key)))


def slots_for(entries: int, per_slot: int = ENTRIES_PER_SLOT) -> int:
    """The power-of-two slot count for ``entries`` entries at ``per_slot`` a slot or more."""
    want = max(_MIN_SLOTS, entries // per_slot)
    return 1 << (want.bit_length() - 1)


class KeyIndexBuilder:
    """One segment's key index in memory, grown by reading its log.

    The active segment's index: :meth:`catch_up` indexes the batches appended
    since the last call; :meth:`write` seals it into a file. Not thread-safe:
    the segment's owner serialises calls.
    """

    def __init__(self, base_offset: int, slot_count: int | None = None) -> None:
        np = _np()
        self.base_offset = base_offset
        self._fixed_slots = slot_count
        if slot_count is not None and (slot_count < 1 or slot_count & (slot_count - 1)):
            raise ValueError(f"slot count {slot_count} is not a power of two")
        self._indexed_bytes = 0
        self._n = 0
        self._nb = 0
        self._hashes = np.zeros(1024, dtype=np.uint32)
        self._deltas = np.zeros(1024, dtype=np.int32)
        self._prev = np.zeros(1024, dtype=np.int32)
        self._slots = np.zeros(slot_count or _MIN_SLOTS, dtype=np.int32)
        self._batch_positions = np.zeros(64, dtype=np.int64)
        self._batch_last = np.zeros(64, dtype=np.int64)
        self._batch_ts = np.zeros(64, dtype=np.int64)

    @property
    def indexed_bytes(self) -> int:
        """The log bytes ``[0, n)`` this index covers."""
        return self._indexed_bytes

    @property
    def entry_count(self) -> int:
        """How many keyed records are indexed."""
        return self._n

    def reset(self) -> None:
        """Forget every entry: the log was truncated, :meth:`catch_up` indexes it again."""
        self.__init__(self.base_offset, self._fixed_slots)  # type: ignore[misc]

    # -------------------------------------------------------------- indexing

    def catch_up(self, read_at: ReadAt, log_size: int, read_into: ReadInto | None = None) -> None:
        """Index the whole batches in ``[indexed_bytes, log_size)`` of the segment's log.

        ``read_at(position, size)`` returns the log's bytes there (fewer at its
        end); ``read_into(view, position)``, when given, fills a buffer this
        thread keeps instead (no new pages to fault in for every chunk: reads
        twice as fast). A batch cut by ``log_size`` (a writer still appending)
        is left for the next call. A batch that does not parse is a
        CorruptRecordError naming its position; what came before it stays
        indexed.
        """
        np = _np()
        kernels = _kernels()
        start_links = self._n
        pos = self._indexed_bytes
        want = READ_CHUNK
        buffer = _chunk_buffer() if read_into is not None else None
        try:
            while pos < log_size:
                length = min(want, log_size - pos)
                data: bytes | memoryview
                if read_into is not None and buffer is not None and length <= len(buffer):
                    data = buffer[: read_into(buffer[:length], pos)]
                else:
                    data = read_at(pos, length)
                if not data:
                    break
                # Room for every record the chunk can hold (at least 7 bytes each, 61
                # per batch), so the loop does not stop half way for space.
                self._grow(self._n + len(data) // 7 + 1, self._nb + len(data) // 61 + 1)
                view = np.frombuffer(data, dtype=np.uint8)
                done, self._n, self._nb, outcome = kernels.scan_batches(
                    view,
                    0,
                    len(view),
                    pos,
                    self.base_offset,
                    self._hashes,
                    self._deltas,
                    self._n,
                    self._batch_positions,
                    self._batch_last,
                    self._batch_ts,
                    self._nb,
                )
                pos += done
                want = READ_CHUNK
                if outcome == kernels.REACHED_END:
                    if done:
                        continue
                    # The next batch is larger than the chunk, or not whole yet.
                    if log_size - pos < batch.HEADER_SIZE:
                        break
                    _, size = batch.peek_offset_and_size(data)
                    if pos + size > log_size:
                        break
                    want = size
                elif outcome == kernels.COMPRESSED:
                    pos += self._index_compressed(data, done, pos)
                elif outcome == kernels.ENTRIES_FULL:
                    count = batch.read_header(data, done).record_count
                    self._grow(self._n + count)
                else:
                    raise CorruptRecordError(
                        f"the batch at position {pos} of segment {self.base_offset} does not parse"
                    )
        finally:
            self._indexed_bytes = pos
            self._link(start_links)

    def _index_compressed(self, data: bytes | memoryview, at: int, position: int) -> int:
        np = _np()
        header = batch.read_header(data, at)
        block = records_block(data, at, header)
        self._grow(self._n + header.record_count)
        before = self._n
        self._n, status = _kernels().scan_block(
            np.frombuffer(block, dtype=np.uint8),
            0,
            len(block),
            header.record_count,
            header.base_offset - self.base_offset,
            self._hashes,
            self._deltas,
            self._n,
        )
        if status < 0:
            raise CorruptRecordError(
                f"the records of the batch at position {position} of segment "
                f"{self.base_offset} do not parse"
            )
        if self._n > before:
            nb = self._nb
            self._batch_positions[nb] = position
            self._batch_last[nb] = header.last_offset - self.base_offset
            self._batch_ts[nb] = header.max_timestamp
            self._nb = nb + 1
        return int(header.size)

    def _grow(self, entries: int, batches: int = 0) -> None:
        np = _np()
        if entries > len(self._hashes):
            size = max(entries, 2 * len(self._hashes))
            for name in ("_hashes", "_deltas", "_prev"):
                old = getattr(self, name)
                new = np.zeros(size, dtype=old.dtype)
                new[: self._n] = old[: self._n]
                setattr(self, name, new)
        if max(self._nb + 1, batches) >= len(self._batch_positions):
            size = max(batches + 1, 2 * len(self._batch_positions))
            for name in ("_batch_positions", "_batch_last", "_batch_ts"):
                old = getattr(self, name)
                new = np.zeros(size, dtype=old.dtype)
                new[: self._nb] = old[: self._nb]
                setattr(self, name, new)

    def _link(self, start: int) -> None:
        np = _np()
        if self._fixed_slots is None and self._n > _MEMORY_ENTRIES_PER_SLOT * len(self._slots):
            self._slots = np.zeros(slots_for(self._n, 1), dtype=np.int32)
            start = 0
        if start < self._n:
            _kernels().link(self._hashes, self._n, self._slots, self._prev, start)

    # --------------------------------------------------------------- lookups

    def candidates(self, hash_: int) -> Iterator[Candidate]:
        """The records whose key hashes to ``hash_``, newest first."""
        found = []
        hashes, deltas, prev = self._hashes, self._deltas, self._prev
        entry = int(self._slots[hash_ & (len(self._slots) - 1)])
        while entry:
            i = entry - 1
            if int(hashes[i]) == hash_:
                found.append(int(deltas[i]))
            entry = int(prev[i])
        last = self._batch_last[: self._nb]
        for delta in found:
            row = int(last.searchsorted(delta))
            if row < self._nb:
                yield Candidate(
                    self.base_offset + delta,
                    int(self._batch_positions[row]),
                    int(self._batch_ts[row]),
                )

    # --------------------------------------------------------------- sealing

    def to_bytes(self) -> bytes:
        """The index as a ``.keyindex`` file's bytes."""
        np = _np()
        n, nb = self._n, self._nb
        slot_count = self._fixed_slots or slots_for(n)
        slots = np.zeros(slot_count, dtype=np.int32)
        prev = np.zeros(max(n, 1), dtype=np.int32)
        _kernels().link(self._hashes, n, slots, prev, 0)
        entries = np.empty(n, dtype=[("h", ">u4"), ("d", ">i4"), ("p", ">i4")])
        entries["h"] = self._hashes[:n]
        entries["d"] = self._deltas[:n]
        entries["p"] = prev[:n]
        batches = np.empty(nb, dtype=[("pos", ">i4"), ("last", ">i4"), ("ts", ">i8")])
        batches["pos"] = self._batch_positions[:nb]
        batches["last"] = self._batch_last[:nb]
        batches["ts"] = self._batch_ts[:nb]
        last_offset = self.base_offset + (int(self._deltas[:n].max()) if n else -1)
        max_ts = int(self._batch_ts[:nb].max()) if nb else batch.NO_TIMESTAMP
        return b"".join(
            (
                _header(
                    self.base_offset, self._indexed_bytes, last_offset, max_ts, slot_count, n, nb
                ),
                slots.astype(">i4").tobytes(),
                entries.tobytes(),
                batches.tobytes(),
            )
        )

    def write(self, path: Path, env: io.Env | None = None) -> None:
        """Seal the index into ``path``: written beside it, fsynced, renamed over it.

        A crash leaves the old file or the new one, never a torn one.
        """
        env = io.env_or_default(env)
        tmp = path.with_name(path.name + ".tmp")
        try:
            env.write_file(tmp, self.to_bytes(), sync=True)
            env.rename(tmp, path)
        except StorageError:
            with contextlib.suppress(StorageError):
                env.unlink(tmp)
            raise
        env.fsync_dir(path.parent)


def _header(
    base_offset: int,
    indexed_bytes: int,
    last_offset: int,
    max_timestamp: int,
    slot_count: int,
    entry_count: int,
    batch_count: int,
) -> bytes:
    body = HEADER.pack(
        MAGIC,
        VERSION,
        0,
        base_offset,
        indexed_bytes,
        last_offset,
        max_timestamp,
        slot_count,
        entry_count,
        batch_count,
        0,
    )
    return body + struct.pack(">Ii", crc32c(body), 0)


def build(
    base_offset: int,
    read_at: ReadAt,
    log_size: int,
    slot_count: int | None = None,
    read_into: ReadInto | None = None,
) -> KeyIndexBuilder:
    """A key index of the segment's log ``[0, log_size)``, built in memory."""
    builder = KeyIndexBuilder(base_offset, slot_count)
    builder.catch_up(read_at, log_size, read_into)
    return builder


class KeyIndexFile:
    """A sealed segment's ``.keyindex``, mapped read-only.

    The map holds no descriptor and outlives a rename or deletion of the file
    (a reader finishes with the pages it mapped), so it is safe to hold over a
    directory a broker writes.
    """

    def __init__(self, path: Path, file_map: io.FileMap, header: tuple[Any, ...]) -> None:
        np = _np()
        self.path = path
        self._map = file_map
        (
            _,
            _,
            _,
            self.base_offset,
            self._indexed_bytes,
            self.last_offset,
            self.max_timestamp,
            slot_count,
            entry_count,
            batch_count,
            _,
        ) = header
        buffer = file_map.buffer
        self._slot_mask = slot_count - 1
        self._slots: Any = np.frombuffer(buffer, dtype=">i4", count=slot_count, offset=HEADER_SIZE)
        entries_at = HEADER_SIZE + slot_count * SLOT.size
        self._entries: Any = np.frombuffer(
            buffer,
            dtype=[("h", ">u4"), ("d", ">i4"), ("p", ">i4")],
            count=entry_count,
            offset=entries_at,
        )
        batches_at = entries_at + entry_count * ENTRY.size
        self._batches: Any = np.frombuffer(
            buffer,
            dtype=[("pos", ">i4"), ("last", ">i4"), ("ts", ">i8")],
            count=batch_count,
            offset=batches_at,
        )
        self._entry_count = int(entry_count)
        self._size = int(batches_at + batch_count * BATCH.size)

    @classmethod
    def load(
        cls, path: Path, base_offset: int, log_size: int | None, env: io.Env | None = None
    ) -> KeyIndexFile:
        """Map ``path``; CorruptIndexError when it is missing, torn, or stale for ``log_size``
        (None: whatever it covers, for tools that report staleness themselves)."""
        env = io.env_or_default(env)
        try:
            fd = env.open(path, os.O_RDONLY)
        except FileNotFoundError:
            raise CorruptIndexError(f"key index {path} is missing") from None
        except OSError as exc:
            raise io.storage_error("open", path, exc) from exc
        try:
            size = env.fstat(fd, name=path).st_size
            head = env.pread(fd, HEADER_SIZE, 0, name=path) if size >= HEADER_SIZE else b""
            header = _check_header(path, head, size, base_offset, log_size)
            file_map = env.mmap(fd, size, writable=False, name=path)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                raise CorruptIndexError(f"key index {path} is missing") from None
            raise io.storage_error("read", path, exc) from exc
        finally:
            env.close(fd)
        return cls(path, file_map, header)

    @property
    def indexed_bytes(self) -> int:
        """The log bytes ``[0, n)`` this file covers."""
        return int(self._indexed_bytes)

    @property
    def entry_count(self) -> int:
        """How many keyed records are indexed."""
        return self._entry_count

    @property
    def size_bytes(self) -> int:
        """The file's length."""
        return self._size

    def candidates(self, hash_: int) -> Iterator[Candidate]:
        """The records whose key hashes to ``hash_``, newest first."""
        entries = self._entries
        limit = self._entry_count
        found = []
        entry = int(self._slots[hash_ & self._slot_mask])
        while 0 < entry <= limit:
            h, delta, previous = entries[entry - 1].item()
            if h == hash_:
                found.append(delta)
            # Chains only go backwards: anything else is damage, and must not loop.
            entry = previous if previous < entry else 0
        last = _BatchLasts(self._batches)
        for delta in found:
            row = bisect.bisect_left(last, delta)
            if row < len(last):
                position, _, max_ts = self._batches[row].item()
                yield Candidate(self.base_offset + delta, position, max_ts)

    @property
    def slot_count(self) -> int:
        """The hash table's slots."""
        return int(self._slot_mask) + 1

    def entries(self) -> Iterator[tuple[int, int, int]]:
        """Every entry in file order: (key hash, offset, 1 + previous entry or 0)."""
        for h, delta, previous in self._entries.tolist():
            yield h, self.base_offset + delta, previous

    def close(self) -> None:
        """Drop the map (its pages go when the last lookup in flight lets go)."""
        self._map.close()


class _BatchLasts:
    """The batch table's last offset deltas as a sequence, for :func:`bisect.bisect_left`."""

    __slots__ = ("_batches",)

    def __init__(self, batches: Any) -> None:
        self._batches = batches

    def __len__(self) -> int:
        return len(self._batches)

    def __getitem__(self, row: int) -> int:
        return int(self._batches[row]["last"])


def _check_header(
    path: Path, head: bytes, size: int, base_offset: int, log_size: int | None
) -> tuple[Any, ...]:
    if len(head) < HEADER_SIZE:
        raise CorruptIndexError(f"key index {path} is torn: {size} bytes, no whole header")
    header = HEADER.unpack_from(head)
    (crc,) = struct.unpack_from(">I", head, HEADER.size)
    if header[0] != MAGIC or crc != crc32c(head[: HEADER.size]):
        raise CorruptIndexError(f"key index {path} is torn: its header fails its check")
    if header[1] != VERSION:
        raise CorruptIndexError(f"key index {path} has version {header[1]}, not {VERSION}")
    _, _, _, base, indexed, _, _, slot_count, entry_count, batch_count, _ = header
    if base != base_offset:
        raise CorruptIndexError(f"key index {path} is for base offset {base}, not {base_offset}")
    expected = (
        HEADER_SIZE + slot_count * SLOT.size + entry_count * ENTRY.size + batch_count * BATCH.size
    )
    if slot_count < 1 or slot_count & (slot_count - 1) or entry_count < 0 or batch_count < 0:
        raise CorruptIndexError(f"key index {path} is torn: its counts do not make sense")
    if size != expected:
        raise CorruptIndexError(
            f"key index {path} is torn: {size} bytes, its header says {expected}"
        )
    if log_size is not None and indexed != log_size:
        raise CorruptIndexError(
            f"key index {path} is stale: it covers {indexed} bytes of a {log_size}-byte log"
        )
    return tuple(header)
