"""The log directory source over files Kafka wrote: no topic definitions, legacy messages."""

from __future__ import annotations

import re
from pathlib import Path

from seglog.mirror import LogDirSource
from tests.cli.conftest import BASE, kafka_partition, legacy_segment

__all__ = ["kafka_partition", "legacy_segment"]


def test_a_kafka_log_directory_without_topic_definitions(kafka_partition: Path) -> None:
    source = LogDirSource(kafka_partition.parent)
    topics = source.topics()
    assert list(topics) == ["orders"]
    assert topics["orders"].partitions == 1 and topics["orders"].configs == {}
    start, end = source.bounds("orders", 0)
    assert (start, end) == (BASE, BASE + 60)
    records = list(source.records("orders", 0, BASE + 31, end))
    assert [r.offset for r in records] == list(range(BASE + 31, BASE + 60))
    assert records[0].key == b"key%d" % (BASE + 31)
    assert records[0].headers[0].key == "h"
    assert source.committed(re.compile(".*")) == {}


def test_legacy_messages_are_records_too(legacy_segment: Path) -> None:
    source = LogDirSource(legacy_segment.parent.parent)
    records = list(source.records("old", 0, 0, 5))
    assert [(r.key, r.value) for r in records] == [(b"k%d" % i, b"legacy-%d" % i) for i in range(5)]
