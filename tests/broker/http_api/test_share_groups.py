"""``GET /v1/share-groups/{group}``: a share group's members and its partitions' records by
state, answered by each partition's leader (one node, and either node of two)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import AcknowledgeType, Producer

from tests.broker.http_api.conftest import Api, ApiBroker, create_topic, node_apis
from tests.broker.nodes.conftest import Cluster, free_ports, make_cluster
from tests.broker.share.helpers import (
    WAIT,
    produce_numbered,
    set_group_configs,
    share_consumer,
    wait_for_members,
)

__all__ = ["make_cluster"]


class _Bootstrap:
    """What the share helpers need of a broker: its bootstrap servers."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.port = int(bootstrap.split(",")[0].rpartition(":")[2])


def _acquire(broker: Any, group: str, topic: str, count: int) -> Any:
    """A member of ``group`` holding all ``count`` records acquired, the first 4 accepted."""
    consumer = share_consumer(broker, group, topic, explicit=True)
    got: list[Any] = []
    deadline = time.monotonic() + WAIT
    while len(got) < count and time.monotonic() < deadline:
        got.extend(m for m in consumer.poll(0.5) if m.error() is None)
    assert len(got) == count
    for message in got[:4]:
        consumer.acknowledge(message, AcknowledgeType.ACCEPT)
    for message in got[4:]:
        consumer.acknowledge(message, AcknowledgeType.RELEASE)
    consumer.commit_sync()
    return consumer


def _wait_counts(api: Api, group: str, wanted: dict[str, int]) -> dict[str, Any]:
    """The route's answer once its one partition shows ``wanted``."""
    deadline = time.monotonic() + WAIT
    while True:
        answer = api.get(f"/v1/share-groups/{group}")
        assert answer.status == 200, answer.body
        [part] = answer.body["partitions"]
        if all(part[k] == v for k, v in wanted.items()) or time.monotonic() > deadline:
            return dict(answer.body)
        time.sleep(0.2)


def test_share_group_members_and_records_by_state(api_broker: Any) -> None:
    started: ApiBroker = api_broker()
    broker = _Bootstrap(started.bootstrap)
    topic = f"share-{uuid.uuid4().hex[:10]}"
    create_topic(started.bootstrap, topic)
    group = f"g-{topic}"
    set_group_configs(started.process, group, {"share.auto.offset.reset": "earliest"})
    produce_numbered(started.process, topic, 10)
    consumer = _acquire(broker, group, topic, 10)
    try:
        wait_for_members(started.process, group, 1)
        body = _wait_counts(started.api, group, {"start_offset": 4, "available": 6})
        assert body["state"] == "Stable"
        [member] = body["members"]
        assert member["assignments"] == [{"topic": topic, "partition": 0}]
        assert member["client_id"]
        [part] = body["partitions"]
        assert part["topic"] == topic
        assert part["start_offset"] == 4
        assert part["end_offset"] == 10
        assert part["available"] == 6
        assert part["acquired"] == 0
        assert part["lag"] == 6
        assert body["group_epoch"] >= 1
    finally:
        consumer.close()
    missing = started.api.get("/v1/share-groups/no-such-group")
    assert missing.status == 404, missing.body
    assert "/v1/share-groups/{share_group}" in started.api.get("/openapi.json").body["paths"]


def test_either_node_asks_each_partitions_leader(make_cluster: Any, topic: str) -> None:
    # Share-partitions of several nodes are not served yet (their state topic is led by
    # one node): the member is assigned both partitions, and each node's answer gives
    # each partition's log end from its leader, and no records by state.
    console = free_ports(2)
    cluster: Cluster = make_cluster(2, **{"console.port": str(console)})
    apis = node_apis(cluster, console)
    create_topic(cluster.bootstrap(), topic, partitions=2)
    broker = _Bootstrap(cluster.bootstrap())
    group = f"g-{topic}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap()})
    for n in range(10):
        producer.produce(topic, str(n).encode(), partition=n % 2)
    assert producer.flush(WAIT) == 0
    consumer = share_consumer(broker, group, topic)  # type: ignore[arg-type]
    try:
        for api in apis:
            deadline = time.monotonic() + WAIT
            while True:
                consumer.poll(0.2)
                answer = api.get(f"/v1/share-groups/{group}")
                members = answer.body.get("members", []) if answer.status == 200 else []
                if any(m["assignments"] for m in members) or time.monotonic() > deadline:
                    break
            assert answer.status == 200, answer.body
            [member] = answer.body["members"]
            assert member["assignments"] == [
                {"topic": topic, "partition": 0},
                {"topic": topic, "partition": 1},
            ]
            parts = answer.body["partitions"]
            assert [(p["partition"], p["end_offset"]) for p in parts] == [(0, 5), (1, 5)]
    finally:
        consumer.close()
