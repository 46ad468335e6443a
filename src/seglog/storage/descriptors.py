"""File descriptors: the limit, how many are free, and the reserve kept for serving.

Every partition holds descriptors for as long as it exists (the ``.log`` of
each of its segments), so a broker with enough
partitions runs out; then it can no longer accept a connection, roll a segment
or write a checkpoint. Two defences:

* at start the soft ``RLIMIT_NOFILE`` is raised to the hard limit
  (:func:`raise_soft_limit`), as Kafka's start scripts expect operators to do;
* a reserve (:func:`reserve`) is kept for accepting connections and for the
  files that serving needs: creating partitions that would eat into it is
  refused (:func:`check_room_for_partitions`) with a clear error
  (POLICY_VIOLATION for the client).

Counting open descriptors lists ``/proc/self/fd`` (``/dev/fd`` elsewhere);
that costs a little per descriptor, so :func:`free` may answer from a count at
most :data:`CACHE_SECONDS` old, and partition creation asks for a fresh one.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import resource
import threading
import time

from seglog.errors import SeglogError

DESCRIPTORS_PER_PARTITION = 1
"""What a new partition holds open: its segment's ``.log`` (index mappings hold none)."""

CACHE_SECONDS = 0.2
"""How old a count of open descriptors :func:`free` may answer from."""

_UNLIMITED = 1 << 20  # what to assume when the limit is infinite or unknown

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_cached_at = -1.0
_cached_open = 0
_promised = 0  # descriptors of partitions allowed since the last count


class TooManyOpenFilesError(SeglogError):
    """Creating more would leave too few descriptors for serving.

    A refusal by the broker's policy, not a failure of the disk: clients get
    POLICY_VIOLATION (not retriable: retrying will not free descriptors) and
    the message.
    """

    kafka_error = "POLICY_VIOLATION"


def limit() -> int:
    """The soft ``RLIMIT_NOFILE``: how many descriptors this process may hold."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return _UNLIMITED if soft == resource.RLIM_INFINITY else int(soft)


def raise_soft_limit() -> tuple[int, int]:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; (before, after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or (soft != resource.RLIM_INFINITY and hard > soft):
        # macOS refuses RLIM_INFINITY (and values above OPEN_MAX): keep the soft limit.
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return (
        _UNLIMITED if soft == resource.RLIM_INFINITY else int(soft),
        limit(),
    )


def open_count() -> int:
    """How many descriptors this process holds now (the limit when none is left to count)."""
    for directory in ("/proc/self/fd", "/dev/fd"):
        try:
            # The listing holds one descriptor of its own while it runs.
            return max(len(os.listdir(directory)) - 1, 0)
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                return limit()
    return 0


def free(*, fresh: bool = False) -> int:
    """Descriptors still available, from a count at most :data:`CACHE_SECONDS` old."""
    with _lock:
        if fresh or time.monotonic() - _cached_at > CACHE_SECONDS:
            _count()
        held = _cached_open + _promised
    return limit() - held


def _count() -> None:
    global _cached_at, _cached_open, _promised
    _cached_open = open_count()
    _cached_at = time.monotonic()
    _promised = 0


def reserve() -> int:
    """Descriptors kept for accepting connections and for serving's own files.

    A tenth of the limit, at least 64 and at most 1024.
    """
    return max(64, min(1024, limit() // 10))


def check_room_for_partitions(count: int, what: str) -> None:
    """Raise :class:`TooManyOpenFilesError` unless ``count`` new partitions leave the reserve.

    Far from the limit this answers from the last count plus what it allowed
    since (creating thousands of topics must not list every descriptor for
    each); near it, from a fresh count.
    """
    global _promised
    needed = count * DESCRIPTORS_PER_PARTITION
    kept = reserve()
    top = limit()
    with _lock:
        if time.monotonic() - _cached_at > CACHE_SECONDS:
            _count()
        available = top - _cached_open - _promised
        if available - needed < 2 * kept:
            _count()
            available = top - _cached_open
        if available - needed < kept:
            logger.warning(
                "refusing to create %s: %d of %d file descriptors free, %d kept in reserve",
                what,
                available,
                top,
                kept,
            )
            raise TooManyOpenFilesError(
                f"cannot create {what}: {count} partition(s) need about {needed} file "
                f"descriptors, {available} of the limit of {top} are free and {kept} are kept "
                "in reserve for connections (raise the open files limit, ulimit -n, or delete "
                "unused topics)"
            )
        _promised += needed


__all__ = [
    "DESCRIPTORS_PER_PARTITION",
    "TooManyOpenFilesError",
    "check_room_for_partitions",
    "free",
    "limit",
    "open_count",
    "raise_soft_limit",
    "reserve",
]
