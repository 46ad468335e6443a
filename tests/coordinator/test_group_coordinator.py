"""The coordinator under a fake clock: joins, syncs, heartbeats, timeouts, commits, restarts."""

from __future__ import annotations

from collections.abc import Callable

from seglog.coordinator.group import GroupState
from seglog.coordinator.group_coordinator import OffsetCommitEntry
from seglog.coordinator.offset_store import TOPIC
from tests.coordinator.conftest import PROTOCOL, Harness


def stable_group(h: Harness, group: str = "g", members: int = 1) -> list[str]:
    """Members joined and synced into one generation; returns their ids, leader first."""
    ids = []
    pending = []
    for _ in range(members):
        member_id, answers = h.join_new(group)
        ids.append(member_id)
        pending.append(answers)
        # Earlier members rejoin as they would on REBALANCE_IN_PROGRESS.
        for i, earlier in enumerate(ids[:-1]):
            if pending[i]:
                pending[i] = h.join(group, earlier)
    assert all(len(a) == 1 and a[0].error == "NONE" for a in pending), pending
    results = [a[0] for a in pending]
    generation = results[0].generation_id
    leader = results[0].leader_id
    syncs = [h.sync(group, generation, m) for m in ids if m != leader]
    h.sync(group, generation, leader, {m: m.encode() for m in ids})
    assert all(s and s[0].error == "NONE" for s in syncs)
    assert h.coordinator.groups[group].state is GroupState.STABLE
    return [leader, *[m for m in ids if m != leader]]


def commit(h: Harness, group: str, generation: int, member: str, offset: int) -> dict:  # type: ignore[type-arg]
    outcome = h.coordinator.commit_offsets(
        group, generation, member, None, [OffsetCommitEntry("t", 0, offset)]
    )
    return outcome.errors


def committed(h: Harness, group: str) -> int | None:
    _, found = h.coordinator.fetch_offsets(group, [("t", 0)])
    entry = found[0][2]
    return None if entry is None else entry.offset


def test_member_id_required_then_join_sync_stable(harness: Harness) -> None:
    first = harness.join("g")
    assert first[0].error == "MEMBER_ID_REQUIRED"
    member_id = first[0].member_id
    assert member_id.startswith("client-")
    joined = harness.join("g", member_id)
    result = joined[0]
    assert (result.error, result.generation_id, result.leader_id) == ("NONE", 1, member_id)
    assert result.protocol_name == "range"
    assert result.members == [(member_id, None, PROTOCOL[0][1])]
    synced = harness.sync("g", 1, member_id, {member_id: b"assignment"})
    assert synced[0].assignment == b"assignment"
    assert harness.coordinator.heartbeat("g", 1, member_id, None) == "NONE"
    described = harness.coordinator.describe_group("g")
    assert described.state == "Stable" and described.protocol_data == "range"
    assert described.members[0].assignment == b"assignment"


def test_old_clients_join_without_the_member_id_round_trip(harness: Harness) -> None:
    answers = harness.join("g", require_known=False)
    assert answers[0].error == "NONE" and answers[0].generation_id == 1


def test_a_second_member_triggers_a_rebalance(harness: Harness) -> None:
    a = stable_group(harness)[0]
    b, b_join = harness.join_new("g")
    assert b_join == []  # held: the group waits for a to rejoin
    assert harness.coordinator.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert harness.coordinator.heartbeat("g", 1, a, None) == "REBALANCE_IN_PROGRESS"
    # A commit of the current generation is still accepted while preparing.
    assert commit(harness, "g", 1, a, 10) == {("t", 0): "NONE"}
    a_join = harness.join("g", a)
    assert a_join[0].generation_id == b_join[0].generation_id == 2
    assert a_join[0].leader_id == a and len(a_join[0].members) == 2
    assert b_join[0].members == []
    # The follower's SyncGroup waits for the leader's.
    b_sync = harness.sync("g", 2, b)
    assert b_sync == []
    assert commit(harness, "g", 2, b, 11) == {("t", 0): "REBALANCE_IN_PROGRESS"}
    harness.sync("g", 2, a, {a: b"A", b: b"B"})
    assert b_sync[0].assignment == b"B"


def test_stale_generation_and_unknown_member_commits_change_nothing(harness: Harness) -> None:
    a, b = stable_group(harness, members=2)
    generation = harness.coordinator.groups["g"].generation_id
    assert commit(harness, "g", generation, a, 5) == {("t", 0): "NONE"}
    log = harness.coordinator.store.log_dir.log(TOPIC, harness.coordinator.store.partition_for("g"))
    end = log.log_end_offset
    assert commit(harness, "g", generation - 1, a, 99) == {("t", 0): "ILLEGAL_GENERATION"}
    assert commit(harness, "g", generation, "stranger", 99) == {("t", 0): "UNKNOWN_MEMBER_ID"}
    assert commit(harness, "g", -1, "", 99) == {("t", 0): "UNKNOWN_MEMBER_ID"}
    assert commit(harness, "nobody", 3, "x", 99) == {("t", 0): "ILLEGAL_GENERATION"}
    assert committed(harness, "g") == 5
    assert log.log_end_offset == end
    assert harness.coordinator.heartbeat("g", generation - 1, b, None) == "ILLEGAL_GENERATION"
    assert harness.coordinator.heartbeat("g", generation, "stranger", None) == "UNKNOWN_MEMBER_ID"


def test_session_expiry_removes_a_silent_member(harness: Harness) -> None:
    a, b = stable_group(harness, members=2)
    for _ in range(4):
        harness.clock.advance(4_000)
        assert harness.coordinator.heartbeat("g", 2, a, None) in ("NONE", "REBALANCE_IN_PROGRESS")
    group = harness.coordinator.groups["g"]
    assert b not in group.members  # silent for 16 s with a 10 s session
    assert group.state is GroupState.PREPARING_REBALANCE
    rejoined = harness.join("g", a)
    assert rejoined[0].generation_id == 3 and [m[0] for m in rejoined[0].members] == [a]


def test_members_that_do_not_rejoin_are_dropped_after_the_rebalance_timeout(
    harness: Harness,
) -> None:
    a, b = stable_group(harness, members=2)
    c, c_join = harness.join_new("g")
    a_join = harness.join("g", a)
    assert a_join == [] and c_join == []
    for _ in range(7):  # b heartbeats (so its session lives) but never rejoins
        harness.clock.advance(4_000)
        assert harness.coordinator.heartbeat("g", 2, b, None) == "REBALANCE_IN_PROGRESS"
    harness.clock.advance(1_000)
    assert a_join == []
    harness.clock.advance(1_000)  # the rebalance timeout (30 s)
    assert a_join[0].generation_id == 3
    assert {m[0] for m in a_join[0].members} == {a, c}
    assert b not in harness.coordinator.groups["g"].members


def test_members_that_never_sync_are_dropped(harness: Harness) -> None:
    long = {"session_ms": 60_000}  # sessions outlive the sync round here
    ids, joins = [], []
    for _ in range(3):
        member_id, answers = harness.join_new("g", **long)
        ids.append(member_id)
        joins.append(answers)
        for i in range(len(ids) - 1):
            if joins[i]:
                joins[i] = harness.join("g", ids[i], **long)
    leader = joins[0][0].leader_id
    generation = joins[0][0].generation_id
    follower, silent = [m for m in ids if m != leader]
    follower_sync = harness.sync("g", generation, follower)
    harness.clock.advance(29_999)
    assert follower_sync == []
    harness.clock.advance(1)  # the rebalance timeout: the leader and `silent` never synced
    assert follower_sync[0].error == "REBALANCE_IN_PROGRESS"
    group = harness.coordinator.groups["g"]
    assert group.state is GroupState.PREPARING_REBALANCE
    assert set(group.members) == {follower}
    assert silent not in group.members


def test_leave_group_rebalances_and_the_last_leaver_empties_the_group(harness: Harness) -> None:
    a, b = stable_group(harness, members=2)
    assert harness.coordinator.leave_group("g", [(b, None), ("ghost", None)]) == (
        "NONE",
        ["NONE", "UNKNOWN_MEMBER_ID"],
    )
    assert harness.coordinator.groups["g"].state is GroupState.PREPARING_REBALANCE
    harness.coordinator.leave_group("g", [(a, None)])
    group = harness.coordinator.groups["g"]
    assert group.state is GroupState.EMPTY and group.generation_id == 3


def test_initial_rebalance_delay_gathers_members(make_harness: Callable[..., Harness]) -> None:
    h = make_harness(initial_rebalance_delay_ms=3_000)
    _, a_join = h.join_new("g")
    h.clock.advance(2_000)
    _, b_join = h.join_new("g")
    h.clock.advance(2_000)  # 4 s: at 3 s the delay was extended by b's arrival
    assert a_join == [] and b_join == []
    h.clock.advance(2_000)  # 6 s: no one new arrived in the extension
    assert a_join[0].generation_id == b_join[0].generation_id == 1
    assert len(a_join[0].members) == 2


def test_pending_member_ids_expire(harness: Harness) -> None:
    answers = harness.join("g")
    member_id = answers[0].member_id
    assert member_id in harness.coordinator.groups["g"].pending_members
    harness.clock.advance(10_001)
    assert harness.coordinator.groups["g"].pending_members == {}
    assert harness.join("g", member_id)[0].error == "UNKNOWN_MEMBER_ID"


def test_static_member_restart_keeps_generation_and_fences_the_old_id(harness: Harness) -> None:
    first = harness.join("g", instance="i-1")
    old = first[0].member_id
    assert first[0].error == "NONE"  # static members skip MEMBER_ID_REQUIRED
    harness.sync("g", 1, old, {old: b"mine"}, instance="i-1")
    other_join = harness.join("g", instance="i-2")
    harness.join("g", old, instance="i-1")
    other = other_join[0].member_id
    generation = other_join[0].generation_id
    leader = other_join[0].leader_id
    harness.sync("g", generation, other, instance="i-2")
    harness.sync("g", generation, leader, {old: b"one", other: b"two"}, instance="i-1")
    # i-2 restarts: a new member id, same generation, same assignment, no rebalance.
    again = harness.join("g", instance="i-2")
    new_id = again[0].member_id
    assert (again[0].error, again[0].generation_id) == ("NONE", generation)
    assert harness.coordinator.groups["g"].state is GroupState.STABLE
    assert harness.sync("g", generation, new_id, instance="i-2")[0].assignment == b"two"
    assert harness.coordinator.heartbeat("g", generation, other, "i-2") == "FENCED_INSTANCE_ID"
    assert harness.coordinator.leave_group("g", [("", "i-2")]) == ("NONE", ["NONE"])


def test_invalid_requests(harness: Harness) -> None:
    assert harness.join("")[0].error == "INVALID_GROUP_ID"
    assert harness.join("g", session_ms=10)[0].error == "INVALID_SESSION_TIMEOUT"
    assert harness.join("g", "made-up")[0].error == "UNKNOWN_MEMBER_ID"
    stable_group(harness)
    wrong = harness.join("g", protocols=[("other", b"")])
    assert wrong[0].error == "INCONSISTENT_GROUP_PROTOCOL"
    assert harness.sync("nope", 1, "x")[0].error == "UNKNOWN_MEMBER_ID"


def test_requests_wait_for_loading(harness: Harness) -> None:
    coordinator = harness.coordinator
    harness.coordinator.shutdown()
    assert harness.log_dir is not None
    harness.log_dir.close()
    coordinator = harness.open(load=False)
    harness.coordinator = coordinator
    assert harness.join("g")[0].error == "COORDINATOR_LOAD_IN_PROGRESS"
    assert coordinator.heartbeat("g", 1, "m", None) == "COORDINATOR_LOAD_IN_PROGRESS"
    assert coordinator.fetch_offsets("g", None)[0] == "COORDINATOR_LOAD_IN_PROGRESS"
    assert coordinator.commit_offsets("g", -1, "", None, [OffsetCommitEntry("t", 0, 1)]).errors == {
        ("t", 0): "COORDINATOR_LOAD_IN_PROGRESS"
    }
    coordinator.finish_loading(coordinator.load())
    assert harness.join("g")[0].error == "MEMBER_ID_REQUIRED"


def test_offsets_and_groups_survive_a_restart(harness: Harness) -> None:
    a, b = stable_group(harness, members=2)
    assert commit(harness, "g", 2, a, 42) == {("t", 0): "NONE"}
    assert commit(harness, "simple", -1, "", 7) == {("t", 0): "NONE"}
    coordinator = harness.restart()
    assert committed(harness, "g") == 42 and committed(harness, "simple") == 7
    group = coordinator.groups["g"]
    assert group.state is GroupState.STABLE and group.generation_id == 2
    assert set(group.members) == {a, b} and group.leader_id == a
    # Members that keep heartbeating carry on; the silent one expires.
    for _ in range(3):
        harness.clock.advance(4_000)
        coordinator.heartbeat("g", 2, a, None)
    assert set(group.members) == {a}
    assert harness.sync("g", 2, b)[0].error in ("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION")


def test_delete_groups_and_offsets(harness: Harness) -> None:
    a = stable_group(harness)[0]
    commit(harness, "g", 1, a, 3)
    h = harness.coordinator
    h.commit_offsets(
        "g", 1, a, None, [OffsetCommitEntry("other", 0, 8), OffsetCommitEntry("other", 1, 9)]
    )
    assert h.delete_groups(["g", "missing"]) == {
        "g": "NON_EMPTY_GROUP",
        "missing": "GROUP_ID_NOT_FOUND",
    }
    error, errors = h.delete_offsets("g", [("t", 0), ("other", 0)])
    assert error == "NONE"
    assert errors == {("t", 0): "GROUP_SUBSCRIBED_TO_TOPIC", ("other", 0): "NONE"}
    assert sorted(h.groups["g"].offsets) == [("other", 1), ("t", 0)]
    h.leave_group("g", [(a, None)])
    assert h.delete_groups(["g"]) == {"g": "NONE"}
    assert "g" not in h.groups
    assert h.list_groups() == ("NONE", [])
    coordinator = harness.restart()
    assert "g" not in coordinator.groups


def test_list_and_describe(harness: Harness) -> None:
    stable_group(harness, "one")
    harness.coordinator.commit_offsets("two", -1, "", None, [OffsetCommitEntry("t", 0, 1)])
    assert harness.coordinator.list_groups() == (
        "NONE",
        [("one", "consumer", "Stable"), ("two", "", "Empty")],
    )
    assert harness.coordinator.list_groups(["empty"])[1] == [("two", "", "Empty")]
    assert harness.coordinator.list_groups(None, ["consumer"])[1] == []
    assert harness.coordinator.describe_group("none").state == "Dead"


def test_offsets_of_an_empty_group_expire_after_the_retention(
    make_harness: Callable[..., Harness],
) -> None:
    h = make_harness(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
    a = stable_group(h)[0]
    commit(h, "g", 1, a, 9)
    h.clock.advance(120_000)  # members keep the offsets of subscribed topics alive
    h.coordinator.heartbeat("g", 1, a, None)
    assert committed(h, "g") is None  # ... but the member died meanwhile (no heartbeats)
    h2 = make_harness(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
    a = stable_group(h2)[0]
    commit(h2, "g", 1, a, 9)
    for _ in range(10):
        h2.clock.advance(5_000)
        h2.coordinator.heartbeat("g", 1, a, None)
    assert committed(h2, "g") == 9
    h2.coordinator.leave_group("g", [(a, None)])
    h2.clock.advance(50_000)
    assert committed(h2, "g") == 9
    h2.clock.advance(20_000)
    assert committed(h2, "g") is None and "g" not in h2.coordinator.groups
    assert "g" not in h2.restart().groups


def test_explicit_retention_of_old_commit_versions(harness: Harness) -> None:
    harness.coordinator.commit_offsets(
        "g", -1, "", None, [OffsetCommitEntry("t", 0, 4)], retention_ms=1_000
    )
    harness.clock.advance(1_000)
    assert harness.coordinator.expire_offsets() == 1
    assert committed(harness, "g") is None
