"""Failed authentications: counted per listener and principal, logged at a bounded rate.

A password guesser fails thousands of times a second. Each failure is
counted (the ``/metrics`` page shows the counts), but a listener logs at
most one failure per interval, with the number left out since the last line:
the log stays readable and its disk stays free while the count stays exact.
The principals counted are bounded too, so that a guesser trying a new user
name each time cannot grow the table without end: past
:data:`MAX_PRINCIPALS` names, failures are counted under ``OTHER``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from seglog.broker.log_limiter import LogLimiter

logger = logging.getLogger(__name__)

INTERVAL_SECONDS = 10.0
"""At most one failure logged per listener in this many seconds."""
MAX_PRINCIPALS = 1000
"""Distinct (listener, principal) pairs counted; the rest count under :data:`OTHER`."""
OTHER = "User:<other>"


class AuthenticationFailures:
    """The broker's count and log of failed authentications, shared by its listeners."""

    def __init__(
        self,
        interval_seconds: float = INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limiter = LogLimiter(interval_seconds, clock)
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}

    def record(
        self, listener: str, principal: str | None, host: str, mechanism: str | None, reason: str
    ) -> None:
        """Count a failure and log it unless this listener logged one within the interval."""
        name = OTHER if principal is None else principal
        with self._lock:
            key = (listener, name)
            if key not in self._counts and len(self._counts) >= MAX_PRINCIPALS:
                key = (listener, OTHER)
            self._counts[key] = self._counts.get(key, 0) + 1
        suppressed = self._limiter.admit(listener)
        if suppressed is None:
            return
        logger.info(
            "failed authentication on listener %s with %s from /%s as %s: %s%s",
            listener,
            mechanism or "no mechanism",
            host,
            name,
            reason,
            self._limiter.not_logged(suppressed, "failed authentication(s) on this listener were"),
        )

    def counts(self) -> dict[tuple[str, str], int]:
        """Failures so far by (listener, principal)."""
        with self._lock:
            return dict(self._counts)


__all__ = ["MAX_PRINCIPALS", "OTHER", "AuthenticationFailures"]
