"""Fetch requests waiting for data: a purgatory keyed by partition, as Kafka's DelayedFetch.

Theory of operation
-------------------
A Fetch that finds less than ``min_bytes`` waits, up to ``max_wait_ms``, as a
:class:`DelayedFetch` put on the watch list of every partition it reads
(:class:`FetchPurgatory`). Whatever changes what a partition offers its
readers names that partition when it is done:

* an append (Produce), a transaction marker (EndTxn, WriteTxnMarkers, an
  abort on timeout or of a fenced producer), which are also the only moves of
  the high watermark and of the last stable offset;
* DeleteRecords (the log start offset moves);
* the partition closing here: its topic deleted (or deleted and created
  again), or released to another node.

The purgatory then looks at the fetches on that partition's list and at no
other. A change of unknown scope (the transaction state loaded at start) asks
every waiting fetch.

A fetch that is asked is first checked cheaply, on the notifier's turn of the
event loop, without reading a file: what it saw of each of its partitions
when it read them (:class:`PartitionSeen`: the offset readable up to, the
active segment and its size) against what the partition holds now. Only a
fetch that may now have enough is woken to read again: one whose partition
closed, went offline or no longer holds its fetch offset (the read answers the
error), or whose partitions have new readable data adding up to ``min_bytes``.
New bytes are counted as what the active segment grew by (an upper bound,
never an underestimate: a fetch is never left waiting with enough); a segment
that rolled, or a last stable offset that moved under ``read_committed``,
counts as enough (the read finds out). A woken fetch that then finds too
little waits again, with what it saw this time.

A fetch leaves every list as soon as it is woken, and in any case when its
wait ends: woken, expired (``max_wait_ms``), cancelled (its connection's task
ended), or its client gone (end of stream or connection lost: there is
nobody left to wait for, so it answers at once with what there is). No
thread waits: each waiting fetch is a future on the event loop with a timer.

Races. Appends and markers written on the event loop notify after they are
written, and a fetch reads and registers in one step of the loop, so no change
falls between. Partitions closed by other threads (a deletion in a worker
thread, a node's control channel) notify through
:meth:`FetchPurgatory.wake_threadsafe`; a fetch checks itself once more just
after registering (Kafka's ``tryCompleteElseWatch``), so a partition closed
by another thread between its read and its registration is not missed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

from seglog.storage.log import Log
from seglog.storage.segment import LogSegment

Key = tuple[str, int]
"""A partition: (topic, partition index)."""

READY = "ready"
"""The fetch may have enough (or an error to answer): read again."""
EXPIRED = "expired"
"""``max_wait_ms`` passed: read once more and answer."""
GONE = "gone"
"""The client is gone (or sends nothing more): read once more and answer."""


class PartitionSeen:
    """What a fetch saw of one partition when it read it; taken before the read."""

    __slots__ = ("end", "fetch_offset", "key", "log", "segment", "segment_size")

    def __init__(self, key: Key, fetch_offset: int, log: Log, end: int) -> None:
        self.key = key
        self.fetch_offset = fetch_offset
        self.log = log
        #: Readable up to here: the high watermark, or the last stable offset
        #: under read_committed.
        self.end = end
        self.segment: LogSegment = log.active_segment
        self.segment_size = self.segment.size


class DelayedFetch:
    """One waiting Fetch: its partitions as it saw them, and what it needs."""

    __slots__ = ("found", "future", "min_bytes", "partitions", "read_committed")

    def __init__(
        self, partitions: list[PartitionSeen], *, found: int, min_bytes: int, read_committed: bool
    ) -> None:
        self.partitions = partitions
        #: Bytes the last read found (fewer than min_bytes).
        self.found = found
        self.min_bytes = min_bytes
        self.read_committed = read_committed
        self.future: asyncio.Future[str] | None = None

    def ready(self) -> bool:
        """Whether a read may now find enough, or an error: the cheap check, no file read."""
        new_bytes = 0
        for seen in self.partitions:
            log = seen.log
            if log.closed or log.offline_reason is not None:
                return True  # deleted, released, recreated or failed: the read says which
            offset = seen.fetch_offset
            if offset < log.log_start_offset or offset > log.log_end_offset:
                return True  # DeleteRecords or a truncation passed it: out of range
            end = log.last_stable_offset if self.read_committed else log.high_watermark
            if end == seen.end or end <= offset:
                continue  # nothing readable beyond what the last read saw
            if self.min_bytes <= 1 or self.read_committed:
                # Any record is enough; or bytes up to a moved LSO are unknown here.
                return True
            segment = log.active_segment
            if segment is not seen.segment:
                return True  # rolled: what it holds past the read is not known here
            new_bytes += segment.size - seen.segment_size
        return new_bytes > 0 and self.found + new_bytes >= self.min_bytes

    def _finish(self, reason: str) -> None:
        future = self.future
        if future is not None and not future.done():
            future.set_result(reason)


def _may_answer(fetch: DelayedFetch) -> bool:
    """:meth:`DelayedFetch.ready`, True if it fails.

    The check runs inside the notifier (a Produce, say), which must not fail
    for a reader's sake; and it reads partitions that other threads may be
    changing (markers). Whatever went wrong, the fetch's own read finds out.
    """
    try:
        return fetch.ready()
    except Exception:
        return True


class FetchPurgatory:
    """Waiting fetches, on the watch list of each partition they read.

    Runs on the event loop, but for :meth:`wake_threadsafe`. The counters are
    read by the metrics page's thread (plain ints).
    """

    def __init__(self) -> None:
        self._watchers: dict[Key, dict[DelayedFetch, None]] = {}
        self._waiting: dict[DelayedFetch, None] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Entries on the partitions' watch lists: a fetch counts once per
        #: partition it reads (Kafka's PurgatorySize).
        self.watched = 0
        #: Fetches answered at max_wait_ms without enough (Kafka's ExpiresPerSec).
        self.expired = 0
        #: Cheap checks of a waiting fetch after a change to one of its partitions.
        self.checks = 0
        #: Waiting fetches woken to read again.
        self.wakeups = 0

    @property
    def delayed(self) -> int:
        """Fetches waiting now (Kafka's NumDelayedOperations)."""
        return len(self._waiting)

    async def wait(
        self, fetch: DelayedFetch, timeout: float, gone: asyncio.Future[None] | None = None
    ) -> str:
        """Wait until ``fetch`` may have enough, ``timeout`` seconds pass or its client goes.

        ``gone`` is done once the client's connection has ended or reached end
        of stream. Returns :data:`READY`, :data:`EXPIRED` or :data:`GONE`. The
        fetch is on no watch list once this returns or raises (cancelled).
        """
        if gone is not None and gone.done():
            return GONE
        loop = asyncio.get_running_loop()
        self._loop = loop
        future: asyncio.Future[str] = loop.create_future()
        fetch.future = future
        self._watch(fetch)
        if _may_answer(fetch):
            # A partition closed by another thread between the read and the
            # registration: its notice may have found nobody to wake.
            self._unwatch(fetch)
            return READY
        timer = loop.call_later(timeout, self._expire, fetch)

        def client_gone(_: asyncio.Future[None]) -> None:
            fetch._finish(GONE)

        if gone is not None:
            gone.add_done_callback(client_gone)
        try:
            return await future
        finally:
            timer.cancel()
            if gone is not None:
                gone.remove_done_callback(client_gone)
            self._unwatch(fetch)

    def wake(self, keys: Iterable[Key] | None = None) -> None:
        """Check the fetches waiting on ``keys`` (None: every fetch); wake the ready ones."""
        if not self._waiting:
            return  # the common case under produce load: nobody to check
        if keys is None:
            for fetch in list(self._waiting):
                self._check(fetch)
            return
        watchers = self._watchers
        for key in keys:
            waiting = watchers.get(key)
            if waiting:
                for fetch in list(waiting):
                    self._check(fetch)

    def wake_threadsafe(self, keys: Iterable[Key]) -> None:
        """:meth:`wake` from any thread (partitions closed by a worker or control thread)."""
        loop = self._loop
        if loop is None:
            return  # no fetch has waited yet; one that is about to checks itself after registering
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits any more
            loop.call_soon_threadsafe(self.wake, list(keys))

    def _check(self, fetch: DelayedFetch) -> None:
        if fetch not in self._waiting:
            return  # woken by an earlier key of the same notice
        self.checks += 1
        if _may_answer(fetch):
            self.wakeups += 1
            self._unwatch(fetch)
            fetch._finish(READY)

    def _expire(self, fetch: DelayedFetch) -> None:
        if fetch in self._waiting:
            self.expired += 1
            self._unwatch(fetch)
            fetch._finish(EXPIRED)

    def _watch(self, fetch: DelayedFetch) -> None:
        self._waiting[fetch] = None
        watchers = self._watchers
        for seen in fetch.partitions:
            waiting = watchers.get(seen.key)
            if waiting is None:
                waiting = watchers[seen.key] = {}
            if fetch not in waiting:
                waiting[fetch] = None
                self.watched += 1

    def _unwatch(self, fetch: DelayedFetch) -> None:
        if self._waiting.pop(fetch, False) is False:
            return  # already off every list
        watchers = self._watchers
        for seen in fetch.partitions:
            waiting = watchers.get(seen.key)
            if waiting is not None and waiting.pop(fetch, False) is None:
                self.watched -= 1
                if not waiting:
                    del watchers[seen.key]
