"""FileRegion: a span of a segment file, handed out instead of a copy of its bytes.

Theory of operation
-------------------
A fetch answers with regions so that the broker can ``sendfile`` them straight
from the page cache. A send can last as long as the client takes to read it,
and meanwhile the segment may be deleted (DeleteTopics, retention after
``file.delete.delay.ms``, compaction's swap). If the segment closed its
descriptor under the send, the number would be reused by the next file opened
and the rest of the answer would come from that file: another topic's bytes.

So the descriptor is a :class:`SharedFile`, counted by references:

* the segment holds one reference from open to close; its close only drops it;
* every region holds one from creation until :meth:`FileRegion.release`;
* the descriptor is closed when the last reference goes.

A closed or deleted segment therefore stays readable, from the same inode, by
every region handed out before, and by nothing else: creating a region on a
file whose references are all gone raises :class:`StorageError`.

The broker releases a region when its send completes or the connection is
lost. As a safety net a region also releases itself when it is garbage
collected, so a reader that forgets (a tool, a test, an abandoned response)
keeps the file open only as long as it keeps the region.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from seglog.errors import StorageError
from seglog.records import batch


class SharedFile:
    """An open descriptor closed when its last holder releases it.

    Created with one reference, the owner's. Thread-safe: segments are closed
    by background threads while regions are released on the event loop.
    """

    __slots__ = ("_close", "_lock", "_refs", "fd", "path")

    def __init__(self, fd: int, path: Path, close: Callable[[int], None] = os.close) -> None:
        self.fd = fd
        self.path = path
        # The environment's close, for a descriptor opened through it.
        self._close = close
        self._refs = 1
        self._lock = threading.Lock()

    def acquire(self) -> None:
        """Take one more reference; :class:`StorageError` once the file is closed."""
        with self._lock:
            if self._refs <= 0:
                raise StorageError(f"{self.path} is closed")
            self._refs += 1

    def release(self) -> None:
        """Drop one reference, closing the descriptor with the last."""
        with self._lock:
            if self._refs <= 0:
                return
            self._refs -= 1
            if self._refs:
                return
        self._close(self.fd)

    @property
    def references(self) -> int:
        """How many holders the descriptor has (0 once closed)."""
        return self._refs

    @property
    def closed(self) -> bool:
        """True once the last reference is gone and the descriptor closed."""
        return self._refs <= 0

    def __repr__(self) -> str:
        return f"SharedFile(fd={self.fd}, refs={self._refs}, path={str(self.path)!r})"


class FileRegion:
    """``length`` bytes of ``file`` starting at ``position``; keeps the file open.

    Release it (:meth:`release`, or a ``with`` block) when done; until then
    :attr:`fd` is the segment's file, whatever happened to the segment.
    """

    __slots__ = ("_held", "file", "length", "path", "position")

    def __init__(self, file: SharedFile, position: int, length: int, path: Path) -> None:
        file.acquire()
        self._held = True
        self.file = file
        self.position = position
        self.length = length
        self.path = path

    @property
    def fd(self) -> int:
        """The descriptor to read or ``sendfile`` from (valid until :meth:`release`)."""
        return self.file.fd

    @property
    def released(self) -> bool:
        """True once :meth:`release` has run."""
        return not self._held

    def release(self) -> None:
        """Give the file back; idempotent."""
        if self._held:
            self._held = False
            self.file.release()

    def __enter__(self) -> FileRegion:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        # The safety net: a region nobody released still closes its file.
        if getattr(self, "_held", False):
            self.release()

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return (
            f"FileRegion(fd={self.file.fd}, position={self.position}, "
            f"length={self.length}, path={str(self.path)!r})"
        )


def release_regions(chunks: Iterable[object]) -> None:
    """Release every :class:`FileRegion` among a response's chunks."""
    for chunk in chunks:
        if isinstance(chunk, FileRegion):
            chunk.release()


def region_batches(
    region: FileRegion, stop_offset: int | None = None
) -> list[tuple[int, batch.BatchHeader]]:
    """The v2 batch headers of ``region``, each with its position relative to the region.

    Reads 61 bytes per batch, never the records: a share fetch decides from
    offsets alone which batches it hands out. Legacy (v0/v1) entries and a
    batch cut by the region's end are left out. With ``stop_offset``, the
    headers end with the first batch whose base offset is at or past it: a
    share fetch can use no batch beyond that one, and a region may hold
    thousands of batches (one pread each) where a fetch takes a handful.
    """
    found: list[tuple[int, batch.BatchHeader]] = []
    position = 0
    while position + batch.HEADER_SIZE <= region.length:
        try:
            raw = os.pread(region.fd, batch.HEADER_SIZE, region.position + position)
        except OSError as exc:
            raise StorageError(f"cannot read {region.path}: {exc}") from exc
        if len(raw) < batch.HEADER_SIZE:
            break
        header = batch.BatchHeader._make(batch.HEADER.unpack(raw))
        if header.size <= batch.LOG_OVERHEAD or position + header.size > region.length:
            break
        if header.magic == batch.CURRENT_MAGIC:
            found.append((position, header))
            if stop_offset is not None and header.base_offset >= stop_offset:
                break
        position += header.size
    return found


def sub_region(region: FileRegion, start: int, stop: int) -> FileRegion:
    """Bytes [``start``, ``stop``) of ``region`` as a region of their own (the file held again)."""
    return FileRegion(region.file, region.position + start, stop - start, region.path)
