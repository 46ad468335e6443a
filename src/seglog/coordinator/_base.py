"""What every part of the group coordinator shares: state, clock, timers, metadata writes.

:class:`CoordinatorBase` owns the group table, the injected clock and
``call_later`` (wrapped so that a timer does nothing once the coordinator has
shut down and a failing callback is logged, not raised into the loop), the
"is the coordinator serving?" check, and the appends to ``__consumer_offsets``
through :class:`~seglog.coordinator.offset_store.OffsetStore` that store a
group's metadata. The membership protocol (:mod:`._membership`) and committed
offsets (:mod:`._offsets`) build on it; :mod:`.group_coordinator` puts them
together as :class:`~seglog.coordinator.group_coordinator.GroupCoordinator`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from seglog.coordinator.group import Group
from seglog.coordinator.offset_store import (
    GroupRecord,
    MemberRecord,
    OffsetStore,
    group_key,
    group_value,
)
from seglog.coordinator.requests import NONE, CallLater, Cancellable, CoordinatorConfig
from seglog.errors import SeglogError

# One logger for the whole coordinator, under the name it has always had, so
# that logging configuration aimed at the coordinator keeps applying.
logger = logging.getLogger("seglog.coordinator.group_coordinator")


class CoordinatorBase:
    """The shared state and plumbing of the group coordinator."""

    def __init__(
        self,
        config: CoordinatorConfig,
        store: OffsetStore,
        *,
        clock: Callable[[], float],
        call_later: CallLater,
        partition_exists: Callable[[str, int], bool] = lambda topic, partition: True,
    ) -> None:
        self.config = config
        #: KIP-848 groups' own settings (group configs), by group id, over ``config``'s.
        self.group_overrides: dict[str, dict[str, int]] = {}
        self.store = store
        self._clock = clock
        self._call_later = call_later
        self._partition_exists = partition_exists
        self.groups: dict[str, Group] = {}
        self.loading = True
        # __consumer_offsets partitions that could not be loaded (offline, or a
        # batch that cannot be decoded), with the reason: only their groups are
        # refused, as Kafka fails only the coordinator of such a partition.
        self.failed_partitions: dict[int, str] = {}
        self._retention_timer: Cancellable | None = None
        self._active = True

    # ------------------------------------------------------------ plumbing

    def now_ms(self) -> int:
        """The clock in milliseconds."""
        return int(self._clock() * 1000)

    def _later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        def run() -> None:
            if not self._active:
                return
            try:
                callback()
            except Exception:
                logger.exception("a group coordinator timer failed")

        return self._call_later(max(delay_ms, 0) / 1000, run)

    @staticmethod
    def _cancel(timer: Cancellable | None) -> None:
        if timer is not None:
            timer.cancel()

    def _unavailable(self, group_id: str | None = None) -> str | None:
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

    def _current(self, group: Group) -> bool:
        """Whether ``group`` is still the registered group of its id (timers check this)."""
        return self.groups.get(group.group_id) is group

    # -------------------------------------------------------------- storage

    def _store_group(self, group: Group) -> None:
        """Write the group's metadata (generation, members, assignments)."""
        protocol = group.protocol_name
        record = GroupRecord(
            group.protocol_type or "",
            group.generation_id,
            protocol,
            group.leader_id if group.members else None,
            group.state_timestamp_ms,
            tuple(
                MemberRecord(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(protocol),
                    m.assignment,
                )
                for m in group.members.values()
            ),
        )
        self._append(group.group_id, [(group_key(group.group_id), group_value(record))])

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> tuple[int, int]:
        return self.store.append(group_id, records, self.now_ms())

    def _store_safely(self, group: Group) -> str:
        try:
            self._store_group(group)
        except SeglogError as exc:
            logger.error("cannot store group %s: %s", group.group_id, exc)
            return "COORDINATOR_NOT_AVAILABLE"
        return NONE

    # ------------------------------------------------------- static members

    def _fenced(self, group: Group, member_id: str, instance: str | None) -> bool:
        if instance is None:
            return False
        known = group.static_members.get(instance)
        return known is not None and known != member_id
