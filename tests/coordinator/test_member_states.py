"""The KIP-848 member state machine: its table, and reconciliation over random assignments."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.coordinator.consumer_group import (
    MEMBER_TRANSITIONS,
    ConsumerMember,
    MemberEvent,
    MemberState,
    next_assignment,
    reconcile,
)
from seglog.coordinator.group import IllegalTransitionError

STABLE = MemberState.STABLE
UNREVOKED = MemberState.UNREVOKED_PARTITIONS
UNRELEASED = MemberState.UNRELEASED_PARTITIONS


@pytest.mark.parametrize(("state", "event"), list(itertools.product(MemberState, MemberEvent)))
def test_every_pair_follows_the_table(state: MemberState, event: MemberEvent) -> None:
    member = ConsumerMember("m", state=state)
    expected = MEMBER_TRANSITIONS.get((state, event))
    if expected is None:
        with pytest.raises(IllegalTransitionError):
            member.transition(event)
        assert member.state is state
    else:
        assert member.transition(event) is expected
        assert member.state is expected


def test_the_table_is_kafkas_reconciliation() -> None:
    # Each outcome of computing the next assignment has one destination, from any state.
    for state in MemberState:
        assert MEMBER_TRANSITIONS[(state, MemberEvent.REVOKE)] is UNREVOKED
        assert MEMBER_TRANSITIONS[(state, MemberEvent.AWAIT_RELEASE)] is UNRELEASED
        assert MEMBER_TRANSITIONS[(state, MemberEvent.CONVERGE)] is STABLE
    # Waiting for a revocation is possible only while one is pending.
    waiting = {s for (s, e) in MEMBER_TRANSITIONS if e is MemberEvent.STILL_REVOKING}
    assert waiting == {UNREVOKED}
    assert MEMBER_TRANSITIONS[(UNREVOKED, MemberEvent.STILL_REVOKING)] is UNREVOKED


def test_refused_transitions_are_exactly_the_unlisted_pairs() -> None:
    refused = set(itertools.product(MemberState, MemberEvent)) - set(MEMBER_TRANSITIONS)
    assert refused == {
        (STABLE, MemberEvent.STILL_REVOKING),
        (UNRELEASED, MemberEvent.STILL_REVOKING),
    }


def test_a_heartbeat_still_owning_revoked_partitions_keeps_the_member_waiting() -> None:
    member = ConsumerMember("m", member_epoch=1, assigned=frozenset({("t", 0), ("t", 1)}))
    next_assignment(member, 2, frozenset({("t", 0)}), set())
    assert member.state is UNREVOKED
    assert member.revoking == {("t", 1)}
    assert member.member_epoch == 1  # keeps its epoch until it has revoked
    reconcile(member, 2, frozenset({("t", 0)}), set(), {("t", 0), ("t", 1)})
    assert member.state is UNREVOKED
    reconcile(member, 2, frozenset({("t", 0)}), set(), None)  # owned not reported
    assert member.state is UNREVOKED
    reconcile(member, 2, frozenset({("t", 0)}), set(), {("t", 0)})
    assert member.state is STABLE
    assert (member.member_epoch, member.previous_member_epoch) == (2, 1)
    assert member.assigned == {("t", 0)} and not member.revoking


PARTITIONS = [("t", p) for p in range(6)]
partition_sets = st.frozensets(st.sampled_from(PARTITIONS))


@st.composite
def members(draw: st.DrawFn) -> ConsumerMember:
    """A member in any state consistent with its partitions."""
    state = draw(st.sampled_from(MemberState))
    assigned = draw(partition_sets)
    revoking = draw(partition_sets.filter(bool)) - assigned if state is UNREVOKED else frozenset()
    if state is UNREVOKED and not revoking:
        state = STABLE
    epoch = draw(st.integers(0, 5))
    return ConsumerMember(
        "m", member_epoch=epoch, state=state, assigned=assigned, revoking=revoking
    )


@given(
    member=members(),
    target=partition_sets,
    held=partition_sets,
    owned=st.none() | st.sets(st.sampled_from(PARTITIONS)),
    bump=st.integers(0, 3),
)
def test_reconciliation_keeps_its_invariants(
    member: ConsumerMember,
    target: frozenset[tuple[str, int]],
    held: frozenset[tuple[str, int]],
    owned: set[tuple[str, int]] | None,
    bump: int,
) -> None:
    """Whatever the member, target and other owners: the table is followed, nothing
    held by another member is handed over, and the state says what is pending."""
    held_by_others = set(held - member.holds())
    assignment_epoch = member.member_epoch + bump
    before = (member.state, member.assigned, member.member_epoch)
    revoking = member.revoking
    reconcile(member, assignment_epoch, target, held_by_others, owned)
    state, assigned, epoch = before
    # Only partitions it had, or free ones of its target, are assigned.
    assert member.assigned <= assigned | (target - held_by_others)
    assert not (member.assigned - assigned) & held_by_others
    # The state tells what is pending.
    assert (member.state is UNREVOKED) == bool(member.revoking)
    assert not member.revoking & member.assigned
    assert member.revoking <= assigned | revoking  # only what it had is revoked
    if member.state is STABLE and member.member_epoch == assignment_epoch:
        assert member.assigned <= target
    # The epoch only moves forward, to the assignment epoch, and only without revocations.
    assert member.member_epoch in (epoch, assignment_epoch)
    if member.state is UNREVOKED:
        assert member.member_epoch == epoch
    # Whatever happened is a transition the table lists (or no transition at all).
    if (member.state, member.assigned, member.member_epoch) != before:
        assert any(MEMBER_TRANSITIONS.get((state, event)) is member.state for event in MemberEvent)
