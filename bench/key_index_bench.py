"""Key index benchmarks: what the index costs and what a lookup by key takes, in one run.

    .venv/bin/python bench/key_index_bench.py            # 10 M records (about 1.3 GB)
    .venv/bin/python bench/key_index_bench.py --quick    # 1 M records, 64 MiB appends

Rows:
  append       LogDir.append of pre-built batches into a topic with key.index.enable=true,
               the log directory's background threads running as in a broker (the key
               indexer catches up on the other core), until its index has caught up (one
               lookup after the last append), against the same batches into a topic
               without the index (goal >= 85%); and the appender alone (what a producer
               sees: the index is kept off the append path)
  size         the .keyindex files' bytes against the .log files' (goal <= 10%), 100 B
               values with unique 16-byte keys
  lookup       LogDir.find(topic, key, limit=1) for random keys of one partition of
               --records records: median and p99 with the page cache warm (goal p99 < 1 ms)
               and after dropping the partition's pages (posix_fadvise DONTNEED: no root
               needed); a key never written
  scan         the same lookup done by a scan: every record decoded and its key compared
               (what a tool without the index does), and a byte search of the .log files
               (faster than any real scan: it does not even parse)
  spark        files mode: spark.read.format("seglog") ... where(key = k) on the indexed
               topic against the same query on an unindexed copy (goal >= 50x faster);
               skipped without Java or PySpark

Building batches is not timed.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from seglog.config import LogConfig
from seglog.records import batch
from seglog.records.builder import build_batch
from seglog.records.compression import Codec
from seglog.records.record import decode_records
from seglog.storage.key_index import key_hash
from seglog.storage.log_dir import LogDir

KiB = 1 << 10
MiB = 1 << 20
MB = 1_000_000
BASE_TS = 1_700_000_000_000
PROJECT_ROOT = Path(__file__).resolve().parent.parent
SEGMENT_BYTES = 1 << 30

err = Console(stderr=True)


@dataclass
class Row:
    name: str
    seglog: str
    limit: str
    ratio: str
    goal: str
    met: bool | None


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )


def key_of(n: int) -> bytes:
    """The unique 16-byte key of record ``n``."""
    return b"key-%012d" % n


def make_batches(record_size: int, batch_bytes: int, records: int, first: int = 0) -> list[bytes]:
    """Batches of ``records`` records with unique keys and ``record_size``-byte values."""
    value = random.Random(record_size).randbytes(record_size)
    probe = len(build_batch([(key_of(0), value, BASE_TS)] * 2)) - len(
        build_batch([(key_of(0), value, BASE_TS)])
    )
    # Later records' deltas take more bytes than the probe's: keep a margin.
    per_batch = max(1, (batch_bytes - batch.HEADER_SIZE) * 15 // 16 // probe)
    out = []
    with _progress() as progress:
        task = progress.add_task(
            f"building {record_size} B records in {batch_bytes // KiB:,} KiB batches",
            total=records,
        )
        n = first
        end = first + records
        while n < end:
            count = min(per_batch, end - n)
            out.append(
                build_batch([(key_of(i), value, BASE_TS + i // 10) for i in range(n, n + count)])
            )
            n += count
            progress.advance(task, count)
    return out


def timed(fn: Callable[[], object]) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def open_dir(path: Path) -> LogDir:
    return LogDir.open(path, defaults=LogConfig(segment_bytes=SEGMENT_BYTES))


def drop_pages(directory: Path) -> None:
    """Ask the kernel to forget the page cache of every file in ``directory``."""
    for path in directory.iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


# ------------------------------------------------------------------ append


def bench_append(root: Path, record_size: int, batch_bytes: int, total: int, repeat: int) -> Row:
    per_record = record_size + 30
    batches = make_batches(record_size, batch_bytes, max(1, total // per_record))
    size = sum(map(len, batches))
    records = sum(batch.read_header(b).record_count for b in batches)
    best = {"plain": float("inf"), "indexed": float("inf"), "appender": float("inf")}
    for run in range(repeat):
        for indexed in (False, True):
            path = root / f"append-{run}-{indexed}"
            log_dir = open_dir(path)
            log_dir.create_topic("t", 1, {"key.index.enable": str(indexed).lower()})
            # As in a broker: retention, checkpoints and the key indexer on their threads.
            log_dir.start_background()
            append = log_dir.append

            def appends(log_dir: LogDir = log_dir, append: Callable[..., object] = append) -> None:
                for data in batches:
                    append("t", 0, data)

            def appends_then_indexed(
                log_dir: LogDir = log_dir, appends: Callable[[], None] = appends
            ) -> None:
                appends()
                # The lookup catches the active segment's index up: all of it is indexed.
                assert log_dir.find("t", key_of(records - 1), limit=1)

            if indexed:
                best["indexed"] = min(best["indexed"], timed(appends_then_indexed))
            else:
                best["plain"] = min(best["plain"], timed(appends))
            log_dir.close()
            shutil.rmtree(path)
        path = root / f"append-{run}-appender"
        log_dir = open_dir(path)
        log_dir.create_topic("t", 1, {"key.index.enable": "true"})
        log_dir.start_background()
        best["appender"] = min(
            best["appender"], timed(lambda d=log_dir: [d.append("t", 0, b) for b in batches])
        )
        log_dir.close()
        shutil.rmtree(path)
    ratio = best["plain"] / best["indexed"]
    appender = best["plain"] / best["appender"]
    return Row(
        f"append {record_size} B records, {batch_bytes // KiB:,} KiB batches, until indexed "
        f"({size / MiB:,.0f} MiB)",
        f"{size / best['indexed'] / MB:,.0f} MB/s, {records / best['indexed']:,.0f} rec/s "
        f"(appender alone {appender:.0%})",
        f"{size / best['plain'] / MB:,.0f} MB/s without the index",
        f"{ratio:.0%}",
        ">= 85%",
        ratio >= 0.85,
    )


# ------------------------------------------------------------------ lookups


def fill_partition(path: Path, records: int, indexed: bool, topic: str) -> None:
    batches_per_round = 2_000_000
    log_dir = open_dir(path)
    log_dir.create_topic(topic, 1, {"key.index.enable": str(indexed).lower()})
    done = 0
    while done < records:
        count = min(batches_per_round, records - done)
        for data in make_batches(100, 16 * KiB, count, first=done):
            log_dir.append(topic, 0, data)
        done += count
    log_dir.close()


def file_bytes(directory: Path, suffix: str) -> int:
    return sum(p.stat().st_size for p in directory.iterdir() if p.name.endswith(suffix))


def bench_lookups(path: Path, records: int, lookups: int, cold_lookups: int) -> list[Row]:
    rows = []
    partition = path / "indexed-0"
    log_dir = open_dir(path)
    rng = random.Random(7)
    keys = [key_of(rng.randrange(records)) for _ in range(lookups)]
    try:
        for key in keys[: min(1000, len(keys))]:  # open the indexes, warm the pages
            log_dir.find("indexed", key, limit=1)
        latencies = []
        for key in keys:
            start = time.perf_counter()
            found = log_dir.find("indexed", key, limit=1)
            latencies.append(time.perf_counter() - start)
            assert [r.key for r in found] == [key]
        p99 = percentile(latencies, 0.99)
        rows.append(
            Row(
                f"lookup of one key among {records:,} records, page cache warm ({lookups:,} keys)",
                f"median {ms(statistics.median(latencies))}, p99 {ms(p99)}",
                "",
                "",
                "p99 < 1 ms",
                p99 < 0.001,
            )
        )
        start = time.perf_counter()
        for i in range(1000):
            assert not log_dir.find("indexed", b"absent-%d" % i, limit=1)
        rows.append(
            Row(
                "lookup of a key never written, page cache warm",
                f"mean {ms((time.perf_counter() - start) / 1000)}",
                "",
                "",
                "",
                None,
            )
        )
        cold = []
        with _progress() as progress:
            task = progress.add_task("cold lookups", total=cold_lookups)
            for key in keys[:cold_lookups]:
                drop_pages(partition)
                start = time.perf_counter()
                found = log_dir.find("indexed", key, limit=1)
                cold.append(time.perf_counter() - start)
                assert [r.key for r in found] == [key]
                progress.advance(task)
        rows.append(
            Row(
                f"lookup after dropping the partition's pages ({cold_lookups:,} keys)",
                f"median {ms(statistics.median(cold))}, p99 {ms(percentile(cold, 0.99))}",
                "",
                "",
                "",
                None,
            )
        )
    finally:
        log_dir.close()
    index = file_bytes(partition, ".keyindex")
    log = file_bytes(partition, ".log")
    rows.insert(
        0,
        Row(
            "index size, 100 B values, unique 16-byte keys",
            f"{index / MiB:,.1f} MiB of .keyindex",
            f"{log / MiB:,.1f} MiB of .log",
            f"{index / log:.1%}",
            "<= 10%",
            index / log <= 0.10,
        ),
    )
    return rows


def bench_scan(path: Path, key: bytes, lookup_seconds: float) -> list[Row]:
    partition = path / "indexed-0"
    logs = sorted(p for p in partition.iterdir() if p.name.endswith(".log"))

    def decode_scan() -> None:
        found = 0
        for log in logs:
            data = log.read_bytes()
            for position, _ in batch.iter_headers(data, check_crc=False):
                found += sum(1 for r in decode_records(data, position) if r.key == key)
        assert found == 1

    def byte_search() -> None:
        assert sum(log.read_bytes().count(key) for log in logs) == 1

    decode = timed(decode_scan)
    grep = timed(byte_search)
    return [
        Row(
            "the same key by a scan: every record decoded, keys compared",
            f"{decode:,.2f} s",
            f"lookup {ms(lookup_seconds)}",
            f"{decode / lookup_seconds:,.0f}x",
            "",
            None,
        ),
        Row(
            "the same key by a byte search of the .log files (no parsing)",
            f"{grep:,.2f} s",
            f"lookup {ms(lookup_seconds)}",
            f"{grep / lookup_seconds:,.0f}x",
            "",
            None,
        ),
    ]


# -------------------------------------------------------------------- spark


def bench_spark(path: Path, records: int, repeat: int) -> list[Row]:
    try:
        from pyspark.sql.functions import col

        from seglog.spark import local_session
    except ImportError:
        return [Row("spark files mode", "skipped: no PySpark", "", "", "", None)]
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return [Row("spark files mode", "skipped: no Java", "", "", "", None)]
    # Pushdown on for both topics: only the indexed one's key filter is pushed.
    spark = local_session(
        "local[2]", "key-index-bench", spark_sql_python_filterPushdown_enabled="true"
    )
    key = key_of(records // 3)

    def query(topic: str) -> float:
        def run() -> None:
            rows = (
                spark.read.format("seglog")
                .option("subscribe", topic)
                .load(str(path))
                .where(col("key") == key)
                .select("offset")
                .collect()
            )
            assert [r.offset for r in rows] == [records // 3]

        return timed(run)

    try:
        query("indexed")
        indexed = min(query("indexed") for _ in range(repeat))
        plain = min(query("plain") for _ in range(repeat))
    finally:
        spark.stop()
    return [
        Row(
            f"Spark files mode, where(key = k) over {records:,} records",
            f"{indexed:,.2f} s with the index",
            f"{plain:,.2f} s unindexed",
            f"{plain / indexed:,.1f}x",
            ">= 50x",
            plain / indexed >= 50,
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--append-mib", type=int, default=256)
    parser.add_argument("--lookups", type=int, default=10_000)
    parser.add_argument("--cold-lookups", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1 M records, 64 MiB appends")
    parser.add_argument("--no-spark", action="store_true")
    parser.add_argument(
        "--only", choices=("append", "lookup", "spark"), action="append", help="run only these"
    )
    parser.add_argument("--dir", type=Path, default=PROJECT_ROOT)
    args = parser.parse_args()
    if args.quick:
        args.records = min(args.records, 1_000_000)
        args.append_mib = min(args.append_mib, 64)
        args.lookups = min(args.lookups, 2000)
        args.cold_lookups = min(args.cold_lookups, 50)
    groups = set(args.only or ("append", "lookup", "spark"))
    if args.no_spark:
        groups.discard("spark")
    root = Path(tempfile.mkdtemp(prefix=".key-index-bench-", dir=args.dir))
    # Load the compiled loops once, as a broker does at its first lookup: not timed.
    key_hash(b"warm-up")
    warm = open_dir(root / "warm-up")
    warm.create_topic("t", 1, {"key.index.enable": "true"})
    warm.append("t", 0, build_batch([(b"k", b"v", BASE_TS)], codec=Codec.LZ4))
    warm.append("t", 0, build_batch([(b"k", b"v", BASE_TS)]))
    assert len(warm.find("t", b"k")) == 2
    warm.close()
    rows: list[Row] = []
    began = time.perf_counter()
    try:
        if "append" in groups:
            for record_size in (100, 1024):
                for batch_bytes in (16 * KiB, MiB):
                    rows.append(
                        bench_append(
                            root, record_size, batch_bytes, args.append_mib * MiB, args.repeat
                        )
                    )
                    err.print(f"[dim]{rows[-1].name}: {rows[-1].seglog} / {rows[-1].limit}[/]")
        if groups & {"lookup", "spark"}:
            data = root / "data"
            fill_partition(data, args.records, True, "indexed")
            if "lookup" in groups:
                lookup_rows = bench_lookups(data, args.records, args.lookups, args.cold_lookups)
                rows.extend(lookup_rows)
                for row in lookup_rows:
                    err.print(f"[dim]{row.name}: {row.seglog}[/]")
                log_dir = open_dir(data)
                key = key_of(args.records // 2)
                log_dir.find("indexed", key, limit=1)
                lookup = min(timed(lambda: log_dir.find("indexed", key, limit=1)) for _ in range(5))
                log_dir.close()
                rows.extend(bench_scan(data, key, lookup))
            if "spark" in groups:
                fill_partition(data, args.records, False, "plain")
                rows.extend(bench_spark(data, args.records, args.repeat))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    table = Table(title="seglog key index benchmark")
    for name in ("benchmark", "seglog", "limit or peer (same run)", "ratio", "goal", "met"):
        table.add_column(name, justify="left" if name == "benchmark" else "right")
    for row in rows:
        table.add_row(
            row.name,
            row.seglog,
            row.limit,
            row.ratio,
            row.goal,
            "" if row.met is None else ("yes" if row.met else "NO"),
        )
    out = Console(width=220)
    out.print(f"{os.cpu_count()} cores; data in {root}")
    out.print(table)
    err.print(f"[dim]done in {time.perf_counter() - began:,.0f} s[/]")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
