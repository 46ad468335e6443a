"""A transactional id's state, and the machine that moves it: (state, event) → (action, next state).

Kafka's ``TransactionMetadata`` states, and what the coordinator does when an
event reaches an id in each (:data:`TRANSITIONS`). An event with no row for a
state does nothing there (a timeout of an id with no open transaction, say).

==================  ==================  =============  ==================
state               event               action         next state
==================  ==================  =============  ==================
Empty, Complete*    InitProducerId      NEW_EPOCH      Empty
Ongoing             InitProducerId      FENCE          PrepareAbort
Prepare*            InitProducerId      REFUSE         (CONCURRENT_TRANSACTIONS)
Empty, Ongoing,     AddPartitionsToTxn  BEGIN          Ongoing
Complete*
Prepare*            AddPartitionsToTxn  REFUSE         (CONCURRENT_TRANSACTIONS)
Ongoing             EndTxn commit       PREPARE        PrepareCommit
Ongoing             EndTxn abort        PREPARE        PrepareAbort
PrepareCommit       EndTxn commit       MARK           CompleteCommit
PrepareAbort        EndTxn abort        MARK           CompleteAbort
CompleteCommit      EndTxn commit       ANSWERED       (a retry: NONE)
CompleteAbort       EndTxn abort        ANSWERED       (a retry: NONE)
Prepare* (other)    EndTxn              REFUSE         (CONCURRENT_TRANSACTIONS)
Empty, Complete*    EndTxn (other)      REFUSE         (INVALID_TXN_STATE)
Ongoing             timeout             FENCE          PrepareAbort
Prepare*            timeout             MARK           Complete*
Prepare*            markers written     COMPLETE       Complete*
Empty, Complete*    expiration          FORGET         Dead (removed)
==================  ==================  =============  ==================

Every stored move is one of these (:func:`check_move`); what must be fsynced
before which answer is the coordinator's business (see
:mod:`~seglog.coordinator.transaction_coordinator`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from seglog.coordinator.offset_store import CommittedOffset
from seglog.coordinator.txn_log import TxnLogValue, TxnState

NONE = "NONE"
MAX_EPOCH = 32_767 - 1  # Short.MaxValue - 1: the last epoch handed out before a new id


class TxnEvent(enum.Enum):
    """What may happen to a transactional id."""

    INIT_PRODUCER_ID = "InitProducerId"
    #: AddPartitionsToTxn or AddOffsetsToTxn, or a partition found open at load.
    ADD_PARTITIONS = "AddPartitionsToTxn"
    END_COMMIT = "EndTxn commit"
    END_ABORT = "EndTxn abort"
    #: The periodic pass: a transaction open past its timeout, or left prepared.
    TIMEOUT = "timeout"
    MARKERS_WRITTEN = "markers written"
    EXPIRATION = "expiration"


class Action(enum.Enum):
    """What the coordinator does for a (state, event)."""

    REFUSE = "answer the error; nothing changes"
    ANSWERED = "answer NONE: a retry of what was done"
    NEW_EPOCH = "bump the epoch (a new id past the last), store Empty, fsynced"
    FENCE = "bump the epoch, store PrepareAbort, then abort as MARK does"
    BEGIN = "store Ongoing with the partitions added, not fsynced"
    PREPARE = "fsync the data (commit), store the Prepare state, fsynced, then MARK"
    MARK = "write the markers (again), then COMPLETE"
    COMPLETE = "store the Complete state (fsynced after a stored Prepare)"
    FORGET = "store a tombstone, fsynced, and forget the id"


@dataclass(frozen=True, slots=True)
class Transition:
    """One row of the machine: the action, and the state it leads to (or the error answered)."""

    action: Action
    next: TxnState | None = None
    error: str = NONE


_E, _O = TxnState.EMPTY, TxnState.ONGOING
_PC, _PA = TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT
_CC, _CA = TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT
_BUSY = Transition(Action.REFUSE, error="CONCURRENT_TRANSACTIONS")
_INVALID = Transition(Action.REFUSE, error="INVALID_TXN_STATE")

TRANSITIONS: dict[tuple[TxnState, TxnEvent], Transition] = {
    **{(s, TxnEvent.INIT_PRODUCER_ID): Transition(Action.NEW_EPOCH, _E) for s in (_E, _CC, _CA)},
    (_O, TxnEvent.INIT_PRODUCER_ID): Transition(Action.FENCE, _PA),
    (_PC, TxnEvent.INIT_PRODUCER_ID): _BUSY,
    (_PA, TxnEvent.INIT_PRODUCER_ID): _BUSY,
    **{(s, TxnEvent.ADD_PARTITIONS): Transition(Action.BEGIN, _O) for s in (_E, _O, _CC, _CA)},
    (_PC, TxnEvent.ADD_PARTITIONS): _BUSY,
    (_PA, TxnEvent.ADD_PARTITIONS): _BUSY,
    (_O, TxnEvent.END_COMMIT): Transition(Action.PREPARE, _PC),
    (_O, TxnEvent.END_ABORT): Transition(Action.PREPARE, _PA),
    (_PC, TxnEvent.END_COMMIT): Transition(Action.MARK, _CC),
    (_PA, TxnEvent.END_ABORT): Transition(Action.MARK, _CA),
    (_PC, TxnEvent.END_ABORT): _BUSY,
    (_PA, TxnEvent.END_COMMIT): _BUSY,
    (_CC, TxnEvent.END_COMMIT): Transition(Action.ANSWERED),
    (_CA, TxnEvent.END_ABORT): Transition(Action.ANSWERED),
    (_CC, TxnEvent.END_ABORT): _INVALID,
    (_CA, TxnEvent.END_COMMIT): _INVALID,
    (_E, TxnEvent.END_COMMIT): _INVALID,
    (_E, TxnEvent.END_ABORT): _INVALID,
    (_O, TxnEvent.TIMEOUT): Transition(Action.FENCE, _PA),
    (_PC, TxnEvent.TIMEOUT): Transition(Action.MARK, _CC),
    (_PA, TxnEvent.TIMEOUT): Transition(Action.MARK, _CA),
    (_PC, TxnEvent.MARKERS_WRITTEN): Transition(Action.COMPLETE, _CC),
    (_PA, TxnEvent.MARKERS_WRITTEN): Transition(Action.COMPLETE, _CA),
    **{(s, TxnEvent.EXPIRATION): Transition(Action.FORGET, TxnState.DEAD) for s in (_E, _CC, _CA)},
}

#: Every (before, after) a transition of the table makes.
_MOVES = frozenset(
    (state, row.next) for (state, _event), row in TRANSITIONS.items() if row.next is not None
)


def transition(state: TxnState, event: TxnEvent) -> Transition | None:
    """The row for ``event`` in ``state``, or None: the event changes nothing there."""
    return TRANSITIONS.get((state, event))


def check_move(before: TxnState, after: TxnState) -> None:
    """Raise AssertionError unless a transition of the table moves ``before`` to ``after``."""
    if (before, after) not in _MOVES:
        raise AssertionError(f"{before.kafka_name} -> {after.kafka_name} is not allowed")


@dataclass
class TxnMetadata:
    """A transactional id's current state (Kafka's ``TransactionMetadata``)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    last_update_ms: int = -1
    start_ms: int = -1
    #: The producer id and epoch a KIP-360 bump came from (kept in memory), so
    #: that a retry of that bump is answered rather than fenced.
    bumped_from: tuple[int, int] | None = None
    #: Offsets committed in the open transaction: group → (topic, partition) → offset.
    pending_offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = field(default_factory=dict)
    #: The transaction version of the id's client, as Kafka stores it (value version 1).
    client_transaction_version: int = 0
    #: An operation on the id waits for other nodes (Kafka's pending state):
    #: others answer CONCURRENT_TRANSACTIONS until it ends.
    in_flight: bool = False

    def value(self) -> TxnLogValue:
        """What is stored for this state."""
        return TxnLogValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            self.state,
            frozenset(self.partitions),
            self.last_update_ms,
            self.start_ms,
            client_transaction_version=self.client_transaction_version,
        )

    def copy(self) -> TxnMetadata:
        """A copy of what DescribeTransactions shows."""
        return TxnMetadata(
            self.transactional_id,
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            self.state,
            set(self.partitions),
            self.last_update_ms,
            self.start_ms,
            client_transaction_version=self.client_transaction_version,
        )


@dataclass(frozen=True, slots=True)
class InitResult:
    """InitProducerId's answer."""

    error: str
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class EndResult:
    """EndTxn's answer, and the offsets its commit made visible (group → offsets)."""

    error: str
    committed_offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = field(
        default_factory=dict
    )


def matching(
    txns: Iterable[TxnMetadata],
    states: Iterable[str],
    producer_ids: Iterable[int],
    min_duration_ms: int,
    now_ms: int,
) -> tuple[list[TxnMetadata], list[str]]:
    """ListTransactions' filter: (matching ids, the state filters that name no state).

    Empty filters match everything; a duration filter of 0 or more keeps
    the transactions running for longer than that.
    """
    names = {state.kafka_name for state in TxnState}
    wanted_states = set(states)
    unknown = sorted(name for name in wanted_states if name not in names)
    wanted_pids = set(producer_ids)
    found = []
    for meta in txns:
        if wanted_states and meta.state.kafka_name not in wanted_states:
            continue
        if wanted_pids and meta.producer_id not in wanted_pids:
            continue
        if min_duration_ms >= 0 and (
            meta.start_ms < 0
            or meta.state != TxnState.ONGOING
            or now_ms - meta.start_ms <= min_duration_ms
        ):
            continue
        found.append(meta)
    return found, unknown


__all__ = [
    "MAX_EPOCH",
    "NONE",
    "TRANSITIONS",
    "Action",
    "EndResult",
    "InitResult",
    "Transition",
    "TxnEvent",
    "TxnMetadata",
    "check_move",
    "matching",
    "transition",
]
