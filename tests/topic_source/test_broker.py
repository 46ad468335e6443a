"""The broker topic source against a real broker on a free port, through confluent-kafka."""

from __future__ import annotations

import re
import socket
from typing import Any

import confluent_kafka as ck
import pytest

from seglog.records.record import Header
from seglog.topic_source import Rows, TopicPartition
from seglog.topic_source.broker import (
    BrokerTopicSource,
    ClusterUnreachableError,
    Timeout,
)
from tests.broker.conftest import BrokerProcess
from tests.topic_source.conftest import create_topic

TS = 1_700_000_000_000


def open_source(bootstrap: str, **consumer: Any) -> BrokerTopicSource:
    """A source as a reader that keeps its own positions opens one."""
    config = {"bootstrap.servers": bootstrap}
    return BrokerTopicSource(
        config,
        {**config, "group.id": "topic-source-tests", "enable.auto.commit": False, **consumer},
        lookup_timeout=Timeout(20, "lookup.setting"),
        read_timeout=Timeout(20, "read.setting"),
    )


def _produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(
            topic,
            b"v%d" % i,
            None if i % 3 else b"k%d" % i,
            partition=partition,
            timestamp=TS + i,
            headers=[("h", b"%d" % i)] if i == 1 else None,
        )
    assert producer.flush(30) == 0


def test_layout_offsets_and_reads(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, partitions=2, **{"retention.ms": "86400000"})
    _produce(broker.bootstrap, topic, 20)
    t0, t1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with open_source(broker.bootstrap) as source:
        assert source.description == broker.bootstrap
        assert {t0, t1} <= set(source.partitions())
        described = source.topics()[topic]
        assert described.partitions == 2 and described.configs == {"retention.ms": "86400000"}
        assert source.bounds(topic, 0) == (0, 20)
        assert source.latest_offsets([t0, t1]) == {t0: 20, t1: 0}
        assert source.earliest_offsets([t0, t1]) == {t0: 0, t1: 0}
        assert source.offsets_for_times({t0: TS + 5, t1: TS}) == {t0: 5, t1: None}
        chunks = list(source.read(topic, 0, 3, 7))
        assert chunks and all(isinstance(c, Rows) for c in chunks)
        records = list(source.records(topic, 0, 0, 20))
        assert [r.offset for r in records] == list(range(20))
        assert records[1].headers == (Header("h", b"1"),) and records[1].key is None
        assert records[3].key == b"k3" and records[3].timestamp == TS + 3
        no_headers = list(source.read(topic, 0, 0, 3, headers=False))
        assert no_headers and all(isinstance(c, Rows) and c.headers == [] for c in no_headers)
        told: list[str] = []
        tail = source.read(topic, 0, 15, 25, lost=told.append)
        assert [r.offset for c in tail for r in c.records()] == list(range(15, 20))
        assert told == [
            f"Cannot fetch offsets up to 25 of {topic}-0: the latest available offset is 20"
        ]


def test_committed_offsets_of_groups(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic)
    _produce(broker.bootstrap, topic, 5)
    group = f"{topic}-group"
    committer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        committer.commit(offsets=[ck.TopicPartition(topic, 0, 4)], asynchronous=False)
    finally:
        committer.close()
    with open_source(broker.bootstrap) as source:
        found = source.committed(re.compile(re.escape(group)))
        assert found == {group: {(topic, 0): 4}}
        assert source.committed(re.compile("no-such-group")) == {}


def test_read_committed_and_read_uncommitted(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic)
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic})
    producer.init_transactions(30)
    for outcome in ("commit", "abort"):
        producer.begin_transaction()
        producer.produce(topic, outcome.encode(), partition=0)
        producer.flush(30)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=0)
    producer.flush(30)
    try:
        with open_source(broker.bootstrap, **{"isolation.level": "read_committed"}) as committed:
            assert committed.bounds(topic, 0) == (0, 4)
            assert [r.value for r in committed.records(topic, 0, 0, 4)] == [b"commit"]
        with open_source(broker.bootstrap, **{"isolation.level": "read_uncommitted"}) as dirty:
            assert dirty.bounds(topic, 0) == (0, 5)
            assert [r.value for r in dirty.records(topic, 0, 0, 5)] == [
                b"commit",
                b"abort",
                b"open",
            ]
    finally:
        producer.abort_transaction(30)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_an_unreachable_cluster_is_named_with_its_cause() -> None:
    address = f"127.0.0.1:{_closed_port()}"
    config = {"bootstrap.servers": address}
    source = BrokerTopicSource(
        config,
        {**config, "group.id": "unreachable"},
        lookup_timeout=Timeout(1.5, "the.lookup.setting"),
        read_timeout=Timeout(1.5, "the.read.setting"),
    )
    with source:
        with pytest.raises(ClusterUnreachableError) as listing:
            source.partitions()
        with pytest.raises(ClusterUnreachableError) as bounds:
            source.bounds("x", 0)
    for info in (listing, bounds):
        message = str(info.value)
        assert "within 1.5 s (the.lookup.setting)" in message, message
        assert address in message and "Connection refused" in message, message
