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

The broker CPU column is user + system time of every broker process (the
supervisor and its nodes) per MB, from /proc; "cores busy" adds the producers'
own CPU time and divides by the wall time: at the machine's core count, the
machine, not the broker, is the limit.

A second pair of rows runs raw producers: the same processes, each sending
prebuilt 1 MiB record batches of its share of the partitions in Produce v9
requests straight to their leaders (four in flight per connection, acks=1),
with no per-record work in the client: what the brokers take when the client
is almost free.
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
import struct
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

from seglog.protocol import ApiKey, decode_response, encode_request
from seglog.records.builder import SimpleRecord, build_batch

TOPIC = "scale"
_SIZE = struct.Struct(">i")


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

    def leaders(self) -> dict[int, int]:
        """Partition → the port of its leader."""
        metadata = AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(TOPIC, timeout=10)
        ports = {node: broker.port for node, broker in metadata.brokers.items()}
        return {p: ports[info.leader] for p, info in metadata.topics[TOPIC].partitions.items()}

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
    ends: multiprocessing.Queue[tuple[float, int, float]],
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
    cpu_start = time.process_time()
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
    ends.put((end, failed, time.process_time() - cpu_start))
    if not deliver:
        producer.purge()
        producer.flush(0)


def raw_producer_worker(
    leaders: dict[int, int],
    partitions: list[int],
    value_size: int,
    count: int,
    ready: multiprocessing.synchronize.Barrier,
    start: multiprocessing.synchronize.Event,
    ends: multiprocessing.Queue[tuple[float, int, float]],
) -> None:
    """A producer with no client library: prebuilt 1 MiB batches in Produce v9 requests.

    One connection per leader of its partitions, up to 4 requests in flight on
    each, acks=1; the broker validates and appends each batch as librdkafka's.
    What the broker can take when the client's per-record work is not the limit.
    """
    per_batch = max(1, (1 << 20) // (value_size + 16))
    value = os.urandom(value_size)
    records = build_batch(
        [SimpleRecord(value, timestamp=int(time.time() * 1000)) for _ in range(per_batch)]
    )
    requests: dict[int, bytes] = {}
    for partition in partitions:
        body = {
            "transactional_id": None,
            "acks": 1,
            "timeout_ms": 30_000,
            "topic_data": [
                {"name": TOPIC, "partition_data": [{"index": partition, "records": records}]}
            ],
        }
        request = encode_request(ApiKey.PRODUCE, 9, partition, "bench", body)
        requests[partition] = _SIZE.pack(len(request)) + request
    sockets = {
        port: socket.create_connection(("127.0.0.1", port), timeout=60)
        for port in {leaders[p] for p in partitions}
    }
    in_flight = dict.fromkeys(sockets, 0)
    failed = 0

    def answer(sock: socket.socket) -> None:
        nonlocal failed
        (size,) = _SIZE.unpack(_exactly(sock, 4))
        _, response = decode_response(ApiKey.PRODUCE, 9, memoryview(_exactly(sock, size)))
        for topic in response["responses"]:
            for partition in topic["partition_responses"]:
                if partition["error_code"]:
                    failed += per_batch

    ready.wait()
    start.wait()
    cpu_start = time.process_time()
    for n in range(max(1, count // per_batch)):
        partition = partitions[n % len(partitions)]
        port = leaders[partition]
        sock = sockets[port]
        if in_flight[port] >= 4:
            answer(sock)
            in_flight[port] -= 1
        sock.sendall(requests[partition])
        in_flight[port] += 1
    for port, sock in sockets.items():
        for _ in range(in_flight[port]):
            answer(sock)
        sock.close()
    ends.put((time.time(), failed, time.process_time() - cpu_start))


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return bytes(data)


@dataclass
class Result:
    seconds: float
    megabytes: float
    cpu: float
    failed: int
    client_cpu: float = 0.0

    @property
    def cores_busy(self) -> float:
        """Cores kept busy by the brokers and the producers together."""
        return (self.cpu + self.client_cpu) / self.seconds

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
    leaders: dict[int, int] | None = None,
) -> tuple[float, int, float]:
    """Run the producers together: seconds from the start signal to the last end,
    failed deliveries, and the producers' CPU seconds.

    With ``leaders`` (partition → port) the producers are raw ones, each on
    its own share of the partitions.
    """
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(producers + 1)
    start = context.Event()
    ends: multiprocessing.Queue[tuple[float, int, float]] = context.Queue()
    share = records // producers
    workers = [
        context.Process(
            target=producer_worker,
            args=(bootstrap, partitions, value_size, share, i, ready, start, ends, deliver),
        )
        if leaders is None
        else context.Process(
            target=raw_producer_worker,
            args=(
                leaders,
                list(range(i, partitions, producers)),
                value_size,
                share,
                ready,
                start,
                ends,
            ),
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
    return (
        max(end for end, _, _ in results) - began,
        sum(failed for _, failed, _ in results),
        sum(cpu for _, _, cpu in results),
    )


def measure(root: Path, nodes: int, args: argparse.Namespace, *, raw: bool = False) -> Result:
    best: Result | None = None
    share = args.records // args.producers
    if raw:
        per_batch = max(1, (1 << 20) // (args.value_size + 16))
        share = max(1, share // per_batch) * per_batch
    megabytes = share * args.producers * args.value_size / 1e6
    for _ in range(args.repeat):
        cluster = Cluster(root, nodes)
        try:
            cluster.start()
            cluster.create_topic(args.partitions)
            leaders = cluster.leaders() if raw else None
            cpu_before = cluster.cpu_seconds()
            seconds, failed, client_cpu = run_load(
                cluster.bootstrap,
                args.producers,
                args.partitions,
                args.value_size,
                args.records,
                leaders=leaders,
            )
            cpu = cluster.cpu_seconds() - cpu_before
        finally:
            cluster.stop()
        result = Result(seconds, megabytes, cpu, failed, client_cpu)
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
    console = Console(width=120)
    console.print(
        f"[bold]seglog nodes benchmark[/] {platform.node()} · {os.cpu_count()} cores · "
        f"Python {platform.python_version()} · {args.producers} producers · "
        f"{args.partitions} partitions · {args.value_size} B values · {args.records:,} records"
    )
    root = Path(tempfile.mkdtemp(prefix="seglog-nodes-bench-"))
    try:
        limit_seconds, _, _ = run_load(
            "127.0.0.1:1",
            args.producers,
            args.partitions,
            args.value_size,
            args.records,
            deliver=False,
        )
        one = measure(root, 1, args)
        many = measure(root, args.nodes, args)
        raw_one = measure(root, 1, args, raw=True)
        raw_many = measure(root, args.nodes, args, raw=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    megabytes = one.megabytes
    table = Table(title="produce, acks=1 (MB/s of values; best of --repeat)")
    columns = (
        "load",
        "MB/s",
        "records/s",
        "broker CPU ms/MB",
        "cores busy",
        "vs 1 node",
        "vs limit",
    )
    for column in columns:
        table.add_column(column, justify="right" if column != "load" else "left")
    limit_rate = megabytes / limit_seconds

    def row(name: str, result: Result, base: Result, *, limit: bool = True) -> None:
        table.add_row(
            name,
            f"{result.rate:,.1f}",
            f"{result.megabytes * 1e6 / args.value_size / result.seconds:,.0f}",
            f"{result.cpu * 1000 / result.megabytes:,.2f}",
            f"{result.cores_busy:.2f} of {os.cpu_count()}",
            f"{result.rate / base.rate:.2f}x",
            f"{result.rate / limit_rate:.0%}" if limit else "",
        )
        if result.failed:
            console.print(f"[red]{name}: {result.failed} deliveries failed[/]")

    row("librdkafka, 1 node", one, one)
    row(f"librdkafka, {args.nodes} nodes", many, one)
    table.add_row(
        "librdkafka produce() alone",
        f"{limit_rate:,.1f}",
        f"{args.records / limit_seconds:,.0f}",
        "",
        "",
        "",
        "100%",
    )
    row("raw, 1 node", raw_one, raw_one, limit=False)
    row(f"raw, {args.nodes} nodes", raw_many, raw_one, limit=False)
    console.print(table)
    goal = 1.6 if args.nodes >= 2 else 1.0
    for name, ratio in (
        ("librdkafka producers", many.rate / one.rate),
        ("raw producers", raw_many.rate / raw_one.rate),
    ):
        verdict = "met" if ratio >= goal else "missed"
        console.print(
            f"{name}: {args.nodes} nodes / 1 node = {ratio:.2f}x (goal >= {goal}x: {verdict})"
        )


if __name__ == "__main__":
    main()
