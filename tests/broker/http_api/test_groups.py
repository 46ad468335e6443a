"""Consumer groups through the API: a confluent-kafka group's members and lags as they move."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.broker.http_api.conftest import TIMEOUT, Api, ApiBroker, create_topic
from tests.broker.http_api.test_storage_routes import cluster_id, produce

StartBroker = Callable[..., ApiBroker]


def consume(consumer: Consumer, count: int) -> None:
    """Read ``count`` messages and commit them synchronously."""
    got = 0
    deadline = time.monotonic() + TIMEOUT
    while got < count:
        assert time.monotonic() < deadline, f"read {got} of {count}"
        message = consumer.poll(0.2)
        if message is None or message.error() is not None:
            continue
        got += 1
    consumer.commit(asynchronous=False)


def wait_for(
    api: Api, path: str, done: Callable[[Any], bool], *, auth: tuple[str, str] | None = None
) -> Any:
    """GET ``path`` until its body satisfies ``done`` (the group settles in its own time)."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        answer = api.get(path, auth=auth)
        if answer.status == 200 and done(answer.body):
            return answer.body
        assert time.monotonic() < deadline, answer.body
        time.sleep(0.1)


def new_consumer(bootstrap: str, group: str, protocol: str) -> Consumer:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if protocol == "consumer":
        config["group.protocol"] = "consumer"
    else:
        config["partition.assignment.strategy"] = "range"
    return Consumer(config)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_lag_rises_and_falls(api_broker: StartBroker, topic: str, protocol: str) -> None:
    served = api_broker(**{"console.write.enable": "true"})
    api = served.api
    create_topic(served.bootstrap, topic, partitions=2)
    cid = cluster_id(served.bootstrap)
    produce(served.bootstrap, topic, [{"value": b"v", "partition": i % 2} for i in range(6)])
    group = f"g-{topic}"
    base = f"/v3/clusters/{cid}/consumer-groups"
    consumer = new_consumer(served.bootstrap, group, protocol)
    consumer.subscribe([topic])
    try:
        consume(consumer, 6)
        # Listed, with its type, state and coordinator.
        listed = wait_for(
            api,
            base,
            lambda b: any(
                g["consumer_group_id"] == group and g["state"] == "STABLE" for g in b["data"]
            ),
        )
        assert listed["kind"] == "KafkaConsumerGroupList"
        [item] = [g for g in listed["data"] if g["consumer_group_id"] == group]
        assert item["type"] == ("CLASSIC" if protocol == "classic" else "CONSUMER")
        assert item["is_simple"] is False
        assert item["coordinator"] == {"broker_id": 1}
        assert item["metadata"]["self"] == f"{base}/{group}"
        if protocol == "classic":
            assert item["partition_assignor"] == "range"
        else:
            assert item["partition_assignor"]
        one = api.get(f"{base}/{group}")
        assert one.status == 200
        assert one.body["consumer_group_id"] == group
        assert one.body["type"] == item["type"]
        # Its one member holds both partitions.
        members = wait_for(
            api,
            f"{base}/{group}/consumers",
            lambda b: len(b["data"]) == 1 and len(b["data"][0]["assignments"]) == 2,
        )
        [member] = members["data"]
        assert sorted((a["topic_name"], a["partition_id"]) for a in member["assignments"]) == [
            (topic, 0),
            (topic, 1),
        ]
        assert member["client_id"] == "rdkafka"
        assert member["host"]
        # Everything read and committed: no lag.
        lags = api.get(f"{base}/{group}/lags").body
        assert lags["kind"] == "KafkaConsumerLagList"
        assert [
            (x["topic_name"], x["partition_id"], x["current_offset"], x["log_end_offset"], x["lag"])
            for x in lags["data"]
        ] == [(topic, 0, 3, 3, 0), (topic, 1, 3, 3, 0)]
        assert {x["consumer_id"] for x in lags["data"]} == {member["consumer_id"]}
        # Produce: the lag rises ...
        produce(served.bootstrap, topic, [{"value": b"w", "partition": 1} for _ in range(4)])
        summary = api.get(f"{base}/{group}/lag-summary").body
        assert (summary["max_lag"], summary["total_lag"]) == (4, 4)
        assert (summary["max_lag_topic_name"], summary["max_lag_partition_id"]) == (topic, 1)
        # ... consume and commit: it falls.
        consume(consumer, 4)
        summary = api.get(f"{base}/{group}/lag-summary").body
        assert (summary["max_lag"], summary["total_lag"]) == (0, 0)
        # A reset is refused while the member is in.
        refused = api.post(f"/v1/groups/{group}/offsets/reset", {"topic": topic, "to": "earliest"})
        assert (refused.status, refused.body["error_code"]) == (409, 68)
    finally:
        consumer.close()
    # Empty now: the reset is done, and the lag is back.
    wait_for(api, f"{base}/{group}", lambda b: b["state"] == "EMPTY")
    reset = api.post(f"/v1/groups/{group}/offsets/reset", {"topic": topic, "to": "earliest"})
    assert reset.status == 200, reset.body
    assert reset.body == {
        "offsets": [
            {"topic": topic, "partition": 0, "offset": 0},
            {"topic": topic, "partition": 1, "offset": 0},
        ]
    }
    summary = api.get(f"{base}/{group}/lag-summary").body
    assert summary["total_lag"] == 10
    one = api.post(
        f"/v1/groups/{group}/offsets/reset", {"topic": topic, "partition": 1, "to": {"offset": 5}}
    )
    assert one.body == {"offsets": [{"topic": topic, "partition": 1, "offset": 5}]}
    latest = api.post(f"/v1/groups/{group}/offsets/reset", {"topic": topic, "to": "latest"})
    assert [x["offset"] for x in latest.body["offsets"]] == [3, 7]
    assert api.get(f"{base}/{group}/lag-summary").body["total_lag"] == 0
    # The committed offsets are those a new member starts from.
    again = new_consumer(served.bootstrap, group, protocol)
    try:
        offsets = again.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], 30)
        assert [tp.offset for tp in offsets] == [3, 7]
    finally:
        again.close()


def test_unknown_group_and_read_only(api_broker: StartBroker, topic: str) -> None:
    served = api_broker()
    create_topic(served.bootstrap, topic)
    cid = cluster_id(served.bootstrap)
    missing = served.api.get(f"/v3/clusters/{cid}/consumer-groups/no-such-{topic}")
    assert (missing.status, missing.body["error_code"]) == (404, 69)
    assert served.api.get(f"/v3/clusters/{cid}/consumer-groups").body["data"] == []
    refused = served.api.post(
        f"/v1/groups/g-{topic}/offsets/reset", {"topic": topic, "to": "latest"}
    )
    assert (refused.status, refused.body["error_code"]) == (403, 42)
    assert "console.write.enable=true" in refused.body["message"]


def test_reset_by_timestamp_and_out_of_range_offsets(api_broker: StartBroker, topic: str) -> None:
    served = api_broker(**{"console.write.enable": "true"})
    api = served.api
    create_topic(served.bootstrap, topic)
    produce(
        served.bootstrap, topic, [{"value": b"v", "timestamp": 1000 * (i + 1)} for i in range(5)]
    )
    group = f"g-{topic}"
    path = f"/v1/groups/{group}/offsets/reset"

    def reset(to: Any) -> Any:
        answer = api.post(path, {"topic": topic, "to": to})
        assert answer.status == 200, answer.body
        return [x["offset"] for x in answer.body["offsets"]]

    # A group with no offsets yet: the reset commits them, as Kafka's tool does.
    assert reset({"timestamp": 2500}) == [2]  # the first record at or after the time
    assert reset({"timestamp": 0}) == [0]
    assert reset({"timestamp": 10**13}) == [5]  # after every record: the end
    assert reset({"offset": 99}) == [5]  # beyond the end: the end
    assert reset({"offset": 3}) == [3]
    cid = api.get("/v1/whoami").body["cluster_id"]
    lags = api.get(f"/v3/clusters/{cid}/consumer-groups/{group}/lags").body["data"]
    assert [(x["current_offset"], x["log_end_offset"], x["lag"]) for x in lags] == [(3, 5, 2)]
    one = api.get(f"/v3/clusters/{cid}/consumer-groups/{group}").body
    assert (one["is_simple"], one["state"], one["type"]) == (True, "EMPTY", "CLASSIC")
    bad = api.post(path, {"topic": topic, "to": "yesterday"})
    assert (bad.status, bad.body["error_code"]) == (400, 42)
    missing = api.post(path, {"topic": f"{topic}-missing", "to": "latest"})
    assert missing.status == 404


def test_an_assigned_partition_never_committed_has_no_lag(
    api_broker: StartBroker, topic: str
) -> None:
    served = api_broker()
    create_topic(served.bootstrap, topic, partitions=2)
    cid = cluster_id(served.bootstrap)
    produce(served.bootstrap, topic, [{"value": b"v", "partition": 0} for _ in range(3)])
    produce(served.bootstrap, topic, [{"value": b"w", "partition": 1} for _ in range(2)])
    group = f"g-{topic}"
    base = f"/v3/clusters/{cid}/consumer-groups/{group}"
    consumer = new_consumer(served.bootstrap, group, "classic")
    consumer.subscribe([topic])
    try:
        # Assigned both partitions; committed only partition 0's position.
        wait_for(
            served.api,
            f"{base}/consumers",
            lambda b: len(b["data"]) == 1 and len(b["data"][0]["assignments"]) == 2,
        )
        consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        lags = wait_for(served.api, f"{base}/lags", lambda b: len(b["data"]) == 2)["data"]
        # As kafka-consumer-groups --describe shows them: "-" where nothing is committed.
        assert [
            (x["partition_id"], x["current_offset"], x["log_end_offset"], x["lag"]) for x in lags
        ] == [(0, 1, 3, 2), (1, None, 2, None)]
        assert lags[1]["consumer_id"] == lags[0]["consumer_id"] != ""
        summary = served.api.get(f"{base}/lag-summary").body
        assert (summary["total_lag"], summary["max_lag"]) == (2, 2)
        assert (summary["max_lag_topic_name"], summary["max_lag_partition_id"]) == (topic, 0)
    finally:
        consumer.close()
