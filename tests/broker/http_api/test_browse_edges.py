"""Record browsing over compressed batches and keyless records; produce's timestamp checks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from seglog.broker.http_api import partition_facts
from tests.broker.http_api.conftest import ApiBroker, create_topic
from tests.broker.http_api.test_security import ADMIN, _prepare, _start
from tests.broker.http_api.test_storage_routes import cluster_id, consume
from tests.broker.security.conftest import Secured
from tests.broker.security.test_sasl import confluent

StartBroker = Callable[..., ApiBroker]
BASE_MS = 1_700_000_000_000
COUNT = 40


def _page(served: ApiBroker, topic: str, **params: object) -> dict[str, Any]:
    answer = served.api.get(f"/v1/topics/{topic}/partitions/0/records", **params)
    assert answer.status == 200, answer.body
    body: dict[str, Any] = answer.body
    return body


def test_browse_inside_compressed_batches(api_broker: StartBroker, topic: str) -> None:
    served = api_broker()
    create_topic(served.bootstrap, topic)
    # Several records a batch, compressed: a page starts and stops inside batches.
    producer = Producer(
        {"bootstrap.servers": served.bootstrap, "compression.type": "zstd", "linger.ms": 100}
    )
    for i in range(COUNT):
        key = None if i % 3 == 0 else f"k{i}".encode()
        producer.produce(topic, value=f"v{i}".encode(), key=key, timestamp=BASE_MS + i * 1000)
    assert producer.flush(30) == 0
    consumed = consume(served.bootstrap, topic, 0, COUNT)
    assert len(consumed) == COUNT

    # Walked a page at a time from an offset inside a batch, every record as consumed.
    walked: list[dict[str, Any]] = []
    offset = 5
    while True:
        page = _page(served, topic, offset=offset, limit=7)
        if not page["records"]:
            assert page["next_offset"] == offset == page["high_watermark"] == COUNT
            break
        walked += page["records"]
        offset = page["next_offset"]
    assert [r["offset"] for r in walked] == list(range(5, COUNT))
    for record, message in zip(walked, consumed[5:], strict=True):
        assert record["offset"] == message.offset()
        assert record["timestamp"] == message.timestamp()[1]
        assert record["value"] == message.value().decode()
        if message.key() is None:
            assert (record["key"], record["key_encoding"]) == (None, None)
        else:
            assert (record["key"], record["key_encoding"]) == (message.key().decode(), "utf8")

    # By time: the first record at or after, also between two records' timestamps.
    page = _page(served, topic, timestamp=BASE_MS + 12_500, limit=2)
    assert [r["offset"] for r in page["records"]] == [13, 14]
    page = _page(served, topic, timestamp=BASE_MS + 12_000, limit=1)
    assert [r["offset"] for r in page["records"]] == [12]
    page = _page(served, topic, timestamp=BASE_MS + COUNT * 1000)
    assert page["records"] == []
    assert page["next_offset"] == COUNT


def test_produce_refuses_a_negative_timestamp(api_broker: StartBroker, topic: str) -> None:
    served = api_broker(**{"console.write.enable": "true"})
    create_topic(served.bootstrap, topic)
    path = f"/v3/clusters/{cluster_id(served.bootstrap)}/topics/{topic}/records"
    for stamp in (-5, "1969-12-31T23:59:59Z"):
        answer = served.api.post(path, {"partition_id": 0, "timestamp": stamp})
        assert (answer.status, answer.body["error_code"]) == (400, 42), answer.body
    answer = served.api.post(path, {"partition_id": 0, "timestamp": "1970-01-01T00:00:01Z"})
    assert answer.status == 200, answer.body
    [message] = consume(served.bootstrap, topic, 0, 1)
    assert (message.offset(), message.timestamp()[1]) == (0, 1000)


def test_a_page_of_large_records_stops_at_its_byte_bound(
    api_broker: StartBroker, topic: str
) -> None:
    served = api_broker()
    create_topic(served.bootstrap, topic)
    size, count = 900_000, 10
    producer = Producer({"bootstrap.servers": served.bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, value=bytes([65 + i]) * size)
    assert producer.flush(30) == 0

    first = _page(served, topic, offset=0, limit=count)
    # The record that reaches the bound ends the page.
    expected = -(-partition_facts.PAGE_BYTES // size)
    assert expected < count
    assert [r["offset"] for r in first["records"]] == list(range(expected))
    assert first["next_offset"] == expected
    # Paged on from next_offset, every record comes, whole.
    records = list(first["records"])
    offset = first["next_offset"]
    while offset < count:
        page = _page(served, topic, offset=offset, limit=count)
        assert page["records"]
        records += page["records"]
        offset = page["next_offset"]
    assert [r["offset"] for r in records] == list(range(count))
    assert [r["value"] for r in records] == [chr(65 + i) * size for i in range(count)]


def test_produce_to_an_internal_topic_is_a_client_error(
    api_broker: StartBroker, topic: str
) -> None:
    served = api_broker(**{"console.write.enable": "true"})
    create_topic(served.bootstrap, topic)
    # A committed offset: the offsets topic exists.
    consumer = Consumer({"bootstrap.servers": served.bootstrap, "group.id": f"g-{topic}"})
    consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    consumer.close()
    cid = cluster_id(served.bootstrap)
    path = f"/v3/clusters/{cid}/topics/__consumer_offsets/records"
    answer = served.api.post(path, {"partition_id": 0, "value": {"type": "STRING", "data": "x"}})
    # Kafka's INVALID_TOPIC_EXCEPTION: not retriable, so not a 503 to try again.
    assert (answer.status, answer.body["error_code"]) == (400, 17), answer.body


def test_configs_need_describe_configs_alone(
    secured_broker: Callable[..., Secured], topic: str
) -> None:
    """bob may DESCRIBE_CONFIGS the topic and nothing else: he sees its configs, as
    DescribeConfigs shows them to him, but not the topic itself."""
    broker, api = _start(secured_broker, "SASL_PLAINTEXT")
    _prepare(broker, topic)
    admin = AdminClient(confluent(broker.bootstrap, "PLAIN", *ADMIN))
    binding = AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        "User:bob",
        "*",
        AclOperation.DESCRIBE_CONFIGS,
        AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([binding]).values():
        future.result(30)
    cid = str(admin.describe_cluster().result(30).cluster_id)
    bob = ("bob", "bob-secret")
    configs = api.get(f"/v3/clusters/{cid}/topics/{topic}/configs", auth=bob)
    assert configs.status == 200, configs.body
    by_name = {c["name"]: c for c in configs.body["data"]}
    assert by_name["key.index.enable"]["value"] == "true"
    assert api.get(f"/v3/clusters/{cid}/topics/{topic}", auth=bob).status == 403
    # alice may READ (so DESCRIBE) but not DESCRIBE_CONFIGS.
    alice = api.get(f"/v3/clusters/{cid}/topics/{topic}/configs", auth=("alice", "alice-secret"))
    assert (alice.status, alice.body["error_code"]) == (403, 29)
    missing = api.get(f"/v3/clusters/{cid}/topics/{topic}-missing/configs", auth=ADMIN)
    assert missing.status == 404


def test_topic_list_while_topics_are_deleted_and_grown(api_broker: StartBroker, topic: str) -> None:
    """Every list answered while topics go and gain partitions is whole: a topic deleted
    after it was listed is left out, a topic growing is listed as it was or as it is."""
    served = api_broker()
    admin = AdminClient({"bootstrap.servers": served.bootstrap})
    doomed = [f"{topic}-d{i:03d}" for i in range(60)]
    growing = [f"{topic}-g{i:03d}" for i in range(20)]
    for future in admin.create_topics([NewTopic(n, 2) for n in doomed + growing]).values():
        future.result(60)
    cid = cluster_id(served.bootstrap)
    changes_done = threading.Event()
    failures: list[BaseException] = []

    def change() -> None:
        try:
            for name in doomed:
                admin.delete_topics([name])[name].result(60)
            for name in growing:
                admin.create_partitions([NewPartitions(name, 4)])[name].result(60)
        except BaseException as exc:  # reported by the test's thread
            failures.append(exc)
        finally:
            changes_done.set()

    changer = threading.Thread(target=change)
    changer.start()
    lists = 0
    while not changes_done.is_set() or lists == 0:
        answer = served.api.get(f"/v3/clusters/{cid}/topics")
        assert answer.status == 200, answer.body
        mine = {
            t["topic_name"]: t for t in answer.body["data"] if t["topic_name"].startswith(topic)
        }
        assert set(mine) <= set(doomed + growing)
        assert set(growing) <= set(mine)
        for name in growing:
            assert mine[name]["partitions_count"] in (2, 4)
        lists += 1
    changer.join()
    assert failures == []
    final = served.api.get(f"/v3/clusters/{cid}/topics").body["data"]
    mine = {t["topic_name"]: t for t in final if t["topic_name"].startswith(topic)}
    assert sorted(mine) == growing
    assert all(mine[n]["partitions_count"] == 4 for n in growing)
