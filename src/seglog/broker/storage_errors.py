"""The log of storage errors that requests answer with KAFKA_STORAGE_ERROR.

The client sees only the error code; the operator needs the cause. Each such
error is logged at ERROR with its traceback, but at most once per partition
per interval (a minute): a full disk fails every produce to every partition,
and one line a minute per partition says as much as a thousand a second.
The count of errors left out is given with the next line logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from seglog.broker.log_limiter import LogLimiter

logger = logging.getLogger(__name__)

#: At most one line per partition in this many seconds.
INTERVAL_SECONDS = 60.0


class StorageErrorLog:
    """Logs storage errors with their cause, rate-limited per partition."""

    def __init__(
        self,
        interval_seconds: float = INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limiter = LogLimiter(interval_seconds, clock)

    def report(self, action: str, topic: str, partition: int, exc: BaseException) -> bool:
        """Log that ``action`` on the partition failed with ``exc``; False if rate-limited."""
        suppressed = self._limiter.admit((topic, partition))
        if suppressed is None:
            return False
        more = self._limiter.not_logged(suppressed, "storage error(s) of this partition were")
        logger.error(
            "%s partition %d of topic %s failed; the client was answered KAFKA_STORAGE_ERROR: %s%s",
            action,
            partition,
            topic,
            exc,
            more,
            exc_info=exc,
        )
        return True


__all__ = ["INTERVAL_SECONDS", "StorageErrorLog"]
