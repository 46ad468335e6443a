"""The KIP-848 consumer protocol under a fake clock: assignment, reconciliation, expiry,
fencing, offsets with member epochs, and the boundary with classic groups."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog.coordinator.consumer_group import (
    HeartbeatRequest,
    HeartbeatResult,
    MemberState,
    uniform_assign,
)
from seglog.coordinator.group_coordinator import GroupCoordinator, OffsetCommitEntry
from seglog.coordinator.offset_store import OffsetStore
from seglog.storage.log_dir import LogDir, LogDirSettings
from tests.coordinator.conftest import Harness

TOPICS = {"t": 6, "u": 2}
SESSION_MS = 3_000


class ConsumerHarness(Harness):
    """The coordinator harness, with topic metadata for server-side assignment."""

    topics: dict[str, int]

    def open(self, *, load: bool = True) -> GroupCoordinator:
        self.log_dir = LogDir.open(
            self.path, settings=LogDirSettings(log_cleaner_enable=False), clock=self.clock.time
        )
        store = OffsetStore(self.log_dir, partitions=self.config.offsets_topic_num_partitions)
        coordinator = GroupCoordinator(
            self.config,
            store,
            clock=self.clock.time,
            call_later=self.clock.call_later,
            topic_partitions=lambda topic: self.topics.get(topic, 0),
            topic_names=lambda: list(self.topics),
        )
        if load:
            coordinator.finish_loading(coordinator.load())
        return coordinator

    def hb(
        self,
        member_id: str = "",
        epoch: int = 0,
        *,
        group: str = "g",
        topics: list[str] | None = None,
        owned: list[tuple[str, int]] | None = None,
        regex: str | None = None,
        assignor: str | None = None,
        rebalance_ms: int = -1,
    ) -> HeartbeatResult:
        if epoch == 0:
            topics = topics if topics is not None or regex is not None else ["t"]
            owned = owned if owned is not None else []
            rebalance_ms = rebalance_ms if rebalance_ms != -1 else 10_000
        return self.coordinator.consumer_group_heartbeat(
            HeartbeatRequest(
                group_id=group,
                member_id=member_id,
                member_epoch=epoch,
                rebalance_timeout_ms=rebalance_ms,
                subscribed_topic_names=topics,
                subscribed_topic_regex=regex,
                server_assignor=assignor,
                owned=owned,
                client_id="client",
            )
        )

    def join_member(self, **kwargs: Any) -> tuple[str, HeartbeatResult]:
        result = self.hb(**kwargs)
        assert result.error == "NONE", result
        assert result.member_id
        return result.member_id, result


@pytest.fixture
def h(tmp_path: Path) -> Iterator[ConsumerHarness]:
    ConsumerHarness.topics = dict(TOPICS)
    harness = ConsumerHarness(
        tmp_path / "data",
        consumer_session_timeout_ms=SESSION_MS,
        consumer_heartbeat_interval_ms=500,
    )
    harness.topics = dict(TOPICS)
    yield harness
    harness.close()


def parts(result: HeartbeatResult) -> list[int]:
    assert result.assignment is not None, result
    return sorted(p for _, p in result.assignment)


# ------------------------------------------------------------------ assignor


def test_uniform_assign_balances_and_is_sticky() -> None:
    first = uniform_assign({"a": ["t"], "b": ["t"], "c": ["t"]}, {"t": 6})
    assert sorted(len(v) for v in first.values()) == [2, 2, 2]
    assert set().union(*first.values()) == {("t", p) for p in range(6)}
    # c leaves: a and b keep what they had and share c's partitions.
    second = uniform_assign({"a": ["t"], "b": ["t"]}, {"t": 6}, first)
    assert first["a"] <= second["a"] and first["b"] <= second["b"]
    assert sorted(len(v) for v in second.values()) == [3, 3]
    # d joins: each of a, b gives up one partition, nothing else moves.
    third = uniform_assign({"a": ["t"], "b": ["t"], "d": ["t"]}, {"t": 6}, second)
    assert third["a"] <= second["a"] and third["b"] <= second["b"]
    assert sorted(len(v) for v in third.values()) == [2, 2, 2]
    # 7 partitions over 3: 3, 2, 2.
    odd = uniform_assign({"a": ["t"], "b": ["t"], "c": ["t"]}, {"t": 7})
    assert sorted(len(v) for v in odd.values()) == [2, 2, 3]


def test_uniform_assign_respects_subscriptions() -> None:
    result = uniform_assign({"a": ["t"], "b": ["t", "u"]}, {"t": 2, "u": 2})
    assert all(topic == "t" for topic, _ in result["a"])
    assert set().union(*result.values()) == {("t", 0), ("t", 1), ("u", 0), ("u", 1)}
    assert uniform_assign({"a": ["missing"]}, {}) == {"a": frozenset()}
    assert uniform_assign({}, {"t": 3}) == {}


# ------------------------------------------------------------- reconciliation


def test_first_member_gets_every_partition(h: ConsumerHarness) -> None:
    member, result = h.join_member()
    assert result.member_epoch >= 1
    assert result.heartbeat_interval_ms == 500
    assert parts(result) == [0, 1, 2, 3, 4, 5]
    group = h.coordinator.consumer_groups["g"]
    assert group.state.value == "Stable"
    # A heartbeat with nothing new: same epoch, no assignment sent.
    again = h.hb(member, result.member_epoch)
    assert (again.error, again.member_epoch, again.assignment) == (
        "NONE",
        result.member_epoch,
        None,
    )


def test_partitions_move_only_after_revocation(h: ConsumerHarness) -> None:
    a, first = h.join_member()
    epoch_a = first.member_epoch
    b, joined = h.join_member()
    # Everything is still A's: B gets the new epoch but no partition yet.
    assert joined.assignment == []
    assert h.coordinator.consumer_groups["g"].members[b].state is MemberState.UNRELEASED_PARTITIONS
    # A is asked to give up half; it keeps its epoch until it has.
    revoke = h.hb(a, epoch_a)
    assert revoke.member_epoch == epoch_a
    kept = parts(revoke)
    assert len(kept) == 3
    assert h.hb(b, joined.member_epoch).assignment is None  # still held by A
    # A reports that it owns only what it keeps: it moves to the new epoch...
    done = h.hb(a, epoch_a, owned=[("t", p) for p in kept])
    assert done.member_epoch == joined.member_epoch > epoch_a
    # ...and B now gets the released partitions.
    got = h.hb(b, joined.member_epoch)
    assert parts(got) == sorted(set(range(6)) - set(kept))
    assert h.coordinator.consumer_groups["g"].state.value == "Stable"


def test_leave_hands_partitions_over(h: ConsumerHarness) -> None:
    a, first = h.join_member()
    b, joined = h.join_member()
    revoke = h.hb(a, first.member_epoch)
    kept = [("t", p) for p in parts(revoke)]
    h.hb(a, first.member_epoch, owned=kept)
    got = h.hb(b, joined.member_epoch)
    assert len(parts(got)) == 3
    left = h.hb(a, -1)
    assert (left.error, left.member_epoch) == ("NONE", -1)
    after = h.hb(b, got.member_epoch)
    assert after.member_epoch > got.member_epoch
    assert parts(after) == [0, 1, 2, 3, 4, 5]


def test_session_expiry_removes_the_member(h: ConsumerHarness) -> None:
    a, first = h.join_member()
    b, joined = h.join_member()
    kept = [("t", p) for p in parts(h.hb(a, first.member_epoch))]
    h.hb(a, first.member_epoch, owned=kept)
    epoch_b = h.hb(b, joined.member_epoch).member_epoch
    for _ in range(2):  # b heartbeats, a goes silent
        h.clock.advance(1_000)
        h.hb(b, epoch_b)
    assert a in h.coordinator.consumer_groups["g"].members
    h.clock.advance(1_500)
    assert a not in h.coordinator.consumer_groups["g"].members
    result = h.hb(b, epoch_b)
    assert parts(result) == [0, 1, 2, 3, 4, 5]
    assert h.hb(a, first.member_epoch).error == "UNKNOWN_MEMBER_ID"


def test_a_groups_own_configs_set_its_session_and_heartbeat(h: ConsumerHarness) -> None:
    h.coordinator.group_overrides = {
        "own": {"consumer.session.timeout.ms": 10_000, "consumer.heartbeat.interval.ms": 2_000}
    }
    own, answer = h.join_member(group="own")
    assert answer.heartbeat_interval_ms == 2_000
    plain, other = h.join_member(group="g")
    assert other.heartbeat_interval_ms == 500
    h.clock.advance(SESSION_MS + 1_000)
    # The broker's session is over; the group's own one is not.
    assert plain not in h.coordinator.consumer_groups["g"].members
    assert own in h.coordinator.consumer_groups["own"].members
    h.clock.advance(10_000 - SESSION_MS)
    assert own not in h.coordinator.consumer_groups["own"].members


def test_member_that_does_not_revoke_is_fenced_after_its_rebalance_timeout(
    h: ConsumerHarness,
) -> None:
    a, first = h.join_member(rebalance_ms=2_000)
    b, joined = h.join_member()
    h.hb(a, first.member_epoch)  # asked to revoke; never confirms
    for _ in range(4):
        h.clock.advance(600)
        h.hb(a, first.member_epoch)  # keeps heartbeating, without reporting
        h.hb(b, joined.member_epoch)
    members = h.coordinator.consumer_groups["g"].members
    assert list(members) == [b]
    assert members[b].assigned == {("t", p) for p in range(6)}


def test_epoch_validation(h: ConsumerHarness) -> None:
    a, first = h.join_member()
    epoch = first.member_epoch
    assert h.hb(a, epoch + 5).error == "FENCED_MEMBER_EPOCH"
    assert h.hb("nobody", 3).error == "UNKNOWN_MEMBER_ID"
    _b, _ = h.join_member()
    revoke = h.hb(a, epoch)
    kept = [("t", p) for p in parts(revoke)]
    new_epoch = h.hb(a, epoch, owned=kept).member_epoch
    # The previous epoch is accepted with a subset of the assignment (a lost answer)...
    assert h.hb(a, epoch, owned=kept).error == "NONE"
    # ...but not with partitions it no longer has, nor an older epoch.
    assert h.hb(a, epoch, owned=[("t", p) for p in range(6)]).error == "FENCED_MEMBER_EPOCH"
    # A fenced member rejoins with epoch 0 under its id and gets a fresh start.
    rejoined = h.hb(a, 0)
    assert rejoined.error == "NONE" and rejoined.member_id == a
    assert rejoined.member_epoch > new_epoch


def test_invalid_requests(h: ConsumerHarness) -> None:
    assert h.hb(group="").error == "INVALID_GROUP_ID"
    assert h.hb(assignor="sticky").error == "UNSUPPORTED_ASSIGNOR"
    assert h.hb(assignor="uniform").error == "NONE"
    no_subscription = h.coordinator.consumer_group_heartbeat(
        HeartbeatRequest("g2", "m", 0, rebalance_timeout_ms=1000, owned=[])
    )
    assert no_subscription.error == "INVALID_REQUEST"
    assert h.hb(regex="(", group="g3", topics=None).error == "INVALID_REQUEST"


def test_regex_subscription_follows_new_topics(h: ConsumerHarness) -> None:
    a, first = h.join_member(topics=None, regex="t|v")
    assert parts(first) == [0, 1, 2, 3, 4, 5]
    h.topics["v"] = 1
    grown = h.hb(a, first.member_epoch)
    assert grown.member_epoch > first.member_epoch
    assert grown.assignment is not None and ("v", 0) in grown.assignment


def test_more_partitions_are_assigned(h: ConsumerHarness) -> None:
    a, first = h.join_member()
    h.topics["t"] = 8
    result = h.hb(a, first.member_epoch)
    assert parts(result) == list(range(8))


# -------------------------------------------------------------------- offsets


def commit(h: ConsumerHarness, member: str, epoch: int, offset: int = 5) -> str:
    outcome = h.coordinator.commit_offsets(
        "g", epoch, member, None, [OffsetCommitEntry("t", 0, offset)]
    )
    return str(outcome.errors[("t", 0)])


def test_offset_commit_with_member_epochs(h: ConsumerHarness) -> None:
    a, first = h.join_member()
    assert commit(h, a, first.member_epoch) == "NONE"
    assert commit(h, a, first.member_epoch + 1) == "STALE_MEMBER_EPOCH"
    assert commit(h, a, first.member_epoch - 1) == "STALE_MEMBER_EPOCH"
    assert commit(h, "nobody", first.member_epoch) == "UNKNOWN_MEMBER_ID"
    assert commit(h, "", -1) == "UNKNOWN_MEMBER_ID"  # not while the group has members
    error, found = h.coordinator.fetch_offsets("g", [("t", 0)])
    assert error == "NONE" and found[0][2] is not None and found[0][2].offset == 5
    fetch = h.coordinator.validate_consumer_fetch
    assert fetch("g", a, first.member_epoch) is None
    assert fetch("g", a, first.member_epoch + 1) == "STALE_MEMBER_EPOCH"
    assert fetch("g", "nobody", 1) == "UNKNOWN_MEMBER_ID"
    assert fetch("g", None, -1) is None
    # Once empty, admin tools may commit; the offsets survive a restart.
    h.hb(a, -1)
    assert commit(h, "", -1, offset=7) == "NONE"
    h.restart()
    stored = h.coordinator.fetch_offsets("g", [("t", 0)])[1][0][2]
    assert stored is not None and stored.offset == 7


# ------------------------------------------------------------ classic groups


def test_classic_and_consumer_groups_do_not_mix(h: ConsumerHarness) -> None:
    _member, answers = h.join_new("classic")
    assert answers[0].error == "NONE"
    refused = h.hb(group="classic")
    assert refused.error == "GROUP_ID_NOT_FOUND"
    a, _first = h.join_member(group="kip848")
    assert [r.error for r in h.join("kip848")] == ["INCONSISTENT_GROUP_PROTOCOL"]
    assert h.coordinator.delete_groups(["kip848"]) == {"kip848": "NON_EMPTY_GROUP"}
    _error, listed = h.coordinator.list_groups(None, ["consumer"])
    assert listed == [("kip848", "consumer", "Stable")]
    assert h.coordinator.group_type("kip848") == "consumer"
    assert h.coordinator.group_type("classic") == "classic"
    # Once empty, the consumer group can be taken over by the classic protocol.
    h.hb(a, -1, group="kip848")
    _, rejoined = h.join_new("kip848")
    assert rejoined[0].error == "NONE"
    assert "kip848" not in h.coordinator.consumer_groups


def test_shutdown_stops_the_timers(h: ConsumerHarness) -> None:
    h.join_member()
    h.coordinator.shutdown()
    h.clock.advance(SESSION_MS * 2)
    assert len(h.coordinator.consumer_groups["g"].members) == 1


def test_describe(h: ConsumerHarness) -> None:
    a, first = h.join_member()
    error, message, group = h.coordinator.describe_consumer_group("g")
    assert (error, message) == ("NONE", None)
    assert group is not None and group.state.value == "Stable"
    assert group.group_epoch == group.assignment_epoch == first.member_epoch
    assert group.members[a].assigned == group.target[a] == {("t", p) for p in range(6)}
    assert h.coordinator.describe_consumer_group("none")[0] == "GROUP_ID_NOT_FOUND"
    h.join_new("classic")
    error, message, _ = h.coordinator.describe_consumer_group("classic")
    assert (
        error == "GROUP_ID_NOT_FOUND" and message is not None and "not a consumer group" in message
    )
    # DescribeGroups (classic) reports a consumer group as Dead, as Kafka does.
    assert h.coordinator.describe_group("g").state == "Dead"
