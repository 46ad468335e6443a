"""Fetch long polling with many partitions and many consumers waiting on them.

    .venv/bin/python bench/fetch_wait_bench.py            # ~2 min
    .venv/bin/python bench/fetch_wait_bench.py --quick    # smoke run

``python -m seglog serve`` runs as a subprocess on a free port (whichever
seglog the interpreter imports: set PYTHONPATH to compare two trees). The
consumers are Fetch v12 requests on plain sockets (``max_wait_ms=500``,
``min_bytes=1``, batch headers read, records never decoded), all on one
asyncio loop in a child process; the producer is confluent-kafka (acks=1,
linger.ms=5) in this process.

Rows:
  idle waiters  W consumers each long-poll their own partition of a topic no one
                writes (W partitions), while the producer writes N records of 100 B
                to another topic's one partition: records per second and the
                broker's CPU per 1,000 records. Fetches waiting elsewhere should
                not slow the producer.
  spread        P partitions and C consumers, each reading P/C of them from offset
                0; the producer writes N records of 100 B round-robin over the P
                partitions (one produce() per record, the client batches them).
                Timed from the first produce() until every consumer has every
                record of its partitions; the broker's CPU per 1,000 records and
                its Fetch requests per 1,000 records.
  paced         the spread rows with the producer held to ``--rate`` records a second
                (50,000): the broker's CPU and Fetch requests per 1,000 records no
                longer depend on how fast a shared machine lets the producer go.

Each row runs ``--repeat`` times on a fresh broker; the best time is shown with
the CPU of that run. Where the broker has them, the purgatory's checks and
wake-ups (``kafka_server_delayedfetchmetrics_*``) are shown too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.protocol import ApiKey, decode_response, encode_request
from seglog.records import batch

FETCH_VERSION = 12
VALUE = bytes(i * 7 % 251 for i in range(100))
_SIZE = struct.Struct(">i")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Broker:
    """``python -m seglog serve`` on free ports, its data in a temp dir."""

    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.metrics_port = free_port()
        self.data = root / f"data-{self.port}"
        self.log = root / f"broker-{self.port}.log"
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "seglog",
                    "serve",
                    "--override",
                    f"log.dirs={self.data}",
                    "--override",
                    f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                    "--override",
                    f"metrics.port={self.metrics_port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited: {self.log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("broker did not start listening") from None
                time.sleep(0.05)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def counters(self) -> dict[str, float]:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=30) as response:
            text = response.read().decode()
        found: dict[str, float] = {}
        for line in text.splitlines():
            m = re.match(
                r'kafka_network_requestmetrics_errors_total\{error="NONE",request="Fetch"\} (\S+)',
                line,
            )
            if m:
                found["fetches"] = float(m[1])
            m = re.match(r"kafka_server_delayedfetchmetrics_(checks|wakeups)_total\S* (\S+)", line)
            if m:
                found[m[1]] = float(m[2])
        return found

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.data, ignore_errors=True)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)


# ------------------------------------------------------------ consumers


def _fetch_request(topic: str, offsets: dict[int, int], correlation: int) -> bytes:
    body = {
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 8 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": p, "fetch_offset": o, "partition_max_bytes": 1 << 20}
                    for p, o in offsets.items()
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    request = encode_request(ApiKey.FETCH, FETCH_VERSION, correlation, "bench", body)
    return _SIZE.pack(len(request)) + request


async def _consumer(
    port: int, topic: str, partitions: list[int], records: int | None, stop: Event
) -> None:
    """Fetch ``partitions`` until each has given ``records`` (None: until ``stop``)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    offsets = dict.fromkeys(partitions, 0)
    correlation = 0
    try:
        while not stop.is_set():
            if records is not None and all(o >= records for o in offsets.values()):
                return
            correlation += 1
            writer.write(_fetch_request(topic, offsets, correlation))
            (size,) = _SIZE.unpack(await reader.readexactly(4))
            frame = await reader.readexactly(size)
            _, response = decode_response(ApiKey.FETCH, FETCH_VERSION, memoryview(frame))
            for partition in response["responses"][0]["partitions"]:
                if partition["error_code"]:
                    raise RuntimeError(f"Fetch failed with error {partition['error_code']}")
                data = partition["records"]
                position = 0
                while position + batch.HEADER_SIZE <= len(data):
                    header = batch.BatchHeader._make(batch.HEADER.unpack_from(data, position))
                    if position + header.size > len(data):
                        break
                    offsets[partition["partition_index"]] = header.next_offset
                    position += header.size
    finally:
        writer.close()


def consumers_main(
    port: int,
    topic: str,
    groups: list[list[int]],
    records: int | None,
    ready: Event,
    stop: Event,
) -> None:
    """The consumers' process: every group of partitions on a connection of its own."""

    async def run() -> None:
        tasks = [_consumer(port, topic, group, records, stop) for group in groups]
        ready.set()
        await asyncio.gather(*tasks)

    async def run_until_stopped() -> None:
        main = asyncio.ensure_future(run())
        while not main.done():
            if stop.is_set():
                main.cancel()
                break
            await asyncio.sleep(0.05)
        with contextlib.suppress(asyncio.CancelledError):
            await main

    asyncio.run(run_until_stopped())


# ------------------------------------------------------------------ rows


@dataclass
class Run:
    seconds: float
    cpu: float
    records: int
    counters: dict[str, float]

    def per_thousand(self, value: float) -> float:
        return value / self.records * 1000


def produce(
    bootstrap: str, topic: str, count: int, partitions: int, rate: float | None = None
) -> None:
    """``count`` records round-robin over ``partitions``; at most ``rate`` a second if given."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 5,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
        }
    )
    start = time.perf_counter()
    for i in range(count):
        if rate is not None and i % 100 == 0:
            ahead = start + i / rate - time.perf_counter()
            if ahead > 0:
                time.sleep(ahead)
        while True:
            try:
                producer.produce(topic, VALUE, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("records left unsent")


def _split(partitions: int, consumers: int) -> list[list[int]]:
    return [list(range(c, partitions, consumers)) for c in range(consumers)]


def idle_waiters(root: Path, waiters: int, count: int) -> Run:
    broker = Broker(root)
    ctx = multiprocessing.get_context("fork")
    ready, stop = ctx.Event(), ctx.Event()
    try:
        create_topic(broker.bootstrap, "hot", 1)
        process = None
        if waiters:
            create_topic(broker.bootstrap, "cold", waiters)
            process = ctx.Process(
                target=consumers_main,
                args=(broker.port, "cold", _split(waiters, waiters), None, ready, stop),
            )
            process.start()
            ready.wait(60)
            time.sleep(1.0)  # every consumer connected and waiting
        before, cpu = broker.counters(), broker.cpu_seconds()
        start = time.perf_counter()
        produce(broker.bootstrap, "hot", count, 1)
        seconds = time.perf_counter() - start
        cpu = broker.cpu_seconds() - cpu
        after = broker.counters()
        stop.set()
        if process is not None:
            process.join(60)
        return Run(seconds, cpu, count, {k: after[k] - before.get(k, 0) for k in after})
    finally:
        stop.set()
        broker.stop()


def spread(
    root: Path, partitions: int, consumers: int, count: int, rate: float | None = None
) -> Run:
    broker = Broker(root)
    ctx = multiprocessing.get_context("fork")
    ready, stop = ctx.Event(), ctx.Event()
    try:
        create_topic(broker.bootstrap, "spread", partitions)
        per_partition = count // partitions
        process = ctx.Process(
            target=consumers_main,
            args=(
                broker.port,
                "spread",
                _split(partitions, consumers),
                per_partition,
                ready,
                stop,
            ),
        )
        process.start()
        ready.wait(60)
        time.sleep(1.0)
        before, cpu = broker.counters(), broker.cpu_seconds()
        start = time.perf_counter()
        produce(broker.bootstrap, "spread", per_partition * partitions, partitions, rate)
        process.join(600)
        seconds = time.perf_counter() - start
        cpu = broker.cpu_seconds() - cpu
        after = broker.counters()
        if process.exitcode != 0:
            raise RuntimeError(f"the consumers failed (exit code {process.exitcode})")
        return Run(
            seconds,
            cpu,
            per_partition * partitions,
            {k: after[k] - before.get(k, 0) for k in after},
        )
    finally:
        stop.set()
        broker.stop()


def report(label: str, runs: list[Run]) -> None:
    best = min(runs, key=lambda r: r.seconds)
    rate = best.records / best.seconds
    extra = ""
    if "fetches" in best.counters:
        extra += f", {best.per_thousand(best.counters['fetches']):,.1f} fetches/1k rec"
    for name in ("checks", "wakeups"):
        if name in best.counters:
            extra += f", {best.per_thousand(best.counters[name]):,.1f} {name}/1k rec"
    times = ", ".join(f"{r.seconds:.2f}" for r in runs)
    print(
        f"{label:<34} {rate:>10,.0f} rec/s  best {best.seconds:6.2f} s ({times})  "
        f"broker CPU {best.per_thousand(best.cpu) * 1000:,.1f} ms/1k rec{extra}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke run")
    parser.add_argument("--count", type=int, help="records per row (default 500,000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per row (3)")
    parser.add_argument(
        "--rate", type=float, default=50_000, help="records/s of the paced spread rows (50,000)"
    )
    parser.add_argument("--only", help="run only the rows whose label contains this")
    args = parser.parse_args()
    count = args.count or (50_000 if args.quick else 500_000)
    repeat = 1 if args.quick else args.repeat
    root = Path(tempfile.mkdtemp(prefix=".fetch-wait-bench-"))
    import seglog

    print(f"seglog from {Path(seglog.__file__).parent}, {os.cpu_count()} CPUs", flush=True)
    rows: list[tuple[str, Any]] = [
        ("idle waiters: 0 consumers", lambda: idle_waiters(root, 0, count)),
        ("idle waiters: 200 consumers", lambda: idle_waiters(root, 200, count)),
        ("spread: 100 partitions, 1 consumer", lambda: spread(root, 100, 1, count)),
        ("spread: 100 partitions, 20 consumers", lambda: spread(root, 100, 20, count)),
        ("spread: 400 partitions, 100 consumers", lambda: spread(root, 400, 100, count)),
        (
            f"paced {args.rate:,.0f}/s: 100 part., 20 cons.",
            lambda: spread(root, 100, 20, count, args.rate),
        ),
        (
            f"paced {args.rate:,.0f}/s: 400 part., 100 cons.",
            lambda: spread(root, 400, 100, count, args.rate),
        ),
    ]
    if args.only:
        rows = [(label, run) for label, run in rows if args.only in label]
    try:
        for label, run in rows:
            report(label, [run() for _ in range(repeat)])
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
