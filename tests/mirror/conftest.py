"""Mirror fixtures: a source log directory written by seglog's storage, a target broker.

The target is a second seglog broker (``tests/broker``'s :class:`BrokerProcess`),
standing in for a Kafka cluster: it speaks the same protocol.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from seglog.coordinator.offset_store import CommittedOffset, OffsetStore, offset_key, offset_value
from seglog.records.builder import SimpleRecord, build_batch
from seglog.records.compression import Codec
from seglog.records.record import Header, Record
from seglog.storage.cleaner import LogCleaner
from seglog.storage.log_dir import LogDir, LogDirSettings
from seglog.storage.reader import PartitionReader
from tests.broker.conftest import BrokerProcess

TS = 1_700_000_000_000
CODECS = [Codec.GZIP, Codec.ZSTD, Codec.NONE]


def write_events(logs: LogDir, topic: str, partitions: int, batches: int, per_batch: int) -> None:
    """Batches of keyed records with headers, tombstones among them, each partition its codec."""
    for p in range(partitions):
        for b in range(batches):
            records = [
                SimpleRecord(
                    None if i % 7 == 3 else b"value-%d-%d-%d" % (p, b, i),
                    b"key-%d" % i,
                    TS + b * per_batch + i,
                    [("trace", b"t%d" % i), ("empty", None)],
                )
                for i in range(per_batch)
            ]
            logs.append(topic, p, build_batch(records, codec=CODECS[p % len(CODECS)]))


def commit(logs: LogDir, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit ``offsets`` for ``group`` the way the coordinator stores them."""
    store = OffsetStore(logs, partitions=3)
    store.append(
        group,
        [
            (offset_key(group, t, p), offset_value(CommittedOffset(o, "", TS)))
            for (t, p), o in offsets.items()
        ],
        TS,
    )


@pytest.fixture
def source_dir(tmp_path: Path) -> Path:
    """``events`` (3 partitions: gzip, zstd, none; headers, tombstones), ``table`` (compacted,
    with gaps), and the groups ``g-events`` and ``g-table``."""
    root = tmp_path / "source"
    with LogDir.open(root, settings=LogDirSettings(log_cleaner_enable=False)) as logs:
        logs.create_topic("events", 3, {"retention.ms": "86400000", "max.message.bytes": "500000"})
        write_events(logs, "events", 3, 4, 25)
        logs.create_topic(
            "table",
            1,
            {
                "cleanup.policy": "compact",
                "internal.segment.bytes": "700",
                "min.cleanable.dirty.ratio": "0.01",
            },
        )
        for i in range(40):
            value = None if i == 37 else b"v%d" % i
            logs.append("table", 0, build_batch([SimpleRecord(value, b"k%d" % (i % 4), TS + i)]))
        assert LogCleaner(logs).clean_once() is not None
        commit(logs, "g-events", {("events", 0): 30, ("events", 1): 100, ("events", 2): 0})
    return root


def source_records(root: Path, topic: str, partition: int) -> list[Record]:
    """Every record of a partition of a log directory."""
    from seglog.mirror import LogDirSource

    source = LogDirSource(root)
    start, end = source.bounds(topic, partition)
    return list(source.records(topic, partition, start, end))


def gaps(root: Path, topic: str, partition: int) -> list[int]:
    """The offsets below the log end that hold no record (compacted away)."""
    held = {r.offset for r in source_records(root, topic, partition)}
    end = PartitionReader(root / f"{topic}-{partition}").next_offset()
    return [o for o in range(end) if o not in held]


def target_records(bootstrap: str, topic: str, partition: int) -> list[Record]:
    """Every record the target holds in a partition."""
    from seglog.mirror import BrokerSource

    source = BrokerSource({"bootstrap.servers": bootstrap}, timeout=10)
    try:
        start, end = source.bounds(topic, partition)
        return list(source.records(topic, partition, start, end))
    finally:
        source.close()


def same_content(rec: Record) -> tuple[object, ...]:
    """A record without its offset."""
    return (rec.key, rec.value, rec.headers, rec.timestamp)


def first_for_group(bootstrap: str, group: str, topic: str, partition: int) -> Record | None:
    """The first record a consumer of ``group`` gets from a partition on ``bootstrap``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, partition)])  # resumes at the committed offset
        msg = consumer.poll(10)
        if msg is None or msg.error():
            return None
        headers = tuple(Header(k, v) for k, v in (msg.headers() or []))
        return Record(msg.offset(), msg.timestamp()[1], msg.key(), msg.value(), headers)
    finally:
        consumer.close()


@pytest.fixture
def target(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A second broker standing in for the target cluster."""
    process = BrokerProcess(tmp_path / "target")
    process.start()
    yield process
    if process.alive():
        process.kill()
