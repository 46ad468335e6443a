"""Whether a partition still takes writes after an I/O error.

Owns one partition's offline state and the rule that sets it; knows nothing
of segments or offsets (:class:`~seglog.storage.log.Log` asks it before every
write and tells it of every failed one).

The rule: the first I/O error on a write path (an append's write, a roll, an
index or snapshot write, any fsync) takes the partition offline, as Kafka takes
its log directory offline (``LogDirFailureChannel``): Linux may drop the pages
of a failed fsync for good ("fsyncgate"), so a later fsync that succeeds proves
nothing and no later append may be acknowledged. An offline log refuses every
write with KAFKA_STORAGE_ERROR, keeps serving reads up to its high watermark,
never advances its recovery point again, and is recovered by the next start.
Its close writes its unflushed bytes again and fsyncs them
(:meth:`~seglog.storage.local_log.LocalLog.write_back_unflushed`): the failed
pages may still be cached, clean, and the next start's recovery would read them
back as if they were on disk. (A crash leaves no such chance: a start after a
crash trusts what it reads past the recovery point, as Kafka's does.)

One exception: an append or roll refused for want of space (ENOSPC, EDQUOT)
whose bytes were all cut away again leaves nothing in doubt, so the partition
takes appends again once there is room.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager

from seglog.errors import StorageError

# The partition's messages keep the logger they have always been logged under.
logger = logging.getLogger("seglog.storage.log")

_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


def _os_error(exc: BaseException) -> OSError | None:
    """The operating-system error behind ``exc``, if there is one."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class OfflineState:
    """The offline state of the partition ``name``, set at most once.

    ``lock`` is the log's writer lock: a partition goes offline between two
    writes, never in the middle of one.
    """

    __slots__ = ("_lock", "name", "reason")

    def __init__(self, name: str, lock: AbstractContextManager[object]) -> None:
        self.name = name
        self._lock = lock
        #: Why the partition refuses writes (None while it takes them).
        self.reason: str | None = None

    def check(self) -> None:
        """Raise :class:`StorageError` if the partition is offline."""
        reason = self.reason
        if reason is not None:
            raise StorageError(
                f"partition {self.name} is offline after an I/O error, until the "
                f"broker is restarted: {reason}"
            )

    def take_offline(self, reason: str) -> None:
        """Refuse every write from now on (reads go on) until a restart recovers the log."""
        with self._lock:
            if self.reason is None:
                self.reason = reason
                logger.error(
                    "partition %s is offline until the broker is restarted: %s",
                    self.name,
                    reason,
                )

    def on_write_error(
        self,
        exc: StorageError,
        action: str,
        *,
        undone: bool = False,
        is_whole: Callable[[], bool],
    ) -> None:
        """Take the partition offline if ``exc`` is an I/O error that may have left
        data in doubt.

        ``undone``: the operation cuts away what it wrote when it fails (an
        append, a roll), so a lack of space, with the file back at its size
        (``is_whole``), leaves nothing in doubt. A failed fsync always does,
        whatever its errno.
        """
        cause = _os_error(exc)
        if cause is None:
            return  # refused before any I/O (an offset or size rule), not a failure
        if undone and cause.errno in _NO_SPACE and is_whole():
            return
        self.take_offline(f"cannot {action} {self.name}: {exc}")


__all__ = ["OfflineState"]
