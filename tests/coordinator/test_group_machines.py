"""Model-based tests of both group protocols: random clients against the coordinator.

Clients join, heartbeat, sync, revoke slowly, leave and fall silent while a
fake clock moves; after every step the groups' state machines must agree with
what their members are doing, no partition may have two owners, and no timer
may have failed (a refused transition in a timer is logged, not raised).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from seglog.coordinator.consumer_group import HeartbeatRequest, MemberState
from seglog.coordinator.group import COMPLETING, EMPTY, PREPARING, STABLE
from seglog.coordinator.group_coordinator import (
    CoordinatorConfig,
    GroupCoordinator,
    JoinRequest,
    JoinResult,
    OffsetCommitEntry,
    SyncResult,
)
from seglog.coordinator.offset_store import OffsetStore
from seglog.storage.log_dir import LogDir, LogDirSettings
from tests.coordinator.conftest import PROTOCOL, FakeClock

SLOTS = st.integers(0, 2)
TOPICS = {"t": 4, "u": 2}


class _TimerFailures(logging.Handler):
    """Collects what the coordinator logs when one of its timers raises."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.failures: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info is not None:
            self.failures.append(self.format(record))


class _CoordinatorMachine(RuleBasedStateMachine):
    """A coordinator over a temporary log directory, driven by a fake clock."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="group-machine-"))
        self.clock = FakeClock()
        self.log_dir = LogDir.open(
            self.root / "data",
            settings=LogDirSettings(log_cleaner_enable=False),
            clock=self.clock.time,
        )
        config = CoordinatorConfig(
            initial_rebalance_delay_ms=0,
            offsets_topic_num_partitions=1,
            consumer_session_timeout_ms=6_000,
        )
        self.coordinator = GroupCoordinator(
            config,
            OffsetStore(self.log_dir, partitions=1),
            clock=self.clock.time,
            call_later=self.clock.call_later,
            topic_partitions=lambda topic: TOPICS.get(topic, 0),
            topic_names=lambda: list(TOPICS),
        )
        self.coordinator.finish_loading(self.coordinator.load())
        self.failures = _TimerFailures()
        logging.getLogger("seglog.coordinator.group_coordinator").addHandler(self.failures)

    @rule(ms=st.integers(0, 12_000))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    @invariant()
    def no_timer_failed(self) -> None:
        assert not self.failures.failures, self.failures.failures

    def teardown(self) -> None:
        logging.getLogger("seglog.coordinator.group_coordinator").removeHandler(self.failures)
        self.coordinator.shutdown()
        self.log_dir.close()
        shutil.rmtree(self.root, ignore_errors=True)


# --------------------------------------------------------------- KIP-848


@dataclass
class ModernClient:
    """What a consumer using the KIP-848 protocol knows of itself."""

    member_id: str = ""
    epoch: int = 0
    owned: frozenset[tuple[str, int]] = frozenset()
    told: frozenset[tuple[str, int]] = frozenset()
    """The last assignment the coordinator sent (applied at the next acknowledging heartbeat)."""


class ConsumerGroupMachine(_CoordinatorMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clients = [ModernClient() for _ in range(3)]

    def _send(self, slot: int, request: HeartbeatRequest) -> None:
        client = self.clients[slot]
        result = self.coordinator.consumer_group_heartbeat(request)
        if result.error in ("FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"):
            self.clients[slot] = ModernClient()  # it abandons its partitions
            return
        assert result.error == "NONE", result
        if request.member_epoch < 0:
            self.clients[slot] = ModernClient()
            return
        assert result.member_id is not None
        client.member_id = result.member_id
        client.epoch = result.member_epoch
        if result.assignment is not None:
            client.told = frozenset(result.assignment)

    @rule(slot=SLOTS, topics=st.sampled_from([["t"], ["u"], ["t", "u"]]))
    def join(self, slot: int, topics: list[str]) -> None:
        if self.clients[slot].member_id:
            return
        request = HeartbeatRequest(
            "g", "", 0, rebalance_timeout_ms=5_000, subscribed_topic_names=topics, owned=[]
        )
        self._send(slot, request)

    @rule(
        slot=SLOTS,
        acknowledge=st.booleans(),
        topics=st.none() | st.sampled_from([["t"], ["u"], ["t", "u"]]),
    )
    def heartbeat(self, slot: int, acknowledge: bool, topics: list[str] | None) -> None:
        client = self.clients[slot]
        if not client.member_id:
            return
        if acknowledge:
            client.owned = client.told  # revoked what it must, took what it was given
        request = HeartbeatRequest(
            "g",
            client.member_id,
            client.epoch,
            subscribed_topic_names=topics,
            owned=sorted(client.owned),
        )
        self._send(slot, request)

    @rule(slot=SLOTS)
    def leave(self, slot: int) -> None:
        client = self.clients[slot]
        if client.member_id:
            self._send(slot, HeartbeatRequest("g", client.member_id, -1))

    @invariant()
    def no_partition_has_two_owners(self) -> None:
        group = self.coordinator.consumer_groups.get("g")
        if group is None:
            return
        seen: set[tuple[str, int]] = set()
        for member in group.members.values():
            holds = member.holds()
            assert not holds & seen, (member.member_id, holds & seen)
            seen |= holds

    @invariant()
    def member_states_say_what_is_pending(self) -> None:
        group = self.coordinator.consumer_groups.get("g")
        if group is None:
            return
        assert group.assignment_epoch <= group.group_epoch
        for member in group.members.values():
            unrevoked = member.state is MemberState.UNREVOKED_PARTITIONS
            assert unrevoked == bool(member.revoking)
            assert not member.assigned & member.revoking
            assert member.member_epoch <= group.assignment_epoch
            assert (member.revocation_timer is not None) == unrevoked


# --------------------------------------------------------------- classic


@dataclass
class ClassicClient:
    """What a consumer using the classic protocol knows of itself, and its waiting calls."""

    member_id: str = ""
    generation: int = -1
    members: list[str] = field(default_factory=list)
    joins: list[JoinResult] = field(default_factory=list)
    syncs: list[SyncResult] = field(default_factory=list)
    waiting: int = 0
    """JoinGroup and SyncGroup calls sent and not yet answered."""


class ClassicGroupMachine(_CoordinatorMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clients = [ClassicClient() for _ in range(3)]

    def _answered(self, client: ClassicClient) -> None:
        client.waiting -= 1
        assert client.waiting >= 0, "a held request was answered twice"

    def _take_answers(self) -> None:
        for client in self.clients:
            while client.joins:
                answer = client.joins.pop(0)
                if answer.error == "MEMBER_ID_REQUIRED":
                    client.member_id = answer.member_id
                elif answer.error == "NONE":
                    client.member_id = answer.member_id
                    client.generation = answer.generation_id
                    client.members = [m for m, _, _ in answer.members]
                elif answer.error in ("UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID"):
                    client.member_id, client.generation = "", -1
            client.syncs.clear()

    def _join_callback(self, client: ClassicClient) -> Callable[[JoinResult], None]:
        client.waiting += 1

        def respond(result: JoinResult) -> None:
            self._answered(client)
            client.joins.append(result)

        return respond

    def _sync_callback(self, client: ClassicClient) -> Callable[[SyncResult], None]:
        client.waiting += 1

        def respond(result: SyncResult) -> None:
            self._answered(client)
            client.syncs.append(result)

        return respond

    @rule(slot=SLOTS)
    def join(self, slot: int) -> None:
        self._take_answers()
        client = self.clients[slot]
        request = JoinRequest(
            "g", client.member_id, None, "c", "/h", 6_000, 8_000, "consumer", PROTOCOL
        )
        self.coordinator.join_group(request, self._join_callback(client))
        self._take_answers()

    @rule(slot=SLOTS)
    def sync(self, slot: int) -> None:
        self._take_answers()
        client = self.clients[slot]
        if not client.member_id:
            return
        assignments = {m: b"a" for m in client.members}
        self.coordinator.sync_group(
            "g",
            client.generation,
            client.member_id,
            None,
            assignments,
            self._sync_callback(client),
        )
        self._take_answers()

    @rule()
    def well_behaved_round(self) -> None:
        """Every client that has a member id rejoins, then syncs: a rebalance that ends."""
        for slot, client in enumerate(self.clients):
            if client.member_id:
                self.join(slot)
        for slot, client in enumerate(self.clients):
            if client.member_id:
                self.sync(slot)

    @rule(slot=SLOTS)
    def heartbeat(self, slot: int) -> None:
        self._take_answers()
        client = self.clients[slot]
        if client.member_id:
            self.coordinator.heartbeat("g", client.generation, client.member_id, None)

    @rule(slot=SLOTS)
    def commit(self, slot: int) -> None:
        self._take_answers()
        client = self.clients[slot]
        entries = [OffsetCommitEntry("t", 0, 5)]
        self.coordinator.commit_offsets("g", client.generation, client.member_id, None, entries)

    @rule(slot=SLOTS)
    def leave(self, slot: int) -> None:
        self._take_answers()
        client = self.clients[slot]
        if client.member_id:
            self.coordinator.leave_group("g", [(client.member_id, None)])
            client.member_id, client.generation = "", -1
        self._take_answers()

    @invariant()
    def the_state_agrees_with_the_members(self) -> None:
        group = self.coordinator.groups.get("g")
        if group is None:
            return
        held_joins = [m for m in group.members.values() if m.join_callback is not None]
        held_syncs = [m for m in group.members.values() if m.sync_callback is not None]
        if group.is_in(EMPTY):
            assert not group.members and not held_joins and not held_syncs
        if group.is_in(PREPARING):
            assert group.join_timer is not None
            assert not held_syncs
        if group.is_in(COMPLETING):
            assert group.members and group.sync_timer is not None
            assert not held_joins
        if group.is_in(STABLE):
            assert group.members and not held_joins and not held_syncs
        if group.members:
            assert group.leader_id in group.members
        assert set(group.static_members.values()) <= set(group.members)


ConsumerGroupMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=40, deadline=None
)
ClassicGroupMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=40, deadline=None
)
TestConsumerGroupMachine = ConsumerGroupMachine.TestCase
TestClassicGroupMachine = ClassicGroupMachine.TestCase
