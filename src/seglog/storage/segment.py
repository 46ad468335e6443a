"""One log segment: a ``.log`` file of entries and its two sparse indexes.

Files of a segment with base offset B, in its partition directory::

    <B:020d>.log        entries back to back, exactly as on the wire (no header)
    <B:020d>.index      offset index: (int32 offset - B, int32 position) every
                        index.interval.bytes of log data
    <B:020d>.timeindex  time index: (int64 max timestamp so far, int32 offset - B)

Theory of operation
-------------------
Appends come whole batches at a time with their offsets already assigned. For
each batch (Kafka 3.8+ indexes per batch, not per append), if more than
``index.interval.bytes`` have been written since the last index entry, the
batch gets an offset-index entry (its *last* offset → its start position) and
the time index gets (max timestamp so far → the offset that carried it).

A lookup by offset binary-searches the offset index for the greatest entry not
above the target and scans batch headers forward from there; a lookup by time
does the same through the time index first. Reads return a
:class:`~seglog.storage.region.FileRegion` from the batch that holds the
target offset, never a copy.

Recovery re-reads every entry, checks its CRC and rebuilds both indexes with
the same spacing rule; the ``.log`` is cut at the first entry that is not
whole and valid, and that is all recovery ever removes.

Roll rules (:meth:`LogSegment.should_roll`) follow Kafka: the next append would
pass ``segment.bytes``; ``segment.ms`` (less jitter) has passed since the
first batch's timestamp; an index is full; or an offset cannot be stored
relative to the base.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from seglog.errors import CorruptIndexError, SeglogError, StorageError
from seglog.records import batch
from seglog.records.log_entries import EntryInfo
from seglog.storage import filenames, io
from seglog.storage._recovery_scan import ChunkIndexer, index_chunks
from seglog.storage.log_file import LogFile
from seglog.storage.offset_index import OffsetIndex
from seglog.storage.reader import BatchWalk, scan_tail
from seglog.storage.results import OffsetPosition, SegmentRead, TimestampAndOffset
from seglog.storage.time_index import TimeIndex

if TYPE_CHECKING:
    # Loaded only when a key index is used: it brings numpy and numba.
    from seglog.storage.key_index import KeyIndexBuilder, KeyIndexFile
    from seglog.storage.key_search import FoundRecord

logger = logging.getLogger(__name__)

_MAX_RELATIVE_OFFSET = 2**31 - 1
#: The most bytes a segment's ``.log`` may hold, whatever ``segment.bytes`` says:
#: index entries store positions as int32 (Kafka's FileRecords has the same limit).
MAX_SEGMENT_BYTES = 2**31 - 1


class LogSegment:
    """A segment's three files, open for appends (the active one) or for reads.

    Create with :meth:`create` for a fresh segment or :meth:`open` for one on
    disk. Not thread-safe for writers: the owning log serialises appends,
    truncation and roll; reads may run concurrently with an append because they
    only see bytes up to the size observed when they started.
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        log_file: LogFile,
        size: int,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        suffix: str = "",
        created_ms: int | None = None,
        env: io.Env | None = None,
    ) -> None:
        self._env = io.env_or_default(env)
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self._suffix = suffix
        self._log = log_file
        self.offset_index = offset_index
        self.time_index = time_index
        self._size = size
        self._bytes_since_last_index_entry = 0
        self._max_timestamp = batch.NO_TIMESTAMP
        self._offset_of_max_timestamp = base_offset - 1
        self._next_offset: int | None = None
        self._rolling_based_timestamp: int | None = None
        self._created_ms = created_ms if created_ms is not None else int(time.time() * 1000)
        self._closed = False
        # Kafka's format is walked by the reader's code, over this segment's reads.
        self._walk = BatchWalk(log_file.read_at, log_file.read_into)
        # The key index (key.index.enable): off until the owning log turns it on.
        # An unsealed segment (the active one, or one rolled but not yet written)
        # keeps it in memory; a sealed one maps its .keyindex at first use.
        self._key_enabled = False
        self._key_slots: int | None = None
        self._key_sealed = True
        self._key_builder: KeyIndexBuilder | None = None
        self._key_file: KeyIndexFile | None = None
        # Lookups, the background indexer and the segment's own moves take it.
        self._key_lock = threading.Lock()
        # The log size a sealed segment's .keyindex was last found to cover.
        self._key_checked_size = -1

    # ----------------------------------------------------------------- opening

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10_485_760,
        suffix: str = "",
        env: io.Env | None = None,
    ) -> LogSegment:
        """Create an empty segment at ``base_offset``, replacing stale files of that name.

        Every file operation of the segment and its indexes goes through ``env``.
        """
        env = io.env_or_default(env)
        log = cls._path(directory, base_offset, filenames.LOG_SUFFIX, suffix)
        index = cls._path(directory, base_offset, filenames.INDEX_SUFFIX, suffix)
        tindex = cls._path(directory, base_offset, filenames.TIME_INDEX_SUFFIX, suffix)
        txn = cls._path(directory, base_offset, filenames.TXN_INDEX_SUFFIX, suffix)
        keys = cls._path(directory, base_offset, filenames.KEY_INDEX_SUFFIX, suffix)
        for stale in (log, index, tindex, txn, keys):
            env.unlink(stale)
        segment = cls(
            directory,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            max_index_size=max_index_size,
            log_file=LogFile.open(env, log),
            size=0,
            offset_index=OffsetIndex(index, base_offset, max_index_size, env=env),
            time_index=TimeIndex(tindex, base_offset, max_index_size, env=env),
            suffix=suffix,
            env=env,
        )
        segment._next_offset = base_offset
        try:
            # The active segment's indexes are used at once: create them now,
            # at full length as sparse files (an inactive segment's open lazily).
            segment.offset_index.load()
            segment.time_index.load()
            segment.offset_index.fault_in_first_page()
            segment.time_index.fault_in_first_page()
        except BaseException:
            segment.delete()
            raise
        return segment

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10_485_760,
        suffix: str = "",
        writable: bool = False,
        env: io.Env | None = None,
    ) -> LogSegment:
        """Open an existing segment.

        Only the ``.log`` is opened; each index is opened and mapped at its
        first use (Kafka's LazyIndex), at the length it has on disk. The owner
        of the active segment calls :meth:`sanity_check` (and :meth:`recover`
        when it fails) before trusting its indexes, and :meth:`resize_indexes`
        to make room for appends.
        """
        env = io.env_or_default(env)
        log_file = LogFile.open(
            env, cls._path(directory, base_offset, filenames.LOG_SUFFIX, suffix)
        )
        stat = log_file.stat()
        index = cls._path(directory, base_offset, filenames.INDEX_SUFFIX, suffix)
        tindex = cls._path(directory, base_offset, filenames.TIME_INDEX_SUFFIX, suffix)
        return cls(
            directory,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            max_index_size=max_index_size,
            log_file=log_file,
            size=stat.st_size,
            offset_index=OffsetIndex(
                index, base_offset, max_index_size, writable=writable, env=env
            ),
            time_index=TimeIndex(tindex, base_offset, max_index_size, writable=writable, env=env),
            suffix=suffix,
            created_ms=int(stat.st_mtime * 1000),
            env=env,
        )

    @staticmethod
    def _path(directory: Path, base_offset: int, kind: str, suffix: str) -> Path:
        return directory / f"{filenames.offset_name(base_offset)}{kind}{suffix}"

    @property
    def suffix(self) -> str:
        """The transient suffix of the segment's files (``.deleted``, ``.swap``...), or ""."""
        return self._suffix

    @property
    def txn_index_path(self) -> Path:
        """Path of the ``.txnindex`` (aborted transactions; present only once there is one)."""
        return self._path(self.directory, self.base_offset, filenames.TXN_INDEX_SUFFIX, self.suffix)

    @property
    def key_index_path(self) -> Path:
        """Path of the ``.keyindex`` (present once the key index was written)."""
        return self._path(self.directory, self.base_offset, filenames.KEY_INDEX_SUFFIX, self.suffix)

    @property
    def log_path(self) -> Path:
        """Path of the ``.log`` file (with any transient suffix)."""
        return self._log.path

    @property
    def env(self) -> io.Env:
        """The environment the segment's files are read and written through."""
        return self._env

    @property
    def fd(self) -> int:
        """The descriptor of the ``.log`` file, for zero-copy sends."""
        return self._log.fd

    @property
    def size(self) -> int:
        """Bytes in the ``.log`` file."""
        return self._size

    @property
    def is_empty(self) -> bool:
        """True when the segment holds no entries."""
        return self._size == 0

    # ------------------------------------------------------------ bookkeeping

    def _load_tail_state(self) -> None:
        """Find the next offset and max timestamp of a reopened segment.

        Starts from the last entries of both indexes and scans the batches after
        them, so the cost is bounded by index.interval.bytes, not the file size.
        """
        if self._next_offset is not None:
            return
        last_time = self.time_index.last_entry
        _, start = self.offset_index.lookup(min(self.offset_index.last_offset, last_time[1]))
        max_ts, offset_of_max = last_time
        if max_ts == batch.NO_TIMESTAMP:
            offset_of_max = self.base_offset - 1
            start = 0
        _, next_offset, max_ts, offset_of_max = scan_tail(
            self._entries(start), start, max_ts, offset_of_max
        )
        if next_offset is None:
            # Nothing after the indexed position: an empty segment, or the index
            # pointed at the end of the file (take the offset from the index).
            next_offset = self.offset_index.last_offset + 1 if start > 0 else self.base_offset
        self._next_offset = next_offset
        if max_ts > self._max_timestamp:
            self._max_timestamp, self._offset_of_max_timestamp = max_ts, offset_of_max

    def read_next_offset(self) -> int:
        """The offset after the last entry, or the base offset when empty."""
        self._load_tail_state()
        assert self._next_offset is not None
        return self._next_offset

    @property
    def max_timestamp_so_far(self) -> int:
        """Largest batch max timestamp appended, or -1."""
        self._load_tail_state()
        return self._max_timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        """The last offset of the batch that carried :attr:`max_timestamp_so_far`."""
        self._load_tail_state()
        return self._offset_of_max_timestamp

    @property
    def largest_timestamp(self) -> int:
        """Max record timestamp, or the file's modification time if there is none.

        Retention by time uses this, as Kafka does.
        """
        ts = self.max_timestamp_so_far
        if ts != batch.NO_TIMESTAMP:
            return ts
        try:
            return self._log.modified_ms()
        except StorageError:
            return self._created_ms

    def _rolling_timestamp(self) -> int | None:
        if self._rolling_based_timestamp is None and self._size > 0:
            # The first entry's max timestamp, from its header (a legacy one is read whole).
            first = next(self._walk.entries(0, self._size), None)
            if first is not None:
                self._rolling_based_timestamp = first.max_timestamp
        return self._rolling_based_timestamp

    # ------------------------------------------------------------------ write

    def can_hold_offset(self, offset: int) -> bool:
        """True when ``offset`` can be stored relative to this segment's base."""
        return 0 <= offset - self.base_offset <= _MAX_RELATIVE_OFFSET

    def should_roll(
        self,
        incoming_size: int,
        incoming_max_timestamp: int,
        incoming_last_offset: int,
        now_ms: int,
        segment_bytes: int,
        segment_ms: int,
        roll_jitter_ms: int = 0,
    ) -> bool:
        """Kafka's roll decision for an append of ``incoming_size`` bytes.

        Whatever ``segment_bytes`` is, a segment rolls before any position in
        it would not fit an int32.
        """
        size = self._size
        if size > min(segment_bytes, MAX_SEGMENT_BYTES) - incoming_size:
            return True
        if size > 0:
            first_ts = self._rolling_based_timestamp
            if first_ts is None:
                first_ts = self._rolling_timestamp()
            if first_ts is not None and first_ts != batch.NO_TIMESTAMP:
                waited = incoming_max_timestamp - first_ts
            else:
                waited = now_ms - self._created_ms
            if waited > segment_ms - roll_jitter_ms:
                return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        return not 0 <= incoming_last_offset - self.base_offset <= _MAX_RELATIVE_OFFSET

    def append(
        self,
        chunks: Sequence[bytes | bytearray | memoryview],
        entries: Sequence[EntryInfo],
        size: int | None = None,
    ) -> None:
        """Append whole entries (offsets assigned), given as buffers written in order.

        ``entries`` describes the bytes (positions relative to the first chunk).

        All or nothing: if anything fails (a short or failed write, a full
        disk while reserving index blocks, an index that refuses an entry),
        the bytes written are cut away and the index entries added are
        removed before the error propagates, so the segment is exactly as it
        was, on disk and in memory, and nothing of the append survives a
        restart.
        """
        if not entries:
            return
        position = self._size
        total = sum(map(len, chunks)) if size is None else size
        if total > MAX_SEGMENT_BYTES - position:
            raise StorageError(
                f"an append of {total} bytes does not fit {self.log_path} at position "
                f"{position}: a segment holds at most {MAX_SEGMENT_BYTES} bytes"
            )
        base = self.base_offset
        first_offset = entries[0].base_offset
        last_offset = entries[-1].last_offset
        if not (
            0 <= first_offset - base <= _MAX_RELATIVE_OFFSET
            and 0 <= last_offset - base <= _MAX_RELATIVE_OFFSET
        ):
            raise StorageError(
                f"offsets {first_offset}..{last_offset} cannot be stored in the "
                f"segment with base offset {base}"
            )
        if self._next_offset is None:
            self._load_tail_state()
        # What a failure puts back.
        max_timestamp = self._max_timestamp
        offset_of_max = self._offset_of_max_timestamp
        since_entry = self._bytes_since_last_index_entry
        saved = (
            max_timestamp,
            offset_of_max,
            since_entry,
            self._rolling_based_timestamp,
            self._next_offset,
        )
        # The indexes' entry counts before the first entry this append adds.
        marks: tuple[int, int] | None = None
        try:
            self._log.write(chunks, total, position)
            if position == 0:
                self._rolling_based_timestamp = entries[0].max_timestamp
            interval = self.index_interval_bytes
            for entry in entries:
                if entry.max_timestamp > max_timestamp:
                    max_timestamp = entry.max_timestamp
                    offset_of_max = entry.last_offset
                if since_entry > interval:
                    if marks is None:
                        marks = (self.offset_index.entries, self.time_index.entries)
                    self.offset_index.append(entry.last_offset, position + entry.position)
                    self.time_index.maybe_append(max_timestamp, offset_of_max)
                    since_entry = 0
                since_entry += entry.size
            # Last: readers see the new bytes only once the append cannot fail.
            self._max_timestamp = max_timestamp
            self._offset_of_max_timestamp = offset_of_max
            self._bytes_since_last_index_entry = since_entry
            self._size = position + total
            self._next_offset = last_offset + 1
        except BaseException as exc:
            self._undo_append(position, marks, exc)
            (
                self._max_timestamp,
                self._offset_of_max_timestamp,
                self._bytes_since_last_index_entry,
                self._rolling_based_timestamp,
                self._next_offset,
            ) = saved
            raise

    def _undo_append(
        self, position: int, marks: tuple[int, int] | None, cause: BaseException
    ) -> None:
        """Cut the ``.log`` back to ``position`` and the indexes back to their entries.

        If even that fails the failure is logged and the original error goes
        on: the log end offset did not move, so the next append writes over
        the leftover bytes at ``position``, and a restart's tail check or
        recovery cuts whatever is left.
        """
        self._size = position
        try:
            if marks is not None:
                self.offset_index.truncate_to_entries(marks[0])
                self.time_index.truncate_to_entries(marks[1])
            self._log.cut(position)
        except StorageError as exc:
            logger.error(
                "cannot undo a failed append to %s (%s) after: %s", self.log_path, exc, cause
            )

    def flush(self) -> None:
        """fsync the ``.log`` and write back both indexes.

        Not the key index: a flush may be on a producer's path (``flush.messages``)
        and a key index write must never delay nor fail an acknowledgement. The
        background indexer writes it once the segment is rolled, a clean close
        writes the active one's, and a crash leaves a stale or missing file,
        which the next lookup or the indexer rebuilds from the log.
        """
        self._log.fsync()
        self.offset_index.flush()
        self.time_index.flush()

    def on_become_inactive(self) -> None:
        """Seal the segment at roll: final time-index entry, indexes trimmed.

        The key index is only marked sealed here: catching it up is left to the
        background indexer (or the next flush or lookup), off the append path.
        """
        self._key_sealed = True
        self._load_tail_state()
        if self._max_timestamp != batch.NO_TIMESTAMP:
            self.time_index.maybe_append(
                self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True
            )
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def resize_indexes(self, size: int) -> None:
        """Make both indexes writable again up to ``size`` bytes (the active segment)."""
        self.offset_index.resize(size)
        self.time_index.resize(size)

    # -------------------------------------------------------------- key index

    def enable_key_index(
        self,
        enabled: bool,
        *,
        active: bool = False,
        slot_count: int | None = None,
        unlink: bool = True,
    ) -> None:
        """Keep a key index (``key.index.enable``) or stop keeping one.

        ``active``: the segment takes appends, so its index lives in memory
        until the segment is rolled or closed. Turning it off drops the index
        and unlinks the ``.keyindex`` (unless ``unlink`` is False: the owner
        knows there is none). ``slot_count`` fixes the in-memory
        table's size (tests force hash collisions with a tiny one).
        """
        with self._key_lock:
            self._key_slots = slot_count
            if not enabled:
                self._key_enabled = False
                self._drop_key_index_locked(unlink=unlink)
                return
            self._key_enabled = True
            if active:
                self._key_sealed = False
                if self._key_builder is None:
                    self._drop_key_index_locked(unlink=unlink)
                    self._key_builder = self._new_builder()

    @property
    def key_index_enabled(self) -> bool:
        """Whether the segment keeps a key index."""
        return self._key_enabled

    def _new_builder(self) -> KeyIndexBuilder:
        from seglog.storage.key_index import KeyIndexBuilder

        return KeyIndexBuilder(self.base_offset, self._key_slots)

    def _read_log(self, position: int, length: int) -> bytes:
        return self._log.read_at(position, length)

    def key_index_pending_bytes(self) -> int:
        """Log bytes the key index does not cover yet (0 when off or caught up).

        Cheap (no file is opened): what the background indexer has left to do.
        """
        if not self._key_enabled:
            return 0
        builder, file = self._key_builder, self._key_file
        if builder is not None:
            return max(0, self._size - builder.indexed_bytes)
        if file is not None and file.indexed_bytes == self._size:
            return 0
        if self._key_checked_size == self._size:
            return 0
        return self._size

    def key_index(self) -> KeyIndexBuilder | KeyIndexFile | None:
        """The key index, covering the whole ``.log`` as it is now; None when off.

        The active segment's is caught up first; a sealed segment's file is
        mapped at first use and, when missing, torn or stale, rebuilt from the
        log and written.
        """
        with self._key_lock:
            if not self._key_enabled:
                return None
            return self._key_index_locked(seal=False)

    def find_key(
        self,
        key: bytes,
        *,
        limit: int | None = None,
        start_offset: int | None = None,
        end_offset: int | None = None,
        from_ms: int | None = None,
        to_ms: int | None = None,
    ) -> list[FoundRecord] | None:
        """The segment's records with ``key``, newest first, at most ``limit``; None when off.

        Bounds as :func:`~seglog.storage.key_search.search_segment`'s. The
        search runs under the key-index lock: an in-memory index must not grow
        under it.
        """
        from seglog.storage.key_search import search_segment

        found: list[FoundRecord] = []
        if limit is not None and limit <= 0:
            return found
        with self._key_lock:
            if not self._key_enabled:
                return None
            index = self._key_index_locked(seal=False)
            if index is None:
                return None
            for record in search_segment(
                index,
                self._read_log,
                key,
                start_offset=start_offset,
                end_offset=end_offset,
                from_ms=from_ms,
                to_ms=to_ms,
            ):
                found.append(record)
                if limit is not None and len(found) >= limit:
                    break
        return found

    def seal_key_index(self, *, force: bool = False) -> bool:
        """Bring the key index up to date and, for a sealed segment, onto disk.

        The background indexer's step (and flush's and close's): an unsealed
        segment's index is only caught up, unless ``force`` (a clean close)
        writes it too. True when anything was read or written.
        """
        with self._key_lock:
            if not self._key_enabled:
                return False
            builder = self._key_builder
            if builder is not None:
                before = builder.indexed_bytes
                builder.catch_up(self._read_log, self._size, self._log.read_into)
                if self._key_sealed or force:
                    builder.write(self.key_index_path, self._env)
                    if self._key_sealed:
                        self._key_builder = None
                        self._key_checked_size = self._size
                    return True
                return builder.indexed_bytes != before
            file = self._key_file
            if self._key_checked_size == self._size or (
                file is not None and file.indexed_bytes == self._size
            ):
                return False
            from seglog.storage.key_index import KeyIndexFile

            try:
                # A whole file left by an earlier run: checked, not rebuilt.
                found = KeyIndexFile.load(
                    self.key_index_path, self.base_offset, self._size, self._env
                )
            except CorruptIndexError:
                self._key_index_locked(seal=True)
                return True
            found.close()
            self._key_checked_size = self._size
            return False

    def _key_index_locked(self, *, seal: bool) -> KeyIndexBuilder | KeyIndexFile | None:
        from seglog.storage import key_index

        size = self._size
        builder = self._key_builder
        if builder is not None:
            builder.catch_up(self._read_log, size, self._log.read_into)
            return builder
        file = self._key_file
        if file is not None and file.indexed_bytes == size:
            return file
        if file is not None:
            file.close()
            self._key_file = None
        try:
            file = key_index.KeyIndexFile.load(
                self.key_index_path, self.base_offset, size, self._env
            )
        except CorruptIndexError as exc:
            logger.debug("building the key index of %s: %s", self.log_path, exc)
            built = key_index.build(
                self.base_offset, self._read_log, size, self._key_slots, self._log.read_into
            )
            try:
                built.write(self.key_index_path, self._env)
            except StorageError as write_error:
                # The lookup is still exact from memory; the next one tries again.
                logger.warning("cannot write %s: %s", self.key_index_path, write_error)
                return built
            self._key_checked_size = size
            if not seal:
                return built
            return None
        self._key_checked_size = size
        if seal:
            file.close()
            return None
        self._key_file = file
        return file

    def _drop_key_index(self, *, unlink: bool) -> None:
        with self._key_lock:
            self._drop_key_index_locked(unlink=unlink)

    def _drop_key_index_locked(self, *, unlink: bool) -> None:
        if self._key_file is not None:
            self._key_file.close()
            self._key_file = None
        if self._key_builder is not None:
            self._key_builder = None
        self._key_checked_size = -1
        if unlink:
            self._env.unlink(self.key_index_path)

    # ------------------------------------------------------------------- read

    def _entries(self, start: int = 0, end: int | None = None) -> Iterator[EntryInfo]:
        """Entries from ``start`` (a batch boundary) to ``end``, positions absolute.

        Headers only, no CRC check: this serves lookups, not validation.
        """
        stop = self._size if end is None else min(end, self._size)
        return self._walk.entries(start, stop)

    def batch_headers(self, from_offset: int = 0) -> Iterator[batch.BatchHeader]:
        """Headers of the v2 batches holding offsets at or after ``from_offset``.

        Rebuilding producer state needs only these; legacy entries carry no
        producer and are skipped.
        """
        found = self._locate(from_offset)
        if found is None:
            return
        yield from self._walk.headers(found[1], self._size)

    def translate_offset(self, offset: int, starting_position: int = 0) -> OffsetPosition | None:
        """The first entry whose last offset is at least ``offset``, or None."""
        found = self._locate(offset, starting_position)
        return None if found is None else OffsetPosition(*found)

    def _locate(self, offset: int, starting_position: int = 0) -> tuple[int, int, int] | None:
        """(base offset, position, size) of :meth:`translate_offset`'s entry, or None.

        The lookup path of every fetch: an offset index lookup, then the
        reader's header walk (:meth:`~seglog.storage.reader.BatchWalk.locate`).
        """
        _, position = self.offset_index.lookup(offset)
        if starting_position > position:
            position = starting_position
        return self._walk.locate(position, self._size, offset)

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = True,
    ) -> SegmentRead | None:
        """The bytes from the entry holding ``start_offset``, at most ``max_size``.

        With ``min_one_message`` the first entry is returned whole even when it
        is larger than ``max_size``. None when the offset is past this segment.
        """
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size}")
        limit = self._size if max_position is None else min(max_position, self._size)
        found = self._locate(start_offset)
        if found is None:
            return None
        first_offset, position, size = found
        if position >= limit:
            return None
        adjusted = max(max_size, size) if min_one_message else max_size
        length = min(limit - position, adjusted)
        return SegmentRead(self._log.region(position, length), first_offset)

    def read_bytes(self, position: int, length: int) -> bytes:
        """A copy of ``length`` bytes at ``position`` (tools and tests; not the fetch path)."""
        return self._log.read_at(position, length)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> TimestampAndOffset | None:
        """The first record with timestamp ≥ ``timestamp`` and offset ≥ ``starting_offset``."""
        indexed_timestamp, indexed_offset = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(max(indexed_offset, starting_offset))
        found = self._walk.first_at_or_after(
            position,
            self._size,
            timestamp,
            starting_offset,
            # The indexed batch carries the target time itself: it holds the answer.
            holds_answer=indexed_timestamp == timestamp and indexed_offset >= starting_offset,
        )
        return None if found is None else TimestampAndOffset(found[1], found[0])

    # --------------------------------------------------------------- recovery

    def sanity_check(self) -> None:
        """Raise CorruptIndexError when an index cannot be trusted."""
        self.offset_index.sanity_check()
        self.time_index.sanity_check()

    def valid_end(self, start: int) -> tuple[int, int | None]:
        """Where the whole, CRC-checked entries from ``start`` (an entry boundary) end,
        and the offset after the last of them (None if there is none)."""
        return self._walk.valid_end(start, self._size)

    def recover(self) -> int:
        """Rebuild both indexes from the log, cutting it at the first bad entry.

        Returns the number of bytes cut. The key index is dropped, to be
        rebuilt from what is left (:meth:`key_index`, or the background indexer).
        """
        with self._key_lock:
            # Held throughout: the background indexer must not read bytes being cut.
            self._drop_key_index_locked(unlink=True)
            if self._key_enabled and not self._key_sealed:
                self._key_builder = self._new_builder()
            return self._recover()

    def _recover(self) -> int:
        self.offset_index.truncate()
        self.offset_index.resize(self.max_index_size)
        self.time_index.truncate()
        self.time_index.resize(self.max_index_size)
        self._max_timestamp = batch.NO_TIMESTAMP
        self._offset_of_max_timestamp = self.base_offset - 1
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp = None
        valid_end = 0
        next_offset = self.base_offset
        if self._size > 0:
            valid_end, next_offset = self._recover_entries()
        truncated = self._size - valid_end
        if truncated > 0:
            self._log.cut(valid_end)
            self._size = valid_end
        self._next_offset = next_offset
        if self._max_timestamp != batch.NO_TIMESTAMP:
            self.time_index.maybe_append(
                self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True
            )
        # As Kafka's recover: the rebuilt indexes are left at their entries;
        # only the active segment's owner grows them again.
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        return truncated

    def _recover_entries(self) -> tuple[int, int]:
        """Check every entry of the ``.log`` and index it; (valid end, next offset).

        The reader's CRC-checked walk
        (:meth:`~seglog.storage.reader.BatchWalk.valid_chunks`) reads the file a
        chunk at a time and stops at the first entry that is not whole and
        valid; a :class:`~seglog.storage._recovery_scan.ChunkIndexer` checks
        and indexes each chunk in one pass.
        """
        scan = ChunkIndexer(
            self.base_offset,
            self.index_interval_bytes,
            self._max_timestamp,
            self._offset_of_max_timestamp,
            self._bytes_since_last_index_entry,
        )
        try:
            index_chunks(
                scan,
                self._walk.valid_chunks(0, self._size, scan),
                self.offset_index,
                self.time_index,
            )
        finally:
            self._max_timestamp = scan.max_timestamp
            self._offset_of_max_timestamp = scan.offset_of_max_timestamp
            self._bytes_since_last_index_entry = scan.since_index
        return scan.valid_end, scan.next_offset

    def truncate_to(self, offset: int) -> int:
        """Remove every entry at or after ``offset``; returns the bytes removed.

        The entry holding ``offset`` is removed whole, as in Kafka: truncation
        points are batch boundaries.
        """
        with self._key_lock:
            # Held throughout: the background indexer must not read bytes being cut.
            return self._truncate_to(offset)

    def _truncate_to(self, offset: int) -> int:
        found = self.translate_offset(offset)
        if found is not None:
            # What is left becomes the active segment: its key index is rebuilt
            # in memory from the bytes that stay.
            self._drop_key_index_locked(unlink=True)
            self._key_sealed = False
            if self._key_enabled:
                self._key_builder = self._new_builder()
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.offset_index.resize(self.max_index_size)
        self.time_index.resize(self.max_index_size)
        if found is None:
            return 0
        removed = self._size - found.position
        self._log.cut(found.position)
        self._size = found.position
        self._bytes_since_last_index_entry = 0
        if self._size == 0:
            self._created_ms = int(time.time() * 1000)
            self._rolling_based_timestamp = None
        # Recompute the tail state from what is left.
        self._next_offset = None
        self._max_timestamp = batch.NO_TIMESTAMP
        self._offset_of_max_timestamp = self.base_offset - 1
        self._load_tail_state()
        return removed

    # ------------------------------------------------------------ file moves

    def change_suffix(self, new_suffix: str) -> None:
        """Rename all files of the segment, e.g. to ``.deleted`` or from ``.swap``."""
        old_txn = self.txn_index_path
        old_keys = self.key_index_path
        self._log.move_to(
            self._path(self.directory, self.base_offset, filenames.LOG_SUFFIX, new_suffix)
        )
        if old_txn.exists():
            self._env.rename(
                old_txn,
                self._path(
                    self.directory, self.base_offset, filenames.TXN_INDEX_SUFFIX, new_suffix
                ),
            )
        self.offset_index.rename_to(
            self._path(self.directory, self.base_offset, filenames.INDEX_SUFFIX, new_suffix)
        )
        self.time_index.rename_to(
            self._path(self.directory, self.base_offset, filenames.TIME_INDEX_SUFFIX, new_suffix)
        )
        with self._key_lock:
            if self._key_file is not None:
                # Mapped under the old name: reopened under the new one at next use.
                self._key_file.close()
                self._key_file = None
            try:
                self._env.rename(
                    old_keys,
                    self._path(
                        self.directory, self.base_offset, filenames.KEY_INDEX_SUFFIX, new_suffix
                    ),
                )
            except StorageError as exc:
                # Not written yet (or disabled): nothing to carry along.
                if not isinstance(exc.__cause__, FileNotFoundError):
                    raise
            self._suffix = new_suffix

    def close(self) -> None:
        """Trim the indexes and close the files; the segment stays on disk.

        The ``.log`` descriptor stays open while regions read from it are held.
        """
        if self._closed:
            return
        self._closed = True
        try:
            if self._key_enabled and self._key_builder is not None:
                # A clean close leaves a key index that covers the whole log.
                self.seal_key_index(force=True)
        except SeglogError as exc:
            logger.warning("cannot write the key index of %s: %s", self.log_path, exc)
        try:
            if self._max_timestamp != batch.NO_TIMESTAMP and self._next_offset is not None:
                self.time_index.maybe_append(
                    self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True
                )
        except (SeglogError, ValueError) as exc:
            # The final entry only saves a scan later. An index a crash left
            # odd (empty, or at its untrimmed length) must not stop a clean
            # close: Kafka swallows this error too.
            logger.warning("cannot add the last time index entry of %s: %s", self.log_path, exc)
        finally:
            self._drop_key_index(unlink=False)
            self.offset_index.close()
            self.time_index.close()
            self._log.release()

    def delete(self) -> None:
        """Close the segment and unlink its files (held regions keep reading the inode)."""
        paths = [
            self.log_path,
            self.offset_index.path,
            self.time_index.path,
            self.txn_index_path,
            self.key_index_path,
        ]
        self._drop_key_index(unlink=False)
        if not self._closed:
            self._closed = True
            self.offset_index.close()
            self.time_index.close()
            self._log.release()
        for path in paths:
            self._env.unlink(path)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._size}{self.suffix!r})"


__all__ = [
    "MAX_SEGMENT_BYTES",
    "LogSegment",
    "OffsetPosition",
    "SegmentRead",
    "TimestampAndOffset",
]
