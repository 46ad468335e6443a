"""Share groups (KIP-932) under a fake clock: the simple assignor, heartbeats and their
errors, session expiry, the records in ``__consumer_offsets`` and their reload, and the
boundary with classic and consumer groups."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.coordinator import share_group_records as rec
from seglog.coordinator.consumer_group import HeartbeatRequest
from seglog.coordinator.group_coordinator import GroupCoordinator, OffsetCommitEntry
from seglog.coordinator.offset_store import TOPIC, OffsetStore
from seglog.coordinator.share_group import (
    ShareHeartbeatRequest,
    ShareHeartbeatResult,
    simple_assign,
)
from seglog.storage.log_dir import LogDir, LogDirSettings
from tests.coordinator.conftest import Harness
from tests.storage.faulty_env import installed

SESSION_MS = 3_000
TOPIC_IDS = {"t": uuid.UUID(int=1), "u": uuid.UUID(int=2), "one": uuid.UUID(int=3)}


class ShareHarness(Harness):
    """The coordinator harness with topics, and the share hooks recorded."""

    topics: dict[str, int] = {"t": 4, "u": 2, "one": 1}  # noqa: RUF012 (copied per harness)
    assigned: list[tuple[str, list[tuple[str, int]]]]
    deleted: list[str]

    def open(self, *, load: bool = True) -> GroupCoordinator:
        if "topics" not in self.__dict__:
            self.topics = dict(type(self).topics)
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
            topic_ids=lambda: {t: TOPIC_IDS[t] for t in self.topics},
        )
        self.assigned = []
        self.deleted = []
        coordinator.share_partitions_assigned = lambda g, tps: self.assigned.append((g, tps))
        coordinator.share_group_deleted = self.deleted.append
        if load:
            coordinator.finish_loading(coordinator.load())
        return coordinator

    def hb(
        self,
        member_id: str,
        epoch: int = 0,
        *,
        group: str = "g",
        topics: list[str] | None = None,
    ) -> ShareHeartbeatResult:
        if epoch == 0 and topics is None:
            topics = ["t"]
        return self.coordinator.share_group_heartbeat(
            ShareHeartbeatRequest(
                group_id=group,
                member_id=member_id,
                member_epoch=epoch,
                subscribed_topic_names=topics,
                client_id="client",
                client_host="/127.0.0.1",
            )
        )

    def member(
        self, member_id: str, *, group: str = "g", topics: list[str] | None = None
    ) -> ShareHeartbeatResult:
        """A member joins (epoch 0) and is accepted."""
        result = self.hb(member_id, 0, group=group, topics=topics)
        assert result.error == "NONE", result
        return result


@pytest.fixture
def h(tmp_path: Path) -> Iterator[ShareHarness]:
    harness = ShareHarness(
        tmp_path / "data",
        share_session_timeout_ms=SESSION_MS,
        share_heartbeat_interval_ms=500,
        share_max_size=3,
    )
    yield harness
    harness.close()


def parts(result: ShareHeartbeatResult) -> list[tuple[str, int]]:
    assert result.assignment is not None, result
    return sorted(result.assignment)


# ------------------------------------------------------------------ assignor


def test_simple_assign_spreads_partitions_one_owner_each_when_members_are_fewer() -> None:
    out = simple_assign({"a": ["t"], "b": ["t"]}, {"t": 4})
    assert sorted(len(v) for v in out.values()) == [2, 2]
    assert out["a"] | out["b"] == {("t", p) for p in range(4)}
    assert not out["a"] & out["b"]


def test_simple_assign_shares_a_partition_among_more_members() -> None:
    members = {f"m{i}": ["one"] for i in range(10)}
    out = simple_assign(members, {"one": 1})
    assert all(tps == {("one", 0)} for tps in out.values())
    # Five members on two partitions: each partition shared by ceil(5 / 2) = 3 members,
    # as Kafka's desired sharing; every member gets one, one of them both.
    out = simple_assign({f"m{i}": ["u"] for i in range(5)}, {"u": 2})
    assert sorted(len(tps) for tps in out.values()) == [1, 1, 1, 1, 2]
    counts = sorted(sum(1 for tps in out.values() if ("u", p) in tps) for p in range(2))
    assert counts == [3, 3]


def test_simple_assign_is_sticky_and_follows_subscriptions() -> None:
    first = simple_assign({"a": ["t"], "b": ["t"]}, {"t": 4})
    second = simple_assign({"a": ["t"], "b": ["t"], "c": ["t"]}, {"t": 4}, first)
    # Each old member keeps partitions it had; the newcomer gets some.
    assert second["a"] <= first["a"] and second["b"] <= first["b"]
    assert second["c"]
    assert second["a"] | second["b"] | second["c"] == {("t", p) for p in range(4)}
    mixed = simple_assign({"a": ["t"], "b": ["u"]}, {"t": 4, "u": 2})
    assert mixed == {
        "a": frozenset(("t", p) for p in range(4)),
        "b": frozenset({("u", 0), ("u", 1)}),
    }
    assert simple_assign({}, {"t": 4}) == {}
    assert simple_assign({"a": ["gone"]}, {}) == {"a": frozenset()}


# --------------------------------------------------------------- heartbeat


def test_join_gets_the_whole_target_at_once_and_the_epoch_moves(h: ShareHarness) -> None:
    a = h.member("A")
    assert (a.member_id, a.member_epoch, a.heartbeat_interval_ms) == ("A", 1, 500)
    assert parts(a) == [("t", p) for p in range(4)]
    b = h.member("B")
    assert b.member_epoch == 2 and len(parts(b)) == 2
    # A's next heartbeat gives up two partitions at once: no revocation phase.
    again = h.hb("A", 1)
    assert again.error == "NONE" and again.member_epoch == 2
    assert set(parts(again)).isdisjoint(parts(b))
    # Nothing changed: no assignment in the answer.
    assert h.hb("A", 2).assignment is None
    assert h.coordinator.share_groups["g"].state.value == "Stable"
    assert h.assigned == [("g", [("t", p) for p in range(4)])]


def test_ten_members_on_one_partition_all_get_it(tmp_path: Path) -> None:
    h = ShareHarness(tmp_path / "data")
    try:
        for i in range(10):
            assert parts(h.member(f"m{i}", topics=["one"])) == [("one", 0)]
        for i in range(10):
            result = h.hb(f"m{i}", i + 1)
            assert result.error == "NONE", result
        group = h.coordinator.share_groups["g"]
        assert all(m.assigned == {("one", 0)} for m in group.members.values())
        assert all(m.member_epoch == 10 for m in group.members.values())
    finally:
        h.close()


def test_heartbeat_errors_as_kafka_answers_them(h: ShareHarness) -> None:
    invalid = h.hb("", 0)
    assert (invalid.error, invalid.error_message) == ("INVALID_REQUEST", "MemberId can't be empty.")
    assert h.hb("A", 0, group="").error_message == "GroupId can't be empty."
    no_topics = h.hb("A", 0, topics=[])
    assert no_topics.error == "INVALID_REQUEST"
    assert no_topics.error_message == "SubscribedTopicNames must be set in first request."
    assert h.hb("A", -2).error_message == "MemberEpoch is invalid."
    missing = h.hb("A", 1)
    assert (missing.error, missing.error_message) == (
        "GROUP_ID_NOT_FOUND",
        "Share group g not found.",
    )
    h.member("A")
    unknown = h.hb("Z", 1)
    assert unknown.error == "UNKNOWN_MEMBER_ID"
    assert unknown.error_message == "Member Z is not a member of group g."
    ahead = h.hb("A", 7)
    assert ahead.error == "FENCED_MEMBER_EPOCH"
    assert "greater member epoch (7)" in (ahead.error_message or "")
    h.member("B")
    h.hb("A", 1)  # A moves to epoch 2, previous 1
    assert h.hb("A", 1).error == "NONE"  # the previous epoch: its answer may have been lost
    h.member("C")
    h.hb("A", 2)  # epoch 3, previous 2
    behind = h.hb("A", 1)
    assert behind.error == "FENCED_MEMBER_EPOCH"
    assert "does not match the previous member epoch (2)" in (behind.error_message or "")
    # Epoch 0 is no exception for a known member (Kafka's check is the same).
    assert h.hb("A", 0).error == "FENCED_MEMBER_EPOCH"
    full = h.hb("D", 0)
    assert full.error == "GROUP_MAX_SIZE_REACHED"
    assert full.error_message == "The share group has reached its maximum capacity of 3 members."
    # Even a known id's other requests are checked only after the size: D is not in.
    assert h.hb("D", 4).error == "GROUP_MAX_SIZE_REACHED"


def test_leave_and_session_timeout_remove_members(h: ShareHarness) -> None:
    h.member("A")
    h.member("B")
    left = h.hb("B", -1)
    assert (left.error, left.member_id, left.member_epoch) == ("NONE", "B", -1)
    group = h.coordinator.share_groups["g"]
    assert list(group.members) == ["A"] and group.group_epoch == 3
    assert h.hb("B", -1).error == "UNKNOWN_MEMBER_ID"
    assert h.hb("X", -1, group="nope").error == "GROUP_ID_NOT_FOUND"
    # A keeps heartbeating, C stops: C expires after the session timeout, A stays.
    h.member("C")
    for _ in range(4):
        h.clock.advance(SESSION_MS / 2)
        assert h.hb("A", group.members["A"].member_epoch).error == "NONE"
    assert list(group.members) == ["A"]
    assert parts(h.hb("A", group.members["A"].member_epoch, topics=["t"])) == [
        ("t", p) for p in range(4)
    ]
    h.clock.advance(SESSION_MS + 1)
    assert group.members == {} and group.state.value == "Empty"


def test_group_config_overrides_session_and_interval(h: ShareHarness) -> None:
    h.coordinator.group_overrides = {
        "g": {"share.session.timeout.ms": 60_000, "share.heartbeat.interval.ms": 1_234}
    }
    assert h.member("A").heartbeat_interval_ms == 1_234
    h.clock.advance(SESSION_MS * 3)
    assert "A" in h.coordinator.share_groups["g"].members


def test_a_member_leaving_bumps_the_epoch_once(h: ShareHarness) -> None:
    h.member("A", topics=["t"])
    h.member("B", topics=["u"])
    assert h.hb("B", -1).error == "NONE"
    group = h.coordinator.share_groups["g"]
    assert group.group_epoch == 3
    result = h.hb("A", 1)
    assert (result.member_epoch, group.group_epoch) == (3, 3)


def test_partition_count_change_bumps_the_epoch(h: ShareHarness) -> None:
    h.member("A")
    h.topics["t"] = 6
    result = h.hb("A", 1)
    assert result.member_epoch == 2
    assert parts(result) == [("t", p) for p in range(6)]
    assert h.assigned[-1] == ("g", [("t", 4), ("t", 5)])


# ------------------------------------------------------------- the records


def _share_keys(h: ShareHarness) -> list[int]:
    assert h.log_dir is not None
    out = []
    for partition in range(h.config.offsets_topic_num_partitions):
        for record in h.log_dir.read_records(TOPIC, partition, 0, max_bytes=1 << 30):
            if record.key is not None and record.key[:2] >= b"\x00\x0a":
                out.append(rec.parse_key(record.key)[0])
    return out


def test_records_are_written_and_the_group_comes_back_after_a_restart(h: ShareHarness) -> None:
    h.member("A", topics=["t", "u"])
    h.member("B", topics=["t"])
    h.hb("A", 1)
    written = _share_keys(h)
    assert set(written) == set(range(10, 16))
    before = h.coordinator.share_groups["g"]
    epochs = {m.member_id: (m.member_epoch, m.assigned) for m in before.members.values()}
    h.restart()
    group = h.coordinator.share_groups["g"]
    assert (group.group_epoch, group.assignment_epoch) == (before.group_epoch, 2)
    assert {m.member_id: (m.member_epoch, m.assigned) for m in group.members.values()} == epochs
    assert group.members["A"].subscribed == ("t", "u") and group.members["A"].client_id == "client"
    # The broker is told every initialized partition again, to load their share state.
    assert h.assigned == [("g", sorted([("t", p) for p in range(4)] + [("u", 0), ("u", 1)]))]
    # The members carry on with their epochs; without heartbeats they expire.
    assert h.hb("A", 2).error == "NONE"
    h.clock.advance(SESSION_MS + 1)
    assert "B" not in group.members
    h.clock.advance(SESSION_MS + 1)
    assert group.members == {}
    h.restart()
    assert h.coordinator.share_groups["g"].members == {}
    assert h.coordinator.share_groups["g"].group_epoch == group.group_epoch


def test_delete_group_tombstones_records_and_calls_the_hook(h: ShareHarness) -> None:
    h.member("A")
    assert h.coordinator.delete_groups(["g"]) == {"g": "NON_EMPTY_GROUP"}
    h.hb("A", -1)
    assert h.coordinator.delete_groups(["g"]) == {"g": "NONE"}
    assert h.deleted == ["g"] and "g" not in h.coordinator.share_groups
    h.restart()
    assert "g" not in h.coordinator.share_groups
    assert h.coordinator.delete_groups(["g"]) == {"g": "GROUP_ID_NOT_FOUND"}


def test_records_round_trip() -> None:
    value = rec.current_member_value(rec.CurrentAssignment(3, 2, 0, [(uuid.UUID(int=9), [0, 2])]))
    found: dict[str, rec.LoadedShareGroup] = {}
    key = rec.key(rec.CURRENT_MEMBER, "g", "m")
    assert rec.apply(found, key, value) == "g"
    assert found["g"].current["m"] == rec.CurrentAssignment(3, 2, 0, [(uuid.UUID(int=9), [0, 2])])
    # The worked example of the module documentation.
    assert rec.key(rec.GROUP_METADATA, "g") == bytes.fromhex("000b000167")
    assert rec.group_metadata_value(3, 0) == bytes.fromhex("000000000003000000000000000000")
    rec.apply(found, rec.key(rec.CURRENT_MEMBER, "g", "m"), None)
    assert "m" not in found["g"].current


# ------------------------------------------------------ the other group kinds


def test_other_group_kinds_and_share_groups_refuse_each_other(h: ShareHarness) -> None:
    h.member("A", group="s")
    consumer = h.coordinator.consumer_group_heartbeat(
        HeartbeatRequest(
            group_id="s",
            member_id="",
            member_epoch=0,
            rebalance_timeout_ms=1000,
            subscribed_topic_names=["t"],
        )
    )
    assert (consumer.error, consumer.error_message) == (
        "GROUP_ID_NOT_FOUND",
        "Group s is not a consumer group.",
    )
    assert h.coordinator.describe_consumer_group("s")[:2] == (
        "GROUP_ID_NOT_FOUND",
        "Group s is not a consumer group.",
    )
    joins = Harness.join(h, "s", require_known=False)
    assert [(j.error, j.member_id) for j in joins] == [("INCONSISTENT_GROUP_PROTOCOL", "")]
    commit = h.coordinator.commit_offsets("s", -1, "", None, [OffsetCommitEntry("t", 0, 5, "")])
    assert set(commit.errors.values()) == {"GROUP_ID_NOT_FOUND"}
    assert h.coordinator.fetch_offsets("s", None) == ("GROUP_ID_NOT_FOUND", [])
    assert h.coordinator.describe_group("s").state == "Dead"
    # A consumer group's id is not a share group's.
    h.coordinator.consumer_group_heartbeat(
        HeartbeatRequest(
            group_id="c",
            member_id="",
            member_epoch=0,
            rebalance_timeout_ms=1000,
            subscribed_topic_names=["t"],
        )
    )
    refused = h.hb("A", 0, group="c")
    assert (refused.error, refused.error_message) == (
        "GROUP_ID_NOT_FOUND",
        "Group c is not a share group.",
    )
    assert h.coordinator.describe_share_group("c")[:2] == (
        "GROUP_ID_NOT_FOUND",
        "Group c is not a share group.",
    )
    assert h.coordinator.describe_share_group("x")[:2] == (
        "GROUP_ID_NOT_FOUND",
        "Group x not found.",
    )
    # ListGroups: type share, protocol type "share", states and types filters.
    assert ("s", "share", "Stable") in h.coordinator.list_groups()[1]
    assert h.coordinator.list_groups(types=["share"])[1] == [("s", "share", "Stable")]
    assert h.coordinator.list_groups(types=["share"], states=["empty"])[1] == []
    assert all(g != "s" for g, _, _ in h.coordinator.list_groups(types=["consumer"])[1])
    assert h.coordinator.group_type("s") == "share"


def test_not_served_while_loading(tmp_path: Path) -> None:
    harness = ShareHarness(tmp_path / "d")
    try:
        harness.coordinator.shutdown()
        assert harness.hb("A").error == "COORDINATOR_NOT_AVAILABLE"
        assert harness.log_dir is not None
        harness.log_dir.close()
        harness.coordinator = harness.open(load=False)
        assert harness.hb("A").error == "COORDINATOR_LOAD_IN_PROGRESS"
    finally:
        harness.close()


# ------------------------------------------------------ assignor properties

_members = st.dictionaries(
    st.sampled_from([f"m{i}" for i in range(12)]),
    st.sets(st.sampled_from(["t", "u", "v"]), min_size=1),
    max_size=12,
)
_counts = st.fixed_dictionaries(
    {"t": st.integers(0, 6), "u": st.integers(0, 3), "v": st.integers(0, 1)}
)


@given(_members, _counts, _members)
@settings(max_examples=500, deadline=None)
def test_simple_assign_serves_every_partition_and_member(
    members: dict[str, set[str]], counts: dict[str, int], before: dict[str, set[str]]
) -> None:
    """Whatever the previous assignment: every subscribed partition goes to at least one
    member subscribed to its topic, no member gets a topic it does not subscribe to, and
    every member whose topics have partitions gets some."""
    previous = simple_assign(before, counts)
    out = simple_assign(members, counts, previous)
    assert set(out) == set(members)
    for member, tps in out.items():
        assert all(topic in members[member] for topic, _ in tps)
        if any(counts[t] for t in members[member]):
            assert tps, (member, out)
    wanted = {(t, p) for topics in members.values() for t in topics for p in range(counts[t])}
    assert set().union(*out.values()) == wanted if out else not wanted
    # Within a topic, partitions' sharing differs by at most one between its partitions.
    for topic, count in counts.items():
        sharing = [sum(1 for tps in out.values() if (topic, p) in tps) for p in range(count)]
        if sharing and any(sharing):
            assert max(sharing) - min(sharing) <= 1, (topic, sharing, out)
        loads = [sum(1 for t, _ in out[m] if t == topic) for m in members if topic in members[m]]
        if count and loads:
            assert max(loads) - min(loads) <= 1, (topic, loads, out)


def test_an_unreadable_share_record_is_skipped_at_load(h: ShareHarness) -> None:
    h.member("A")
    store = h.coordinator.store
    # A member record cut short, in the group's partition: skipped, the group still loads.
    bad_key = rec.key(rec.MEMBER_METADATA, "g", "broken")
    store.append("g", [(bad_key, b"\x00\x00\x05ab")], h.coordinator.now_ms())
    h.restart()
    group = h.coordinator.share_groups["g"]
    assert list(group.members) == ["A"]
    assert h.hb("A", 1).error == "NONE"


def test_a_failed_write_is_refused_and_written_with_the_next_change(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with installed(data) as env:
        h = ShareHarness(data)
        try:
            h.member("A")
            env.disk_full = True
            refused = h.hb("B", 0, topics=["t"])
            assert refused.error == "COORDINATOR_NOT_AVAILABLE"
            env.disk_full = False
            # B is in the group in memory; the next change writes it too.
            assert h.member("C").error == "NONE"
            h.restart()
            assert sorted(h.coordinator.share_groups["g"].members) == ["A", "B", "C"]
        finally:
            h.close()
