"""Rows per second into Spark through ``format("seglog")``: network mode, files mode, bare client.

    .venv/bin/python bench/spark_bench.py              # 10 million 100-byte records
    .venv/bin/python bench/spark_bench.py --quick      # 1 million

One topic with one partition is filled by confluent-kafka against ``python -m
seglog serve`` (a subprocess on a free port, data in a temporary directory).
Then, in the same run:

  bare client   confluent-kafka in this process, ``assign()`` from offset 0, every
                message's key, value and timestamp touched; the limit a Python reader
                of the network has.
  network       ``spark.read.format("seglog")`` with ``kafka.bootstrap.servers``,
                ``minPartitions`` = the cores, summing ``length(value)`` so every row
                reaches Spark.
  files         the same query with ``load(<the broker's log directory>)``, the broker
                still running.
  files, time   files mode with ``timestamp >= T``, T the time of the record at 99% of
  filter        the log (1% selective), with PySpark's filter pushdown off (a full
                scan that Spark filters) and on (the scan starts at the first record
                at or after T, found through the time indexes).

Spark runs ``local[*]`` with the project's interpreter for its Python workers.
Each Spark row is the best of ``--repeat`` runs after one warm-up query.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka as ck

TOPIC = "bench"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_broker(data: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    args = [
        sys.executable,
        "-m",
        "seglog",
        "serve",
        "--override",
        f"log.dirs={data}",
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{port}",
    ]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("the broker did not start")


def _produce(bootstrap: str, records: int) -> float:
    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    value = b"x" * 100
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value, b"%d" % (i % 1000), partition=0)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    return time.perf_counter() - start


def _bare_client(bootstrap: str, records: int) -> float:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "queued.max.messages.kbytes": 262_144,
            "fetch.max.bytes": 52_428_800,
        }
    )
    consumer.assign([ck.TopicPartition(TOPIC, 0, 0)])
    seen = 0
    total = 0
    start = time.perf_counter()
    while seen < records:
        for message in consumer.consume(10_000, timeout=0.2):
            if message.error() is None:
                total += len(message.value() or b"") + len(message.key() or b"")
                message.timestamp()
                seen += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


def _timestamp_at(bootstrap: str, offset: int) -> int:
    """The timestamp (ms) of the record at ``offset``."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-ts"})
    consumer.assign([ck.TopicPartition(TOPIC, 0, offset)])
    try:
        while True:
            for message in consumer.consume(1, timeout=1.0):
                if message.error() is None:
                    return int(message.timestamp()[1])
    finally:
        consumer.close()


def _spark_query(
    spark: object,
    reader_options: dict[str, str],
    path: str | None,
    where: str | None = None,
    expect: int | None = None,
) -> float:
    from pyspark.sql import functions as F

    reader = spark.read.format("seglog")  # type: ignore[attr-defined]
    for key, value in reader_options.items():
        reader = reader.option(key, value)
    df = reader.load(path) if path else reader.load()
    if where is not None:
        df = df.where(where)
    start = time.perf_counter()
    rows = df.agg(F.count("*"), F.sum(F.length("value"))).collect()
    elapsed = time.perf_counter() - start
    if expect is not None and rows[0][0] != expect:
        raise AssertionError(f"{where}: {rows[0][0]} rows, expected {expect}")
    return elapsed


def main() -> None:
    """Run the benchmark and print one table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--quick", action="store_true", help="1 million records")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    records = 1_000_000 if args.quick else args.records
    cores = os.cpu_count() or 1

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    workdir = Path(tempfile.mkdtemp(prefix="seglog-spark-bench-"))
    data = workdir / "data"
    broker, bootstrap = _start_broker(data)
    try:
        produce_s = _produce(bootstrap, records)
        print(f"produced {records:,} records in {produce_s:.1f} s", flush=True)
        bare = min(_bare_client(bootstrap, records) for _ in range(args.repeat))

        import seglog.spark

        spark = seglog.spark.local_session("local[*]", "seglog-bench")
        spark.sparkContext.setLogLevel("ERROR")
        network = {
            "kafka.bootstrap.servers": bootstrap,
            "subscribe": TOPIC,
            "minPartitions": str(cores),
        }
        files = {"subscribe": TOPIC, "minPartitions": str(cores)}
        _spark_query(spark, network, None)  # warm-up: JVM, Python workers
        net_s = min(_spark_query(spark, network, None) for _ in range(args.repeat))
        files_s = min(_spark_query(spark, files, str(data)) for _ in range(args.repeat))

        # Timestamps rise with offsets here (one producer, CreateTime), so the records at
        # or after the 99% one's time are the last 1% (a few more at equal milliseconds).
        cut = records * 99 // 100
        since_ms = _timestamp_at(bootstrap, cut)
        where = f"timestamp >= timestamp_millis({since_ms})"
        expect = (
            spark.read.format("seglog").option("subscribe", TOPIC).load(str(data)).where(where)
        ).count()
        timed = {"subscribe": TOPIC, "minPartitions": str(cores)}
        scan_s = min(
            _spark_query(spark, timed, str(data), where, expect) for _ in range(args.repeat)
        )
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        pruned_s = min(
            _spark_query(spark, timed, str(data), where, expect) for _ in range(args.repeat)
        )
        spark.stop()
    finally:
        broker.send_signal(signal.SIGTERM)
        broker.wait(60)
        shutil.rmtree(workdir, ignore_errors=True)

    print(f"\n{records:,} records of 100 B, one partition, {cores} cores\n")
    print(f"{'reader':<44} {'rows/s':>14} {'vs bare client':>15}")
    for name, seconds in [
        ("bare confluent-kafka client, 1 process", bare),
        (f"Spark, network mode, {cores} tasks", net_s),
        (f"Spark, files mode, {cores} tasks", files_s),
    ]:
        rate = records / seconds
        print(f"{name:<44} {rate:>14,.0f} {bare / seconds:>14.0%}")
    print(f"\nfiles mode, timestamp >= T ({expect:,} rows, {expect / records:.1%} of the log)\n")
    print(f"{'scan':<44} {'seconds':>14} {'speed-up':>15}")
    for name, seconds in [
        ("full scan, Spark filters (pushdown off)", scan_s),
        ("pruned by the time index (pushdown on)", pruned_s),
    ]:
        print(f"{name:<44} {seconds:>14.2f} {scan_s / seconds:>14.1f}x")


if __name__ == "__main__":
    main()
