"""Soak: producers, a rebalancing consumer group and faults against one broker, then a check.

    .venv/bin/python bench/soak.py                  # 120 s of load and faults
    .venv/bin/python bench/soak.py --seconds 30     # a shorter run

Not a test: it runs for a fixed time and prints a table. What runs at once:

  producers   --producers threads, each an idempotent confluent-kafka producer
              (acks=all) writing values ``<topic>|<producer>|<n>`` to the topic
              ``soak`` (--partitions partitions); a value counts as acknowledged
              when its delivery callback reports no error.
  group       --consumers members of the group ``soak-group`` reading ``soak``,
              committing synchronously after each poll and on revocation; every
              --rebalance-every seconds one member leaves and a new one joins.
  faults      every --kill-every seconds the broker is killed with SIGKILL and
              started again on the same data and port; meanwhile a churn thread
              creates a topic, fills it, starts a slow Fetch-reading consumer on
              it and deletes it, over and over; the topic ``soak-retained`` has
              tiny segments and ``retention.bytes`` so retention deletes
              segments under its readers all the time.

Then the producers stop, the group drains ``soak`` to its end, and a fresh
consumer reads ``soak`` whole. The checker reports:

  lost         acknowledged values the group never read (must be 0)
  in log twice acknowledged values stored more than once (must be 0: the
               producers are idempotent)
  foreign      values read from a topic other than the one written in the
               value (must be 0: no record of one topic ever appears in another)
  redelivered  values the group read more than once: a consumer without
               transactions reads at least once; each is a record whose
               commit was cut off by a broker kill or a rebalance
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from broker_bench import SeglogBroker  # bench/ is on sys.path: this script's dir

TOPIC = "soak"
RETAINED = "soak-retained"
GROUP = "soak-group"
# librdkafka logs every refused connection while the broker restarts: expected here.
QUIET = {"log_level": 2}


class Tally:
    """What every thread saw, behind one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: set[str] = set()
        self.produce_errors = 0
        self.group_reads: collections.Counter[str] = collections.Counter()
        self.foreign: list[tuple[str, str]] = []
        self.other_reads = 0
        self.kills = 0
        self.deleted_topics = 0
        self.rebalances = 0

    def check_topic(self, message: Message) -> str | None:
        """The value of ``message``, or None after recording it as foreign."""
        raw = message.value()
        value = raw.decode(errors="replace") if raw is not None else ""
        if value.split("|", 1)[0] != message.topic():
            with self.lock:
                self.foreign.append((message.topic() or "", value[:60]))
            return None
        return value


def produce_loop(bootstrap: str, index: int, stop: threading.Event, tally: Tally) -> None:
    producer = Producer(
        {
            **QUIET,
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 120_000,
        }
    )

    def delivered(err: KafkaError | None, message: Message) -> None:
        with tally.lock:
            if err is None:
                tally.acked.add(message.value().decode())
            else:
                tally.produce_errors += 1

    for n in itertools.count():
        if stop.is_set():
            break
        for topic in (TOPIC, RETAINED):
            value = f"{topic}|p{index}|{n}".encode()
            while True:
                try:
                    producer.produce(topic, value, key=str(n % 97).encode(), on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
        if n % 50 == 0:
            time.sleep(0.005)
    producer.flush(180)


class Member:
    """One group member on its own thread; ``leave()`` closes it cleanly."""

    def __init__(self, bootstrap: str, tally: Tally) -> None:
        self.bootstrap = bootstrap
        self.tally = tally
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        consumer = Consumer(
            {
                **QUIET,
                "bootstrap.servers": self.bootstrap,
                "group.id": GROUP,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 500,
            }
        )

        def revoked(c: Consumer, partitions: list[TopicPartition]) -> None:
            with contextlib.suppress(Exception):
                c.commit(asynchronous=False)

        consumer.subscribe([TOPIC], on_revoke=revoked)
        try:
            while not self.stop.is_set():
                messages = consumer.consume(500, timeout=0.2)
                seen = [m for m in messages if m.error() is None]
                for message in seen:
                    value = self.tally.check_topic(message)
                    if value is not None:
                        with self.tally.lock:
                            self.tally.group_reads[value] += 1
                if seen:
                    with contextlib.suppress(Exception):
                        consumer.commit(asynchronous=False)
        finally:
            consumer.close()

    def leave(self) -> None:
        self.stop.set()
        self.thread.join(60)


def churn_loop(bootstrap: str, stop: threading.Event, tally: Tally) -> None:
    """Create a topic, fill it, read it slowly, delete it under the reader; again."""
    admin = AdminClient({**QUIET, "bootstrap.servers": bootstrap})
    for round_no in itertools.count():
        if stop.is_set():
            return
        name = f"churn-{round_no}"
        with contextlib.suppress(Exception):
            admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
            producer = Producer({**QUIET, "bootstrap.servers": bootstrap, "linger.ms": 5})
            for n in range(20_000):
                producer.produce(name, f"{name}|c|{n}".encode() + b"x" * 200)
                if n % 1000 == 0:
                    producer.poll(0)
            producer.flush(60)
            reader = Consumer(
                {
                    **QUIET,
                    "bootstrap.servers": bootstrap,
                    "group.id": f"reader-{name}",
                    "auto.offset.reset": "earliest",
                    "fetch.max.bytes": 8 << 20,
                    "max.partition.fetch.bytes": 8 << 20,
                    "socket.receive.buffer.bytes": 4096,
                }
            )
            reader.assign([TopicPartition(name, 0, 0)])
            deleted = False
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not stop.is_set():
                message = reader.poll(0.05)
                if message is not None and message.error() is None:
                    tally.check_topic(message)
                    with tally.lock:
                        tally.other_reads += 1
                if not deleted and time.monotonic() > deadline - 9:
                    admin.delete_topics([name])[name].result(30)
                    deleted = True
                    with tally.lock:
                        tally.deleted_topics += 1
            reader.close()


def retained_reader(bootstrap: str, stop: threading.Event, tally: Tally) -> None:
    consumer = Consumer(
        {
            **QUIET,
            "bootstrap.servers": bootstrap,
            "group.id": "soak-retained-reader",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([RETAINED])
    while not stop.is_set():
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            tally.check_topic(message)
            with tally.lock:
                tally.other_reads += 1
    consumer.close()


def read_whole(bootstrap: str, partitions: int, tally: Tally) -> collections.Counter[str]:
    """Every value of ``soak`` as stored, read by a fresh consumer from offset 0 to the end."""
    consumer = Consumer(
        {
            **QUIET,
            "bootstrap.servers": bootstrap,
            "group.id": "soak-checker",
            "enable.auto.commit": False,
        }
    )
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1]
        for p in range(partitions)
    }
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
    stored: collections.Counter[str] = collections.Counter()
    remaining = {p for p, end in ends.items() if end > 0}
    deadline = time.monotonic() + 120
    while remaining and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None or message.error() is not None:
            continue
        value = tally.check_topic(message)
        if value is not None:
            stored[value] += 1
        if message.offset() + 1 >= ends[message.partition()]:
            remaining.discard(message.partition())
    consumer.close()
    return stored


def group_caught_up(bootstrap: str, partitions: int) -> bool:
    consumer = Consumer({**QUIET, "bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        committed = consumer.committed(
            [TopicPartition(TOPIC, p) for p in range(partitions)], timeout=30
        )
        for tp in committed:
            end = consumer.get_watermark_offsets(TopicPartition(TOPIC, tp.partition), timeout=30)[1]
            if tp.offset < end:
                return False
        return True
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--producers", type=int, default=3)
    parser.add_argument("--consumers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--kill-every", type=float, default=25)
    parser.add_argument("--rebalance-every", type=float, default=15)
    args = parser.parse_args(argv)
    console = Console()

    root = Path(tempfile.mkdtemp(prefix="seglog-soak-"))
    broker = SeglogBroker(root)
    broker.keep_data = True
    broker.start()
    bootstrap = broker.bootstrap
    admin = AdminClient({**QUIET, "bootstrap.servers": bootstrap})
    created = admin.create_topics(
        [
            NewTopic(TOPIC, args.partitions, 1),
            NewTopic(
                RETAINED,
                2,
                1,
                config={
                    "segment.bytes": str(1 << 20),
                    "retention.bytes": str(2 << 20),
                    "file.delete.delay.ms": "1000",
                },
            ),
        ]
    )
    for future in created.values():
        future.result(30)

    tally = Tally()
    stop = threading.Event()
    workers = [
        threading.Thread(target=produce_loop, args=(bootstrap, i, stop, tally), daemon=True)
        for i in range(args.producers)
    ]
    workers.append(threading.Thread(target=churn_loop, args=(bootstrap, stop, tally), daemon=True))
    workers.append(
        threading.Thread(target=retained_reader, args=(bootstrap, stop, tally), daemon=True)
    )
    for worker in workers:
        worker.start()
    members = [Member(bootstrap, tally) for _ in range(args.consumers)]

    started = time.monotonic()
    next_kill = started + args.kill_every
    next_rebalance = started + args.rebalance_every
    with console.status("soaking") as status:
        while (now := time.monotonic()) - started < args.seconds:
            if now >= next_kill:
                assert broker.process is not None
                broker.process.kill()
                broker.process.wait()
                broker.process = None
                broker.start()
                tally.kills += 1
                next_kill = now + args.kill_every
            if now >= next_rebalance:
                members.pop(0).leave()
                members.append(Member(bootstrap, tally))
                tally.rebalances += 1
                next_rebalance = now + args.rebalance_every
            status.update(
                f"soaking: {now - started:.0f}/{args.seconds:.0f} s, "
                f"{len(tally.acked):,} acknowledged, {tally.kills} kills"
            )
            time.sleep(0.2)
        stop.set()
        status.update("draining: producers flush, the group reads to the end")
        for worker in workers:
            worker.join(240)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not group_caught_up(bootstrap, args.partitions):
            time.sleep(1)
        for member in members:
            member.leave()
        status.update("checking: reading the topic whole")
        stored = read_whole(bootstrap, args.partitions, tally)
    broker.keep_data = False
    broker.stop()

    acked = {v for v in tally.acked if v.startswith(f"{TOPIC}|")}
    lost = acked - set(tally.group_reads)
    twice_in_log = sum(1 for v in acked if stored[v] > 1)
    missing_in_log = sum(1 for v in acked if stored[v] == 0)
    redelivered = sum(count - 1 for count in tally.group_reads.values() if count > 1)

    table = Table(title=f"soak: {args.seconds:.0f} s, {args.partitions} partitions")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_column("expected", justify="right")
    rows: list[tuple[str, Any, str]] = [
        ("broker kills (SIGKILL + restart)", tally.kills, ""),
        ("topics deleted under a reader", tally.deleted_topics, ""),
        ("group rebalances (leave + join)", tally.rebalances, ""),
        ("values acknowledged (soak)", len(acked), ""),
        ("produce errors reported", tally.produce_errors, ""),
        ("values read by the group", len(tally.group_reads), ""),
        ("reads of other topics checked", tally.other_reads, ""),
        ("lost (acknowledged, never read)", len(lost), "0"),
        ("acknowledged, missing from the log", missing_in_log, "0"),
        ("acknowledged, in the log twice", twice_in_log, "0"),
        ("foreign (another topic's record)", len(tally.foreign), "0"),
        ("redelivered to the group", redelivered, "at least once"),
    ]
    for name, value, expected in rows:
        table.add_row(name, f"{value:,}" if isinstance(value, int) else str(value), expected)
    console.print(table)
    ok = not lost and not missing_in_log and not twice_in_log and not tally.foreign
    console.print("[green]passed[/green]" if ok else "[red]FAILED[/red]")
    if tally.foreign:
        console.print(f"first foreign records: {tally.foreign[:5]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
