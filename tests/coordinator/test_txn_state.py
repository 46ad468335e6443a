"""The transaction state machine's table: what each event does in each state."""

from __future__ import annotations

import pytest

from seglog.coordinator.txn_log import TxnState
from seglog.coordinator.txn_state import (
    TRANSITIONS,
    Action,
    Transition,
    TxnEvent,
    check_move,
    transition,
)

LIVE = [
    TxnState.EMPTY,
    TxnState.ONGOING,
    TxnState.PREPARE_COMMIT,
    TxnState.PREPARE_ABORT,
    TxnState.COMPLETE_COMMIT,
    TxnState.COMPLETE_ABORT,
]


def _row(state: TxnState, event: TxnEvent) -> Transition:
    row = transition(state, event)
    assert row is not None, (state, event)
    return row


@pytest.mark.parametrize(
    "event",
    [
        TxnEvent.INIT_PRODUCER_ID,
        TxnEvent.ADD_PARTITIONS,
        TxnEvent.END_COMMIT,
        TxnEvent.END_ABORT,
    ],
)
def test_every_client_request_has_an_answer_in_every_state(event: TxnEvent) -> None:
    for state in LIVE:
        row = _row(state, event)
        # A refusal names its error and moves nowhere; anything else answers NONE.
        assert (row.action == Action.REFUSE) == (row.error != "NONE"), (state, event)
        if row.action == Action.REFUSE:
            assert row.next is None


def test_refusals_are_kafkas_errors() -> None:
    assert _row(TxnState.PREPARE_COMMIT, TxnEvent.END_ABORT).error == "CONCURRENT_TRANSACTIONS"
    assert _row(TxnState.EMPTY, TxnEvent.END_COMMIT).error == "INVALID_TXN_STATE"
    assert _row(TxnState.COMPLETE_ABORT, TxnEvent.END_COMMIT).error == "INVALID_TXN_STATE"
    assert _row(TxnState.COMPLETE_COMMIT, TxnEvent.END_COMMIT).action == Action.ANSWERED


def test_a_transaction_ends_only_through_a_prepare_state() -> None:
    for (state, _event), row in TRANSITIONS.items():
        if row.next in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            assert state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
    check_move(TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)
    with pytest.raises(AssertionError):
        check_move(TxnState.ONGOING, TxnState.COMPLETE_COMMIT)
    with pytest.raises(AssertionError):
        check_move(TxnState.PREPARE_ABORT, TxnState.COMPLETE_COMMIT)


def test_timeouts_and_expiration_leave_open_and_idle_ids_alone_respectively() -> None:
    assert transition(TxnState.EMPTY, TxnEvent.TIMEOUT) is None
    assert _row(TxnState.ONGOING, TxnEvent.TIMEOUT).action == Action.FENCE
    assert transition(TxnState.ONGOING, TxnEvent.EXPIRATION) is None
    assert _row(TxnState.COMPLETE_COMMIT, TxnEvent.EXPIRATION).next == TxnState.DEAD
