"""The log directory source over files Kafka wrote: no topic definitions, legacy messages."""

from __future__ import annotations

import re
from pathlib import Path

from seglog.coordinator.offset_store import CommittedOffset, OffsetStore, offset_key, offset_value
from seglog.mirror import LogDirSource
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage.log_dir import LogDir
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


def _txn_batch(values: list[bytes], pid: int) -> bytes:
    records = [SimpleRecord(v, None, 1_700_000_000_000) for v in values]
    return build_batch(
        records, producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True
    )


def write_transactions(root: Path) -> None:
    """``txn-0``: committed, aborted and (from offset 7) open transactional data among plain
    records; group ``g``'s offsets committed, aborted and still open in transactions."""

    def plain(value: bytes) -> bytes:
        return build_batch([SimpleRecord(value, None, 1_700_000_000_000)])

    with LogDir.open(root) as logs:
        logs.create_topic("txn", 1)
        log = logs.log("txn", 0)
        log.append(plain(b"p0"))  # 0
        log.append(_txn_batch([b"c0", b"c1"], 100), from_client=False)  # 1-2
        log.append_marker(100, 0, commit=True)  # 3
        log.append(_txn_batch([b"a0"], 101), from_client=False)  # 4
        log.append_marker(101, 0, commit=False)  # 5
        log.append(plain(b"p1"))  # 6
        log.append(_txn_batch([b"o0"], 102), from_client=False)  # 7: left open
        log.append(plain(b"p2"))  # 8
        store = OffsetStore(logs, partitions=3)

        def stored(partition: int, offset: int) -> list[tuple[bytes, bytes | None]]:
            committed = CommittedOffset(offset, "", 1_700_000_000_000)
            return [(offset_key("g", "txn", partition), offset_value(committed))]

        for pid, offset, commit in ((200, 40, True), (201, 50, False), (202, 60, None)):
            store.append_transactional("g", stored(0, offset), 0, pid, 0)
            if commit is not None:
                logs.log("__consumer_offsets", store.partition_for("g")).append_marker(
                    pid, 0, commit=commit
                )
        store.append("g", stored(1, 5), 0)


def test_a_log_directory_is_read_as_read_committed(tmp_path: Path) -> None:
    root = tmp_path / "source"
    write_transactions(root)
    source = LogDirSource(root)
    # The open transaction at offset 7 holds the end: nothing from it on is decided.
    assert source.bounds("txn", 0) == (0, 7)
    values = [r.value for r in source.records("txn", 0, 0, 9)]
    assert values == [b"p0", b"c0", b"c1", b"p1"]
    # Offsets count once their transaction committed: not the aborted one, not the open one.
    assert source.committed(re.compile("g")) == {"g": {("txn", 0): 40, ("txn", 1): 5}}

    with LogDir.open(root) as logs:
        logs.log("txn", 0).append_marker(102, 0, commit=True)  # 9
    assert source.bounds("txn", 0) == (0, 10)
    records = list(source.records("txn", 0, 0, 10))
    assert [(r.offset, r.value) for r in records] == [
        (0, b"p0"), (1, b"c0"), (2, b"c1"), (6, b"p1"), (7, b"o0"), (8, b"p2"),
    ]  # fmt: skip
