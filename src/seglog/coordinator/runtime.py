"""What the parts of the group coordinator run on: clock, timers, serving status, writes.

:class:`CoordinatorRuntime` is the one object the three managers of the
group coordinator (:mod:`.classic_groups`, :mod:`.consumer_groups`,
:mod:`.offsets`) are given to reach the world, in the spirit of Kafka 4's
coordinator runtime under its shards:

* the injected clock (:meth:`~CoordinatorRuntime.now_ms`);
* timers (:meth:`~CoordinatorRuntime.schedule`), wrapped so that a timer does
  nothing once the coordinator has shut down, and a failing callback is
  logged instead of raised into the event loop;
* whether a request can be served (:meth:`~CoordinatorRuntime.unavailable`):
  not before ``__consumer_offsets`` is loaded, not after shutdown, and not for
  a group whose ``__consumer_offsets`` partition failed to load;
* appends to ``__consumer_offsets`` (:meth:`~CoordinatorRuntime.append`),
  through :class:`~seglog.coordinator.offset_store.OffsetStore`.

It holds no group state. Everything runs on one thread, the broker's event
loop: the runtime takes no locks and neither do the managers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from seglog.coordinator.offset_store import OffsetStore
from seglog.coordinator.requests import CallLater, Cancellable

# One logger for the whole group coordinator, under the name it has always
# had, so that logging configuration aimed at the coordinator keeps applying.
logger = logging.getLogger("seglog.coordinator.group_coordinator")

Record = tuple[bytes, bytes | None]
"""A ``__consumer_offsets`` record: (key, value); a None value is a tombstone."""


class CoordinatorRuntime:
    """Clock, timers, serving status and writes shared by the group coordinator's parts."""

    def __init__(
        self, store: OffsetStore, *, clock: Callable[[], float], call_later: CallLater
    ) -> None:
        self.store = store
        self._clock = clock
        self._call_later = call_later
        #: True until the groups read from ``__consumer_offsets`` are installed.
        self.loading = True
        #: ``__consumer_offsets`` partitions that could not be loaded (offline, or
        #: a batch that cannot be decoded), with the reason: only their groups are
        #: refused, as Kafka fails only the coordinator of such a partition.
        self.failed_partitions: dict[int, str] = {}
        self._active = True

    # ------------------------------------------------------------- time

    def now_ms(self) -> int:
        """The clock in milliseconds."""
        return int(self._clock() * 1000)

    def schedule(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        """Run ``callback`` after ``delay_ms`` (at once if negative), unless shut down by then."""

        def run() -> None:
            if not self._active:
                return
            try:
                callback()
            except Exception:
                logger.exception("a group coordinator timer failed")

        return self._call_later(max(delay_ms, 0) / 1000, run)

    @staticmethod
    def cancel(timer: Cancellable | None) -> None:
        """Cancel ``timer`` if there is one."""
        if timer is not None:
            timer.cancel()

    def shutdown(self) -> None:
        """From now on timers do nothing and requests get COORDINATOR_NOT_AVAILABLE."""
        self._active = False

    # ----------------------------------------------------------- serving

    def unavailable(self, group_id: str | None = None) -> str | None:
        """The error for a request (of ``group_id``), or None if it can be served.

        A group whose ``__consumer_offsets`` partition failed to load gets
        NOT_COORDINATOR, what Kafka's coordinator runtime answers from a failed
        partition: the client then asks FindCoordinator again, which answers
        COORDINATOR_NOT_AVAILABLE for it (:meth:`coordinator_error`).
        """
        if not self._active:
            return "COORDINATOR_NOT_AVAILABLE"
        if self.loading:
            return "COORDINATOR_LOAD_IN_PROGRESS"
        if group_id is not None and self.coordinator_error(group_id) is not None:
            return "NOT_COORDINATOR"
        return None

    def coordinator_error(self, group_id: str) -> str | None:
        """FindCoordinator's error for ``group_id``: COORDINATOR_NOT_AVAILABLE when its
        ``__consumer_offsets`` partition could not be loaded (Kafka's answer for a
        coordinator partition without a leader), else None."""
        if self.failed_partitions and self.store.partition_for(group_id) in self.failed_partitions:
            return "COORDINATOR_NOT_AVAILABLE"
        if not self.store.serves(group_id):
            return "NOT_COORDINATOR"  # another node of the cluster coordinates it
        return None

    # ------------------------------------------------------------ writes

    def append(self, group_id: str, records: list[Record]) -> tuple[int, int]:
        """Append ``records`` to ``group_id``'s partition of ``__consumer_offsets``.

        Returns (partition, offset to flush up to); raises SeglogError if the
        write fails, in which case the caller changes no state.
        """
        return self.store.append(group_id, records, self.now_ms())
