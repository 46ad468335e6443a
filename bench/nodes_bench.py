"""Scaling over cores: several producers against one node and against ``--nodes`` nodes.

    .venv/bin/python bench/nodes_bench.py            # 1 node vs one node per core
    .venv/bin/python bench/nodes_bench.py --quick    # smoke run
    .venv/bin/python bench/nodes_bench.py --nodes 4  # any node count beside 1

The load: ``--producers`` producer processes (default 4), each a confluent-kafka
(librdkafka) Producer in its own process, sending ``--value-size`` values (default
1 KiB) spread evenly over ``--partitions`` partitions (default 16) of one topic,
acks=1, linger.ms=5, batch.size=1 MiB. All start together; the run is timed from
the start signal to the end of the last producer's flush(). MB/s counts value
bytes. The same load runs against ``python -m seglog serve`` with one node and
with ``--nodes N`` (default: the number of cores), each on a fresh log directory,
in the same run, best of ``--repeat``.

Limit row: the same producers with no broker reachable, timed to the end of
their produce() calls: what the clients can hand over at most on this machine
(they share its cores with the brokers in the measured rows).

The CPU column is user + system time of every broker process (the supervisor
and its nodes) per MB, from /proc.
"""

from __future__ import annotations

import argparse
import multiprocessing
import multiprocessing.synchronize
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

TOPIC = "scale"


def free_ports(count: int) -> int:
    """A base port such that ``count`` consecutive ports from it are free."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = int(probe.getsockname()[1])
        if base + count > 65535:
            continue
        sockets = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise RuntimeError(f"no {count} consecutive free ports")


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def process_tree_cpu(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and all its descendants still running."""
    total = 0.0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            pending.extend(int(child) for child in children)
    return total


class Cluster:
    """``python -m seglog serve`` with ``nodes`` nodes on consecutive ports, fresh data."""

    def __init__(self, root: Path, nodes: int) -> None:
        self.nodes = nodes
        self.port = free_ports(nodes)
        self.data = root / f"data-{nodes}-{self.port}"
        self.log = root / f"serve-{nodes}-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.port + i}" for i in range(self.nodes))

    def start(self) -> None:
        command = [sys.executable, "-m", "seglog", "serve"]
        if self.nodes > 1:
            command += ["--nodes", str(self.nodes)]
        command += [
            "--override",
            f"log.dirs={self.data}",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
        ]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not all(listening(self.port + i) for i in range(self.nodes)):
            if self.process.poll() is not None:
                raise RuntimeError(f"serve exited: {self.log.read_text(errors='replace')[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("the nodes did not start listening")
            time.sleep(0.1)

    def create_topic(self, partitions: int) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for future in admin.create_topics([NewTopic(TOPIC, partitions, 1)]).values():
            future.result(30)
        deadline = time.monotonic() + 30
        while True:
            topic = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
            leaders = [p.leader for p in topic.partitions.values()]
            if len(leaders) == partitions and min(leaders) >= 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"partitions without a leader: {leaders}")
            time.sleep(0.1)

    def cpu_seconds(self) -> float:
        assert self.process is not None
        return process_tree_cpu(self.process.pid)

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
        shutil.rmtree(self.data, ignore_errors=True)


def producer_worker(
    bootstrap: str,
    partitions: int,
    value_size: int,
    count: int,
    offset: int,
    ready: multiprocessing.synchronize.Barrier,
    start: multiprocessing.synchronize.Event,
    ends: multiprocessing.Queue[tuple[float, int]],
    deliver: bool,
) -> None:
    """One producer process: ``count`` values, partitions in turn; reports its end time."""
    config = {
        "bootstrap.servers": bootstrap,
        "acks": "1",
        "linger.ms": 5,
        "batch.size": 1 << 20,
        "queue.buffering.max.kbytes": 2_097_151,
        "queue.buffering.max.messages": 10_000_000,
        "message.timeout.ms": 120_000,
    }
    if not deliver:
        config["log_level"] = 0  # no broker on purpose: no connection errors on stderr
    failed = 0

    def on_delivery(error: object, _message: object) -> None:
        nonlocal failed
        if error is not None:
            failed += 1

    producer = Producer(config)
    if deliver:
        producer.list_topics(TOPIC, timeout=30)  # connections and metadata before the clock
    value = os.urandom(value_size)
    produce = producer.produce
    poll = producer.poll
    ready.wait()
    start.wait()
    for n in range(count):
        while True:
            try:
                produce(TOPIC, value, partition=(offset + n) % partitions, on_delivery=on_delivery)
                break
            except BufferError:
                poll(0.001)
        if n & 0x3FFF == 0:
            poll(0)
    if deliver:
        producer.flush(300)
    end = time.time()
    ends.put((end, failed))
    if not deliver:
        producer.purge()
        producer.flush(0)


@dataclass
class Result:
    seconds: float
    megabytes: float
    cpu: float
    failed: int

    @property
    def rate(self) -> float:
        return self.megabytes / self.seconds


def run_load(
    bootstrap: str,
    producers: int,
    partitions: int,
    value_size: int,
    records: int,
    *,
    deliver: bool = True,
) -> tuple[float, int]:
    """Run the producers together; seconds from the start signal to the last end."""
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(producers + 1)
    start = context.Event()
    ends: multiprocessing.Queue[tuple[float, int]] = context.Queue()
    share = records // producers
    workers = [
        context.Process(
            target=producer_worker,
            args=(bootstrap, partitions, value_size, share, i, ready, start, ends, deliver),
        )
        for i in range(producers)
    ]
    for worker in workers:
        worker.start()
    ready.wait(timeout=120)
    began = time.time()
    start.set()
    results = [ends.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    return max(end for end, _ in results) - began, sum(failed for _, failed in results)


def measure(root: Path, nodes: int, args: argparse.Namespace) -> Result:
    best: Result | None = None
    megabytes = args.records // args.producers * args.producers * args.value_size / 1e6
    for _ in range(args.repeat):
        cluster = Cluster(root, nodes)
        try:
            cluster.start()
            cluster.create_topic(args.partitions)
            cpu_before = cluster.cpu_seconds()
            seconds, failed = run_load(
                cluster.bootstrap, args.producers, args.partitions, args.value_size, args.records
            )
            cpu = cluster.cpu_seconds() - cpu_before
        finally:
            cluster.stop()
        result = Result(seconds, megabytes, cpu, failed)
        if best is None or result.rate > best.rate:
            best = result
    assert best is not None
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--nodes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    if args.quick:
        args.records, args.repeat = 100_000, 1
    console = Console()
    console.print(
        f"[bold]seglog nodes benchmark[/] {platform.node()} · {os.cpu_count()} cores · "
        f"Python {platform.python_version()} · {args.producers} producers · "
        f"{args.partitions} partitions · {args.value_size} B values · {args.records:,} records"
    )
    root = Path(tempfile.mkdtemp(prefix="seglog-nodes-bench-"))
    try:
        limit_seconds, _ = run_load(
            "127.0.0.1:1",
            args.producers,
            args.partitions,
            args.value_size,
            args.records,
            deliver=False,
        )
        one = measure(root, 1, args)
        many = measure(root, args.nodes, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    megabytes = one.megabytes
    table = Table(title="produce, acks=1 (MB/s of values; best of --repeat)")
    for column in ("load", "MB/s", "records/s", "CPU ms/MB", "vs 1 node", "vs limit"):
        table.add_column(column, justify="right" if column != "load" else "left")
    limit_rate = megabytes / limit_seconds

    def row(name: str, result: Result) -> None:
        table.add_row(
            name,
            f"{result.rate:,.1f}",
            f"{args.records / result.seconds:,.0f}",
            f"{result.cpu * 1000 / result.megabytes:,.2f}",
            f"{result.rate / one.rate:.2f}x",
            f"{result.rate / limit_rate:.0%}",
        )
        if result.failed:
            console.print(f"[red]{name}: {result.failed} deliveries failed[/]")

    row("1 node", one)
    row(f"{args.nodes} nodes", many)
    table.add_row(
        "limit: produce() alone, no broker",
        f"{limit_rate:,.1f}",
        f"{args.records / limit_seconds:,.0f}",
        "",
        "",
        "100%",
    )
    console.print(table)
    ratio = many.rate / one.rate
    goal = 1.6 if args.nodes >= 2 else 1.0
    verdict = "met" if ratio >= goal else "missed"
    console.print(f"{args.nodes} nodes / 1 node = {ratio:.2f}x (goal >= {goal}x: {verdict})")


if __name__ == "__main__":
    main()
