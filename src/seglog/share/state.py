"""The durable state of one share-partition: what ``__share_group_state`` keeps.

The share coordinator folds ShareSnapshot and ShareUpdate records into a
:class:`PersistedState`; the share-partition writes :class:`StateUpdate`
values (its changed ranges) and reads a :class:`PersistedState` back when it
is first used after a start.
"""

from __future__ import annotations

import base64
import enum
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field


class RecordState(enum.IntEnum):
    """A record's delivery state, with Kafka's numbers (``RecordState``)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """What a consumer says of a record it acquired (the protocol's acknowledge types)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    """Which share-partition: a group's view of one topic partition."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """Kafka's ``groupId:topicId:partition`` string, hashed to pick the state partition."""
        return f"{self.group_id}:{_kafka_uuid(self.topic_id)}:{self.partition}"


def _kafka_uuid(value: uuid.UUID) -> str:
    """A topic id as Kafka prints it: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of offsets with one delivery state and count (both ends inclusive)."""

    first_offset: int
    last_offset: int
    delivery_state: RecordState
    delivery_count: int


@dataclass(frozen=True, slots=True)
class PersistedState:
    """A share-partition's state as last written: where it starts and its in-flight runs.

    ``batches`` are sorted, do not overlap, and lie at or above ``start_offset``.
    ``start_offset`` -1 means not initialized yet (the group's
    ``share.auto.offset.reset`` decides where it starts).
    """

    state_epoch: int = 0
    leader_epoch: int = 0
    start_offset: int = -1
    batches: tuple[StateBatch, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class StateUpdate:
    """A change to persist: the new start offset and the runs whose state changed.

    Runs not named keep what was written before; runs below ``start_offset``
    are gone. The share coordinator folds it into the state it keeps.
    """

    start_offset: int
    batches: tuple[StateBatch, ...] = ()
    leader_epoch: int = 0


def fold(state: PersistedState, update: StateUpdate) -> PersistedState:
    """``state`` with ``update`` applied, as Kafka's share coordinator merges an update."""
    start = max(state.start_offset, update.start_offset)
    runs: list[StateBatch] = []
    for old in state.batches:
        runs.extend(_minus(old, update.batches))
    runs.extend(update.batches)
    runs = [_clip(run, start) for run in runs if run.last_offset >= start]
    runs.sort(key=lambda run: run.first_offset)
    return PersistedState(
        state_epoch=state.state_epoch,
        leader_epoch=max(state.leader_epoch, update.leader_epoch),
        start_offset=start,
        batches=tuple(merge_adjacent(runs)),
    )


def _clip(run: StateBatch, start: int) -> StateBatch:
    if run.first_offset >= start:
        return run
    return StateBatch(start, run.last_offset, run.delivery_state, run.delivery_count)


def _minus(run: StateBatch, covers: tuple[StateBatch, ...]) -> list[StateBatch]:
    """The parts of ``run`` not covered by any of ``covers``."""
    pieces = [run]
    for cover in covers:
        next_pieces = []
        for piece in pieces:
            if cover.last_offset < piece.first_offset or cover.first_offset > piece.last_offset:
                next_pieces.append(piece)
                continue
            if piece.first_offset < cover.first_offset:
                next_pieces.append(
                    StateBatch(
                        piece.first_offset,
                        cover.first_offset - 1,
                        piece.delivery_state,
                        piece.delivery_count,
                    )
                )
            if piece.last_offset > cover.last_offset:
                next_pieces.append(
                    StateBatch(
                        cover.last_offset + 1,
                        piece.last_offset,
                        piece.delivery_state,
                        piece.delivery_count,
                    )
                )
        pieces = next_pieces
    return pieces


def merge_adjacent(runs: Iterable[StateBatch]) -> list[StateBatch]:
    """``runs`` (in offset order) with adjacent runs of the same state and count joined."""
    merged: list[StateBatch] = []
    for run in runs:
        if merged:
            last = merged[-1]
            if (
                last.last_offset + 1 == run.first_offset
                and last.delivery_state == run.delivery_state
                and last.delivery_count == run.delivery_count
            ):
                merged[-1] = StateBatch(
                    last.first_offset, run.last_offset, run.delivery_state, run.delivery_count
                )
                continue
        merged.append(run)
    return merged
