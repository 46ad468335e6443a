"""What an open console costs the broker, and how fast a 1,000-topic topics page draws.

    .venv/bin/python bench/console_bench.py            # ~1 minute
    .venv/bin/python bench/console_bench.py --quick    # smoke run

One broker (``python -m seglog serve`` as a subprocess) serving its console
on a free port, and Debian's Chromium driven headless by Playwright (nothing
downloaded). Rows:

  produce     N values of 1 KiB to one partition, acks=1, linger.ms=5,
              batch.size=1 MiB, from confluent-kafka; MB/s of value bytes.
  consume     the same values read back with assign() from offset 0.
  Each twice in one run, after an unmeasured warm-up: with no console page
  open, then with three open (Overview polling every 5 s, a group's page
  polling every 2 s, a topic's page), their polling running in Chromium
  while the clients work.

  topics page the 1,000-topic topics page: from navigation to its table in the
              page (the page's own measure, data-render-ms, and the wall time
              seen here, median of R loads).
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

VALUE = bytes(i * 7 % 251 for i in range(1024))
TOPICS = "div[data-page=topics]"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_broker(root: Path) -> tuple[subprocess.Popen[bytes], int, int]:
    port, console = free_port(), free_port()
    overrides = {
        "log.dirs": str(root / "data"),
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "console.port": str(console),
    }
    args = [sys.executable, "-m", "seglog", "serve"]
    for key, value in overrides.items():
        args += ["--override", f"{key}={value}"]
    log = open(root / "broker.log", "wb")  # noqa: SIM115 (kept open for the process)
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", console), timeout=0.2):
                return process, port, console
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"the broker did not start: {(root / 'broker.log').read_text()}")


def produce(bootstrap: str, topic: str, count: int) -> float:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, "batch.size": 1 << 20,
         "queue.buffering.max.kbytes": 1 << 20, "enable.idempotence": False}
    )  # fmt: skip
    producer.produce(topic, VALUE, partition=0)
    producer.flush(30)
    start = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, VALUE, partition=0)
                break
            except BufferError:
                producer.poll(0.001)
    if producer.flush(300):
        raise RuntimeError("messages not delivered")
    return count * len(VALUE) / (time.perf_counter() - start) / 1e6


def consume(bootstrap: str, topic: str, count: int) -> float:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
         "queued.max.messages.kbytes": 256 * 1024, "fetch.queue.backoff.ms": 10}
    )  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 1)])
    got, first, start = 0, 0, 0.0
    try:
        while got < count:
            batch = consumer.consume(10_000, 10)
            if not batch:
                raise RuntimeError(f"consumed {got} of {count}")
            if not start:
                # Timed from the first batch: connecting and the first fetch are not throughput.
                start, first = time.perf_counter(), len(batch)
            got += len(batch)
    finally:
        consumer.close()
    return (got - first) * len(VALUE) / (time.perf_counter() - start) / 1e6


def committed_group(bootstrap: str, topic: str, group: str) -> None:
    """A group with a committed offset, so that its page has lag to poll."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke run")
    args = parser.parse_args()
    count = 20_000 if args.quick else 200_000
    loads = 2 if args.quick else 5
    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("Debian's chromium is not installed (make install installs it)")
    from playwright.sync_api import sync_playwright

    rows: list[tuple[str, float, float]] = []
    renders: list[tuple[int, float]] = []
    with tempfile.TemporaryDirectory(prefix="seglog-console-bench-") as directory:
        process, port, console = start_broker(Path(directory))
        bootstrap = f"127.0.0.1:{port}"
        url = f"http://127.0.0.1:{console}/"
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            names = ["warm-up", "closed", "open"]
            for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
                future.result(30)
            # Not measured: the first run of each path is slower (imports, page cache).
            produce(bootstrap, "warm-up", count // 4)
            consume(bootstrap, "warm-up", count // 4)
            rows.append(("no page", produce(bootstrap, "closed", count),
                         consume(bootstrap, "closed", count)))  # fmt: skip
            committed_group(bootstrap, "open", "watched")
            with sync_playwright() as driver:
                browser = driver.chromium.launch(
                    executable_path=chromium, headless=True, args=["--no-sandbox"]
                )
                pages: list[Any] = []
                for route in ("#/", "#/groups/watched", "#/topics/open"):
                    page = browser.new_page()
                    page.goto(url + route)
                    pages.append(page)
                rows.append(("3 pages open", produce(bootstrap, "open", count),
                             consume(bootstrap, "open", count)))  # fmt: skip
                for page in pages:
                    page.close()

                many = [f"bench-{i:04d}" for i in range(1000)]
                for start in range(0, len(many), 250):
                    batch = [NewTopic(n, 1, 1) for n in many[start : start + 250]]
                    for future in admin.create_topics(batch).values():
                        future.result(120)
                page = browser.new_page()
                for _ in range(loads):
                    page.goto("about:blank")
                    began = time.perf_counter()
                    page.goto(url + "#/topics")
                    page.wait_for_selector(
                        "[data-page=topics][data-rendered=true]", timeout=120_000
                    )
                    wall = (time.perf_counter() - began) * 1000
                    rows_shown = page.locator("[data-testid=topics] tbody tr").count()
                    if rows_shown < 1000:
                        raise RuntimeError(f"the topics page shows {rows_shown} topics")
                    own = int(page.locator(TOPICS).get_attribute("data-render-ms"))
                    renders.append((own, wall))
                browser.close()
        finally:
            process.terminate()
            process.wait(30)
    print(f"{count:,} values of 1 KiB, acks=1")
    print(f"{'console':<14} {'produce MB/s':>13} {'consume MB/s':>13}")
    for label, produced, consumed in rows:
        print(f"{label:<14} {produced:>13.1f} {consumed:>13.1f}")
    (_, p0, c0), (_, p1, c1) = rows
    print(f"with the console open / without: produce {p1 / p0:.0%}, consume {c1 / c0:.0%}")
    own_ms = statistics.median(r[0] for r in renders)
    wall_ms = statistics.median(r[1] for r in renders)
    print(f"topics page, 1,003 topics: {own_ms:.0f} ms in the page, {wall_ms:.0f} ms "
          f"navigation to table (median of {loads})")  # fmt: skip


if __name__ == "__main__":
    main()
