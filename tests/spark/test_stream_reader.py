"""Streaming reads: admission control without Spark, then AvailableNow queries across restarts."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest

from tests.broker.conftest import BrokerProcess
from tests.spark.conftest import create_topic, produce

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    ReadMinRows,
)

from seglog.spark.offsets import OffsetRange, PartitionOffsets, TopicPartition
from seglog.spark.options import SourceOptions, Strategy, parse_source_options
from seglog.spark.stream_reader import StreamReader, admit
from seglog.spark.transport import DataLossError, Transport

A0, A1, A2 = (TopicPartition("a", p) for p in range(3))


def _options(**extra: str) -> SourceOptions:
    return parse_source_options(
        {"kafka.bootstrap.servers": "x:1", "subscribe": "a", **extra}, streaming=True
    )


def test_admission_control() -> None:
    opts = _options(minOffsetsPerTrigger="50")
    start = {A0: 10, A1: 0}
    latest = {A0: 40, A1: 10, A2: 5}
    new = {A2: 0}
    assert admit(ReadAllAvailable(), opts, start, latest, new, min_rows_due=False) == latest
    # 45 offsets waiting, fewer than 50: no batch until maxTriggerDelay has passed.
    assert admit(ReadMinRows(50), opts, start, latest, new, min_rows_due=False) == start
    assert admit(ReadMinRows(50), opts, start, latest, new, min_rows_due=True) == latest
    # ReadMaxRows shares the limit; the option's minimum still applies (Spark's composite).
    assert admit(ReadMaxRows(9), opts, start, latest, new, min_rows_due=False) == start
    assert admit(ReadMaxRows(9), _options(), start, latest, new, min_rows_due=False) == {
        A0: 16,
        A1: 2,
        A2: 1,
    }


def test_default_read_limit_and_pickling() -> None:
    import pickle

    assert StreamReader(_options()).getDefaultReadLimit() == ReadAllAvailable()
    assert StreamReader(_options(maxOffsetsPerTrigger="7")).getDefaultReadLimit() == ReadMaxRows(7)
    assert StreamReader(_options(minOffsetsPerTrigger="3")).getDefaultReadLimit() == ReadMinRows(3)
    reader = StreamReader(_options())
    copy = pickle.loads(pickle.dumps(reader))
    assert copy.options == reader.options


class FakeTransport(Transport):
    """Offsets from dicts, for planning tests."""

    def __init__(self, earliest: PartitionOffsets, latest: PartitionOffsets) -> None:
        self.earliest, self.latest = earliest, latest

    def partitions(self, strategy: Strategy) -> list[TopicPartition]:
        return sorted(self.latest)

    def earliest_offsets(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        return {tp: self.earliest[tp] for tp in tps}

    def latest_offsets(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        return {tp: self.latest[tp] for tp in tps}

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        raise NotImplementedError

    def read(self, rng: OffsetRange, include_headers: bool, fail: bool) -> Iterator[Any]:
        raise NotImplementedError


def _reader(transport: FakeTransport, **extra: str) -> StreamReader:
    reader = StreamReader(_options(**extra))
    reader._transport = transport
    return reader


def test_new_partitions_and_data_loss_in_planning() -> None:
    transport = FakeTransport({A0: 0, A1: 0, A2: 3}, {A0: 10, A1: 5, A2: 8})
    reader = _reader(transport, failOnDataLoss="false")
    start = {A0: 4, A1: 7}
    # A1 went backwards (truncated): skipped; A2 is new: read from its earliest offset.
    assert reader.plan(start, {A0: 10, A1: 5, A2: 8}) == [
        OffsetRange("a", 0, 4, 10),
        OffsetRange("a", 2, 3, 8),
    ]
    strict = _reader(transport)
    with pytest.raises(DataLossError, match="Added partition a-2 starts from 3 instead of 0"):
        strict.plan(start, {A0: 10, A1: 7, A2: 8})
    with pytest.raises(DataLossError, match="a-1 is gone"):
        strict.plan(start, {A0: 10})
    with pytest.raises(DataLossError, match="offset was changed from 7 to 5"):
        strict.plan(start, {A0: 10, A1: 5})


def test_latest_offset_picks_up_partitions_and_stops_at_available_now_target() -> None:
    transport = FakeTransport({A0: 0, A1: 0}, {A0: 10})
    reader = _reader(transport, maxOffsetsPerTrigger="6")
    assert reader.initialOffset() == {"a": {"0": -1}}  # latest: resolved by latestOffset
    transport.latest = {A0: 12, A1: 4}
    limit = reader.getDefaultReadLimit()
    end = reader.latestOffset({"a": {"0": 10}}, limit)
    assert end == {"a": {"0": 12, "1": 4}}  # 6 offsets shared: 2 + 4
    assert reader.reportLatestOffset() == {"a": {"0": 12, "1": 4}}
    reader.prepareForTriggerAvailableNow()
    transport.latest = {A0: 100, A1: 100}
    assert reader.latestOffset(end, limit) == end  # nothing after the target
    assert reader.latestOffset(end, ReadAllAvailable()) == end


def _run_available_now(
    spark: SparkSession,
    broker: BrokerProcess,
    topic: str,
    checkpoint: Path,
    out: Path,
    **extra: str,
) -> list[int]:
    """One AvailableNow run into a parquet table; returns the rows of each micro-batch."""
    stream = (
        spark.readStream.format("seglog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "40")
        .options(**extra)
        .load()
    )
    query = (
        stream.selectExpr("partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def test_available_now_reads_every_record_once_across_restarts(
    spark: SparkSession, broker: BrokerProcess, topic: str, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, topic, partitions=2)
    first = produce(
        broker.bootstrap,
        topic,
        [{"value": f"a{i}".encode(), "partition": i % 2} for i in range(100)],
    )
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    group = f"{topic}-pipeline"
    batches = _run_available_now(spark, broker, topic, checkpoint, out, commitOffsetsToGroup=group)
    assert sum(batches) == 100
    assert max(batches) <= 40 and len(batches) >= 3

    # Nothing new: a restart reads nothing.
    assert _run_available_now(spark, broker, topic, checkpoint, out) == []

    second = produce(
        broker.bootstrap,
        topic,
        [{"value": f"b{i}".encode(), "partition": i % 2} for i in range(30)],
    )
    batches = _run_available_now(spark, broker, topic, checkpoint, out)
    assert sum(batches) == 30

    # The group trails by at most one micro-batch (Spark commits when it plans the next).
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    committed = consumer.committed(
        [ck.TopicPartition(topic, 0), ck.TopicPartition(topic, 1)], timeout=10
    )
    consumer.close()
    assert 100 - 40 <= sum(max(tp.offset, 0) for tp in committed) <= 100

    rows = spark.read.parquet(str(out)).collect()
    got = sorted((r["partition"], r["offset"], r["value"]) for r in rows)
    assert got == sorted((p.partition, p.offset, p.value) for p in first + second)


def test_files_mode_stream_reads_the_same_records(
    spark: SparkSession, broker: BrokerProcess, topic: str, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, topic, partitions=2)
    produced = produce(
        broker.bootstrap,
        topic,
        [{"value": b"%d" % i, "partition": i % 2} for i in range(50)],
    )
    query = (
        spark.readStream.format("seglog")
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "20")
        .load(str(broker.data))
        .selectExpr("partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert all(p["numInputRows"] <= 20 for p in query.recentProgress)
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    got = sorted((r["partition"], r["offset"], r["value"]) for r in rows)
    assert got == [(p.partition, p.offset, p.value) for p in produced]
