"""The group state machine: its table, and the membership bookkeeping beside it."""

from __future__ import annotations

import itertools

import pytest

from seglog.coordinator.group import (
    TRANSITIONS,
    Event,
    Group,
    GroupState,
    IllegalTransitionError,
    Member,
    consumer_subscription_topics,
)


def member(member_id: str, protocols: list[str], instance: str | None = None) -> Member:
    return Member(
        member_id, instance, "c", "h", 10_000, 30_000, "consumer", [(p, b"") for p in protocols]
    )


@pytest.mark.parametrize(("state", "event"), list(itertools.product(GroupState, Event)))
def test_every_pair_follows_the_table(state: GroupState, event: Event) -> None:
    group = Group("g", state=state)
    expected = TRANSITIONS.get((state, event))
    if expected is None:
        with pytest.raises(IllegalTransitionError):
            group.transition(event, 5)
        assert group.state is state
    else:
        assert group.transition(event, 5) is expected
        assert group.state is expected
        assert group.state_timestamp_ms == 5


def test_dead_is_final_and_every_live_state_can_die() -> None:
    assert not [key for key in TRANSITIONS if key[0] is GroupState.DEAD]
    for state in GroupState:
        if state is not GroupState.DEAD:
            assert TRANSITIONS[(state, Event.DELETE)] is GroupState.DEAD


def test_every_state_is_reachable_from_empty() -> None:
    reached = {GroupState.EMPTY}
    frontier = [GroupState.EMPTY]
    while frontier:
        state = frontier.pop()
        for (source, _), target in TRANSITIONS.items():
            if source is state and target not in reached:
                reached.add(target)
                frontier.append(target)
    assert reached == set(GroupState)


def test_the_first_member_leads_and_a_successor_takes_over() -> None:
    group = Group("g")
    group.add(member("a", ["range"]))
    group.add(member("b", ["range"]))
    assert group.leader_id == "a"
    group.remove("a")
    assert group.leader_id == "b"
    group.remove("b")
    assert group.leader_id is None


def test_protocol_vote_and_support() -> None:
    group = Group("g")
    group.add(member("a", ["roundrobin", "range"]))
    group.add(member("b", ["range", "roundrobin"]))
    group.add(member("c", ["range", "sticky"]))
    assert group.select_protocol() == "range"  # the only protocol all three support
    assert group.supports("consumer", ["range"])
    assert not group.supports("consumer", ["sticky"])
    assert not group.supports("connect", ["range"])
    assert not Group("empty").supports("consumer", [])


def test_static_members_are_indexed_by_instance_id() -> None:
    group = Group("g")
    group.add(member("a", ["range"], instance="i-1"))
    replacement = member("a2", ["range"], instance="i-1")
    group.members["a"].assignment = b"parts"
    group.replace_static("a", replacement)
    assert group.static_members == {"i-1": "a2"}
    assert group.leader_id == "a2"
    assert replacement.assignment == b"parts"
    group.remove("a2")
    assert group.static_members == {}


def test_consumer_subscription_topics() -> None:
    data = b"\x00\x01" + b"\x00\x00\x00\x02" + b"\x00\x01a" + b"\x00\x02bc" + b"\xff\xff\xff\xff"
    assert consumer_subscription_topics(data) == ["a", "bc"]
    assert consumer_subscription_topics(b"\x00") is None
    assert consumer_subscription_topics(b"\x00\x00\x00\x00\x00\x01\x00\x09ab") is None


def test_the_table_allows_what_kafka_allows() -> None:
    """The (from, to) pairs of the table are Kafka's ``ClassicGroupState`` valid previous
    states, less Dead → Dead: a deleted group leaves the coordinator's table at once,
    so nothing can delete it twice."""
    e, p, c, s, d = (
        GroupState.EMPTY,
        GroupState.PREPARING_REBALANCE,
        GroupState.COMPLETING_REBALANCE,
        GroupState.STABLE,
        GroupState.DEAD,
    )
    kafka_valid_previous = {
        e: {p},
        p: {s, c, e},
        c: {p},
        s: {c},
        d: {s, p, c, e, d},
    }
    allowed = {(source, target) for (source, _), target in TRANSITIONS.items()}
    kafka = {
        (source, target) for target, sources in kafka_valid_previous.items() for source in sources
    }
    assert allowed == kafka - {(d, d)}
