"""The transaction index: a segment's aborted transactions (``<base>.txnindex``).

Theory of operation
-------------------
When an ABORT marker lands in a segment, the aborted transaction is appended
to that segment's ``.txnindex``. A read_committed Fetch asks the segments it
reads from which aborted transactions overlap its answer, so that the client
can drop their records. The file is Kafka's: fixed 34-byte entries, back to
back, integers big-endian::

    txnindex := entry*
    entry    := version:int16 (0) producer_id:int64 first_offset:int64
                last_offset:int64 last_stable_offset:int64

``first_offset`` is the transaction's first offset in the partition,
``last_offset`` its ABORT marker's, ``last_stable_offset`` the partition's
LSO once the marker was written. Entries are in marker order, so truncating
the log at an offset truncates the index after the last entry whose marker is
below it. Example: producer 7 writing offsets 10-11 and aborting at 12, with
no other open transaction, gives ``0000 0000000000000007 000000000000000a
000000000000000c 000000000000000d``.

The file exists only once a segment has an aborted transaction. It is not
kept open: markers are rare next to data, and the file is written with one
positioned write per marker and synced with the log. Recovery rebuilds the
entries of the replayed part of the log (see :meth:`seglog.storage.log.Log`).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from seglog.errors import StorageError
from seglog.storage import io

VERSION = 0
ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    """One aborted transaction (Kafka's ``AbortedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        """The entry's 34 bytes."""
        return ENTRY.pack(
            VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )


def decode(data: bytes | memoryview, name: object = "txnindex") -> list[AbortedTxn]:
    """Parse a whole ``.txnindex``; a torn last entry (a crash mid-write) is ignored."""
    entries = []
    whole = len(data) - len(data) % ENTRY_SIZE
    for position in range(0, whole, ENTRY_SIZE):
        version, pid, first, last, lso = ENTRY.unpack_from(data, position)
        if version != VERSION:
            raise StorageError(f"{name} has an entry of version {version} at byte {position}")
        entries.append(AbortedTxn(pid, first, last, lso))
    return entries


def read(path: Path, *, env: io.Env | None = None) -> list[AbortedTxn]:
    """Every entry of the index at ``path`` (none if there is no file)."""
    data = io.env_or_default(env).read_file(path)
    return [] if data is None else decode(data, path)


def append(path: Path, entries: Iterable[AbortedTxn], *, env: io.Env | None = None) -> None:
    """Add ``entries`` at the end of the index at ``path`` (created if need be)."""
    data = b"".join(entry.encode() for entry in entries)
    if not data:
        return
    env = io.env_or_default(env)
    fd = env.open(path, os.O_RDWR | os.O_CREAT)
    try:
        size = env.fstat(fd, name=path).st_size
        # Start at a whole entry: a torn tail left by a crash is overwritten.
        position = size - size % ENTRY_SIZE
        view = memoryview(data)
        while view:
            written = env.pwritev(fd, [view], position, name=path)
            view = view[written:]
            position += written
    finally:
        env.close(fd)


def sync(path: Path, *, env: io.Env | None = None) -> None:
    """fsync the index at ``path`` if it exists."""
    env = io.env_or_default(env)
    try:
        fd = env.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        env.fsync(fd, name=path)
    finally:
        env.close(fd)


def truncate_to(path: Path, offset: int, *, env: io.Env | None = None) -> None:
    """Drop the entries whose marker is at or after ``offset`` (a log truncation)."""
    env = io.env_or_default(env)
    data = env.read_file(path)
    if data is None:
        return
    entries = decode(data, path)
    keep = [entry for entry in entries if entry.last_offset < offset]
    if len(keep) * ENTRY_SIZE == len(data):
        return
    if keep:
        env.truncate(path, len(keep) * ENTRY_SIZE)
    else:
        env.unlink(path)


def collect_aborted(
    entries: Iterable[AbortedTxn], fetch_offset: int, upper_bound: int
) -> list[AbortedTxn]:
    """Entries overlapping [``fetch_offset``, ``upper_bound``): Kafka's ``collectAbortedTxns``."""
    return [
        entry
        for entry in entries
        if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound
    ]


__all__ = [
    "ENTRY_SIZE",
    "VERSION",
    "AbortedTxn",
    "append",
    "collect_aborted",
    "decode",
    "read",
    "sync",
    "truncate_to",
]
