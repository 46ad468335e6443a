"""Leaders chosen round-robin, recorded, and given again when nodes go away."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from seglog.broker.nodes.assignment import assigner, reassign, round_robin
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
def test_reassign_gives_every_partition_a_live_node_and_keeps_live_ones(
    specs: list[tuple[int, list[int] | None]], count: int
) -> None:
    topics = _topics(specs)
    before = {name: info.copy() for name, info in topics.items()}
    nodes = list(range(1, count + 1))
    reassign(topics, nodes)
    for name, info in topics.items():
        assert info.replicas is not None and len(info.replicas) == info.partitions
        for partition, replicas in enumerate(info.replicas):
            assert len(replicas) == 1 and replicas[0] in nodes
            kept = before[name].replicas_of(partition)
            if kept and kept[0] in nodes:
                assert replicas == kept  # a live leader stays where it is
    assert not reassign(topics, nodes)  # nothing left to do


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
