"""Storage engine benchmarks: each figure stands beside a limit measured in the same run.

    .venv/bin/python bench/storage_bench.py              # 1 GiB partitions
    .venv/bin/python bench/storage_bench.py --quick      # 64 MiB smoke run

Rows:
  append       Log.append of pre-built batches (segment.bytes 1 GiB, defaults otherwise)
               vs the same bytes written to a plain file with as many os.write calls
               (goal >= 80%)
  read         the whole partition through Log.read(offset, 1 MiB) regions + os.pread,
               advancing past the last whole batch of each chunk, vs os.pread of the
               segment file in 1 MiB chunks; page cache warm
  lookups      random offset lookups (Log.read(offset, 1)) and timestamp lookups
               (Log.find_offset_by_timestamp) vs bisect over an in-memory list with as
               many keys as the offset index has entries (goal > 100,000 /s)
  recovery     LogSegment.recover of a segment opened from disk vs CRC-32C of the same
               bytes in memory (goal >= 50%)
  open         Log.open of a partition of 2,000 one-batch segments after a clean shutdown
               (no index is opened) vs os.open + fstat + close of its .log files (goal < 5 s)
  compaction   Cleaner.clean of a compacted partition vs os.pread of the same bytes
               (goal >= 200 MB/s)

Timed sections run best of --repeat, alternating seglog and its limit so that neither
pays alone for page-cache or writeback noise. Building batches is not timed.
"""

from __future__ import annotations

import argparse
import bisect
import gc
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import crc32c as crc32c_lib
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from seglog.config import LogConfig
from seglog.records import log_entries
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage import filenames, producer_state
from seglog.storage.cleaner import Cleaner, cleanable_range
from seglog.storage.log import Log
from seglog.storage.segment import LogSegment

KiB = 1 << 10
MiB = 1 << 20
MB = 1_000_000
BASE_TS = 1_700_000_000_000
RECORDS_PER_MS = 10  # producer-like timestamps: 10 records share each millisecond
PROJECT_ROOT = Path(__file__).resolve().parent.parent

err = Console(stderr=True)


# --------------------------------------------------------------------- data


@dataclass
class Batches:
    """Pre-built v2 batches: the producer's work, done before any timing."""

    data: list[bytes]
    records: int
    size: int
    last_timestamp: int


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )


def _records_per_batch(value: bytes, batch_bytes: int, keyed: bool) -> int:
    """The most records of this shape whose batch stays within ``batch_bytes``."""
    key = b"key-000000000" if keyed else None
    count = max(1, batch_bytes // (len(value) + 16))
    while True:
        probe = [
            SimpleRecord(value=value, key=key, timestamp=BASE_TS + i // RECORDS_PER_MS)
            for i in range(count)
        ]
        size = len(build_batch(probe))
        if size <= batch_bytes or count == 1:
            return count
        count = max(1, count * batch_bytes // size - 1)


def plan(record_size: int, batch_bytes: int, total: int, keyed: bool) -> tuple[bytes, int, int]:
    """The value, records per batch and number of batches for ~``total`` bytes."""
    value = random.Random(record_size).randbytes(record_size)
    per_batch = _records_per_batch(value, batch_bytes, keyed)
    key = b"key-000000000" if keyed else None
    probe = build_batch([SimpleRecord(value=value, key=key, timestamp=BASE_TS)] * per_batch)
    return value, per_batch, max(1, total // len(probe))


def make_batches(
    record_size: int,
    batch_bytes: int,
    total: int,
    keys: Iterator[bytes] | None = None,
) -> Batches:
    """Batches of ``record_size``-byte values, at most ``batch_bytes`` each, ~``total`` in all.

    Timestamps advance 1 ms every :data:`RECORDS_PER_MS` records. With ``keys``,
    every record takes the next key from it.
    """
    value, per_batch, count = plan(record_size, batch_bytes, total, keys is not None)
    data: list[bytes] = []
    n = 0
    size = 0
    with _progress() as progress:
        task = progress.add_task(
            f"building {record_size} B records in {batch_bytes // KiB} KiB batches", total=count
        )
        for _ in range(count):
            records = [
                SimpleRecord(
                    value=value,
                    key=None if keys is None else next(keys),
                    timestamp=BASE_TS + (n + i) // RECORDS_PER_MS,
                )
                for i in range(per_batch)
            ]
            n += per_batch
            built = build_batch(records)
            size += len(built)
            data.append(built)
            progress.advance(task)
    return Batches(data, n, size, BASE_TS + (n - 1) // RECORDS_PER_MS)


def compaction_keys(records: int, distinct: int, seed: int = 3) -> Iterator[bytes]:
    """Keys for ``records`` records: each of ``distinct`` keys at least once, the rest
    repeats of random ones, all shuffled so that repeats are spread over the log."""
    rng = random.Random(seed)
    ids = list(range(distinct))
    ids += [rng.randrange(distinct) for _ in range(records - distinct)]
    rng.shuffle(ids)
    return (b"key-%09d" % i for i in ids)


def write_partition(log: Log, batches: Batches, label: str) -> None:
    with _progress() as progress:
        task = progress.add_task(f"appending {label}", total=len(batches.data))
        for data in batches.data:
            log.append(data)
            progress.advance(task)


# ------------------------------------------------------------------- timing


def timed(fn: Callable[[], object]) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def best_of(repeat: int, *fns: Callable[[], float]) -> list[float]:
    """Run each of ``fns`` (which return seconds) ``repeat`` times, interleaved; keep minima."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            best[i] = min(best[i], fn())
    return best


def pread_file(path: Path, chunk: int = MiB) -> int:
    fd = os.open(path, os.O_RDONLY)
    position = 0
    try:
        while True:
            data = os.pread(fd, chunk, position)
            if not data:
                break
            position += len(data)
    finally:
        os.close(fd)
    return position


@dataclass
class Row:
    name: str
    seglog: str
    limit: str
    ratio: float | None
    goal: str
    met: bool | None


def mbps(size: int, seconds: float) -> str:
    return f"{size / seconds / MB:,.0f} MB/s"


# ------------------------------------------------------------- benchmarks


def bench_append(root: Path, record_size: int, batch_bytes: int, total: int, repeat: int) -> Row:
    batches = make_batches(record_size, batch_bytes, total)
    config = LogConfig(segment_bytes=1 << 30)
    label = f"{record_size}x{batch_bytes}"
    plain = root / f"plain-{label}.bin"

    def run_log() -> float:
        directory = root / f"append{label}-0"
        log = Log.open(directory, config)

        def go() -> None:
            append = log.append
            for data in batches.data:
                append(data)

        seconds = timed(go)
        assert log.size == batches.size
        log.delete()  # no fsync: the plain file gets none either
        shutil.rmtree(directory)
        return seconds

    def run_plain() -> float:
        fd = os.open(plain, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

        def go() -> None:
            write = os.write
            for data in batches.data:
                write(fd, data)

        seconds = timed(go)
        os.close(fd)
        plain.unlink()
        return seconds

    plain_s, log_s = best_of(repeat, run_plain, run_log)
    ratio = plain_s / log_s
    return Row(
        f"append {record_size} B records, {batch_bytes // KiB:,} KiB batches "
        f"({batches.size / MiB:,.0f} MiB, {len(batches.data):,} appends)",
        f"{mbps(batches.size, log_s)}, {batches.records / log_s:,.0f} rec/s",
        f"{mbps(batches.size, plain_s)} os.write",
        ratio,
        ">= 80%",
        ratio >= 0.8,
    )


def read_partition(log: Log) -> int:
    """Read every batch as a consumer would: regions of at most 1 MiB, whole batches."""
    offset = log.log_start_offset
    total = 0
    while offset < log.high_watermark:
        result = log.read(offset, MiB)
        if result.data is None:
            break
        region = result.data.region
        data = os.pread(region.fd, region.length, region.position)
        entries = log_entries.scan(data, check_crc=False).entries
        last = entries[-1]
        total += last.position + last.size
        offset = last.next_offset
    return total


def bench_read(log: Log, repeat: int) -> Row:
    paths = [s.log_path for s in log.segments]
    size = log.size
    read_partition(log)  # warm the page cache
    for path in paths:
        pread_file(path)

    def run_log() -> float:
        box: list[int] = []
        seconds = timed(lambda: box.append(read_partition(log)))
        assert box[0] == size, (box[0], size)
        return seconds

    def run_plain() -> float:
        return timed(lambda: [pread_file(p) for p in paths])

    plain_s, log_s = best_of(repeat, run_plain, run_log)
    return Row(
        f"read {size / MiB:,.0f} MiB partition, 1 MiB reads (page cache)",
        mbps(size, log_s),
        f"{mbps(size, plain_s)} os.pread",
        plain_s / log_s,
        "",
        None,
    )


def bench_lookups(log: Log, batches: Batches, count: int, repeat: int) -> list[Row]:
    rng = random.Random(1)
    start, end = log.log_start_offset, log.log_end_offset
    offsets = [rng.randrange(start, end) for _ in range(count)]
    stamps = [rng.randint(BASE_TS, batches.last_timestamp) for _ in range(count)]
    index_entries = sum(s.offset_index.entries for s in log.segments)
    keys = sorted(rng.randrange(start, end) for _ in range(max(index_entries, 1)))

    # Spot-check the answers before timing them.
    for o in offsets[:200]:
        found = log.read(o, 1).data
        assert found is not None and found.first_entry_offset <= o
    for t in stamps[:200]:
        hit = log.find_offset_by_timestamp(t)
        assert hit is not None and hit.timestamp >= t and hit.offset == (t - BASE_TS) * 10

    # Plain loops that drop each answer: a list of results would add garbage
    # collection passes over every object kept, which no caller pays.
    def offset_lookups() -> float:
        def go() -> None:
            read = log.read
            for o in offsets:
                read(o, 1)

        return timed(go)

    def time_lookups() -> float:
        def go() -> None:
            find = log.find_offset_by_timestamp
            for t in stamps:
                find(t)

        return timed(go)

    def bisect_lookups() -> float:
        def go() -> None:
            search = bisect.bisect_right
            for o in offsets:
                search(keys, o)

        return timed(go)

    bisect_s, offset_s, time_s = best_of(repeat, bisect_lookups, offset_lookups, time_lookups)
    limit = f"{count / bisect_s:,.0f} /s bisect of {index_entries:,} keys"
    rows = []
    for label, seconds in (
        ("offset lookups, Log.read(o, 1)", offset_s),
        ("timestamp lookups, find_offset_by_timestamp", time_s),
    ):
        rate = count / seconds
        rows.append(
            Row(
                f"{label} ({count:,} random)",
                f"{rate:,.0f} /s ({seconds / count * 1e6:.1f} µs)",
                limit,
                bisect_s / seconds,
                "> 100,000 /s",
                rate > 100_000,
            )
        )
    return rows


def bench_recovery(log: Log, repeat: int) -> Row:
    segment0 = log.segments[0]
    directory, base, path = log.directory, segment0.base_offset, segment0.log_path
    config = log.config
    entries = segment0.offset_index.entries
    log.close()
    data = path.read_bytes()
    size = len(data)
    segment = LogSegment.open(
        directory,
        base,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes,
        writable=True,
    )

    def run_recover() -> float:
        box: list[int] = []
        seconds = timed(lambda: box.append(segment.recover()))
        assert box[0] == 0 and segment.size == size
        assert segment.offset_index.entries == entries, (segment.offset_index.entries, entries)
        return seconds

    def run_crc() -> float:
        return timed(lambda: crc32c_lib.crc32c(data))

    try:
        crc_s, recover_s = best_of(repeat, run_crc, run_recover)
    finally:
        segment.close()
    ratio = crc_s / recover_s
    return Row(
        f"recovery of a {size / MiB:,.0f} MiB segment",
        mbps(size, recover_s),
        f"{mbps(size, crc_s)} CRC-32C in memory",
        ratio,
        ">= 50%",
        ratio >= 0.5,
    )


def bench_open_many_segments(root: Path, count: int, repeat: int) -> Row:
    """Log.open of ``count`` one-batch segments, as a clean shutdown leaves them."""
    directory = root / "many-0"
    directory.mkdir()
    template = bytearray(build_batch([SimpleRecord(b"v", timestamp=BASE_TS)]))
    for base in range(count):
        template[0:8] = base.to_bytes(8, "big")  # the CRC does not cover the base offset
        filenames.log_path(directory, base).write_bytes(template)
        filenames.index_path(directory, base).write_bytes(b"")
        filenames.time_index_path(directory, base).write_bytes(b"")
    filenames.snapshot_path(directory, count).write_bytes(producer_state.encode_snapshot([]))
    paths = [filenames.log_path(directory, base) for base in range(count)]

    def run_open() -> float:
        logs: list[Log] = []
        seconds = timed(
            lambda: logs.append(
                Log.open(directory, LogConfig(), recovery_point=count, had_clean_shutdown=True)
            )
        )
        assert logs[0].log_end_offset == count
        logs[0].close()
        return seconds

    def run_files() -> float:
        def open_all() -> None:
            for path in paths:
                fd = os.open(path, os.O_RDONLY)
                os.fstat(fd)
                os.close(fd)

        return timed(open_all)

    try:
        files_s, open_s = best_of(repeat, run_files, run_open)
    finally:
        shutil.rmtree(directory)
    return Row(
        f"open of {count:,} segments",
        f"{open_s:.2f} s",
        f"{files_s:.2f} s to open + fstat + close the .log files",
        files_s / open_s,
        "< 5 s",
        open_s < 5,
    )


def bench_compaction(root: Path, size: int, distinct: int, dedupe: int) -> Row:
    config = LogConfig(cleanup_policy="compact", segment_bytes=128 * MiB)
    _, per_batch, count = plan(1024, 16 * KiB, size, keyed=True)
    records = count * per_batch
    if records <= distinct:
        distinct = records * 9 // 10  # small runs: keep some repeats for the cleaner
    batches = make_batches(1024, 16 * KiB, size, compaction_keys(records, distinct))
    assert batches.records == records
    log = Log.open(root / "compact-0", config)
    write_partition(log, batches, "the compacted partition")
    del batches
    log.roll()  # the active segment is never cleaned: make all of it cleanable
    log.flush()
    segments = log.segments[:-1]
    dirty = sum(s.size for s in segments)
    paths = [s.log_path for s in segments]
    for path in paths:
        pread_file(path)  # warm, as the cleaner will find it
    plain_s = min(timed(lambda: [pread_file(p) for p in paths]) for _ in range(3))
    target = cleanable_range(log, 0, int(time.time() * 1000))
    assert target.dirty_bytes == dirty
    cleaner = Cleaner(dedupe_buffer_size=dedupe)
    box = []
    clean_s = timed(lambda: box.append(cleaner.clean(target)))
    stats = box[0]
    assert stats.records_kept == distinct, (stats.records_kept, distinct)
    log.close()
    shutil.rmtree(log.directory)
    rate = dirty / clean_s
    return Row(
        f"compaction of {dirty / MiB:,.0f} MiB in {len(segments)} segments, "
        f"{records:,} records, {distinct:,} distinct keys "
        f"(→ {stats.bytes_written / MiB:,.0f} MiB)",
        f"{rate / MB:,.1f} MB/s ({clean_s:,.1f} s)",
        f"{mbps(dirty, plain_s)} os.pread",
        plain_s / clean_s,
        ">= 200 MB/s",
        rate >= 200 * MB,
    )


# --------------------------------------------------------------------- main


def machine_info(root: Path) -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"{model}; {os.cpu_count()} cores ({usable} usable); "
        f"crc32c.hardware_based={crc32c_lib.hardware_based}; "
        f"Python {platform.python_version()}; data in {root}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--size-mib",
        type=int,
        default=1024,
        help="partition size for read/lookup/recovery/compaction (default 1024)",
    )
    parser.add_argument("--append-mib", type=int, default=256, help="bytes per append row")
    parser.add_argument("--lookups", type=int, default=100_000, help="lookups of each kind")
    parser.add_argument("--distinct-keys", type=int, default=1_000_000)
    parser.add_argument("--dedupe-mib", type=int, default=256, help="cleaner dedupe buffer")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 64 MiB partitions, 32 MiB appends"
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=PROJECT_ROOT,
        help="the temp dir is created under this (default: the project root's disk)",
    )
    parser.add_argument(
        "--only",
        choices=("append", "read", "compaction"),
        action="append",
        help="run only these groups (read includes lookups, recovery and open)",
    )
    args = parser.parse_args()
    if args.quick:
        args.size_mib = min(args.size_mib, 64)
        args.append_mib = min(args.append_mib, 32)
        args.distinct_keys = min(args.distinct_keys, 50_000)
    groups = set(args.only or ("append", "read", "compaction"))
    size = args.size_mib * MiB
    root = Path(tempfile.mkdtemp(prefix=".storage-bench-", dir=args.dir))
    info = machine_info(root)
    err.print(info)
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
                    err.print(f"[dim]{rows[-1].name}: {rows[-1].seglog}[/]")
        if "read" in groups:
            # segment.bytes 1 GiB and a little under 1 GiB of data: one segment.
            batches = make_batches(1024, 16 * KiB, size)
            log = Log.open(root / "partition-0", LogConfig(segment_bytes=1 << 30))
            write_partition(log, batches, f"the {args.size_mib} MiB partition")
            log.flush()
            err.print(f"[dim]partition: {log}, {batches.records:,} records[/]")
            rows.append(bench_read(log, args.repeat))
            err.print(f"[dim]{rows[-1].name}: {rows[-1].seglog}[/]")
            rows.extend(bench_lookups(log, batches, args.lookups, args.repeat))
            del batches
            rows.append(bench_recovery(log, args.repeat))
            err.print(f"[dim]{rows[-1].name}: {rows[-1].seglog}[/]")
            shutil.rmtree(log.directory)
            rows.append(bench_open_many_segments(root, 2000, args.repeat))
            err.print(f"[dim]{rows[-1].name}: {rows[-1].seglog}[/]")
        if "compaction" in groups:
            rows.append(bench_compaction(root, size, args.distinct_keys, args.dedupe_mib * MiB))
    finally:
        shutil.rmtree(root, ignore_errors=True)

    table = Table(title="seglog storage benchmark")
    table.add_column("benchmark")
    table.add_column("seglog", justify="right")
    table.add_column("limit (same run)", justify="right")
    table.add_column("ratio", justify="right")
    table.add_column("goal", justify="right")
    table.add_column("met", justify="center")
    for row in rows:
        table.add_row(
            row.name,
            row.seglog,
            row.limit,
            "" if row.ratio is None else f"{row.ratio:.1%}",
            row.goal,
            "" if row.met is None else ("yes" if row.met else "NO"),
        )
    out = Console(width=200)
    out.print(info)
    out.print(table)
    err.print(f"[dim]done in {time.perf_counter() - began:,.0f} s[/]")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
