"""Keyed rows land where the Java producer behind Spark's Kafka sink would put them."""

from __future__ import annotations

import itertools

import pytest

from tests.broker.conftest import BrokerProcess
from tests.spark.conftest import create_topic

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """MurmurHash2, 32 bits, seed 0x9747b28c, as Kafka's ``Utils.murmur2`` (a signed int).

    Four bytes at a time read little-endian, each mixed by multiply/shift/multiply
    and folded into the hash; the 1-3 trailing bytes are folded in directly; a final
    avalanche of shifts and a multiply.
    """
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = data[whole:]
    if tail:
        for shift, byte in enumerate(tail):
            h ^= byte << (8 * shift)
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def java_partition(key: bytes, partitions: int) -> int:
    """The Java producer's choice for a keyed record: ``toPositive(murmur2(key)) % n``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def test_murmur2_matches_kafkas_published_values() -> None:
    # Values from Kafka's own unit tests of Utils.murmur2.
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107


def test_keyed_rows_land_on_the_java_partition(
    spark: SparkSession, broker: BrokerProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, partitions=7)
    keys = [f"user-{i}" for i in range(300)] + [""]
    rows = [(key, f"v{i}") for i, key in enumerate(keys)] + [(None, f"n{i}") for i in range(200)]
    df = spark.createDataFrame(rows, "key string, value string").coalesce(1)
    (
        df.write.format("seglog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic)
        .mode("append")
        .save()
    )
    back = (
        spark.read.format("seglog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .load()
        .collect()
    )
    placed = {r["key"]: r["partition"] for r in back if r["key"] is not None}
    assert len(placed) == len(keys)
    wrong = [k for k, p in placed.items() if p != java_partition(k, 7)]
    assert wrong == []
    # Null keys: sticky, one partition for a run of records (librdkafka switches after
    # sticky.partitioning.linger.ms), not a partition drawn per record. Counted as runs
    # of consecutive rows on one partition: about 170 of 200 if drawn per record, a
    # handful if sticky, however slowly a busy machine writes them.
    null_keyed = sorted(
        (int(r["value"].decode()[1:]), r["partition"]) for r in back if r["key"] is None
    )
    assert [n for n, _ in null_keyed] == list(range(200))
    runs = 1 + sum(1 for a, b in itertools.pairwise(null_keyed) if a[1] != b[1])
    assert runs <= 40, runs
