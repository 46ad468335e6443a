"""Which node leads each partition: chosen at creation, recorded as Kafka's replicas.

Like Kafka's assignment without racks: partitions go round-robin over the
nodes. The round starts where the previous topic's ended (the number of
partitions already assigned), so that many small topics still spread evenly.
A partition recorded on a node that no longer exists (``--nodes`` went down),
or recorded with no assignment (a directory written by one node, or by
Kafka), is given a node again in the same way; its files stay where they are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from seglog.storage.log_dir import TopicInfo


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


def reassign(topics: Mapping[str, TopicInfo], node_ids: list[int]) -> bool:
    """Give every partition without a live node one; True if anything changed."""
    valid = set(node_ids)
    position = assigned_count(topics)
    changed = False
    for info in sorted(topics.values(), key=lambda i: i.name):
        replicas = [list(r) for r in (info.replicas or [])]
        replicas += [[] for _ in range(info.partitions - len(replicas))]
        for partition in range(info.partitions):
            current = replicas[partition]
            if current and current[0] in valid:
                continue
            replicas[partition] = [node_ids[position % len(node_ids)]]
            position += 1
            changed = True
        if replicas != info.replicas:
            info.replicas = replicas[: info.partitions]
            changed = True
    return changed
