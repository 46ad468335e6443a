"""Lines that could come a thousand a second, logged at most once per key and interval.

A full disk fails every produce to a partition; a password guesser fails
thousands of logins a second. One line per interval says as much as all of
them, provided it also says how many were left out: :class:`LogLimiter`
decides which events are logged and counts the others, per key.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable


class LogLimiter:
    """At most one logged event per key in ``interval_seconds``; the rest are counted."""

    def __init__(
        self, interval_seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval_seconds = interval_seconds
        self._clock = clock
        self._lock = threading.Lock()  # storage errors are reported from worker threads
        self._last: dict[Hashable, float] = {}
        self._suppressed: dict[Hashable, int] = {}

    def admit(self, key: Hashable) -> int | None:
        """None if this event is not to be logged; else how many were left out before it."""
        now = self._clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval_seconds:
                self._suppressed[key] = self._suppressed.get(key, 0) + 1
                return None
            self._last[key] = now
            return self._suppressed.pop(key, 0)

    def not_logged(self, suppressed: int, what: str) -> str:
        """The phrase that ends a line after ``suppressed`` events were left out ('' for none)."""
        if not suppressed:
            return ""
        return f" ({suppressed} more {what} not logged in the last {self.interval_seconds:g} s)"


__all__ = ["LogLimiter"]
