"""The files topic source over log directories written by seglog's storage, and by hand in
Kafka's layouts, in temporary directories."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from seglog.records.builder import SimpleRecord, build_batch
from seglog.records.record import Header
from seglog.storage import filenames
from seglog.storage.log_dir import LogDir
from seglog.topic_source import Rows, StoredBatch, TopicPartition, UnknownPartitionError
from seglog.topic_source.files import FilesTopicSource, NotALogDirectoryError
from tests.cli.conftest import legacy_segment
from tests.mirror.test_source import write_transactions

__all__ = ["legacy_segment"]

TS = 1_700_000_000_000


def _write(root: Path, batches: int = 30) -> None:
    """``events``: two partitions, the first of many small segments of 4-record batches."""
    with LogDir.open(root) as logs:
        logs.create_topic(
            "events",
            partitions=2,
            configs={"internal.segment.bytes": "600", "index.interval.bytes": "100"},
        )
        for b in range(batches):
            records = [
                SimpleRecord(
                    b"v%d" % (4 * b + i),
                    None if i == 2 else b"k%d" % (4 * b + i),
                    TS + (4 * b + i) * 10,
                    [("h", b"%d" % i)] if i == 1 else (),
                )
                for i in range(4)
            ]
            logs.append("events", 0, build_batch(records))
        logs.append("events", 1, build_batch([SimpleRecord(b"only", None, TS)]))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    _write(path)
    return path


def test_layout_and_offsets(root: Path) -> None:
    source = FilesTopicSource(root)
    e0, e1 = TopicPartition("events", 0), TopicPartition("events", 1)
    assert source.description == str(root)
    assert source.partitions() == [e0, e1]
    topics = source.topics()
    assert list(topics) == ["events"] and topics["events"].partitions == 2
    assert topics["events"].configs["internal.segment.bytes"] == "600"
    assert source.bounds("events", 0) == (0, 120)
    assert source.earliest_offsets([e0, e1]) == {e0: 0, e1: 0}
    assert source.latest_offsets([e0, e1]) == {e0: 120, e1: 1}
    assert source.offsets_for_times({e0: TS + 555, e1: TS + 1}) == {e0: 56, e1: None}
    sizes = source.segment_sizes("events", 0, 0, 120)
    assert len(sizes) > 3 and sizes[0][0] == 0 and all(size > 0 for _, size in sizes)
    assert [b for b, _ in sizes] == sorted(b for b, _ in sizes)


def test_the_log_start_checkpoint_raises_the_earliest_offset(root: Path) -> None:
    with LogDir.open(root) as logs:
        log = logs.log("events", 0)
        log.increment_log_start_offset(50)
    source = FilesTopicSource(root)
    assert source.bounds("events", 0)[0] == 50
    # Nothing below the log start is read, even if its segment is still there.
    assert next(source.records("events", 0, 0, 120)).offset == 50
    told: list[str] = []
    first = next(iter(source.read("events", 0, 10, 60, lost=told.append)))
    assert told == ["Cannot fetch offset 10 of events-0: the earliest available offset is 50"]
    assert isinstance(first, StoredBatch) and first.header.base_offset <= 50


def test_reads_give_stored_batches_cut_to_the_range(root: Path) -> None:
    source = FilesTopicSource(root)
    chunks = list(source.read("events", 0, 5, 11))
    assert all(isinstance(c, StoredBatch) for c in chunks)
    # Whole batches: the first begins before the range, the last ends after it.
    assert [c.header.base_offset for c in chunks if isinstance(c, StoredBatch)] == [4, 8]
    records = list(source.records("events", 0, 5, 11))
    assert [r.offset for r in records] == list(range(5, 11))
    assert records[0].headers == (Header("h", b"1"),)
    assert records[1].key is None and records[1].value == b"v6"
    assert records[0].timestamp == TS + 50


def test_a_range_past_the_end_is_cut_and_reported(root: Path) -> None:
    source = FilesTopicSource(root)
    told: list[str] = []
    records = [r for c in source.read("events", 1, 0, 5, lost=told.append) for r in c.records()]
    assert [r.value for r in records] == [b"only"]
    assert told == ["Cannot fetch offsets up to 5 of events-1: the latest available offset is 1"]
    assert list(source.read("events", 1, 3, 5)) == []  # nothing said without a callback


def test_a_segment_deleted_while_it_is_read_is_reported(root: Path) -> None:
    source = FilesTopicSource(root)
    told: list[str] = []
    reading = source.read("events", 0, 0, 120, lost=told.append)
    first = next(reading)
    assert isinstance(first, StoredBatch) and first.header.base_offset == 0
    bases = sorted(
        base
        for p in (root / "events-0").glob("*.log")
        if (base := filenames.parse_base_offset(p.name)) is not None
    )
    gone = bases[2]
    (root / "events-0" / f"{gone:020d}.log").unlink()
    rest = [c.header.base_offset for c in reading if isinstance(c, StoredBatch)]
    assert told == [f"Segment {gone} of events-0 was deleted while it was read"]
    assert gone not in rest and rest[-1] == 116


def test_unknown_partitions_and_paths(root: Path, tmp_path: Path) -> None:
    source = FilesTopicSource(root)
    with pytest.raises(UnknownPartitionError, match="other-0 is not a partition of") as info:
        source.bounds("other", 0)
    assert isinstance(info.value, ValueError)
    # A partition the topic defines but that has no directory (yet) is empty.
    shutil.rmtree(root / "events-1")
    assert source.bounds("events", 1) == (0, 0)
    assert list(source.read("events", 1, 0, 0)) == []
    assert source.topics()["events"].partitions == 2
    with pytest.raises(NotALogDirectoryError, match="is not a log directory") as missing:
        FilesTopicSource(tmp_path / "nowhere")
    assert isinstance(missing.value, FileNotFoundError)


def test_legacy_entries_are_rows(legacy_segment: Path) -> None:
    source = FilesTopicSource(legacy_segment.parent.parent)
    chunks = list(source.read("old", 0, 1, 4))
    assert chunks and all(isinstance(c, Rows) for c in chunks)
    rows = [r for c in chunks for r in c.records()]
    assert [(r.offset, r.key, r.value) for r in rows] == [
        (i, b"k%d" % i, b"legacy-%d" % i) for i in range(1, 4)
    ]


def test_isolation_levels(tmp_path: Path) -> None:
    root = tmp_path / "txn"
    write_transactions(root)
    committed = FilesTopicSource(root, read_committed=True)
    everything = FilesTopicSource(root)
    # The open transaction at offset 7 holds a read_committed end.
    assert committed.bounds("txn", 0) == (0, 7)
    assert everything.bounds("txn", 0) == (0, 9)
    assert [r.value for r in committed.records("txn", 0, 0, 9)] == [b"p0", b"c0", b"c1", b"p1"]
    # Markers are never records; aborted data is, at read_uncommitted.
    assert [(r.offset, r.value) for r in everything.records("txn", 0, 0, 9)] == [
        (0, b"p0"), (1, b"c0"), (2, b"c1"), (4, b"a0"), (6, b"p1"), (7, b"o0"), (8, b"p2"),
    ]  # fmt: skip
    # Group commits replayed from __consumer_offsets: the committed transaction's only.
    assert committed.committed(re.compile("g")) == {"g": {("txn", 0): 40, ("txn", 1): 5}}
    assert committed.committed(re.compile("other")) == {}
    assert "__consumer_offsets" not in committed.topics()
    assert TopicPartition("__consumer_offsets", 0) in committed.partitions()
