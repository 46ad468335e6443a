"""Consumer groups with confluent-kafka (librdkafka): three members over six partitions, one
leaves cleanly, one is killed; together they read every message exactly once."""

from __future__ import annotations

import contextlib
import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.conftest import BrokerProcess

ROOT = Path(__file__).parent.parent.parent
PARTITIONS = 6
# Small timeouts: the broker's minimum session timeout is Kafka's 6000 ms.
MEMBER_CONFIG = {
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
}


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)])
    futures[topic].result(timeout=20)


def produce(bootstrap: str, topic: str, values: list[str], partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % partitions)
    assert producer.flush(20) == 0


def child(bootstrap: str, topic: str, group: str) -> None:
    """A member in its own process: prints its assignments and each committed message."""

    def on_assign(consumer: Any, partitions: list[TopicPartition]) -> None:
        print(json.dumps({"assigned": sorted(p.partition for p in partitions)}), flush=True)

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **MEMBER_CONFIG})
    consumer.subscribe([topic], on_assign=on_assign)
    while True:
        message = consumer.poll(0.2)
        if message is None or message.error() is not None:
            continue
        consumer.commit(message=message, asynchronous=False)
        print(json.dumps({"read": message.value().decode()}), flush=True)


class Member:
    """An in-process member that records what it read and committed."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.read: list[str] = []
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, **MEMBER_CONFIG}
        )
        self.consumer.subscribe([topic])

    def poll(self) -> None:
        message = self.consumer.poll(0.05)
        if message is None or message.error() is not None:
            return
        self.consumer.commit(message=message, asynchronous=False)
        self.read.append(message.value().decode())

    def assigned(self) -> list[int]:
        return sorted(p.partition for p in self.consumer.assignment())


class ChildMember:
    """A member in a subprocess, so that it can be killed without leaving the group."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        code = f"from {__name__} import child; child({bootstrap!r}, {topic!r}, {group!r})"
        self.process = subprocess.Popen(
            [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        self.read: list[str] = []
        self._assigned: list[int] = []
        self._lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(json.loads(line))

    def poll(self) -> None:
        while True:
            try:
                event = self._lines.get_nowait()
            except queue.Empty:
                return
            if "read" in event:
                self.read.append(event["read"])
            else:
                self._assigned = event["assigned"]

    def assigned(self) -> list[int]:
        return self._assigned

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        self._pump_thread.join(timeout=10)  # it stops at the end of the pipe
        assert self.process.stdout is not None
        self.process.stdout.close()


def poll_until(members: list[Any], done: Callable[[], bool], timeout: float, what: str) -> float:
    began = time.monotonic()
    while not done():
        assert time.monotonic() - began < timeout, f"timed out waiting for {what}"
        for member in members:
            member.poll()
    return time.monotonic() - began


def test_three_members_share_six_partitions_through_a_leave_and_a_kill(
    make_broker: Callable[..., BrokerProcess], topic: str
) -> None:
    broker = make_broker(**{"group.initial.rebalance.delay.ms": "0"})
    create_topic(broker.bootstrap, topic, PARTITIONS)
    group = f"{topic}-group"
    batches = [[f"{phase}-{i}" for i in range(60)] for phase in range(3)]
    produce(broker.bootstrap, topic, batches[0], PARTITIONS)

    one = Member(broker.bootstrap, topic, group)
    two = Member(broker.bootstrap, topic, group)
    three = ChildMember(broker.bootstrap, topic, group)
    members: list[Any] = [one, two, three]
    try:
        # Three members: two partitions each, disjoint, covering all six.
        poll_until(
            members,
            lambda: (
                [len(m.assigned()) for m in members] == [2, 2, 2]
                and sorted(p for m in members for p in m.assigned()) == list(range(PARTITIONS))
            ),
            60,
            "two partitions each",
        )

        def total() -> int:
            return sum(len(m.read) for m in members)

        poll_until(members, lambda: total() == 60, 60, "the first batch")

        # One member closes (LeaveGroup): its partitions go to the two others.
        one.consumer.close()
        members = [two, three]
        moved = poll_until(
            members,
            lambda: (
                sorted(p for m in members for p in m.assigned()) == list(range(PARTITIONS))
                and [len(m.assigned()) for m in members] == [3, 3]
            ),
            30,
            "the partitions of the member that left",
        )
        assert moved < 10  # well within the rebalance timeout
        produce(broker.bootstrap, topic, batches[1], PARTITIONS)
        poll_until(
            members, lambda: len(two.read) + len(three.read) + len(one.read) == 120, 60, "b2"
        )

        # One member is killed: expelled after the session timeout, the last one takes all.
        three.kill()
        killed_at = time.monotonic()
        poll_until([two], lambda: two.assigned() == list(range(PARTITIONS)), 40, "expulsion")
        assert time.monotonic() - killed_at >= 5  # not before the 6 s session ran out
        produce(broker.bootstrap, topic, batches[2], PARTITIONS)
        poll_until([two], lambda: len(one.read) + len(two.read) + len(three.read) == 180, 60, "b3")
        time.sleep(0.5)
        two.poll()

        everything = one.read + two.read + three.read
        assert sorted(everything) == sorted(v for batch in batches for v in batch)
        assert len(everything) == len(set(everything))  # exactly once
        # The committed offsets are the ends of the partitions.
        committed = two.consumer.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10
        )
        assert [tp.offset for tp in committed] == [30] * PARTITIONS
    finally:
        if three.process.poll() is None:
            three.kill()
        for member in (one, two):
            with contextlib.suppress(RuntimeError):  # closed already
                member.consumer.close()
    assert broker.stop() == 0  # a clean stop with groups alive


def test_describe_shows_each_members_client_and_host(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    broker = make_broker(**{"group.initial.rebalance.delay.ms": "0"})
    create_topic(broker.bootstrap, "described", 2)
    assigned = threading.Event()
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "described-group",
            "client.id": "the-client",
            **MEMBER_CONFIG,
        }
    )
    try:
        consumer.subscribe(["described"], on_assign=lambda c, p: assigned.set())
        deadline = time.monotonic() + 20
        while not assigned.is_set() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert assigned.is_set()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        description = admin.describe_consumer_groups(["described-group"])["described-group"].result(
            timeout=20
        )
        (member,) = description.members
        assert member.client_id == "the-client"
        assert member.host == "/127.0.0.1"
    finally:
        consumer.close()
