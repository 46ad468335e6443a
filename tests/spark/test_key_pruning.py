"""Files mode pruned by ``key = ...`` / ``key IN (...)`` through the topics' key indexes."""

from __future__ import annotations

from typing import Any

import confluent_kafka as ck
import pytest

from tests.broker.conftest import BrokerProcess
from tests.spark.conftest import create_topic

pytest.importorskip("pyspark")

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import EqualTo, Filter, In

from seglog.spark.batch_reader import FilteringBatchReader, RangePartition
from seglog.spark.options import parse_source_options

T0 = 1_700_000_000_000
KEYS = 40


def _fill(broker: BrokerProcess, topic: str, **configs: str) -> None:
    """Three partitions, 3,000 records of 40 keys (and some without a key) over many segments;
    some with headers, one transaction aborted."""
    create_topic(broker.bootstrap, topic, partitions=3, **configs)
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "batch.size": 16384})
    for i in range(3000):
        key = None if i % 97 == 0 else b"k%d" % (i % KEYS)
        headers = [("i", b"%d" % i), ("n", None)] if i % 5 == 0 else None
        producer.produce(
            topic, b"v%d" % i + b"." * 80, key, partition=i % 3, timestamp=T0 + i, headers=headers
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    txn = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic}-txn"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for p in range(3):
        txn.produce(topic, b"aborted", b"k3", partition=p)
    txn.flush(30)
    txn.abort_transaction(30)
    producer.produce(topic, b"after", b"k3", partition=0, timestamp=T0 + 5000)
    assert producer.flush(30) == 0


@pytest.fixture
def indexed_topic(broker: BrokerProcess, topic: str) -> str:
    _fill(broker, topic, **{"key.index.enable": "true"})
    return topic


@pytest.fixture
def plain_topic(broker: BrokerProcess, topic: str) -> str:
    _fill(broker, topic + "-plain")
    return topic + "-plain"


def _reader(
    broker: BrokerProcess, topic: str, *filters: Filter, **extra: str
) -> tuple[FilteringBatchReader, list[Filter]]:
    options = parse_source_options(
        {"subscribe": topic, "path": str(broker.data), "includeHeaders": "true", **extra},
        streaming=False,
    )
    reader = FilteringBatchReader(options)
    return reader, list(reader.pushFilters(list(filters)))


def _plan(df: DataFrame) -> str:
    """The physical plan, where the filters Spark still applies itself show."""
    return str(df._jdf.queryExecution().executedPlan().toString())


def _rows(df: DataFrame) -> list[tuple[Any, ...]]:
    def plain(row: Row) -> tuple[Any, ...]:
        headers = tuple((h["key"], h["value"]) for h in row["headers"] or [])
        return (row["partition"], row["offset"], row["key"], row["value"], row["timestamp"],
                row["timestampType"], headers)  # fmt: skip

    return sorted(plain(r) for r in df.collect())


def test_tasks_read_only_the_keys_records(broker: BrokerProcess, indexed_topic: str) -> None:
    reader, remaining = _reader(
        broker, indexed_topic, In(("key",), (b"k3", b"k17")), EqualTo(("key",), b"k3")
    )
    assert remaining == []  # exact: Spark does not filter again
    parts = [p for p in reader.partitions() if isinstance(p, RangePartition)]
    assert [p.range.partition for p in parts] == [0, 1, 2]  # one task a partition, not a segment
    assert all(p.keys == frozenset({b"k3"}) for p in parts)
    read = [row for p in parts for batch in reader.read(p) for row in batch.to_pylist()]
    assert {row["key"] for row in read} == {b"k3"}
    # Every record of k3 but the aborted ones (read_uncommitted keeps them, as a full scan does).
    assert len(read) == 3000 // KEYS - 1 + 3 + 1
    committed, _ = _reader(
        broker,
        indexed_topic,
        EqualTo(("key",), b"k3"),
        **{"kafka.isolation.level": "read_committed"},
    )
    parts = [p for p in committed.partitions() if isinstance(p, RangePartition)]
    values = [row["value"] for p in parts for b in committed.read(p) for row in b.to_pylist()]
    assert b"aborted" not in values and b"after" in values


def test_unindexed_topics_and_other_filters_are_not_pushed(
    broker: BrokerProcess, plain_topic: str
) -> None:
    key_filter = EqualTo(("key",), b"k3")
    reader, remaining = _reader(broker, plain_topic, key_filter)
    assert remaining == [key_filter]
    assert all(p.keys is None for p in reader.partitions() if isinstance(p, RangePartition))
    # A value Spark compares as something other than bytes (or a null) is left to Spark.
    for odd in (EqualTo(("key",), "k3"), In(("key",), (b"k3", None))):
        assert _reader(broker, plain_topic, odd)[1] == [odd]


def test_pruned_queries_equal_full_scans(
    spark: SparkSession, broker: BrokerProcess, indexed_topic: str, plain_topic: str
) -> None:
    def load(topic: str, **extra: str) -> DataFrame:
        read = spark.read.format("seglog").option("subscribe", topic)
        for name, value in {"includeHeaders": "true", **extra}.items():
            read = read.option(name, value)
        return read.load(str(broker.data))

    queries = [
        F.col("key") == F.lit(b"k10"),
        F.col("key").isin(b"k1", b"k39", b"never"),
        (F.col("key") == F.lit(b"k3")) & (F.col("partition") == 0) & (F.col("offset") < 900),
    ]
    committed = {"kafka.isolation.level": "read_committed"}
    full = {}
    for i, where in enumerate(queries):
        full[i] = _rows(load(indexed_topic).where(where))
        full[i, "rc"] = _rows(load(indexed_topic, **committed).where(where))
    assert full[0] and full[1] and full[2]
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        for i, where in enumerate(queries):
            assert _rows(load(indexed_topic).where(where)) == full[i]
            # Spark filters the keys itself (a binary literal, 0x...) only where not pushed.
            assert "0x" not in _plan(load(indexed_topic).where(where))
            assert "0x" in _plan(load(plain_topic).where(where))
            assert _rows(load(indexed_topic, **committed).where(where)) == full[i, "rc"]
            # Unindexed: not pushed, Spark filters the scan; the same records.
            plain = _rows(load(plain_topic).where(where))
            assert [r[2:4] for r in plain] == [r[2:4] for r in full[i]]
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")
    assert any(headers for *_, headers in full[0])
    assert all(key == b"k10" for _, _, key, *_ in full[0])
