"""Files mode without Spark: the transport over log directories written by seglog and by hand
in Kafka's older formats, checked against seglog's own storage library."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from seglog import LogDir, SimpleRecord, build_batch
from seglog.records.compression import Codec
from seglog.spark.batch_reader import plan_batch
from seglog.spark.files import FilesTransport
from seglog.spark.offsets import OffsetRange, TopicPartition
from seglog.spark.options import Subscribe, SubscribePattern, parse_source_options
from seglog.spark.transport import DataLossError
from seglog.storage.reader import SegmentReader
from tests.records.legacy_encoder import message

TS = 1_700_000_000_000
TP = TopicPartition("events", 0)


def _write(path: Path, batches: int = 60) -> dict[int, SimpleRecord]:
    """A topic of many small segments: codecs, headers, nulls, a LogAppendTime batch."""
    written: dict[int, SimpleRecord] = {}
    codecs = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]
    with LogDir.open(path) as logs:
        logs.create_topic(
            "events",
            partitions=2,
            configs={"internal.segment.bytes": 2048, "index.interval.bytes": 256},
        )
        offset = 0
        for b in range(batches):
            records = [
                SimpleRecord(
                    key=None if i == 2 else f"k{offset + i}".encode(),
                    value=None if (offset + i) % 13 == 0 else b"v" * (offset + i),
                    timestamp=TS + (offset + i) * 100,
                    headers=[("h", str(offset + i).encode()), ("empty", None)] if i == 1 else (),
                )
                for i in range(4)
            ]
            for i, rec in enumerate(records):
                written[offset + i] = rec
            logs.append("events", 0, build_batch(records, codec=codecs[b % len(codecs)]))
            offset += 4
        logs.append("events", 1, build_batch([SimpleRecord(value=b"only", timestamp=TS)]))
    return written


def _rows(batches: Iterator[pa.RecordBatch]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for rb in batches:
        out.extend(rb.to_pylist())
    return out


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, SimpleRecord]]:
    path = tmp_path_factory.mktemp("files") / "data"
    return path, _write(path)


def test_offsets_match_the_storage_library(log_dir: tuple[Path, dict[int, SimpleRecord]]) -> None:
    path, written = log_dir
    t = FilesTransport(path)
    tps = t.partitions(None)
    assert tps == [TP, TopicPartition("events", 1)]
    assert t.partitions(Subscribe(("other",))) == []
    assert t.earliest_offsets(tps) == {TP: 0, TopicPartition("events", 1): 0}
    assert t.latest_offsets(tps) == {TP: len(written), TopicPartition("events", 1): 1}
    assert len(list((path / "events-0").glob("*.log"))) > 5
    with LogDir.open(path) as logs:
        for target in [TS - 5, TS, TS + 1, TS + 555, TS + 100 * 150 + 50, TS + 10**9]:
            found = logs.offset_for_time("events", 0, target)
            expected = None if found is None else found.offset
            assert t.offsets_for_times({TP: target}) == {TP: expected}


def test_every_range_reads_exactly_its_records(
    log_dir: tuple[Path, dict[int, SimpleRecord]],
) -> None:
    path, written = log_dir
    t = FilesTransport(path)
    n = len(written)
    for start, until in [(0, n), (0, 1), (5, 6), (37, 190), (n - 1, n), (100, 100)]:
        rows = _rows(t.read(OffsetRange("events", 0, start, until), True, True))
        assert [r["offset"] for r in rows] == list(range(start, until))
        for row in rows:
            rec = written[row["offset"]]
            assert (row["key"], row["value"]) == (rec.key, rec.value)
            assert row["timestamp"].timestamp() * 1000 == rec.timestamp
            assert row["timestampType"] == 0
            assert (row["topic"], row["partition"]) == ("events", 0)
            expected = [{"key": h[0], "value": h[1]} for h in rec.headers] or None
            assert row["headers"] == expected


def test_untouched_segments_are_never_opened(
    log_dir: tuple[Path, dict[int, SimpleRecord]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, written = log_dir
    opened: list[int] = []
    original = SegmentReader.__init__

    def spy(self: SegmentReader, log_path: Path, base: int) -> None:
        opened.append(base)
        original(self, log_path, base)

    monkeypatch.setattr(SegmentReader, "__init__", spy)
    t = FilesTransport(path)
    n = len(written)
    rows = _rows(t.read(OffsetRange("events", 0, n - 3, n), False, True))
    assert [r["offset"] for r in rows] == [n - 3, n - 2, n - 1]
    # The read opened only the last segment (plus it again for the log end offset).
    assert len(set(opened)) == 1


def test_data_loss_after_retention(tmp_path: Path) -> None:
    path = tmp_path / "data"
    written = _write(path, batches=30)
    with LogDir.open(path) as logs:
        log = logs.log("events", 0)
        assert log.delete_segments_prefix(2, "test") == 2
        start = log.log_start_offset
        logs.run_pending_deletions(now_ms=2**62)
        logs.checkpoint()
    t = FilesTransport(path)
    assert t.earliest_offsets([TP]) == {TP: start}
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        list(t.read(OffsetRange("events", 0, 0, len(written)), False, True))
    rows = _rows(t.read(OffsetRange("events", 0, 0, len(written)), False, False))
    assert [r["offset"] for r in rows] == list(range(start, len(written)))


def test_legacy_messages_as_kafka_wrote_them(tmp_path: Path) -> None:
    """A partition directory as an old Kafka left it: v0 and v1 messages, then v2 batches, with
    empty index files."""
    part = tmp_path / "old-0"
    part.mkdir()
    log = (
        message(0, b"a", b"v0", magic=0)
        + message(1, b"b", b"v1", magic=1, timestamp=TS)
        + message(2, None, b"v1-lat", magic=1, timestamp=TS + 5, attributes=0x08)
    )
    log += bytearray(build_batch([SimpleRecord(b"v2", b"c", TS + 10)], base_offset=3))
    (part / "00000000000000000000.log").write_bytes(log)
    (part / "00000000000000000000.index").write_bytes(b"")
    (part / "00000000000000000000.timeindex").write_bytes(b"")
    t = FilesTransport(tmp_path)
    tp = TopicPartition("old", 0)
    assert t.latest_offsets([tp]) == {tp: 4}
    rows = _rows(t.read(OffsetRange("old", 0, 0, 4), False, True))
    assert [(r["offset"], r["key"], r["value"], r["timestampType"]) for r in rows] == [
        (0, b"a", b"v0", -1),
        (1, b"b", b"v1", 0),
        (2, None, b"v1-lat", 1),
        (3, b"c", b"v2", 0),
    ]
    assert t.offsets_for_times({tp: TS + 3}) == {tp: 2}


def test_latest_offset_of_a_segment_cut_inside_its_last_indexed_batch(tmp_path: Path) -> None:
    """A crash can leave the offset index naming a batch the .log no longer holds whole: the
    log ends at the last whole batch, not after the indexed one."""
    path = tmp_path / "data"
    with LogDir.open(path) as logs:
        logs.create_topic("cut", partitions=1, configs={"index.interval.bytes": 100})
        for i in range(10):
            logs.append("cut", 0, build_batch([SimpleRecord(value=b"v" * 150, timestamp=TS + i)]))
    part = path / "cut-0"
    index = (part / "00000000000000000000.index").read_bytes()
    last_position = int.from_bytes(index[-4:], "big")
    last_offset = int.from_bytes(index[-8:-4], "big")
    log = part / "00000000000000000000.log"
    log.write_bytes(log.read_bytes()[: last_position + 30])
    t = FilesTransport(path)
    tp = TopicPartition("cut", 0)
    assert t.latest_offsets([tp]) == {tp: last_offset}
    rows = _rows(t.read(OffsetRange("cut", 0, 0, last_offset), False, True))
    assert [r["offset"] for r in rows] == list(range(last_offset))


def _txn_batch(values: list[bytes], pid: int, seq: int) -> bytes:
    return build_batch(
        [SimpleRecord(value=v, timestamp=TS) for v in values],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        is_transactional=True,
    )


@pytest.mark.parametrize("clean_shutdown", [True, False])
def test_read_committed_skips_aborted_data_and_stops_at_the_lso(
    tmp_path: Path, clean_shutdown: bool
) -> None:
    logs = LogDir.open(tmp_path)
    logs.create_topic("events", 1, {"internal.segment.bytes": 300})
    log = logs.log("events", 0)
    log.append(_txn_batch([b"c0", b"c1"], 1, 0))  # 0-1
    log.append(_txn_batch([b"a0", b"a1"], 2, 0))  # 2-3
    log.append_marker(1, 0, commit=True)  # 4
    log.append_marker(2, 0, commit=False)  # 5
    log.append(build_batch([SimpleRecord(value=b"plain", timestamp=TS)]))  # 6
    log.append(_txn_batch([b"open"], 3, 0))  # 7: never ended
    log.append(build_batch([SimpleRecord(value=b"after", timestamp=TS)]))  # 8
    log.append(_txn_batch([b"late"], 2, 2))  # 9-: aborted below
    log.append_marker(2, 0, commit=False)
    lso = log.last_stable_offset
    assert lso == 7
    end = log.log_end_offset
    if clean_shutdown:
        logs.close()
    committed = FilesTransport(tmp_path, read_committed=True)
    assert committed.latest_offsets([TP]) == {TP: lso}
    rows = _rows(committed.read(OffsetRange("events", 0, 0, end), False, True))
    assert [r["value"] for r in rows] == [b"c0", b"c1", b"plain"]
    everything = FilesTransport(tmp_path)
    assert everything.latest_offsets([TP]) == {TP: end}
    rows = _rows(everything.read(OffsetRange("events", 0, 0, end), False, True))
    assert [r["value"] for r in rows] == [
        b"c0",
        b"c1",
        b"a0",
        b"a1",
        b"plain",
        b"open",
        b"after",
        b"late",
    ]
    if not clean_shutdown:
        logs.close()


def test_without_a_subscription_internal_topics_are_left_out(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as logs:
        for name in ("orders", "__consumer_offsets", "__transaction_state"):
            logs.create_topic(name, partitions=1)
            logs.append(name, 0, build_batch([SimpleRecord(value=b"x", timestamp=TS)]))
    with FilesTransport(tmp_path) as t:
        orders = [TopicPartition("orders", 0)]
        assert t.partitions(None) == orders
        assert t.partitions(SubscribePattern(".*")) == orders
        # Named, an internal topic is read, as Spark's subscribe and assign read it.
        named = Subscribe(("__consumer_offsets",))
        assert t.partitions(named) == [TopicPartition("__consumer_offsets", 0)]


def test_a_start_past_the_end_is_refused_with_sparks_message(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("orders", partitions=1)
        logs.append("orders", 0, build_batch([SimpleRecord(value=b"x", timestamp=TS)] * 3))
    options = parse_source_options(
        {"path": str(tmp_path), "subscribe": "orders", "startingOffsets": '{"orders":{"0":10}}'},
        streaming=False,
    )
    with pytest.raises(ValueError) as info:
        plan_batch(options)
    assert str(info.value) == (
        "Beginning offset 10 is after the ending offset 3 for topic orders partition 0. You "
        "either provided an invalid fromOffset, or the Kafka topic has been damaged"
    )
    at_the_end = parse_source_options(
        {"path": str(tmp_path), "subscribe": "orders", "startingOffsets": '{"orders":{"0":3}}'},
        streaming=False,
    )
    assert plan_batch(at_the_end) == []  # nothing to read, and nothing wrong
