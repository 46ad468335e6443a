"""/metrics under ``seglog serve --nodes N``: each node serves its share on its own port."""

from __future__ import annotations

import urllib.request
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from seglog.broker.nodes.cluster import Cluster
from seglog.broker.settings import BrokerSettings
from seglog.errors import InvalidConfigError
from tests.broker.nodes.conftest import free_ports
from tests.broker.nodes.test_nodes_confluent import create, produce


def _samples(port: int) -> list[tuple[str, dict[str, str], float]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        page = response.read().decode()
    return [
        (s.name, s.labels, s.value)
        for family in text_string_to_metric_families(page)
        for s in family.samples
    ]


def _series(
    pages: dict[int, list[tuple[str, dict[str, str], float]]], name: str, **labels: str
) -> dict[int, list[tuple[dict[str, str], float]]]:
    """Per node id, the samples of ``name`` whose labels include ``labels``."""
    return {
        node: [
            (found, value)
            for sample, found, value in samples
            if sample == name and labels.items() <= found.items()
        ]
        for node, samples in pages.items()
    }


def test_each_node_serves_its_partitions_and_groups_with_lag_across_nodes(
    make_cluster: Any,
) -> None:
    metrics_port = free_ports(2)
    cluster = make_cluster(2, **{"metrics.port": str(metrics_port)})
    topic, group = f"metered-{uuid.uuid4()}", f"lagging-{uuid.uuid4()}"
    create(cluster, 1, topic, 2)
    produce(cluster, 1, topic, {0: [b"a"] * 10, 1: [b"b"] * 10})
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap(1), "group.id": group, "enable.auto.commit": False}
    )
    try:
        # Whichever node coordinates the group, one of the two partitions is led
        # by the other node: its lag needs that node's high watermark.
        consumer.commit(
            offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 7)], asynchronous=False
        )
    finally:
        consumer.close()
    # Node i (id 1 + i) serves on metrics.port + i, as its listeners do.
    pages = {node: _samples(metrics_port + node - 1) for node in (1, 2)}

    ends = _series(pages, "kafka_log_log_logendoffset", topic=topic)
    leaders = _series(pages, "kafka_topic_partition_leader", topic=topic)
    for partition in ("0", "1"):
        holders = [
            n
            for n, found in ends.items()
            if any(labels["partition"] == partition for labels, _ in found)
        ]
        assert len(holders) == 1, f"partition {partition} on nodes {holders}"
        (node,) = holders
        assert [v for labels, v in ends[node] if labels["partition"] == partition] == [10]
        assert [v for labels, v in leaders[node] if labels["partition"] == partition] == [node]

    lag = _series(pages, "kafka_consumergroup_lag", consumergroup=group, topic=topic)
    coordinators = [n for n, found in lag.items() if found]
    assert len(coordinators) == 1, f"the group's lag is on nodes {coordinators}"
    (coordinator,) = coordinators
    assert sorted((labels["partition"], v) for labels, v in lag[coordinator]) == [
        ("0", 6),
        ("1", 3),
    ]
    committed = _series(pages, "kafka_consumergroup_current_offset", consumergroup=group)
    assert sorted((labels["partition"], v) for labels, v in committed[coordinator]) == [
        ("0", 4),
        ("1", 7),
    ]

    for node in (1, 2):
        assert [v for _, v in _series(pages, "kafka_brokers")[node]] == [2]
        assert [labels["id"] for labels, _ in _series(pages, "kafka_broker_info")[node]] == [
            str(node)
        ]
    controllers = _series(pages, "kafka_controller_kafkacontroller_activecontrollercount")
    assert {node: [v for _, v in found] for node, found in controllers.items()} == {
        1: [1],
        2: [0],
    }
    assert cluster.stop() == 0


def test_each_node_gets_metrics_port_plus_its_index_and_port_0_stays_0() -> None:
    settings = BrokerSettings.from_properties({"metrics.port": "9400"})
    shifted = [Cluster.for_node(settings, 3, i).node_settings(settings) for i in range(3)]
    assert [s.metrics_port for s in shifted] == [9400, 9401, 9402]
    any_port = BrokerSettings.from_properties({"metrics.port": "0"})
    assert Cluster.for_node(any_port, 3, 2).node_settings(any_port).metrics_port == 0
    unset = BrokerSettings.from_properties({})
    assert Cluster.for_node(unset, 3, 2).node_settings(unset).metrics_port is None
    Cluster.check(BrokerSettings.from_properties({"metrics.port": "65534"}), 2)
    with pytest.raises(InvalidConfigError, match=r"metrics\.port=65535"):
        Cluster.check(BrokerSettings.from_properties({"metrics.port": "65535"}), 2)
