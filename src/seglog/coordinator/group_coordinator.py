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
In the shape of Kafka 4's group coordinator (service → runtime → shard →
managers), without the runtime's event queue: everything already runs on one
thread. Each part is a class with its own state, given only what it needs:

* :class:`GroupCoordinator` (this module) — the facade the broker's handlers
  call. It owns the parts below, routes each request to the manager of the
  group's protocol, and keeps the two protocols apart where they share a group
  id (a JoinGroup for a KIP-848 group with members, a ConsumerGroupHeartbeat
  for a classic group with members, DeleteGroups, OffsetCommit);
* :mod:`seglog.coordinator.runtime` — :class:`~seglog.coordinator.runtime.CoordinatorRuntime`:
  clock, shutdown-safe timers, serving status (loading, failed partitions)
  and appends to ``__consumer_offsets``; it holds no group state;
* :mod:`seglog.coordinator.classic_group_manager` — classic groups: JoinGroup,
  SyncGroup, Heartbeat, LeaveGroup, with their rounds and timers in
  :mod:`seglog.coordinator.classic_rebalance` and the state table in
  :mod:`seglog.coordinator.group`;
* :mod:`seglog.coordinator.consumer_group_manager` — KIP-848 consumer groups:
  ConsumerGroupHeartbeat and server-side assignment, with the member state
  table and reconciliation in :mod:`seglog.coordinator.consumer_group`;
* :mod:`seglog.coordinator.share_group_manager` — KIP-932 share groups:
  ShareGroupHeartbeat, the simple assignor and the share group records, with
  the data in :mod:`seglog.coordinator.share_group`;
* :mod:`seglog.coordinator.offset_manager` — committed offsets: OffsetCommit,
  OffsetFetch, OffsetDelete, group deletion and the retention timer.

Groups of the two consumer protocols share the group-id namespace and committed
offsets: a group id's offsets are kept on its classic group record, which stays
Empty while a KIP-848 group of that id is in use. Share groups live in the
same namespace but share nothing: as in Kafka, a request of another kind for a
share group's id is refused (GROUP_ID_NOT_FOUND "Group g is not a consumer
group.", or INCONSISTENT_GROUP_PROTOCOL for JoinGroup), and a
ShareGroupHeartbeat for a classic or consumer group's id likewise ("Group g is
not a share group."). Share groups have no committed offsets here: their
positions are the share state of :mod:`seglog.share`.

Two hooks, set by the broker (no-ops by default), tell the share side of
the broker about share groups: :attr:`GroupCoordinator.share_partitions_assigned`
(partitions newly in a group's target assignment, and all of them after a
load: initialize their share state) and
:attr:`GroupCoordinator.share_group_deleted` (DeleteGroups removed a share
group: delete its share state).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from seglog.coordinator.classic_group_manager import ClassicGroupManager
from seglog.coordinator.consumer_group import ConsumerGroup, HeartbeatRequest, HeartbeatResult
from seglog.coordinator.consumer_group_manager import ConsumerGroupManager
from seglog.coordinator.group import DEAD, EMPTY, Group
from seglog.coordinator.offset_manager import OffsetManager
from seglog.coordinator.offset_store import CommittedOffset, LoadedGroup, OffsetStore
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
from seglog.coordinator.runtime import CoordinatorRuntime, logger
from seglog.coordinator.share_group import (
    PROTOCOL_TYPE,
    ShareGroup,
    ShareHeartbeatRequest,
    ShareHeartbeatResult,
)
from seglog.coordinator.share_group_manager import ShareGroupManager
from seglog.errors import NotLeaderOrFollowerError, SeglogError
from seglog.storage.log_dir import LogDir
from seglog.storage.topic_admin import TopicAdministration

# ------------------------------------------------------------ the coordinator


class GroupCoordinator:
    """Every group of this broker; see the module documentation."""

    def __init__(
        self,
        config: CoordinatorConfig,
        store: OffsetStore,
        *,
        clock: Callable[[], float],
        call_later: CallLater,
        partition_exists: Callable[[str, int], bool] = lambda topic, partition: True,
        topic_partitions: Callable[[str], int] | None = None,
        topic_names: Callable[[], Iterable[str]] | None = None,
        topic_ids: Callable[[], Mapping[str, uuid.UUID]] | None = None,
    ) -> None:
        self.config = config
        #: Called with (group id, [(topic, partition)]) when partitions enter a share
        #: group's target assignment for the first time, and for all of a group's
        #: after a load: the broker initializes their share state.
        self.share_partitions_assigned: Callable[[str, list[tuple[str, int]]], None] = (
            lambda group_id, partitions: None
        )
        #: Called with the group id when DeleteGroups removed a share group: the
        #: broker deletes its share state.
        self.share_group_deleted: Callable[[str], None] = lambda group_id: None
        self.store = store
        self._runtime = CoordinatorRuntime(store, clock=clock, call_later=call_later)
        self._classic = ClassicGroupManager(self._runtime, config)
        self._consumer = ConsumerGroupManager(
            self._runtime,
            config,
            topic_partitions=topic_partitions or (lambda topic: 0),
            topic_names=topic_names or (lambda: ()),
        )
        self._share = ShareGroupManager(
            self._runtime,
            config,
            topic_partitions=topic_partitions or (lambda topic: 0),
            topic_ids=topic_ids or (lambda: {}),
            assigned=lambda group_id, partitions: self.share_partitions_assigned(
                group_id, partitions
            ),
        )
        self._offsets = OffsetManager(
            self._runtime,
            config,
            self._classic,
            partition_exists=partition_exists,
            in_use=self._consumer.in_use,
        )

    # ------------------------------------------------------------ state views

    @property
    def groups(self) -> dict[str, Group]:
        """Every classic group record (and offsets-only group), by id."""
        return self._classic.groups

    @property
    def consumer_groups(self) -> dict[str, ConsumerGroup]:
        """Every KIP-848 consumer group, by id."""
        return self._consumer.groups

    @property
    def share_groups(self) -> dict[str, ShareGroup]:
        """Every KIP-932 share group, by id."""
        return self._share.groups

    @property
    def group_overrides(self) -> dict[str, dict[str, int]]:
        """KIP-848 and share groups' own settings (group configs), by group id and config
        name, over ``config``'s."""
        return self._consumer.overrides

    @group_overrides.setter
    def group_overrides(self, overrides: dict[str, dict[str, int]]) -> None:
        self._consumer.overrides = overrides
        self._share.overrides = overrides

    @property
    def loading(self) -> bool:
        """True until :meth:`finish_loading`: requests get COORDINATOR_LOAD_IN_PROGRESS."""
        return self._runtime.loading

    @property
    def failed_partitions(self) -> dict[int, str]:
        """``__consumer_offsets`` partitions that could not be loaded, with the reason."""
        return self._runtime.failed_partitions

    def now_ms(self) -> int:
        """The clock in milliseconds."""
        return self._runtime.now_ms()

    def coordinator_error(self, group_id: str) -> str | None:
        """FindCoordinator's error for ``group_id`` (None: this broker coordinates it)."""
        return self._runtime.coordinator_error(group_id)

    # ------------------------------------------------------ loading, shutdown

    def load(self) -> dict[str, LoadedGroup]:
        """Read ``__consumer_offsets`` (blocking; run it off the event loop).

        Partitions that cannot be read are left out and recorded in
        :attr:`failed_partitions`: only their groups are refused.
        """
        loaded = self.store.load()
        self._runtime.failed_partitions = dict(self.store.failed_partitions)
        return loaded

    def finish_loading(self, loaded: Mapping[str, LoadedGroup]) -> None:
        """Install what :meth:`load` read and start serving group requests."""
        self._classic.restore(
            {
                group_id: found
                for group_id, found in loaded.items()
                if found.metadata is not None or found.offsets
            }
        )
        self._share.restore(loaded)
        self._runtime.loading = False
        logger.info("loaded %d consumer groups from %s", len(loaded), "__consumer_offsets")
        self._offsets.start_retention()

    def shutdown(self) -> None:
        """Stop every timer; later requests are answered COORDINATOR_NOT_AVAILABLE."""
        self._runtime.shutdown()
        self._offsets.shutdown()
        self._consumer.shutdown()
        self._share.shutdown()
        self._classic.shutdown()

    # ------------------------------------------------------- classic groups

    def join_group(self, request: JoinRequest, respond: Callable[[JoinResult], None]) -> None:
        """JoinGroup: ``respond`` is called when the answer is known (maybe much later)."""
        error = self._classic.join_error(request)
        if error is None and self._consumer.in_use(request.group_id):
            error = "INCONSISTENT_GROUP_PROTOCOL"  # a KIP-848 group with members
        if error is None and self._share.get(request.group_id) is not None:
            # A share group, empty or not: Kafka answers without a member id.
            respond(JoinResult(error="INCONSISTENT_GROUP_PROTOCOL", member_id=""))
            return
        if error is not None:
            respond(JoinResult(error=error, member_id=request.member_id))
            return
        self._consumer.release_if_empty(request.group_id)
        self._classic.join(request, respond)

    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        assignments: Mapping[str, bytes],
        respond: Callable[[SyncResult], None],
        *,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> None:
        """SyncGroup: the leader brings ``assignments``; everyone gets their share."""
        self._classic.sync_group(
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            assignments,
            respond,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
        )

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> str:
        """Heartbeat: the error to answer (REBALANCE_IN_PROGRESS tells the member to rejoin)."""
        return self._classic.heartbeat(group_id, generation_id, member_id, group_instance_id)

    def leave_group(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[str, list[str]]:
        """LeaveGroup for (member id, group instance id) pairs: (group error, member errors)."""
        return self._classic.leave_group(group_id, leaving)

    # ------------------------------------------------- KIP-848 consumer groups

    def consumer_group_heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        """ConsumerGroupHeartbeat: join, heartbeat, reconcile or leave."""
        refused = self._consumer.refuse(request)
        if refused is not None:
            return refused
        if self._classic.in_use(request.group_id) or self._share.get(request.group_id):
            return HeartbeatResult(
                error="GROUP_ID_NOT_FOUND",
                error_message=f"Group {request.group_id} is not a consumer group.",
            )
        return self._consumer.heartbeat(request)

    def describe_consumer_group(
        self, group_id: str
    ) -> tuple[str, str | None, ConsumerGroup | None]:
        """ConsumerGroupDescribe of one group: (error, error message, group)."""
        error = self._runtime.unavailable(group_id)
        if error is not None:
            return error, None, None
        group = self._consumer.get(group_id)
        if group is None:
            classic = self._classic.get(group_id)
            if self._share.get(group_id) is not None or (
                classic is not None and not classic.is_in(DEAD)
            ):
                return "GROUP_ID_NOT_FOUND", f"Group {group_id} is not a consumer group.", None
            return "GROUP_ID_NOT_FOUND", f"Group {group_id} not found.", None
        return NONE, None, group

    def validate_consumer_fetch(
        self, group_id: str, member_id: str | None, member_epoch: int
    ) -> str | None:
        """OffsetFetch v9+ with a member: None if accepted, else the error (as Kafka)."""
        return self._consumer.validate_fetch(group_id, member_id, member_epoch)

    # ------------------------------------------------------ KIP-932 share groups

    def share_group_heartbeat(self, request: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        """ShareGroupHeartbeat: join, heartbeat or leave (see :mod:`.share_group`)."""
        refused = self._share.refuse(request)
        if refused is not None:
            return refused
        if self._other_kind(request.group_id):
            return ShareHeartbeatResult(
                error="GROUP_ID_NOT_FOUND",
                error_message=f"Group {request.group_id} is not a share group.",
            )
        return self._share.heartbeat(request)

    def describe_share_group(self, group_id: str) -> tuple[str, str | None, ShareGroup | None]:
        """ShareGroupDescribe of one group: (error, error message, group)."""
        error = self._runtime.unavailable(group_id)
        if error is not None:
            return error, None, None
        group = self._share.get(group_id)
        if group is not None:
            return NONE, None, group
        if self._other_kind(group_id):
            return "GROUP_ID_NOT_FOUND", f"Group {group_id} is not a share group.", None
        return "GROUP_ID_NOT_FOUND", f"Group {group_id} not found.", None

    def _other_kind(self, group_id: str) -> bool:
        """Whether ``group_id`` is a classic or consumer group (Kafka keeps an empty
        classic group, such as one that only stores offsets, as a group too)."""
        classic = self._classic.get(group_id)
        return self._consumer.get(group_id) is not None or (
            classic is not None and not classic.is_in(DEAD)
        )

    def _not_consumer_group(self, group_id: str) -> str | None:
        """The message refusing an offsets request for a share group, else None."""
        if self._share.get(group_id) is None:
            return None
        return f"Group {group_id} is not a consumer group."

    # ---------------------------------------------------------------- offsets

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        entries: list[OffsetCommitEntry],
        *,
        retention_ms: int = -1,
    ) -> CommitOutcome:
        """OffsetCommit: validate the committer, then store every acceptable partition."""
        error = self._runtime.unavailable(group_id) or (
            "INVALID_GROUP_ID" if not group_id else None
        )
        group = self._classic.get(group_id)
        if error is None and self._not_consumer_group(group_id):
            error = "GROUP_ID_NOT_FOUND"  # a share group stores no offsets here
        if error is None and self._consumer.get(group_id) is not None:
            # A KIP-848 group: generation_id is the member epoch.
            error = self._consumer.validate_commit(group_id, member_id, generation_id)
        elif error is None:
            if group is None:
                if generation_id >= 0:
                    error = "ILLEGAL_GENERATION"  # from a generation this broker does not know
            else:
                error = self._classic.validate_commit(
                    group, generation_id, member_id, group_instance_id
                )
        if error is not None:
            return CommitOutcome({(e.topic, e.partition): error for e in entries})
        # A group that only stores offsets (assign() users, tools) is created Empty.
        group = self._classic.get_or_create(group_id)
        return self._offsets.commit(group, entries, retention_ms)

    def validate_txn_offset_commit(
        self, group_id: str, generation_id: int, member_id: str, instance: str | None
    ) -> str | None:
        """TxnOffsetCommit's group checks (v3+): None if accepted, else the error.

        Kafka's coordinator checks the member of a transactional commit only
        when one is named: generation -1 with no member id and no instance id
        (every request below v3, and producers given no consumer group
        metadata) is accepted whatever the group's state. A group this broker
        does not know takes only such a commit. A KIP-848 group's member epoch
        stands for the generation, a stale one answered ILLEGAL_GENERATION.
        """
        error = self._runtime.unavailable(group_id)
        if error is not None:
            return error
        if self._not_consumer_group(group_id):
            return "GROUP_ID_NOT_FOUND"
        if self._consumer.get(group_id) is not None:
            if generation_id < 0 and not member_id and instance is None:
                return None
            error = self._consumer.validate_commit(group_id, member_id, generation_id)
            return "ILLEGAL_GENERATION" if error == "STALE_MEMBER_EPOCH" else error
        return self._classic.validate_txn_commit(group_id, generation_id, member_id, instance)

    def apply_txn_offsets(self, committed: Mapping[str, Mapping[tuple[str, int], Any]]) -> None:
        """Make the offsets of a committed transaction visible (they are stored already)."""
        self._offsets.apply_txn_offsets(committed)

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> tuple[str, list[tuple[str, int, CommittedOffset | None]]]:
        """OffsetFetch: (group error, [(topic, partition, committed or None)]).

        ``partitions`` None asks for every partition the group has an offset for.
        A share group has none: GROUP_ID_NOT_FOUND, as Kafka answers.
        """
        if self._runtime.unavailable(group_id) is None and self._not_consumer_group(group_id):
            return "GROUP_ID_NOT_FOUND", []
        return self._offsets.fetch_offsets(group_id, partitions)

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[str, dict[tuple[str, int], str]]:
        """OffsetDelete: (group error, per-partition errors)."""
        if self._runtime.unavailable(group_id) is None and self._not_consumer_group(group_id):
            return "GROUP_ID_NOT_FOUND", {}
        return self._offsets.delete_offsets(group_id, partitions)

    def expire_offsets(self) -> int:
        """Delete offsets past ``offsets.retention.minutes``; returns how many."""
        return self._offsets.expire_offsets()

    def delete_groups(self, group_ids: list[str]) -> dict[str, str]:
        """DeleteGroups: each empty group's offsets and metadata are tombstoned."""
        results: dict[str, str] = {}
        for group_id in group_ids:
            error = self._runtime.unavailable(group_id)
            group = self._classic.get(group_id)
            if error is None and self._share.get(group_id) is not None:
                error = self._share.delete(group_id)
                if error == NONE:
                    self._share_deleted(group_id)
            if error is None:
                if not group_id:
                    error = "INVALID_GROUP_ID"
                elif self._consumer.in_use(group_id):
                    error = "NON_EMPTY_GROUP"
                elif group is None and self._consumer.get(group_id) is not None:
                    self._consumer.discard(group_id)  # empty, without offsets
                    error = NONE
                elif group is None or group.is_in(DEAD):
                    error = "GROUP_ID_NOT_FOUND"
                elif not group.is_in(EMPTY):
                    error = "NON_EMPTY_GROUP"
            if error is None:
                assert group is not None
                error = self._offsets.delete_group(group)
                if error == NONE:
                    self._consumer.discard(group_id)
            results[group_id] = error
        return results

    def _share_deleted(self, group_id: str) -> None:
        try:
            self.share_group_deleted(group_id)
        except Exception:
            # The group is gone from the log already; the broker's side logs its own trouble.
            logger.exception("deleting the share state of %s failed", group_id)

    # ------------------------------------------------ List / Describe

    def list_groups(
        self, states: list[str] | None = None, types: list[str] | None = None
    ) -> tuple[str, list[tuple[str, str, str]]]:
        """ListGroups: (error, [(group id, protocol type, state)]), filtered as Kafka does."""
        error = self._runtime.unavailable()
        if error is not None:
            return error, []
        wanted_states = {s.lower() for s in states or []}
        wanted_types = {t.lower() for t in types or []}
        listed = []
        if not wanted_types or "share" in wanted_types:
            for group_id, state in self._share.summary():
                if not wanted_states or state.lower() in wanted_states:
                    listed.append((group_id, PROTOCOL_TYPE, state))
        if not wanted_types or "consumer" in wanted_types:
            for group_id, state in self._consumer.summary():
                if not wanted_states or state.lower() in wanted_states:
                    listed.append((group_id, "consumer", state))
        if wanted_types and "classic" not in wanted_types:
            return NONE, sorted(listed)
        listed.extend(
            entry
            for entry in self._classic.listed(wanted_states)
            if self._consumer.get(entry[0]) is None
        )
        return NONE, sorted(listed)

    def group_type(self, group_id: str) -> str:
        """ListGroups v5's type of a group: ``share``, ``consumer`` (KIP-848) or ``classic``."""
        if self._share.get(group_id) is not None:
            return "share"
        return "consumer" if self._consumer.get(group_id) is not None else "classic"

    def describe_group(self, group_id: str) -> GroupDescription:
        """DescribeGroups for one group; an unknown group is reported Dead, as Kafka does."""
        error = self._runtime.unavailable(group_id)
        group = self._classic.get(group_id)
        modern = self._consumer.get(group_id) is not None or self._share.get(group_id) is not None
        if error is not None:
            return GroupDescription(group_id, error, DEAD.value, "", "", [])
        if group is None or modern:
            # A KIP-848 or share group is not a classic one: Dead, and not found from v6 on.
            missing = (
                f"Group {group_id} is not a classic group."
                if modern
                else f"Group {group_id} not found."
            )
            return GroupDescription(group_id, NONE, DEAD.value, "", "", [], missing)
        return self._classic.describe(group)


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
        topic_ids=lambda: {name: info.topic_id for name, info in log_dir.topics().items()},
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
