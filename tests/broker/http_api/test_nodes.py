"""``seglog serve --nodes 2 --console-port P``: each node serves the API, for every partition."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from tests.broker.http_api.conftest import create_topic, node_apis
from tests.broker.nodes.conftest import Cluster, free_ports, make_cluster

__all__ = ["make_cluster"]


def test_every_node_answers_for_partitions_of_both_nodes(make_cluster: Any, topic: str) -> None:
    console = free_ports(2)
    cluster: Cluster = make_cluster(2, **{"console.port": str(console)})
    apis = node_apis(cluster, console)  # node i on console.port + i
    # Two partitions: node 1 leads partition 0, node 2 partition 1 (round robin).
    create_topic(cluster.bootstrap(), topic, partitions=2)
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "linger.ms": 0})
    for partition, timestamp in ((0, 1000), (1, 2000), (0, 3000)):
        producer.produce(
            topic,
            key=b"k",
            value=f"p{partition} at {timestamp}".encode(),
            partition=partition,
            timestamp=timestamp,
        )
        producer.flush(30)
    assert producer.flush(30) == 0
    for api in apis:
        found = api.records(topic, key="k", all="true").body["records"]
        assert [(r["partition"], r["value"]) for r in found] == [
            (0, "p0 at 3000"),
            (1, "p1 at 2000"),
            (0, "p0 at 1000"),
        ]
        only_1 = api.records(topic, key="k", partition=1).body["records"]
        assert [(r["partition"], r["offset"]) for r in only_1] == [(1, 0)]
    # Each node tells its own port, where a client that bootstrapped from it finds the API.
    for node_id, api in ((1, apis[0]), (2, apis[1])):
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap(node_id)})
        resource = ConfigResource(ResourceType.BROKER, str(node_id))
        configs = admin.describe_configs([resource])[resource].result(30)
        assert int(configs["console.port"].value) == api.port


def test_topic_partition_segment_and_record_routes_on_any_node(
    make_cluster: Any, topic: str
) -> None:
    console = free_ports(2)
    cluster: Cluster = make_cluster(2, **{"console.port": str(console)})
    apis = node_apis(cluster, console)
    create_topic(cluster.bootstrap(), topic, partitions=2)
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "linger.ms": 0})
    for i in range(5):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % 2, timestamp=1000 + i)
        producer.flush(30)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    cid = str(admin.describe_cluster().result(30).cluster_id)
    answers = []
    for api in apis:
        base = f"/v3/clusters/{cid}/topics/{topic}"
        listed = api.get(f"/v3/clusters/{cid}/topics").body["data"]
        [item] = [t for t in listed if t["topic_name"] == topic]
        assert item["record_count"] == 5
        parts = api.get(f"{base}/partitions").body["data"]
        # Node 1 leads partition 0, node 2 partition 1; each told by its leader.
        assert [(p["leader"]["broker_id"], p["high_watermark"]) for p in parts] == [(1, 3), (2, 2)]
        assert api.get(f"{base}/partitions/1").body == parts[1]
        segments = api.get(f"/v1/topics/{topic}/partitions/1/segments").body
        assert (segments["partition"], segments["high_watermark"]) == (1, 2)
        assert [s["active"] for s in segments["segments"]] == [True]
        page = api.get(f"/v1/topics/{topic}/partitions/1/records", offset=0).body
        assert [(r["offset"], r["value"], r["timestamp"]) for r in page["records"]] == [
            (0, "v1", 1001),
            (1, "v3", 1003),
        ]
        by_time = api.get(f"/v1/topics/{topic}/partitions/0/records", timestamp=1002).body
        assert [r["value"] for r in by_time["records"]] == ["v2", "v4"]
        answers.append((item, parts, page))
        for path in (f"{base}/partitions/2", f"/v1/topics/{topic}/partitions/2/segments"):
            assert api.get(path).status == 404
    assert answers[0] == answers[1]


def test_produce_reaches_the_leader_from_either_node(make_cluster: Any, topic: str) -> None:
    console = free_ports(2)
    cluster: Cluster = make_cluster(
        2, **{"console.port": str(console), "console.write.enable": "true"}
    )
    apis = node_apis(cluster, console)
    create_topic(cluster.bootstrap(), topic, partitions=2)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    cid = str(admin.describe_cluster().result(30).cluster_id)
    path = f"/v3/clusters/{cid}/topics/{topic}/records"
    offsets = []
    # Each node produces to the partition it leads and to the other's.
    for api in apis:
        for partition in (0, 1):
            body = {
                "partition_id": partition,
                "value": {"type": "STRING", "data": f"via {api.port} to {partition}"},
            }
            answer = api.post(path, body)
            assert answer.status == 200, answer.body
            offsets.append((partition, answer.body["offset"]))
    assert offsets == [(0, 0), (1, 0), (0, 1), (1, 1)]
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap(),
            "group.id": topic,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    got: dict[int, list[str]] = {0: [], 1: []}
    deadline = time.monotonic() + 60
    while sum(len(v) for v in got.values()) < 4 and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            got[message.partition()].append(message.value().decode())
    consumer.close()
    assert got == {p: [f"via {api.port} to {p}" for api in apis] for p in (0, 1)}
