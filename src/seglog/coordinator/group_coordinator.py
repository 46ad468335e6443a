"""The group coordinator: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, offsets, timers.

Theory of operation
-------------------
One :class:`GroupCoordinator` serves every group (a single broker is the
coordinator of all of them). It runs on one thread, the broker's event loop,
and does no I/O of its own except synchronous appends to
``__consumer_offsets`` through :class:`~seglog.coordinator.offset_store.OffsetStore`
(a write to the page cache, like a Produce); the fsync that makes an
OffsetCommit durable is left to the caller, which awaits it off the loop
before answering (:attr:`CommitOutcome.flush`).

Time comes from two injected callables, so the logic runs under a fake clock
in tests without sleeping:

* ``clock()`` — wall-clock seconds (commit timestamps, offset expiry);
* ``call_later(seconds, callback)`` — a timer with ``cancel()``
  (``loop.call_later`` in the broker).

Requests that must wait (JoinGroup until the join round ends, SyncGroup
until the leader's assignment) take a ``respond`` callback instead of
returning: it is called exactly once, maybe before the method returns. The
broker passes a future's ``set_result``.

Timers, each cancelled when what it guards happens first:

* session — per member, ``session.timeout.ms`` after its last heartbeat,
  commit, join or sync; a member whose JoinGroup or SyncGroup is being held is
  alive by definition. Expiry removes the member and rebalances the group.
* pending member — a member id handed out with MEMBER_ID_REQUIRED that is not
  used within the session timeout is forgotten.
* join — the rebalance timeout of a join round (or the initial delay of an
  empty group's first round, extended while new members keep coming).
* sync — the rebalance timeout of the sync round: members that never sent
  SyncGroup are removed and the group rebalances without them.
* retention — every ``offsets.retention.check.interval.ms``, offsets older than
  ``offsets.retention.minutes`` are deleted (for an empty group counted from
  when it became empty; for a group without group management from the commit;
  for a consumer group from the commit when no member subscribes to the topic
  any more), and empty groups left without offsets are deleted.

Loading: at start the broker reads ``__consumer_offsets`` off the loop
(:meth:`GroupCoordinator.load`) and hands the result to
:meth:`GroupCoordinator.finish_loading`; until then every group request is
answered COORDINATOR_LOAD_IN_PROGRESS. A partition that cannot be read (offline,
or a batch that cannot be decoded) fails alone, as in Kafka's coordinator
runtime: its groups are answered NOT_COORDINATOR and FindCoordinator finds no
coordinator for them (COORDINATOR_NOT_AVAILABLE) until a restart reads it.
Groups stored with members come back Stable with their generation and
assignments, so consumers that keep heartbeating through a broker restart
carry on without a rebalance; those that do not come back expire after their
session timeout.

The group state machine and its table are in :mod:`seglog.coordinator.group`.

Where the code is
-----------------
This module holds the facade, :class:`GroupCoordinator` (shutdown and the
read-only ListGroups/DescribeGroups), and :func:`create_coordinator`, which
the broker calls. The rest of the class is assembled from:

* :mod:`seglog.coordinator._base` — the shared state, the wrapped clock and
  timers, and writes of group metadata to ``__consumer_offsets``;
* :mod:`seglog.coordinator._membership` — JoinGroup, SyncGroup, Heartbeat,
  LeaveGroup and the session, pending-member, join and sync timers;
* :mod:`seglog.coordinator._offsets` — OffsetCommit, OffsetFetch,
  DeleteGroups, OffsetDelete, the retention timer, and loading;
* :mod:`seglog.coordinator.consumer_group` — the KIP-848 consumer protocol
  (ConsumerGroupHeartbeat, server-side assignment), whose groups share the
  group ids and committed offsets of the classic ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from seglog.coordinator._membership import GroupMembership
from seglog.coordinator._offsets import GroupOffsets
from seglog.coordinator.consumer_group import ConsumerGroupProtocol
from seglog.coordinator.group import DEAD, STABLE
from seglog.coordinator.offset_store import OffsetStore
from seglog.coordinator.requests import (
    NONE,
    CallLater,
    Cancellable,
    CommitOutcome,
    CoordinatorConfig,
    GroupDescription,
    JoinRequest,
    JoinResult,
    MemberDescription,
    OffsetCommitEntry,
    SyncResult,
)
from seglog.errors import NotLeaderOrFollowerError, SeglogError
from seglog.storage.log_dir import LogDir
from seglog.storage.topic_admin import TopicAdministration

# ------------------------------------------------------------ the coordinator


class GroupCoordinator(GroupMembership, GroupOffsets, ConsumerGroupProtocol):
    """Every group of this broker; see the module documentation.

    The state and plumbing are in :mod:`._base`, the membership protocol in
    :mod:`._membership` and committed offsets in :mod:`._offsets`; this class
    adds shutting down and the read-only views (ListGroups, DescribeGroups).
    """

    def shutdown(self) -> None:
        """Stop every timer; later requests are answered COORDINATOR_NOT_AVAILABLE."""
        self._active = False
        self._cancel(self._retention_timer)
        self._stop_consumer_timers()
        for group in self.groups.values():
            self._cancel(group.join_timer)
            self._cancel(group.sync_timer)
            for timer in group.pending_members.values():
                self._cancel(timer)
            for member in group.members.values():
                self._cancel(member.session_timer)

    # ------------------------------------------------ List / Describe

    def list_groups(
        self, states: list[str] | None = None, types: list[str] | None = None
    ) -> tuple[str, list[tuple[str, str, str]]]:
        """ListGroups: (error, [(group id, protocol type, state)]), filtered as Kafka does."""
        error = self._unavailable()
        if error is not None:
            return error, []
        wanted_states = {s.lower() for s in states or []}
        wanted_types = {t.lower() for t in types or []}
        listed = []
        if not wanted_types or "consumer" in wanted_types:
            for group_id, state in self.consumer_group_summary():
                if not wanted_states or state.lower() in wanted_states:
                    listed.append((group_id, "consumer", state))
        if wanted_types and "classic" not in wanted_types:
            return NONE, sorted(listed)
        for group in self.groups.values():
            if group.is_in(DEAD) or group.group_id in self.consumer_groups:
                continue
            if wanted_states and group.state.value.lower() not in wanted_states:
                continue
            listed.append((group.group_id, group.protocol_type or "", group.state.value))
        return NONE, sorted(listed)

    def group_type(self, group_id: str) -> str:
        """ListGroups v5's type of a group: ``consumer`` (KIP-848) or ``classic``."""
        return "consumer" if group_id in self.consumer_groups else "classic"

    def describe_group(self, group_id: str) -> GroupDescription:
        """DescribeGroups for one group; an unknown group is reported Dead, as Kafka does."""
        error = self._unavailable(group_id)
        group = self.groups.get(group_id)
        if error is not None or group is None or group_id in self.consumer_groups:
            # A KIP-848 group is not a classic one: Dead here, as Kafka (before v6) does.
            return GroupDescription(group_id, error or NONE, DEAD.value, "", "", [])
        stable = group.is_in(STABLE)
        members = [
            MemberDescription(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        return GroupDescription(
            group_id,
            NONE,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )


def create_coordinator(
    log_dir: LogDir,
    properties: Mapping[str, str],
    *,
    clock: Callable[[], float],
    call_later: CallLater,
    topic_admin: TopicAdministration | None = None,
) -> GroupCoordinator:
    """A coordinator over ``log_dir``'s ``__consumer_offsets``, configured by broker properties.

    ``topic_admin`` creates the topic (the log directory itself unless given).
    """
    config = CoordinatorConfig.from_properties(properties)
    store = OffsetStore(
        log_dir,
        partitions=config.offsets_topic_num_partitions,
        segment_bytes=config.offsets_topic_segment_bytes,
        topic_admin=topic_admin,
    )

    def topic_partitions(topic: str) -> int:
        info = log_dir.topics().get(topic)
        return info.partitions if info is not None else 0

    def partition_exists(topic: str, partition: int) -> bool:
        try:
            log_dir.log(topic, partition)
        except NotLeaderOrFollowerError:
            return True  # another node of the cluster leads it
        except SeglogError:
            return False
        return True

    return GroupCoordinator(
        config,
        store,
        clock=clock,
        call_later=call_later,
        partition_exists=partition_exists,
        topic_partitions=topic_partitions,
        topic_names=lambda: list(log_dir.topics()),
    )


__all__ = [
    "CallLater",
    "Cancellable",
    "CommitOutcome",
    "CoordinatorConfig",
    "GroupCoordinator",
    "GroupDescription",
    "JoinRequest",
    "JoinResult",
    "MemberDescription",
    "OffsetCommitEntry",
    "SyncResult",
    "create_coordinator",
]
