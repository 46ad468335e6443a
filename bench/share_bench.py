"""Share group (KIP-932) benchmarks: ShareConsumers against a classic consumer group.

    .venv/bin/python bench/share_bench.py              # ~90 s
    .venv/bin/python bench/share_bench.py --quick      # smoke run (~80 s: the 1 ms rows)
    .venv/bin/python bench/share_bench.py --profile bench/out   # + cProfile of ShareFetch

The broker is ``python -m seglog serve`` started as a subprocess on a free
port with ``group.initial.rebalance.delay.ms=0``; every client is
confluent-kafka (librdkafka), each consumer in a process of its own (so that
one GIL does not serialize them). All rows read the same data: one topic of
one partition holding N records of 100 B values (--records, default 200,000;
--quick 20,000), produced once, with Java's default ``batch.size`` (16 KiB,
about 140 of these records per batch: a share group hands out whole batches).

Rows:
  classic      one ``Consumer`` in a consumer group of its own, subscribed from
               the earliest offset, ``consume()`` of up to 1,000 records a call,
               no commits: every record read once, end to end.
  share        a share group (``share.auto.offset.reset=earliest``, set with
               IncrementalAlterConfigs on the GROUP resource) of 1, 4 and 10
               ``ShareConsumer``s, implicit acknowledgement, until every record
               was delivered; then each member commits (acknowledges its last
               poll) and closes.
  share, 1 ms  the same with ``time.sleep(0.001)`` after each record (the work
               of the record), until the first --work-records distinct records
               (default 20,000) were delivered: the point of a queue is that more
               consumers do more work, so 4 should beat 1 (and 10 beat 4).

A share group of 1 consumer first reads a topic of 1,000 records, unreported: the
broker's first share group creates ``__share_group_state``. Every row starts a fresh
group; the consumers are started and waiting first, then all subscribe at once.
"records/s" counts distinct records between the first and the last one delivered
(times from CLOCK_MONOTONIC, which all processes share);
"first record" is the time from the subscribe() calls to the first delivery (the
join). Each delivery's offset is sent back to this process, which counts the
records delivered twice or more (duplicates) and those never delivered (missing).
"broker CPU" is user + system time of the broker process (/proc/<pid>/stat) from
the subscribe() calls until every consumer closed; per MB of values delivered.

Goals (the share groups issue): a share group of 1 consumer reads at least 50%
of the classic consumer's records/s; with 1 ms of work per record, 4 consumers
deliver more records/s than 1.

``--profile DIR`` then runs the 1-consumer share row again against a broker under
cProfile (bench/profile_broker.py: CPU time of the event-loop thread) and prints
the CPU per ShareFetch request by stage and the top functions; the .prof file stays
in DIR.

``--consumer`` is the entry point of the consumer processes (internal).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from rich.console import Console
from rich.table import Table

from group_bench import GroupBroker, machine_info  # bench/ is on sys.path: this script's dir
from profile_broker import print_profile

VALUE_SIZE = 100
BATCH_SIZE = 16_384  # Java's default batch.size
CONSUMERS = (1, 4, 10)
WORK = 0.001  # seconds of work per record in the "1 ms" rows
WAIT = 180.0  # generous: the machine is shared
MB = 1_000_000

err = Console(stderr=True)


# ---------------------------------------------------------------- consumer processes


def ranges(offsets: list[int]) -> list[list[int]]:
    """``offsets`` as [first, last] runs, to keep the lines to the parent short."""
    runs: list[list[int]] = []
    for offset in sorted(offsets):
        if runs and runs[-1][1] + 1 == offset:
            runs[-1][1] = offset
        else:
            runs.append([offset, offset])
    return runs


def consumer_main(spec: str) -> None:
    """One consumer: waits for "go", then reports its deliveries as JSON lines until "stop"."""
    options = json.loads(spec)
    out_lock = threading.Lock()

    def emit(**data: Any) -> None:
        with out_lock:
            sys.stdout.write(json.dumps(data) + "\n")
            sys.stdout.flush()

    commands: queue.Queue[str] = queue.Queue()

    def read_commands() -> None:
        for line in sys.stdin:
            commands.put(line.strip())
        commands.put("stop")

    base = {"bootstrap.servers": options["bootstrap"], "group.id": options["group"]}
    share = options["kind"] == "share"
    consumer: Any
    if share:
        consumer = ShareConsumer({**base, "share.acknowledgement.mode": "implicit"})
    else:
        consumer = Consumer({**base, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    work = float(options["work"])
    threading.Thread(target=read_commands, daemon=True).start()
    emit(kind="ready")
    if commands.get() != "go":
        consumer.close()
        return
    consumer.subscribe([options["topic"]])
    while commands.empty():
        messages = consumer.poll(0.1) if share else consumer.consume(1000, 0.1)
        offsets: list[int] = []
        first = 0.0
        for message in messages:
            if message.error() is not None:
                continue
            if not offsets:
                first = time.monotonic()
            if work:
                time.sleep(work)
            offsets.append(message.offset())
        if offsets:
            emit(kind="delivered", first=first, last=time.monotonic(), offsets=ranges(offsets))
    if share:
        # In implicit mode, what the last poll returned is accepted by a commit;
        # close() alone would release it to the group.
        consumer.commit_sync()
    consumer.close()
    emit(kind="closed")


class Process:
    """A consumer process; its lines go to a shared queue as (index, data)."""

    def __init__(
        self, index: int, spec: dict[str, Any], lines: queue.Queue[tuple[int, Any]], log: TextIO
    ) -> None:
        self.index = index
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--consumer", json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            bufsize=1,
        )
        threading.Thread(target=self._read, args=(lines,), daemon=True).start()

    def _read(self, lines: queue.Queue[tuple[int, Any]]) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            lines.put((self.index, json.loads(line)))
        lines.put((self.index, {"kind": "exited"}))

    def send(self, command: str) -> None:
        assert self.process.stdin is not None
        with contextlib.suppress(OSError):
            self.process.stdin.write(command + "\n")
            self.process.stdin.flush()

    def wait(self) -> None:
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# ---------------------------------------------------------------- runs


@dataclass
class Row:
    label: str
    consumers: int
    target: int  # distinct records to deliver before stopping
    records: int = 0  # total records in the topic
    distinct: int = 0
    deliveries: int = 0
    duplicates: int = 0  # records delivered more than once
    first_record: float = 0.0  # go → first delivery
    span: float = 0.0  # first → last delivery
    cpu: float = 0.0
    per_consumer: tuple[int, ...] = ()

    @property
    def per_second(self) -> float:
        return self.distinct / self.span if self.span > 0 else 0.0

    @property
    def missing(self) -> int | None:
        """Records never delivered, when the run was meant to deliver them all."""
        return self.records - self.distinct if self.target >= self.records else None

    @property
    def cpu_per_mb(self) -> float:
        mb = self.deliveries * VALUE_SIZE / MB
        return self.cpu / mb if mb else 0.0


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=WAIT)


def produce(bootstrap: str, topic: str, count: int) -> float:
    """``count`` records of VALUE_SIZE bytes, all acknowledged; returns the seconds taken."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": BATCH_SIZE,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = b"v" * VALUE_SIZE
    began = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(WAIT) != 0:
        raise RuntimeError("records left undelivered by the producer")
    return time.perf_counter() - began


def share_earliest(bootstrap: str, group: str) -> None:
    """``share.auto.offset.reset=earliest`` for ``group`` (IncrementalAlterConfigs, GROUP)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset",
                "earliest",
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=WAIT)


def run(
    broker: GroupBroker,
    topic: str,
    records: int,
    row: Row,
    kind: str,
    work: float,
    log: TextIO,
) -> Row:
    """One row: ``row.consumers`` processes of ``kind`` until ``row.target`` records delivered."""
    group = f"{kind}-{row.consumers}-{int(work * 1e6)}us-{os.getpid()}-{time.monotonic_ns()}"
    if kind == "share":
        share_earliest(broker.bootstrap, group)
    row.records = records
    spec = {
        "kind": kind,
        "bootstrap": broker.bootstrap,
        "group": group,
        "topic": topic,
        "work": work,
    }
    lines: queue.Queue[tuple[int, Any]] = queue.Queue()
    processes = [Process(i, spec, lines, log) for i in range(row.consumers)]
    counts = bytearray(records)  # deliveries per offset (saturating at 255)
    per_consumer = [0] * row.consumers
    ready: set[int] = set()
    closed: set[int] = set()
    first = last = 0.0
    stopped = False
    try:
        deadline = time.monotonic() + WAIT
        while len(ready) < row.consumers:
            index, data = lines.get(timeout=max(deadline - time.monotonic(), 0.1))
            if data["kind"] == "exited":
                raise RuntimeError(f"consumer {index} exited early; see {log.name}")
            ready.add(index)
        cpu_before = broker.cpu_seconds()
        go = time.monotonic()
        for process in processes:
            process.send("go")
        deadline = go + WAIT + row.target * work * 2
        while len(closed) < row.consumers:
            try:
                index, data = lines.get(timeout=1)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{row.label}, {row.consumers} consumers: {row.distinct:,} of "
                        f"{row.target:,} records in {WAIT + row.target * work * 2:.0f} s"
                    ) from None
                continue
            if data["kind"] == "delivered":
                first = min(first, data["first"]) if first else data["first"]
                last = max(last, data["last"])
                for start, end in data["offsets"]:
                    for offset in range(start, end + 1):
                        if counts[offset] == 0:
                            row.distinct += 1
                        elif counts[offset] == 1:
                            row.duplicates += 1
                        counts[offset] = min(counts[offset] + 1, 255)
                        row.deliveries += 1
                        per_consumer[index] += 1
                if not stopped and row.distinct >= row.target:
                    stopped = True
                    row.span = last - first
                    for process in processes:
                        process.send("stop")
            elif data["kind"] in ("closed", "exited"):
                if data["kind"] == "exited" and not stopped:
                    raise RuntimeError(f"consumer {index} exited early; see {log.name}")
                closed.add(index)
        row.cpu = broker.cpu_seconds() - cpu_before
        row.first_record = first - go
    finally:
        for process in processes:
            process.send("stop")
        for process in processes:
            process.wait()
    row.per_consumer = tuple(per_consumer)
    err.print(
        f"[dim]{row.label}, {row.consumers} consumer(s): {row.per_second:,.0f} records/s, "
        f"per consumer {list(row.per_consumer)}, {row.duplicates} duplicates, "
        f"broker CPU {row.cpu:.1f} s[/]"
    )
    return row


def all_rows(
    broker: GroupBroker, topic: str, records: int, work_records: int, log: TextIO
) -> list[Row]:
    # The first share group of a broker creates __share_group_state (50 partitions, their
    # files preallocated): done once on a small topic, so that no row pays for it.
    warm_up = f"{topic}-warm-up"
    create_topic(broker.bootstrap, warm_up)
    produce(broker.bootstrap, warm_up, 1_000)
    run(broker, warm_up, 1_000, Row("warm-up share group", 1, 1_000), "share", 0.0, log)
    rows = [run(broker, topic, records, Row("classic group", 1, records), "classic", 0.0, log)]
    for consumers in CONSUMERS:
        rows.append(
            run(broker, topic, records, Row("share group", consumers, records), "share", 0.0, log)
        )
    target = min(work_records, records)
    for consumers in CONSUMERS:
        row = Row("share group, 1 ms/record", consumers, target)
        rows.append(run(broker, topic, records, row, "share", WORK, log))
    return rows


# ---------------------------------------------------------------- profile


def profile_share(root: Path, out: Path, records: int, log: TextIO) -> None:
    """The 1-consumer share row against a broker under cProfile; prints the ShareFetch costs."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "share-fetch-1-consumer.prof"
    broker = GroupBroker(root, profile=path)
    try:
        broker.start()
        topic = "share-bench-profile"
        create_topic(broker.bootstrap, topic)
        produce(broker.bootstrap, topic, records)
        before, _ = broker.handled("ShareFetch")
        run(broker, topic, records, Row("profiled share group", 1, records), "share", 0.0, log)
        after, _ = broker.handled("ShareFetch")
    finally:
        broker.stop()
    print_profile(path, "ShareFetch", int(after - before), "seglog, share group, 1 consumer")


# ---------------------------------------------------------------- report


def print_report(info: str, rows: list[Row], records: int, produced: float, quick: bool) -> None:
    out = Console(width=200)
    out.print(info)
    out.print(
        f"load average (1, 5, 15 min) at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    table = Table(
        title=f"share groups: 1 partition, {records:,} records of {VALUE_SIZE} B "
        f"(produced in {produced:.1f} s), each consumer a process "
        f"({'quick' if quick else 'full'} run)"
    )
    table.add_column("group")
    table.add_column("consumers", justify="right")
    table.add_column("records", justify="right")
    table.add_column("records/s", justify="right")
    table.add_column("first record", justify="right")
    table.add_column("duplicates", justify="right")
    table.add_column("missing", justify="right")
    table.add_column("broker CPU", justify="right")
    table.add_column("CPU s / MB", justify="right")
    table.add_column("records per consumer", justify="right")
    for row in rows:
        missing = row.missing
        table.add_row(
            row.label,
            str(row.consumers),
            f"{row.distinct:,}",
            f"{row.per_second:,.0f}",
            f"{row.first_record:.2f} s",
            f"{row.duplicates:,}",
            "—" if missing is None else f"{missing:,}",
            f"{row.cpu:.2f} s",
            f"{row.cpu_per_mb:.2f}",
            " ".join(f"{n:,}" for n in row.per_consumer)
            if row.consumers <= 4
            else f"{min(row.per_consumer):,} – {max(row.per_consumer):,}",
        )
    out.print(table)
    out.print(
        "records/s: distinct records from the first delivery to the last; first record: from "
        "the subscribe() calls (the join); broker CPU: user + system of the broker process "
        "from the subscribe() calls until every consumer closed, per MB of values delivered.\n"
        "The 1 ms rows stop once the first "
        f"{rows[-1].target:,} distinct records were delivered (— : no missing count)."
    )
    classic = rows[0]
    share_1 = next(r for r in rows if r.label == "share group" and r.consumers == 1)
    slow = {r.consumers: r for r in rows if r.label.endswith("1 ms/record")}
    ratio = share_1.per_second / classic.per_second if classic.per_second else 0.0
    goals = [
        (
            "share group, 1 consumer ≥ 50% of the classic group's records/s",
            f"{ratio:.0%}",
            ratio >= 0.5,
        ),
        (
            "1 ms per record: 4 consumers deliver more records/s than 1",
            f"{slow[4].per_second:,.0f} vs {slow[1].per_second:,.0f}",
            slow[4].per_second > slow[1].per_second,
        ),
        (
            "every record delivered exactly once (all rows)",
            f"{sum(r.duplicates for r in rows)} duplicates, "
            f"{sum(r.missing or 0 for r in rows)} missing",
            not any(r.duplicates or r.missing for r in rows),
        ),
    ]
    verdicts = Table(title="goals")
    verdicts.add_column("goal")
    verdicts.add_column("measured", justify="right")
    verdicts.add_column("met")
    for goal, measured, met in goals:
        verdicts.add_row(goal, measured, "[green]yes[/]" if met else "[red]no[/]")
    out.print(verdicts)
    sys.stdout.flush()


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--consumer":
        consumer_main(sys.argv[2])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke run (20,000 records)")
    parser.add_argument("--records", type=int, help="records in the topic (200,000)")
    parser.add_argument(
        "--work-records", type=int, default=20_000, help="records per 1 ms/record row (20,000)"
    )
    parser.add_argument("--profile", type=Path, help="also profile ShareFetch; .prof files here")
    parser.add_argument("--dir", type=Path, help="where the temporary directory goes")
    args = parser.parse_args()
    records = args.records or (20_000 if args.quick else 200_000)

    root = Path(tempfile.mkdtemp(prefix=".share-bench-", dir=args.dir))
    began = time.perf_counter()
    broker = GroupBroker(root)
    try:
        info = machine_info(root)
        err.print(info)
        with open(root / "consumers.log", "w") as log:
            broker.start()
            topic = "share-bench"
            create_topic(broker.bootstrap, topic)
            produced = produce(broker.bootstrap, topic, records)
            err.print(f"[dim]{records:,} records produced in {produced:.1f} s[/]")
            rows = all_rows(broker, topic, records, args.work_records, log)
            broker.stop()
            print_report(info, rows, records, produced, args.quick)
            if args.profile:
                profile_share(root, args.profile, records, log)
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
        err.print(f"[dim]done in {time.perf_counter() - began:,.0f} s[/]")


if __name__ == "__main__":
    main()
