"""Limits on what clients may hold: connections, request memory, idle time.

Theory of operation
-------------------
One :class:`Connections` object per broker sees every connection's
:class:`~seglog.broker.connection.Channel` and enforces Kafka's limits:

* ``max.connections`` and ``max.connections.per.ip`` (with
  ``max.connections.per.ip.overrides``): a connection over a limit is closed
  right after it is accepted (:meth:`Connections.admit`); so is one that
  would leave less than half of the file descriptors' reserve
  (:mod:`seglog.storage.descriptors`) free.
* ``queued.max.request.bytes``: the bytes of requests being read or waiting to
  be handled, summed over all connections. A frame's memory grows only with the
  bytes that arrive (:mod:`seglog.protocol.framing`), so this sum is what
  clients make the broker hold. When it reaches the bound, every connection
  stops reading (the kernel's socket buffers then push back on the senders)
  until handled requests or closed connections bring it below again (peers
  that close meanwhile are found by a poll, and read to their end); nothing
  fails. Kafka's default
  is -1 (no bound); seglog's is :data:`DEFAULT_QUEUED_MAX_REQUEST_BYTES`, and
  -1 still means none.
* ``connections.max.idle.ms``: a connection with no bytes received and no
  request in progress for that long is closed, and so is one whose frame has
  been arriving for that long (a peer that trickles a frame byte by byte, or
  stalls half-way, would otherwise hold its memory for ever), and one whose
  response has made no progress for that long (a peer that stops reading
  would otherwise hold the response and the segment files it reads from). This also ends
  the one wait the memory bound can cause: if partial frames alone fill the
  bound, they stall, are closed, and reading resumes.

Everything here runs on the event loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import select
import time
from collections import Counter
from typing import Protocol

from seglog.config import BROKER_CONFIGS
from seglog.storage import descriptors

logger = logging.getLogger(__name__)

_PAUSED_CHECK = 0.05
"""Seconds between looks for closed peers while reading is paused."""

DEFAULT_QUEUED_MAX_REQUEST_BYTES: int = BROKER_CONFIGS["queued.max.request.bytes"].default
"""seglog's bound on request bytes held broker-wide when ``queued.max.request.bytes`` is unset."""


class Limited(Protocol):
    """What :class:`Connections` needs of a connection."""

    def sync_reading(self) -> None:
        """Pause or resume reading from the peer after the memory state changed."""

    def idle_since(self) -> float | None:
        """Monotonic time of the last activity; None while a request is in progress."""

    def frame_started(self) -> float | None:
        """Monotonic time the frame being received started arriving, if any."""

    def close_idle(self, reason: str) -> None:
        """Close the connection because of ``reason``."""

    def fileno(self) -> int:
        """The socket's descriptor (-1 if unknown)."""

    def send_progress(self) -> object | None:
        """While a response goes out, a value that changes when it progresses; else None."""

    def peer_finished(self) -> None:
        """The peer closed its side: read what it left, even while reading is paused."""


class Connections:
    """Every connection of a broker and the limits they share."""

    def __init__(
        self,
        *,
        max_connections: int = 2_147_483_647,
        max_connections_per_ip: int = 2_147_483_647,
        per_ip_overrides: dict[str, int] | None = None,
        queued_max_request_bytes: int | None = DEFAULT_QUEUED_MAX_REQUEST_BYTES,
        idle_ms: int | None = 600_000,
    ) -> None:
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.per_ip_overrides = dict(per_ip_overrides or {})
        self.queued_max_request_bytes = queued_max_request_bytes
        self.idle_seconds: float | None = None if idle_ms is None or idle_ms < 0 else idle_ms / 1000
        """None: connections never expire (``connections.max.idle.ms`` negative)."""
        self._per_ip: Counter[str] = Counter()
        self._count = 0
        self._channels: set[Limited] = set()
        self._sends: dict[Limited, tuple[object, float]] = {}  # last progress seen, and when
        self.request_bytes = 0
        """Bytes of requests being read or waiting to be handled, all connections."""
        self.reading_paused = False
        """True while :attr:`request_bytes` is at the bound: no connection reads."""
        self._reaper: asyncio.Task[None] | None = None
        self._fd_open = 0  # descriptors open at the last count
        self._fd_count_at = 0  # connections at the last count
        self._fd_checked = -1.0
        self._paused_event = asyncio.Event()

    # ------------------------------------------------------------ connections

    def admit(self, ip: str) -> str | None:
        """Count a new connection from ``ip``; the reason to refuse it, if over a limit."""
        if self._count >= self.max_connections:
            return f"max.connections ({self.max_connections}) reached"
        # Connections may not eat the descriptors kept for serving (segment
        # rolls, checkpoints): half the reserve stays free whatever happens.
        free = self._descriptors_free()
        if free < descriptors.reserve() // 2:
            return f"too few file descriptors free ({free} of {descriptors.limit()})"
        limit = self.per_ip_overrides.get(ip, self.max_connections_per_ip)
        if self._per_ip[ip] >= limit:
            return f"max.connections.per.ip ({limit}) reached for {ip}"
        self._count += 1
        self._per_ip[ip] += 1
        return None

    def _descriptors_free(self) -> int:
        # Counting open descriptors lists them all: count now and then, and in
        # between add the connections opened since; count afresh whenever the
        # estimate comes near the reserve, where it matters.
        now = time.monotonic()
        estimate = descriptors.limit() - (self._fd_open + self._count - self._fd_count_at)
        if now - self._fd_checked > descriptors.CACHE_SECONDS or estimate < descriptors.reserve():
            self._fd_open = descriptors.open_count()
            self._fd_count_at = self._count
            self._fd_checked = now
            estimate = descriptors.limit() - self._fd_open
        return estimate

    def leave(self, ip: str) -> None:
        """Forget a connection counted by :meth:`admit`."""
        self._count -= 1
        self._per_ip[ip] -= 1
        if self._per_ip[ip] <= 0:
            del self._per_ip[ip]

    @property
    def count(self) -> int:
        """Connections admitted and still open."""
        return self._count

    def register(self, channel: Limited) -> None:
        """Watch ``channel`` for memory and idle limits."""
        self._channels.add(channel)

    def unregister(self, channel: Limited, held: int) -> None:
        """Stop watching ``channel``; ``held`` request bytes it counted go back."""
        self._channels.discard(channel)
        self._sends.pop(channel, None)
        self.change_request_bytes(-held)

    # ----------------------------------------------------------------- memory

    def change_request_bytes(self, delta: int) -> None:
        """Account ``delta`` request bytes; pause or resume every reader at the bound."""
        if not delta:
            return
        self.request_bytes += delta
        limit = self.queued_max_request_bytes
        if limit is None:
            return
        over = self.request_bytes >= limit
        if over != self.reading_paused:
            self.reading_paused = over
            if over:
                self._paused_event.set()
                logger.warning(
                    "requests hold %d bytes (queued.max.request.bytes=%d): "
                    "reading paused on every connection",
                    self.request_bytes,
                    limit,
                )
            for channel in list(self._channels):
                channel.sync_reading()

    # ------------------------------------------------------------------- idle

    def start_reaper(self) -> None:
        """Close idle and stalled connections from now on (call on the event loop)."""
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())

    async def stop_reaper(self) -> None:
        """Stop closing idle connections."""
        task, self._reaper = self._reaper, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _reap_forever(self) -> None:
        # Check a few times per idle period: a connection lives at most about
        # 1.25 idle periods without activity.
        idle = self.idle_seconds
        interval = 5.0 if idle is None else min(max(idle / 4, 0.01), 5.0)
        last = time.monotonic()
        while True:
            if self.reading_paused:
                await asyncio.sleep(min(interval, _PAUSED_CHECK))
            else:
                # A pause wakes the reaper at once (see change_request_bytes).
                self._paused_event.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._paused_event.wait(), interval)
            if self.reading_paused:
                self.find_finished_peers()
            now = time.monotonic()
            if idle is not None and now - last >= interval:
                last = now
                self.reap(now)

    def find_finished_peers(self) -> int:
        """While reading is paused, let connections whose peer has closed read on.

        A paused socket is not read, so a peer's close would go unnoticed and
        the bytes its connection holds would stay counted. A poll for
        POLLRDHUP finds them; each then reads what is left (no more than the
        kernel holds: the peer can send nothing more), sees the end of the
        stream and gives its bytes back.
        """
        if not self._channels:
            return 0
        flags = getattr(select, "POLLRDHUP", 0) | select.POLLHUP | select.POLLERR
        poller = select.poll()
        by_fd: dict[int, Limited] = {}
        for channel in self._channels:
            fd = channel.fileno()
            if fd >= 0:
                by_fd[fd] = channel
                poller.register(fd, flags)
        found = 0
        for fd, _ in poller.poll(0):
            finished = by_fd.get(fd)
            if finished is not None:
                finished.peer_finished()
                found += 1
        return found

    def reap(self, now: float) -> int:
        """Close the connections idle or stalled for the idle period; returns how many."""
        closed = 0
        limit = self.idle_seconds
        if limit is None:
            return 0
        for channel in list(self._channels):
            started = channel.frame_started()
            since = channel.idle_since()
            if started is not None and now - started > limit:
                channel.close_idle(f"a request has been arriving for over {limit:g} s")
            elif since is not None and now - since > limit:
                channel.close_idle(f"idle for over {limit:g} s (connections.max.idle.ms)")
            elif self._send_stalled(channel, now, limit):
                # A peer that stops reading would otherwise hold its response,
                # and the files its regions keep open, for ever.
                channel.close_idle(f"a response has made no progress for over {limit:g} s")
            else:
                continue
            closed += 1
        return closed

    def _send_stalled(self, channel: Limited, now: float, limit: float) -> bool:
        progress = channel.send_progress()
        if progress is None:
            self._sends.pop(channel, None)
            return False
        seen = self._sends.get(channel)
        if seen is None or seen[0] != progress:
            self._sends[channel] = (progress, now)
            return False
        return now - seen[1] > limit
