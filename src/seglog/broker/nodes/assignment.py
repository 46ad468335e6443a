"""Which node leads each partition: chosen at creation, recorded as Kafka's replicas.

Like Kafka's assignment without racks: partitions go round-robin over the
nodes. The round starts where the previous topic's ended (the number of
partitions already assigned), so that many small topics still spread evenly.

When the supervisor starts the nodes, :func:`reassign` checks the recorded
leaders against the nodes that will run. A partition recorded with no
assignment (a directory written by one node, or by Kafka) is given a node.
When the node count has changed (a recorded leader no longer exists, or a node
leads nothing at all), every topic's leadership is balanced again: each node
leads its share of the topic's partitions (counts differing by at most one, as
a round-robin assignment gives), and as few partitions as possible change
leader: a partition stays on its node while that node is within its share.
That holds for the internal topics too, so that group and transaction
coordination spreads over the new nodes. Only the record changes: a
partition's files stay where they are, in the one log directory.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from seglog.storage.log_dir import TopicInfo

logger = logging.getLogger(__name__)


def round_robin(node_ids: list[int], start: int, count: int) -> list[list[int]]:
    """``count`` partitions' replicas (one node each), from position ``start`` on."""
    return [[node_ids[(start + i) % len(node_ids)]] for i in range(count)]


def assigned_count(topics: Mapping[str, TopicInfo]) -> int:
    """How many partitions of ``topics`` have a recorded node."""
    return sum(1 for info in topics.values() for r in (info.replicas or []) if r)


def assigner(
    node_ids: list[int], topics: Callable[[], Mapping[str, TopicInfo]]
) -> Callable[[int, int], list[list[int]]]:
    """The ``replicas`` callable the log directory takes when creating partitions."""

    def assign(first: int, count: int) -> list[list[int]]:
        return round_robin(node_ids, assigned_count(topics()) + first, count)

    return assign


@dataclass(frozen=True)
class Move:
    """One partition given another leader (``previous`` None: it had none recorded)."""

    topic: str
    partition: int
    previous: int | None
    leader: int


def recorded_leaders(topics: Mapping[str, TopicInfo]) -> set[int]:
    """Every node id recorded as a leader in ``topics``."""
    return {r[0] for info in topics.values() for r in (info.replicas or []) if r}


def shares(counts: Mapping[int, int], node_ids: list[int], partitions: int) -> dict[int, int]:
    """How many of a topic's ``partitions`` each node leads when balanced.

    Each node leads ``partitions // len(node_ids)``; the remainder goes one
    each to the nodes that lead the most already (``counts``), so that the
    fewest partitions have to move.
    """
    base, extra = divmod(partitions, len(node_ids))
    order = sorted(node_ids, key=lambda n: -counts.get(n, 0))
    return {n: base + (1 if i < extra else 0) for i, n in enumerate(order)}


def plan(topics: Mapping[str, TopicInfo], node_ids: list[int]) -> list[Move]:
    """The leader changes :func:`reassign` makes (nothing is changed)."""
    valid = set(node_ids)
    rebalance = recorded_leaders(topics) != valid
    # Partitions led per node over every topic: the tie-breaker that spreads
    # many small topics (and a new node's first partitions) over every node.
    load: Counter[int] = Counter()
    moves: list[Move] = []
    for info in sorted(topics.values(), key=lambda i: i.name):
        owners = [
            r[0] if r and r[0] in valid else None
            for r in (info.replicas_of(p) for p in range(info.partitions))
        ]
        counts = Counter(o for o in owners if o is not None)
        # Ties go to the node leading fewer partitions overall, then the lower id.
        ranked = sorted(node_ids, key=lambda n: (load[n], n))
        if rebalance:
            quota = shares(counts, ranked, info.partitions)
        else:
            quota = {n: info.partitions for n in node_ids}
        kept: Counter[int] = Counter()
        leaders: list[int | None] = [None] * info.partitions
        for partition, owner in enumerate(owners):
            if owner is not None and kept[owner] < quota[owner]:
                leaders[partition] = owner
                kept[owner] += 1
        for partition, leader in enumerate(leaders):
            if leader is not None:
                continue
            chosen = min(
                (n for n in ranked if kept[n] < quota[n]), key=lambda n: (kept[n], load[n])
            )
            leaders[partition] = chosen
            kept[chosen] += 1
            previous = info.replicas_of(partition)
            moves.append(Move(info.name, partition, previous[0] if previous else None, chosen))
        load.update(kept)
    return moves


def reassign(topics: Mapping[str, TopicInfo], node_ids: list[int]) -> bool:
    """Give partitions their leaders among ``node_ids`` (see the module); True if anything changed.

    Each partition that changes leader is logged, then a summary.
    """
    moves = plan(topics, node_ids)
    by_partition = {(m.topic, m.partition): m.leader for m in moves}
    changed = False
    for info in topics.values():
        replicas = [
            [by_partition[info.name, p]]
            if (info.name, p) in by_partition
            else list(info.replicas_of(p) or [])
            for p in range(info.partitions)
        ]
        if replicas != info.replicas:
            info.replicas = replicas
            changed = True
    for move in moves:
        if move.previous is None:
            logger.info(
                "partition %d of topic %s: led by node %d", move.partition, move.topic, move.leader
            )
        else:
            logger.info(
                "partition %d of topic %s: leader node %d -> node %d",
                move.partition,
                move.topic,
                move.previous,
                move.leader,
            )
    if moves:
        logger.info(
            "%d partitions of %d topics given a leader among nodes %s; now leading: %s",
            len(moves),
            len({m.topic for m in moves}),
            node_ids,
            ", ".join(
                f"node {n}: {c}"
                for n, c in sorted(
                    Counter(r[0] for i in topics.values() for r in i.replicas or [] if r).items()
                )
            ),
        )
    return changed
