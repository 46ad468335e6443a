"""``POST /v3/clusters/{c}/topics/{t}/records``: produce through the broker's own path."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tests.broker.http_api.conftest import ApiBroker, create_topic
from tests.broker.http_api.test_security import ADMIN, _prepare, _start
from tests.broker.http_api.test_storage_routes import cluster_id, consume
from tests.broker.security.conftest import Secured
from tests.broker.security.test_sasl import confluent

StartBroker = Callable[..., ApiBroker]


def _path(cid: str, topic: str) -> str:
    return f"/v3/clusters/{cid}/topics/{topic}/records"


def test_read_only_unless_write_is_enabled(api_broker: StartBroker, topic: str) -> None:
    served = api_broker()
    create_topic(served.bootstrap, topic)
    cid = cluster_id(served.bootstrap)
    answer = served.api.post(_path(cid, topic), {"value": {"type": "STRING", "data": "x"}})
    assert (answer.status, answer.body["error_code"]) == (403, 42)
    assert "console.write.enable=true" in answer.body["message"]
    assert consume(served.bootstrap, topic, 0, 0) == []
    page = served.api.get(f"/v1/topics/{topic}/partitions/0/records", offset=0).body
    assert page["records"] == []


def test_produce_then_consume(api_broker: StartBroker, topic: str) -> None:
    served = api_broker(**{"console.write.enable": "true"})
    create_topic(served.bootstrap, topic, partitions=3)
    cid = cluster_id(served.bootstrap)
    api = served.api
    first = api.post(
        _path(cid, topic),
        {
            "partition_id": 1,
            "key": {"type": "STRING", "data": "order-7"},
            "value": {"type": "JSON", "data": {"state": "shipped", "n": 2}},
            "headers": [
                {"name": "source", "value": base64.b64encode(b"web").decode()},
                {"name": "empty", "value": None},
            ],
            "timestamp": "2026-01-02T03:04:05.678Z",
        },
    )
    assert first.status == 200, first.body
    assert first.body == {
        "error_code": 200,
        "cluster_id": cid,
        "topic_name": topic,
        "partition_id": 1,
        "offset": 0,
        "timestamp": "2026-01-02T03:04:05.678Z",
        "timestamp_ms": 1767323045678,
        "key": {"type": "STRING", "size": 7},
        "value": {"type": "JSON", "size": len(b'{"state":"shipped","n":2}')},
    }
    binary = api.post(
        _path(cid, topic),
        {
            "partition_id": 1,
            "value": {"type": "BINARY", "data": base64.b64encode(b"\xff\x00").decode()},
            "timestamp": 1234,
        },
    )
    assert (binary.status, binary.body["offset"], binary.body["key"]) == (200, 1, None)
    [one, two] = consume(served.bootstrap, topic, 1, 2)
    assert (one.key(), json.loads(one.value()), one.timestamp()[1]) == (
        b"order-7",
        {"state": "shipped", "n": 2},
        1767323045678,
    )
    assert one.headers() == [("source", b"web"), ("empty", None)]
    assert (two.key(), two.value(), two.timestamp()[1]) == (None, b"\xff\x00", 1234)
    # Without partition_id a keyed record goes where Kafka's (murmur2) partitioner sends it.
    producer = Producer(
        {"bootstrap.servers": served.bootstrap, "partitioner": "murmur2_random", "linger.ms": 0}
    )
    placed: list[Any] = []
    for key in ("a", "b", "c", "d", "e"):
        producer.produce(
            topic, key=key.encode(), value=b"v", on_delivery=lambda e, m: placed.append(m)
        )
        producer.flush(30)
        mine = api.post(_path(cid, topic), {"key": {"type": "STRING", "data": key}})
        assert mine.body["partition_id"] == placed[-1].partition(), key
    # Errors: a bad body 400, an unknown partition or topic 404.
    for body in (
        {"value": {"type": "NOPE", "data": "x"}},
        {"value": {"type": "BINARY", "data": "not base64!"}},
        {"partition_id": "one"},
        {"surprise": 1},
        {"timestamp": "yesterday"},
    ):
        answer = api.post(_path(cid, topic), body)
        assert (answer.status, answer.body["error_code"]) == (400, 42), body
    assert api.post(_path(cid, topic), {"partition_id": 3}).status == 404
    assert api.post(_path(cid, f"{topic}-missing"), {}).status == 404


def test_produce_needs_write_on_the_topic(
    secured_broker: Callable[..., Secured], topic: str
) -> None:
    broker, api = _start(secured_broker, "SASL_PLAINTEXT", write=True)
    _prepare(broker, topic)
    admin = AdminClient(confluent(broker.bootstrap, "PLAIN", *ADMIN))
    cid = str(admin.describe_cluster().result(30).cluster_id)
    binding = AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        "User:carol",
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([binding]).values():
        future.result(30)
    body = {"partition_id": 0, "value": {"type": "STRING", "data": "from the console"}}
    # alice may READ (so DESCRIBE), not WRITE; bob nothing; carol WRITE.
    refused = api.post(_path(cid, topic), body, auth=("alice", "alice-secret"))
    assert (refused.status, refused.body["error_code"]) == (403, 29)
    assert api.post(_path(cid, topic), body, auth=("bob", "bob-secret")).status == 403
    assert api.post(_path(cid, topic), body).status == 401
    done = api.post(_path(cid, topic), body, auth=("carol", "carol-secret"))
    assert (done.status, done.body["offset"]) == (200, 1)
    page = api.get(f"/v1/topics/{topic}/partitions/0/records", auth=ADMIN, offset=0).body
    assert [r["value"] for r in page["records"]] == ["secret value", "from the console"]
