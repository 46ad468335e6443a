"""The network transport against a real broker, without Spark."""

from __future__ import annotations

import pytest

from seglog.spark.network import NetworkTransport
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
