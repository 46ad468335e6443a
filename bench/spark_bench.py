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

  typed Avro    a second topic (a fifth as many records) of Avro records in the
                schema registry's wire format (registered and serialized by
                confluent-kafka's ``AvroSerializer``, served by the broker's registry):
                the same query with ``valueFormat=avro`` (every row decoded into a
                struct) against the binary read of the same topic, network and files mode.

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
AVRO_TOPIC = "bench-avro"
USER = {
    "type": "record",
    "name": "User",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": "int"},
        {"name": "score", "type": "double"},
        {"name": "email", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {
            "name": "address",
            "type": {
                "type": "record",
                "name": "Address",
                "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": "int"}],
            },
        },
    ],
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_broker(data: Path, registry_port: int) -> tuple[subprocess.Popen[bytes], str]:
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
        "--schema-registry-port",
        str(registry_port),
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


def _produce_avro(bootstrap: str, registry_url: str, records: int) -> None:
    """``records`` Avro users in the wire format: a thousand distinct ones serialized by
    confluent-kafka's AvroSerializer (which registers the schema), produced in turn."""
    import json

    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deadline = time.monotonic() + 60
    while True:  # the registry listens once the broker has read _schemas
        try:
            port = int(registry_url.rsplit(":", 1)[1])
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    with SchemaRegistryClient({"url": registry_url}) as client:
        serializer = AvroSerializer(client, json.dumps(USER))
        ctx = SerializationContext(AVRO_TOPIC, MessageField.VALUE)
        values = [
            serializer(
                {
                    "name": f"user {i}",
                    "age": i % 90,
                    "score": i / 7,
                    "email": None if i % 3 else f"user{i}@example.com",
                    "tags": [f"t{j}" for j in range(i % 4)],
                    "address": {"city": f"city {i % 50}", "zip": 10_000 + i},
                },
                ctx,
            )
            for i in range(1000)
        ]
    producer = ck.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_000_000}
    )
    for i in range(records):
        while True:
            try:
                producer.produce(AVRO_TOPIC, values[i % 1000], partition=0)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0


def _typed_query(spark: object, reader_options: dict[str, str], path: str | None) -> float:
    """Count the rows and sum a field of the typed value, so every row is decoded."""
    from pyspark.sql import functions as F

    reader = spark.read.format("seglog")  # type: ignore[attr-defined]
    for key, value in reader_options.items():
        reader = reader.option(key, value)
    df = reader.load(path) if path else reader.load()
    start = time.perf_counter()
    df.agg(F.count("*"), F.sum("value.age"), F.max("value.address.city")).collect()
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
    registry_port = _free_port()
    registry_url = f"http://127.0.0.1:{registry_port}"
    broker, bootstrap = _start_broker(data, registry_port)
    avro_records = max(records // 5, 1000)
    try:
        produce_s = _produce(bootstrap, records)
        print(f"produced {records:,} records in {produce_s:.1f} s", flush=True)
        _produce_avro(bootstrap, registry_url, avro_records)
        print(f"produced {avro_records:,} Avro records", flush=True)
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
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")

        avro_network = {**network, "subscribe": AVRO_TOPIC}
        avro_files = {**files, "subscribe": AVRO_TOPIC}
        typed_network = {**avro_network, "valueFormat": "avro", "schema.registry.url": registry_url}
        typed_files = {**avro_files, "valueFormat": "avro"}
        _typed_query(spark, typed_network, None)  # warm-up of the decoding path
        typed = [
            ("binary value, network mode", avro_network, None, _spark_query),
            ("typed Avro value, network mode", typed_network, None, _typed_query),
            ("binary value, files mode", avro_files, str(data), _spark_query),
            ("typed Avro value, files mode", typed_files, str(data), _typed_query),
        ]
        typed_s = {
            name: min(query(spark, opts, path) for _ in range(args.repeat))  # type: ignore[operator]
            for name, opts, path, query in typed
        }
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
    print(f"\n{avro_records:,} Avro records (6 fields, ~60 B), one partition, {cores} tasks\n")
    print(f"{'read':<44} {'rows/s':>14} {'vs binary':>15}")
    for name, seconds in typed_s.items():
        binary = typed_s[name.replace("typed Avro", "binary")]
        print(f"{name:<44} {avro_records / seconds:>14,.0f} {binary / seconds:>14.0%}")


if __name__ == "__main__":
    main()
