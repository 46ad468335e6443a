"""Leaders chosen round-robin, recorded, and given again when nodes go away."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from seglog.broker.nodes.assignment import (
    assigner,
    plan,
    reassign,
    recorded_leaders,
    round_robin,
)
from seglog.broker.nodes.cluster import Cluster
from seglog.storage.log_dir import TopicInfo


def _topics(specs: list[tuple[int, list[int] | None]]) -> dict[str, TopicInfo]:
    topics = {}
    for index, (count, nodes) in enumerate(specs):
        replicas = None if nodes is None else [[n] for n in nodes[:count]]
        topics[f"t{index}"] = TopicInfo(f"t{index}", uuid.uuid4(), count, {}, replicas)
    return topics


@given(
    st.lists(
        st.integers(1, 12).flatmap(
            lambda count: st.tuples(
                st.just(count),
                st.none() | st.lists(st.integers(1, 6), min_size=0, max_size=count),
            )
        ),
        max_size=6,
    ),
    st.integers(1, 5),
)
def test_reassign_gives_every_partition_a_live_node(
    specs: list[tuple[int, list[int] | None]], count: int
) -> None:
    topics = _topics(specs)
    before = {name: info.copy() for name, info in topics.items()}
    nodes = list(range(1, count + 1))
    # The same nodes as before (each leads something): only leaderless partitions change.
    unchanged = recorded_leaders(topics) == set(nodes)
    reassign(topics, nodes)
    for name, info in topics.items():
        assert info.replicas is not None and len(info.replicas) == info.partitions
        for partition, replicas in enumerate(info.replicas):
            assert len(replicas) == 1 and replicas[0] in nodes
            kept = before[name].replicas_of(partition)
            if unchanged and kept and kept[0] in nodes:
                assert replicas == kept  # a live leader stays where it is
    assert not reassign(topics, nodes)  # nothing left to do


_specs = st.lists(
    st.integers(1, 12).flatmap(
        lambda count: st.tuples(
            st.just(count),
            st.none() | st.lists(st.integers(1, 6), min_size=0, max_size=count),
        )
    ),
    max_size=6,
)


def _fewest_moves(info: TopicInfo, nodes: list[int]) -> int:
    """The fewest leader changes that balance ``info`` over ``nodes`` (computed apart)."""
    owners = [r[0] for r in (info.replicas_of(p) for p in range(info.partitions)) if r]
    counts = sorted((owners.count(n) for n in nodes), reverse=True)
    base, extra = divmod(info.partitions, len(nodes))
    orphans = info.partitions - sum(counts)
    return orphans + sum(max(0, c - base - (i < extra)) for i, c in enumerate(counts))


@given(_specs, st.integers(1, 6), st.integers(1, 6))
def test_a_new_node_count_balances_every_topic_with_the_fewest_moves(
    specs: list[tuple[int, list[int] | None]], before_count: int, after_count: int
) -> None:
    topics = _topics(specs)
    # As the nodes left it: every partition led by one of ``before_count`` nodes.
    reassign(topics, list(range(1, before_count + 1)))
    recorded = {name: info.copy() for name, info in topics.items()}
    nodes = list(range(1, after_count + 1))
    moves = plan(topics, nodes)
    reassign(topics, nodes)
    changed_count = after_count != before_count and any(i.partitions for i in topics.values())
    for name, info in topics.items():
        assert info.replicas is not None and len(info.replicas) == info.partitions
        assert all(len(r) == 1 and r[0] in nodes for r in info.replicas)
        old = recorded[name].replicas or []
        moved = [p for p in range(info.partitions) if info.replicas[p] != old[p]]
        assert sorted(m.partition for m in moves if m.topic == name) == moved
        if changed_count:
            load = Counter(r[0] for r in info.replicas)
            # Balanced: every node leads its share, counts differing by at most one.
            assert max(load[n] for n in nodes) - min(load[n] for n in nodes) <= 1
            assert len(moved) == _fewest_moves(recorded[name], nodes)
        else:
            assert not moved
    # Stable: starting again with the same nodes changes nothing.
    assert not plan(topics, nodes)
    assert not reassign(topics, nodes)


def test_two_nodes_restarted_as_three_give_the_third_a_share() -> None:
    topics: dict[str, TopicInfo] = {}
    assign = assigner([1, 2], lambda: topics)
    for name, count in (("__consumer_offsets", 50), ("a", 6), ("b", 1)):
        topics[name] = TopicInfo(name, uuid.uuid4(), count, {}, assign(0, count))
    before = {name: info.copy() for name, info in topics.items()}
    assert reassign(topics, [1, 2, 3])
    offsets = Counter(r[0] for r in topics["__consumer_offsets"].replicas or [])
    assert sorted(offsets.values()) == [16, 17, 17]
    assert Counter(r[0] for r in topics["a"].replicas or []) == {1: 2, 2: 2, 3: 2}
    assert topics["b"].replicas == before["b"].replicas  # one partition: balanced already
    # Only partitions that go to node 3 move.
    for name, info in topics.items():
        for partition, replicas in enumerate(info.replicas or []):
            if replicas != before[name].replicas_of(partition):
                assert replicas == [3]


def test_new_partitions_spread_evenly_across_topics() -> None:
    topics: dict[str, TopicInfo] = {}
    assign = assigner([1, 2, 3], lambda: topics)
    for index in range(5):
        replicas = assign(0, 2)
        topics[f"t{index}"] = TopicInfo(f"t{index}", uuid.uuid4(), 2, {}, replicas)
    load = Counter(r[0] for info in topics.values() for r in info.replicas or [])
    assert max(load.values()) - min(load.values()) <= 1
    assert round_robin([1, 2], 1, 3) == [[2], [1], [2]]


def test_a_node_without_its_lock_is_down_and_its_leader_falls_back(tmp_path: Path) -> None:
    cluster = Cluster(1, 3, 0, tmp_path)
    assert cluster.alive(1) and not cluster.alive(2)
    info = TopicInfo("t", uuid.uuid4(), 3, {}, [[3], [7], []])
    assert [cluster.leader(info, p) for p in range(3)] == [3, 2, 3]
    assert cluster.serves(TopicInfo("u", uuid.uuid4(), 1, {}, [[1]]), 0)
