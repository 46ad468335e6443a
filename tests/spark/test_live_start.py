"""A streaming query's start on a topic being written to: resolved once, the same on every call
and every restart (Spark calls ``initialOffset`` again to run the first micro-batch and again
after a restart until that batch is committed)."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest

from tests.broker.conftest import BrokerProcess
from tests.spark.conftest import create_topic, produce, wait_until
from tests.spark.test_stream_reader import A0, A1, FakeTransport, _reader

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows


def test_initial_offset_does_not_move_as_the_log_grows() -> None:
    transport = FakeTransport({A0: 0, A1: 0}, {A0: 300, A1: 7})
    reader = _reader(transport)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"a": {"0": 300, "1": 7}}
    transport.latest = {A0: 307, A1: 9}
    assert reader.initialOffset() == start
    # Spark plans the first batch from initialOffset() again: it is empty, not "data loss".
    assert reader.partitions(reader.initialOffset(), end) == []


def test_restart_before_the_first_batch_commits_plans_the_same_batch() -> None:
    transport = FakeTransport({A0: 0, A1: 0}, {A0: 10, A1: 4})
    first = _reader(transport, maxOffsetsPerTrigger="5")
    end = first.latestOffset(first.initialOffset(), first.getDefaultReadLimit())
    assert end == {"a": {"0": 10, "1": 4}}
    # The query stops before batch 0 commits; new records arrive; it restarts from the
    # offsets log (end) and a new reader's initialOffset().
    transport.latest = {A0: 17, A1: 6}
    again = _reader(transport, maxOffsetsPerTrigger="5")
    assert again.partitions(again.initialOffset(), end) == []
    # Earliest keeps its meaning too: the first batch starts at the log start.
    earliest = _reader(transport, startingOffsets="earliest", maxOffsetsPerTrigger="5")
    start = earliest.initialOffset()
    assert start == {"a": {"0": -2, "1": -2}}
    end = earliest.latestOffset(start, ReadMaxRows(5))
    ranges = [p.range for p in earliest.partitions(start, end)]  # type: ignore[attr-defined]
    assert 0 < sum(r.size for r in ranges) <= 5 and all(r.from_offset == 0 for r in ranges)


class LiveProducer:
    """Writes to a topic's partitions until stopped, as a live pipeline would."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
        self.topic, self.partitions = topic, partitions
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.sent = 0

    def _run(self) -> None:
        while not self.stopping.is_set():
            self.producer.produce(
                self.topic, value=b"%d" % self.sent, partition=self.sent % self.partitions
            )
            self.sent += 1
            self.producer.poll(0)
            time.sleep(0.002)
        self.producer.flush(30)

    def __enter__(self) -> LiveProducer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join(30)


def _start(spark: SparkSession, broker: BrokerProcess, topic: str, tmp: Path) -> StreamingQuery:
    return (
        spark.readStream.format("seglog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .load()
        .selectExpr("partition", "offset")
        .writeStream.format("parquet")
        .option("path", str(tmp / "out"))
        .option("checkpointLocation", str(tmp / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def _batches_with_rows(query: StreamingQuery) -> int:
    if query.exception() is not None:
        raise AssertionError(str(query.exception()))
    return sum(1 for p in query.recentProgress if p["numInputRows"])


def _offsets(spark: SparkSession, out: Path) -> Iterator[tuple[int, list[int]]]:
    rows = spark.read.parquet(str(out)).collect()
    for partition in sorted({r["partition"] for r in rows}):
        yield partition, sorted(r["offset"] for r in rows if r["partition"] == partition)


def _assert_contiguous(spark: SparkSession, out: Path) -> None:
    """No record read twice, none skipped after the first one read."""
    for _, offsets in _offsets(spark, out):
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))


def test_default_latest_on_a_live_topic_and_restart_before_the_first_commit(
    spark: SparkSession, broker: BrokerProcess, topic: str, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, topic, partitions=2)
    produce(broker.bootstrap, topic, [{"value": b"old", "partition": p} for p in (0, 1)] * 5)
    with LiveProducer(broker.bootstrap, topic, 2):
        query = _start(spark, broker, topic, tmp_path)
        try:
            wait_until(lambda: _batches_with_rows(query) >= 2, timeout=90)
        finally:
            query.stop()
        assert query.exception() is None
        _assert_contiguous(spark, tmp_path / "out")
        assert all(offsets[0] >= 5 for _, offsets in _offsets(spark, tmp_path / "out"))

        # A query stopped before its first batch committed: only batch 0 in the offsets log.
        checkpoint = tmp_path / "checkpoint"
        shutil.rmtree(tmp_path / "out")
        for entry in (checkpoint / "offsets").iterdir():
            if entry.name not in ("0", ".0.crc"):
                entry.unlink()
        shutil.rmtree(checkpoint / "commits")
        shutil.rmtree(checkpoint / "sources", ignore_errors=True)
        time.sleep(0.5)  # new records arrive before the restart
        query = _start(spark, broker, topic, tmp_path)
        try:
            wait_until(lambda: _batches_with_rows(query) >= 1, timeout=90)
        finally:
            query.stop()
        assert query.exception() is None
        _assert_contiguous(spark, tmp_path / "out")
