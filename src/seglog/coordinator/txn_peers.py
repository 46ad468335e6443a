"""The transaction coordinator's peers: the other nodes, leading partitions and ids.

A coordinator writes the markers of the partitions it leads and checks the
ids it coordinates itself; what other nodes lead or coordinate it asks them
through a :class:`Peers`. A single broker is a cluster of one
(:class:`ClusterOfOne`): it leads every partition and coordinates every id,
so it never has anything to ask; the code is the same for one node and many.

An operation never waits for a peer while it holds the coordinator: it is a
generator (:data:`Op`) that *yields* what it needs from the peers, and
whoever runs it performs that request outside the coordinator's turn (other
operations go on meanwhile) and sends the answer back in. Two coordinators
each waiting, inside an operation, for the other's turn would otherwise
deadlock. :func:`drive` runs an operation to its end in the calling thread
(tests and tools own their coordinator outright); the broker runs it on the
coordinator's own thread and performs the requests off it.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, cast

from seglog.errors import SeglogError

R = TypeVar("R")

TopicPartition = tuple[str, int]


class Peers(Protocol):
    """The other nodes of the cluster, as the transaction coordinator needs them (blocking)."""

    def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
        *,
        commit: bool,
        coordinator_epoch: int,
    ) -> dict[TopicPartition, str]:
        """Have each partition's leader write and fsync the marker; an error name each."""
        ...

    def flush(self, partitions: list[TopicPartition]) -> None:
        """Have each partition's leader fsync its data; raises SeglogError if one cannot."""
        ...

    def verify_partition(
        self, transactional_id: str, producer_id: int, epoch: int, topic: str, partition: int
    ) -> str:
        """Ask the id's coordinator whether the partition is in the producer's open transaction."""
        ...

    def may_coordinate(self, producer_id: int) -> bool:
        """Whether another node may be the coordinator of ``producer_id``'s transactional id."""
        ...


class ClusterOfOne:
    """The peers of a broker alone: none. It leads and coordinates everything itself.

    The coordinator asks its peers only about partitions it does not lead and
    ids it does not coordinate, which a broker alone does not have; were it
    asked, it answers as a leader or coordinator that is not this one.
    """

    def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
        *,
        commit: bool,
        coordinator_epoch: int,
    ) -> dict[TopicPartition, str]:
        """No other leader: every partition is NOT_LEADER_OR_FOLLOWER."""
        return dict.fromkeys(partitions, "NOT_LEADER_OR_FOLLOWER")

    def flush(self, partitions: list[TopicPartition]) -> None:
        """No other leader can fsync them."""
        raise SeglogError(f"no node leads {partitions}")

    def verify_partition(
        self, transactional_id: str, producer_id: int, epoch: int, topic: str, partition: int
    ) -> str:
        """No other coordinator."""
        return "NOT_COORDINATOR"

    def may_coordinate(self, producer_id: int) -> bool:
        """Every producer id is this broker's."""
        return False


# ------------------------------------------------------------------ requests


@dataclass(frozen=True, slots=True)
class WriteMarkers:
    """Markers for partitions other nodes lead."""

    producer_id: int
    producer_epoch: int
    partitions: list[TopicPartition]
    commit: bool
    coordinator_epoch: int

    def send(self, peers: Peers) -> dict[TopicPartition, str]:
        """Carry the request out (blocking)."""
        return peers.write_markers(
            self.producer_id,
            self.producer_epoch,
            self.partitions,
            commit=self.commit,
            coordinator_epoch=self.coordinator_epoch,
        )


@dataclass(frozen=True, slots=True)
class FlushData:
    """An fsync of partitions other nodes lead."""

    partitions: list[TopicPartition]

    def send(self, peers: Peers) -> None:
        """Carry the request out (blocking)."""
        peers.flush(self.partitions)


@dataclass(frozen=True, slots=True)
class Verify:
    """KIP-890's question to the coordinator of another node's id."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    topic: str
    partition: int

    def send(self, peers: Peers) -> str:
        """Carry the request out (blocking)."""
        return peers.verify_partition(
            self.transactional_id, self.producer_id, self.producer_epoch, self.topic, self.partition
        )


PeerRequest = WriteMarkers | FlushData | Verify

#: A coordinator operation: yields peer requests, is sent their answers, returns its result.
Op = Generator[PeerRequest, object, R]


def ask_markers(request: WriteMarkers) -> Op[dict[TopicPartition, str]]:
    """``yield from`` it: the peers' answer to ``request``."""
    answer = yield request
    return cast(dict[TopicPartition, str], answer)


def ask_flush(request: FlushData) -> Op[None]:
    """``yield from`` it: returns once the peers have fsynced (raises SeglogError if not)."""
    yield request


def ask_verify(request: Verify) -> Op[str]:
    """``yield from`` it: the id's coordinator's verdict."""
    answer = yield request
    return str(answer)


# ------------------------------------------------------------------- running


@dataclass(frozen=True, slots=True)
class Step(Generic[R]):
    """Where an operation stands after one turn: a request to carry out, or its result."""

    request: PeerRequest | None
    result: R | None = None

    @property
    def done(self) -> bool:
        """True once the operation returned (``result`` holds what it returned)."""
        return self.request is None


def advance(op: Op[R], answer: object = None, error: BaseException | None = None) -> Step[R]:
    """Run ``op`` up to its next peer request, sending it ``answer`` (or raising ``error``).

    The first turn of an operation sends nothing.
    """
    try:
        request = op.throw(error) if error is not None else op.send(answer)
    except StopIteration as stop:
        return Step(None, cast(R, stop.value))
    return Step(request)


def drive(op: Op[R], peers: Peers) -> R:
    """Run ``op`` to its end in this thread, asking ``peers`` (blocking) what it yields."""
    step = advance(op)
    while step.request is not None:
        try:
            answer = step.request.send(peers)
        except Exception as exc:  # handed to the operation, which decides
            step = advance(op, error=exc)
        else:
            step = advance(op, answer)
    return cast(R, step.result)


__all__ = [
    "ClusterOfOne",
    "FlushData",
    "Op",
    "PeerRequest",
    "Peers",
    "Step",
    "Verify",
    "WriteMarkers",
    "advance",
    "ask_flush",
    "ask_markers",
    "ask_verify",
    "drive",
]
