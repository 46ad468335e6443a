"""The network transport against a real broker, without Spark."""

from __future__ import annotations

import socket

import pytest

from seglog.spark.network import ClusterUnreachableError, NetworkTransport
from seglog.spark.offsets import OffsetRange, TopicPartition
from seglog.spark.options import GlobalTimestamp, SubscribePattern, parse_source_options
from seglog.spark.transport import DataLossError, resolve_offsets
from tests.broker.conftest import BrokerProcess
from tests.spark.conftest import create_topic, produce

TS = 1_700_000_000_000


def _transport(broker: BrokerProcess, **extra: str) -> NetworkTransport:
    options = parse_source_options(
        {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "x", **extra}, streaming=False
    )
    return NetworkTransport(options)


def test_offsets_times_and_reads(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, partitions=2)
    produce(
        broker.bootstrap,
        topic,
        [{"value": f"{i}".encode(), "partition": 0, "timestamp": TS + i} for i in range(20)],
    )
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with _transport(broker) as t:
        assert t.partitions(SubscribePattern(topic.replace("-", ".") + ".*")) == [tp0, tp1]
        assert t.earliest_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert t.latest_offsets([tp0, tp1]) == {tp0: 20, tp1: 0}
        assert t.offsets_for_times({tp0: TS + 5, tp1: TS}) == {tp0: 5, tp1: None}
        late = GlobalTimestamp(TS + 100)
        with pytest.raises(ValueError, match="No offset matched from request"):
            resolve_offsets(t, late, [tp0], starting=True)
        assert resolve_offsets(t, late, [tp0], starting=True, no_match_strategy="latest") == {
            tp0: 20
        }
        assert resolve_offsets(t, late, [tp0], starting=False) == {tp0: 20}
        values = [v for rb in t.read(OffsetRange(topic, 0, 3, 7), False, True) for v in rb["value"]]
        assert [v.as_py() for v in values] == [b"3", b"4", b"5", b"6"]
        with pytest.raises(DataLossError, match="failOnDataLoss"):
            list(t.read(OffsetRange(topic, 0, 15, 25), False, True))
        tolerated = [rb.num_rows for rb in t.read(OffsetRange(topic, 0, 15, 25), False, False)]
        assert sum(tolerated) == 5


def test_read_committed_stops_at_the_lso_and_skips_aborted_records(
    broker: BrokerProcess, topic: str
) -> None:
    from confluent_kafka import Producer

    create_topic(broker.bootstrap, topic, partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic})
    producer.init_transactions(10)
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, f"{outcome}-{i}".encode(), partition=0)
        producer.flush(10)
        if outcome == "commit":
            producer.commit_transaction(10)
        else:
            producer.abort_transaction(10)
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=0)
    producer.flush(10)
    tp = TopicPartition(topic, 0)
    with _transport(broker, **{"kafka.isolation.level": "read_committed"}) as t:
        lso = t.latest_offsets([tp])[tp]
        assert lso == 12  # three transactions of three records and a marker each
        values = [
            v.as_py()
            for rb in t.read(OffsetRange(topic, 0, 0, lso), False, True)
            for v in rb["value"]
        ]
        assert values == [b"commit-0", b"commit-1", b"commit-2"] * 2
    with _transport(broker) as t:
        assert t.latest_offsets([tp])[tp] == 13
    producer.abort_transaction(10)


def _closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.parametrize("setting", ["request.timeout.ms", "default.api.timeout.ms"])
def test_a_broker_that_is_down_fails_lookups_after_the_java_timeout(setting: str) -> None:
    address = f"127.0.0.1:{_closed_port()}"
    options = parse_source_options(
        {"kafka.bootstrap.servers": address, "subscribe": "x", f"kafka.{setting}": "1500"},
        streaming=False,
    )
    with NetworkTransport(options) as t:
        with pytest.raises(ClusterUnreachableError) as listing:
            t.partitions(options.strategy)
        with pytest.raises(ClusterUnreachableError) as offsets:
            t.latest_offsets([TopicPartition("x", 0)])
    for info in (listing, offsets):
        message = str(info.value)
        assert "within 1.5 s" in message, message
        assert address in message and "Connection refused" in message, message
