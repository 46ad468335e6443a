"""REST v3 topics and partitions, /v1 segments and record browsing, over a real broker."""

from __future__ import annotations

import itertools
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.http_api.conftest import TIMEOUT, Api, ApiBroker, create_topic, wait_listening
from tests.broker.http_api.test_security import ADMIN, _prepare, _start
from tests.broker.security.conftest import Secured
from tests.broker.security.test_sasl import confluent

StartBroker = Callable[..., ApiBroker]


def cluster_id(bootstrap: str) -> str:
    """The cluster's id, as a Kafka client sees it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return str(admin.describe_cluster().result(30).cluster_id)


def produce(bootstrap: str, topic: str, records: list[dict[str, Any]]) -> None:
    """Each of ``records`` (``produce``'s keyword arguments), in order, acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for record in records:
        producer.produce(topic, **record)
        producer.flush(30)  # one batch each: segment sizes and order are the test's
    assert producer.flush(30) == 0


def consume(bootstrap: str, topic: str, partition: int, count: int) -> list[Any]:
    """The first ``count`` records of one partition, read with confluent-kafka."""
    from confluent_kafka import TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    got: list[Any] = []
    deadline = time.monotonic() + TIMEOUT
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            got.append(message)
    consumer.close()
    return got


def wait_for(check: Callable[[], Any], what: str) -> Any:
    """``check()``'s first truthy value (generous timeout: the event, not its speed)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def topic_path(cid: str, topic: str, rest: str = "") -> str:
    return f"/v3/clusters/{cid}/topics/{urllib.parse.quote(topic)}{rest}"


@pytest.fixture
def served(api_broker: StartBroker) -> ApiBroker:
    return api_broker()


def test_topics_partitions_and_configs(served: ApiBroker, topic: str) -> None:
    create_topic(served.bootstrap, topic, partitions=2, **{"retention.ms": "3600000"})
    produce(
        served.bootstrap,
        topic,
        [{"value": f"v{i}".encode(), "partition": i % 2} for i in range(5)],
    )
    cid = cluster_id(served.bootstrap)
    api = served.api
    listed = api.get(f"/v3/clusters/{cid}/topics")
    assert listed.status == 200
    assert listed.body["kind"] == "KafkaTopicList"
    assert listed.body["metadata"] == {"self": f"/v3/clusters/{cid}/topics", "next": None}
    [item] = [t for t in listed.body["data"] if t["topic_name"] == topic]
    assert item["metadata"]["self"] == topic_path(cid, topic)
    assert item["partitions_count"] == 2
    assert item["record_count"] == 5
    assert item["replication_factor"] == 1
    assert item["is_internal"] is False
    assert item["key_index"] is True
    assert item["size_bytes"] > 0
    assert api.get(topic_path(cid, topic)).body == item

    partitions = api.get(topic_path(cid, topic, "/partitions")).body
    assert partitions["kind"] == "KafkaPartitionList"
    rows = partitions["data"]
    assert [(p["partition_id"], p["high_watermark"], p["log_start_offset"]) for p in rows] == [
        (0, 3, 0),
        (1, 2, 0),
    ]
    assert all(isinstance(p["leader"]["broker_id"], int) for p in rows)
    assert all(
        p["segment_count"] == 1 and p["last_stable_offset"] == p["high_watermark"] for p in rows
    )
    assert sum(p["size_bytes"] for p in rows) == item["size_bytes"]
    assert api.get(topic_path(cid, topic, "/partitions/1")).body == rows[1]

    configs = api.get(topic_path(cid, topic, "/configs")).body
    assert configs["kind"] == "KafkaTopicConfigList"
    by_name = {c["name"]: c for c in configs["data"]}
    assert by_name["retention.ms"]["value"] == "3600000"
    assert by_name["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert by_name["retention.ms"]["is_default"] is False
    assert by_name["segment.ms"]["is_default"] is True
    assert by_name["segment.ms"]["source"] == "DEFAULT_CONFIG"
    assert all(not c["is_sensitive"] or c["value"] is None for c in configs["data"])

    # Errors: unknown topic, partition and cluster 404; a malformed partition 400.
    for path in (
        topic_path(cid, f"{topic}-missing"),
        topic_path(cid, f"{topic}-missing", "/partitions"),
        topic_path(cid, topic, "/partitions/2"),
        topic_path("not-this-cluster", topic),
        f"/v1/topics/{topic}/partitions/2/segments",
        f"/v1/topics/{topic}-missing/partitions/0/records?offset=0",
    ):
        answer = api.get(path)
        assert answer.status == 404, path
        assert set(answer.body) == {"error_code", "message"}
    assert api.get(topic_path(cid, topic, "/partitions/x")).status == 400
    # Every route is in the OpenAPI document.
    documented = api.get("/openapi.json").body["paths"]
    for path in (
        "/v3/clusters/{cluster_id}/topics",
        "/v3/clusters/{cluster_id}/topics/{topic}",
        "/v3/clusters/{cluster_id}/topics/{topic}/configs",
        "/v3/clusters/{cluster_id}/topics/{topic}/partitions",
        "/v3/clusters/{cluster_id}/topics/{topic}/partitions/{partition_id}",
        "/v3/clusters/{cluster_id}/topics/{topic}/records",
        "/v1/topics/{topic}/partitions/{partition}/segments",
        "/v1/topics/{topic}/partitions/{partition}/records",
    ):
        assert path in documented, path


def test_a_thousand_topics_are_all_listed(served: ApiBroker, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": served.bootstrap})
    from confluent_kafka.admin import NewTopic

    names = [f"{topic}-{i:04d}" for i in range(1000)]
    for start in range(0, len(names), 200):
        futures = admin.create_topics([NewTopic(n, 1) for n in names[start : start + 200]])
        for future in futures.values():
            future.result(60)
    produce(served.bootstrap, names[7], [{"value": b"x"}, {"value": b"y"}])
    cid = cluster_id(served.bootstrap)
    listed = served.api.get(f"/v3/clusters/{cid}/topics").body["data"]
    mine = {t["topic_name"]: t for t in listed if t["topic_name"].startswith(f"{topic}-")}
    assert sorted(mine) == names
    assert mine[names[7]]["record_count"] == 2
    assert all(mine[n]["record_count"] == 0 for n in names if n != names[7])


def test_browse_by_offset_and_by_time(served: ApiBroker, topic: str) -> None:
    create_topic(served.bootstrap, topic)
    produce(
        served.bootstrap,
        topic,
        [
            {
                "key": None if i == 3 else f"k{i}".encode(),
                "value": b"\xff\x00" if i == 4 else f"v{i}".encode(),
                "timestamp": 1_000_000 + 1000 * i,
                "headers": [("h", b"x")] if i == 0 else None,
            }
            for i in range(10)
        ],
    )
    api = served.api
    path = f"/v1/topics/{topic}/partitions/0/records"
    page = api.get(path, offset=0, limit=3).body
    assert [r["offset"] for r in page["records"]] == [0, 1, 2]
    assert page["next_offset"] == 3
    assert (page["log_start_offset"], page["high_watermark"]) == (0, 10)
    first = page["records"][0]
    assert first == {
        "topic": topic,
        "partition": 0,
        "offset": 0,
        "timestamp": 1_000_000,
        "key": "k0",
        "key_encoding": "utf8",
        "value": "v0",
        "value_encoding": "utf8",
        "headers": [{"key": "h", "value": "x", "value_encoding": "utf8"}],
    }
    rest = api.get(path, offset=page["next_offset"], limit=500).body
    assert [r["offset"] for r in rest["records"]] == list(range(3, 10))
    assert rest["next_offset"] == 10
    assert rest["records"][0]["key"] is None
    assert rest["records"][1]["value_encoding"] == "base64"
    # What confluent-kafka reads is what the browse shows.
    consumed = consume(served.bootstrap, topic, 0, 10)
    shown = page["records"] + rest["records"]
    assert [(m.offset(), m.timestamp()[1]) for m in consumed] == [
        (r["offset"], r["timestamp"]) for r in shown
    ]
    # By time: the first record at or after the timestamp.
    by_time = api.get(path, timestamp=1_004_500, limit=2).body
    assert [(r["offset"], r["timestamp"]) for r in by_time["records"]] == [
        (5, 1_005_000),
        (6, 1_006_000),
    ]
    assert api.get(path, timestamp=9_999_999_999).body["records"] == []
    assert api.get(path, offset=10).body["records"] == []
    assert api.get(path, offset=99).body["records"] == []
    assert len(api.get(path, offset=0).body["records"]) == 10  # fewer than the default 20
    for params in (
        {},
        {"offset": 0, "timestamp": 0},
        {"offset": 0, "limit": 501},
        {"offset": -1},
        {"offset": 0, "nope": 1},
        {"offset": "x"},
    ):
        answer = api.get(path, **params)
        assert (answer.status, answer.body["error_code"]) == (400, 42), params


def _segments(api: Api, topic: str) -> dict[str, Any]:
    answer = api.get(f"/v1/topics/{topic}/partitions/0/segments")
    assert answer.status == 200, answer.body
    return dict(answer.body)


def _restart(process: BrokerProcess, **overrides: str) -> Api:
    process.stop()
    port = free_port()
    process.overrides = {**process.overrides, "console.port": str(port), **overrides}
    process.start()
    wait_listening(port, process.alive, process.log)
    return Api(port)


def test_segments_past_retention_are_what_retention_deletes(tmp_path: Path, topic: str) -> None:
    # No retention pass while the prediction is read (the first is an interval after start).
    port = free_port()
    process = BrokerProcess(tmp_path / "data", {"console.port": str(port)})
    process.start()
    try:
        wait_listening(port, process.alive, process.log)
        api = Api(port)
        create_topic(process.bootstrap, topic, **{"internal.segment.bytes": "300"})
        produce(process.bootstrap, topic, [{"key": b"k", "value": b"x" * 200} for _ in range(8)])
        before = _segments(api, topic)
        assert before["cleanup_policy"] == "delete"
        assert before["retention_bytes"] == -1
        assert before["dirty_ratio"] is None
        segments = before["segments"]
        assert len(segments) >= 4
        assert not any(s["past_retention"] for s in segments)
        assert [s["active"] for s in segments] == [False] * (len(segments) - 1) + [True]
        for s, following in itertools.pairwise(segments):
            assert s["next_offset"] == following["base_offset"]
            assert s["size_bytes"] > 0 and s["max_timestamp"] is not None
            assert s["index_max_entries"] >= s["index_entries"]
        # Keep about half: the oldest segments beyond it are due.
        total = sum(s["size_bytes"] for s in segments)
        keep = total // 2
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        resource = ConfigResource(
            ResourceType.TOPIC,
            topic,
            incremental_configs=[
                ConfigEntry(
                    "retention.bytes", str(keep), incremental_operation=AlterConfigOpType.SET
                )
            ],
        )
        admin.incremental_alter_configs([resource])[resource].result(30)
        predicted = _segments(api, topic)["segments"]
        due = [s["base_offset"] for s in predicted if s["past_retention"]]
        assert due, predicted
        assert due == [s["base_offset"] for s in predicted[: len(due)]]  # a prefix
        survivors = [s for s in predicted if not s["past_retention"]]
        assert sum(s["size_bytes"] for s in survivors) <= keep
        # Now let retention run, and see it delete exactly those.
        api = _restart(process, **{"log.retention.check.interval.ms": "200"})
        after = wait_for(
            lambda: (s := _segments(api, topic))["log_start_offset"] > 0 and s,
            "the retention pass",
        )
        assert after["log_start_offset"] == survivors[0]["base_offset"]
        assert [s["base_offset"] for s in after["segments"]] == [
            s["base_offset"] for s in survivors
        ]
        assert not any(s["past_retention"] for s in after["segments"])
        # Browsing from below the log start starts at it.
        page = api.get(f"/v1/topics/{topic}/partitions/0/records", offset=0, limit=1).body
        assert page["log_start_offset"] == after["log_start_offset"]
        assert [r["offset"] for r in page["records"]] == [after["log_start_offset"]]
    finally:
        if process.process is not None:
            process.stop()


def test_cleaner_marks_and_dirty_ratio_match_the_cleaner(tmp_path: Path, topic: str) -> None:
    port = free_port()
    process = BrokerProcess(
        tmp_path / "data", {"console.port": str(port), "log.cleaner.enable": "false"}
    )
    process.start()
    try:
        wait_listening(port, process.alive, process.log)
        api = Api(port)
        create_topic(
            process.bootstrap,
            topic,
            **{
                "cleanup.policy": "compact",
                "internal.segment.bytes": "300",
                "min.cleanable.dirty.ratio": "0.01",
            },
        )
        # Four keys written over and over: most records are superseded.
        produce(
            process.bootstrap,
            topic,
            [{"key": f"k{i % 4}".encode(), "value": f"v{i}".encode() * 40} for i in range(16)],
        )
        before = _segments(api, topic)
        assert before["cleanup_policy"] == "compact"
        segments = before["segments"]
        closed = [s for s in segments if not s["active"]]
        assert len(closed) >= 3
        # Never cleaned: every closed segment is dirty, and the whole log is cleanable.
        assert before["dirty_ratio"] == 1.0
        assert [s["cleaner"] for s in closed] == ["next"] * len(closed)
        assert segments[-1]["cleaner"] is None
        assert not any(s["past_retention"] for s in segments)
        end = closed[-1]["next_offset"]

        api = _restart(process, **{"log.cleaner.enable": "true", "log.cleaner.backoff.ms": "100"})
        after = wait_for(
            lambda: (
                (s := _segments(api, topic))
                and any(x["cleaner"] == "cleaned" for x in s["segments"])
                and s
            ),
            "the cleaner",
        )
        cleaned = [s for s in after["segments"] if s["cleaner"] == "cleaned"]
        assert cleaned[-1]["next_offset"] == end  # what was "next" is what was cleaned
        assert after["dirty_ratio"] == 0.0
        assert not any(s["cleaner"] == "next" for s in after["segments"])
        # Only each key's newest record is left below the cleaned end.
        records = api.get(f"/v1/topics/{topic}/partitions/0/records", offset=0, limit=500).body
        below = [r for r in records["records"] if r["offset"] < end]
        keys = [r["key"] for r in below]
        assert len(keys) == len(set(keys))
        # The ratio is the cleaner's: dirty bytes over closed bytes below the active segment.
        produce(
            process.bootstrap,
            topic,
            [{"key": f"k{i % 4}".encode(), "value": f"w{i}".encode() * 40} for i in range(8)],
        )
        again = _segments(api, topic)
        closed = [s for s in again["segments"] if not s["active"]]
        dirty = sum(s["size_bytes"] for s in closed if s["cleaner"] != "cleaned")
        total = sum(s["size_bytes"] for s in closed)
        assert again["dirty_ratio"] == pytest.approx(dirty / total)
    finally:
        if process.process is not None:
            process.stop()


def test_acls_decide_what_is_seen(secured_broker: Callable[..., Secured], topic: str) -> None:
    """alice may READ the topic (so DESCRIBE it), bob nothing; admin is a super user."""
    broker, api = _start(secured_broker, "SASL_PLAINTEXT")
    _prepare(broker, topic)
    admin = AdminClient(confluent(broker.bootstrap, "PLAIN", *ADMIN))
    cid = str(admin.describe_cluster().result(30).cluster_id)
    alice, bob = ("alice", "alice-secret"), ("bob", "bob-secret")
    paths = [
        topic_path(cid, topic),
        topic_path(cid, topic, "/partitions"),
        topic_path(cid, topic, "/partitions/0"),
        f"/v1/topics/{topic}/partitions/0/segments",
        f"/v1/topics/{topic}/partitions/0/records?offset=0",
    ]
    for path in paths:
        assert api.get(path, auth=alice).status == 200, path
        denied = api.get(path, auth=bob)
        assert (denied.status, denied.body["error_code"]) == (403, 29), path
        assert api.get(path).status == 401
    # Without DESCRIBE, a missing topic is not told apart from a hidden one.
    assert api.get(topic_path(cid, f"{topic}-missing"), auth=bob).status == 403
    assert api.get(topic_path(cid, f"{topic}-missing"), auth=ADMIN).status == 404
    listed = api.get(f"/v3/clusters/{cid}/topics", auth=bob).body["data"]
    assert topic not in [t["topic_name"] for t in listed]
    listed = api.get(f"/v3/clusters/{cid}/topics", auth=alice).body["data"]
    assert topic in [t["topic_name"] for t in listed]
    # The configs need DESCRIBE_CONFIGS, which READ does not give.
    assert api.get(topic_path(cid, topic, "/configs"), auth=alice).status == 403
    assert api.get(topic_path(cid, topic, "/configs"), auth=ADMIN).status == 200
    records = api.get(f"/v1/topics/{topic}/partitions/0/records", auth=alice, offset=0).body
    assert [r["value"] for r in records["records"]] == ["secret value"]


def test_browse_read_committed(served: ApiBroker, topic: str) -> None:
    create_topic(served.bootstrap, topic)
    producer = Producer(
        {"bootstrap.servers": served.bootstrap, "transactional.id": f"tx-{topic}", "linger.ms": 0}
    )
    producer.init_transactions(30)
    for outcome in ("commit", "abort", "open"):
        producer.begin_transaction()
        for i in range(2):
            producer.produce(topic, value=f"{outcome}-{i}".encode())
        producer.flush(30)
        if outcome == "commit":
            producer.commit_transaction(30)
        elif outcome == "abort":
            producer.abort_transaction(30)
    path = f"/v1/topics/{topic}/partitions/0/records"
    # Offsets: commit 0-1, marker 2, abort 3-4, marker 5, open 6-7.
    committed = served.api.get(path, offset=0, isolation_level="read_committed").body
    assert [r["value"] for r in committed["records"]] == ["commit-0", "commit-1"]
    assert committed["next_offset"] == 6  # the last stable offset
    everything = served.api.get(path, offset=0).body
    assert [r["value"] for r in everything["records"]] == [
        "commit-0",
        "commit-1",
        "abort-0",
        "abort-1",
        "open-0",
        "open-1",
    ]
    assert everything["next_offset"] == everything["high_watermark"] == 8
    parts = served.api.get(
        f"/v3/clusters/{cluster_id(served.bootstrap)}/topics/{topic}/partitions/0"
    ).body
    assert (parts["last_stable_offset"], parts["high_watermark"]) == (6, 8)
    producer.abort_transaction(30)
