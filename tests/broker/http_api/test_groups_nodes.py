"""``--nodes 2``: every node's API answers for groups coordinated by either node."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.broker.http_api.conftest import create_topic, node_apis
from tests.broker.http_api.test_groups import consume, wait_for
from tests.broker.http_api.test_storage_routes import produce
from tests.broker.nodes.conftest import Cluster, free_ports, make_cluster

__all__ = ["make_cluster"]


def test_groups_of_both_coordinators_on_either_node(make_cluster: Any, topic: str) -> None:
    console = free_ports(2)
    cluster: Cluster = make_cluster(
        2, **{"console.port": str(console), "console.write.enable": "true"}
    )
    apis = node_apis(cluster, console)
    create_topic(cluster.bootstrap(), topic, partitions=2)
    produce(cluster.bootstrap(), topic, [{"value": b"v", "partition": i % 2} for i in range(4)])
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    cid = str(admin.describe_cluster().result(30).cluster_id)
    # Enough groups that both nodes coordinate some.
    groups = [f"g{i}-{topic}" for i in range(6)]
    for group in groups:
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap(),
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe([topic])
        consume(consumer, 4)
        consumer.close()
    coordinators = {}
    for group in groups:
        described = admin.describe_consumer_groups([group])[group].result(30)
        coordinators[group] = described.coordinator.id
    assert set(coordinators.values()) == {1, 2}
    base = f"/v3/clusters/{cid}/consumer-groups"
    for api in apis:
        assert len(api.get(f"/v3/clusters/{cid}/brokers").body["data"]) == 2
        listed = wait_for(
            api,
            base,
            lambda b: sorted(g["consumer_group_id"] for g in b["data"]) == sorted(groups),
        )
        assert {
            g["consumer_group_id"]: g["coordinator"]["broker_id"] for g in listed["data"]
        } == coordinators
        for group in groups:
            one = api.get(f"{base}/{group}").body
            assert (one["state"], one["coordinator"]["broker_id"]) == ("EMPTY", coordinators[group])
            lags = api.get(f"{base}/{group}/lags").body["data"]
            assert [(x["partition_id"], x["current_offset"], x["lag"]) for x in lags] == [
                (0, 2, 0),
                (1, 2, 0),
            ]
        overview = api.get("/v1/overview").body
        assert [n["node_id"] for n in overview["nodes"]] == [1, 2]
    # A reset through node 2 of groups of either coordinator.
    for group in groups:
        reset = apis[1].post(
            f"/v1/groups/{group}/offsets/reset", {"topic": topic, "to": "earliest"}
        )
        assert reset.status == 200, reset.body
        assert apis[0].get(f"{base}/{group}/lag-summary").body["total_lag"] == 4
    check = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": groups[0]})
    try:
        committed = check.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], 30)
        assert [tp.offset for tp in committed] == [0, 0]
    finally:
        check.close()


def test_transactions_of_both_coordinators_on_either_node(make_cluster: Any, topic: str) -> None:
    console = free_ports(2)
    cluster: Cluster = make_cluster(2, **{"console.port": str(console)})
    apis = node_apis(cluster, console)
    create_topic(cluster.bootstrap(), topic, partitions=2)
    ids = [f"t{i}-{topic}" for i in range(6)]
    for tid in ids:
        producer = Producer({"bootstrap.servers": cluster.bootstrap(), "transactional.id": tid})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, value=tid.encode(), partition=0)
        producer.commit_transaction(30)
    for api in apis:
        listed = api.get("/v1/transactions").body["transactions"]
        assert [t["transactional_id"] for t in listed] == sorted(ids)
        assert {t["state"] for t in listed} <= {"CompleteCommit", "PrepareCommit"}
        assert not any(t["hanging"] for t in listed)
