"""The KIP-848 consumer protocol with confluent-kafka (``group.protocol=consumer``): the
broker assigns partitions, hands them over incrementally, and refuses to mix protocols."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupType,
    KafkaError,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from tests.broker.conftest import BrokerProcess
from tests.broker.test_groups_confluent import create_topic, produce

ROOT = Path(__file__).parent.parent.parent
PARTITIONS = 6
BROKER_CONFIG = {
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.heartbeat.interval.ms": "300",
}


def new_consumer(bootstrap: str, group: str, **extra: Any) -> Consumer:
    # No session timeout nor assignor on the client: both are the broker's under KIP-848.
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **extra,
        }
    )


class Member:
    """An in-process member that commits each message after processing it."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.read: list[str] = []
        self.errors: list[KafkaError] = []
        self.consumer = new_consumer(bootstrap, group)
        self.consumer.subscribe([topic])

    def poll(self) -> None:
        message = self.consumer.poll(0.02)
        if message is None:
            return
        error = message.error()
        if error is not None:
            self.errors.append(error)
            return
        self.read.append((message.value() or b"").decode())
        self.consumer.commit(message=message, asynchronous=False)

    def assigned(self) -> list[int]:
        return sorted(p.partition for p in self.consumer.assignment())


def describe(bootstrap: str, group: str) -> Any:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(timeout=20)


def poll_until(members: list[Member], done: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for member in members:
            member.poll()
        if done():
            return
    state = [(m.assigned(), len(m.read), m.errors) for m in members]
    raise AssertionError(f"timed out waiting for {what}: {state}")


def test_members_share_partitions_and_hand_them_over(make_broker: Any, topic: str) -> None:
    broker: BrokerProcess = make_broker(**BROKER_CONFIG)
    create_topic(broker.bootstrap, topic, PARTITIONS)
    first = [f"a{i}" for i in range(60)]
    produce(broker.bootstrap, topic, first, PARTITIONS)
    members = [Member(broker.bootstrap, topic, "kip848") for _ in range(3)]
    try:

        def read() -> list[str]:
            return [value for m in members for value in m.read]

        poll_until(
            members,
            lambda: [len(m.assigned()) for m in members] == [2, 2, 2] and len(read()) == 60,
            40,
            "two partitions each and every message",
        )
        assert sorted(p for m in members for p in m.assigned()) == list(range(PARTITIONS))
        described = describe(broker.bootstrap, "kip848")
        assert described.type == ConsumerGroupType.CONSUMER
        assert described.state == ConsumerGroupState.STABLE
        assert described.partition_assignor == "uniform"
        shares = [
            sorted(tp.partition for tp in m.assignment.topic_partitions) for m in described.members
        ]
        assert sorted(shares) == sorted(m.assigned() for m in members)

        leaving = members.pop(0)
        gone = leaving.assigned()
        leaving.consumer.close()
        poll_until(
            members,
            lambda: [len(m.assigned()) for m in members] == [3, 3],
            30,
            "the leaver's partitions to move",
        )
        assert sorted(p for m in members for p in m.assigned()) == list(range(PARTITIONS))
        assert all(any(p in m.assigned() for m in members) for p in gone)

        second = [f"b{i}" for i in range(60)]
        produce(broker.bootstrap, topic, second, PARTITIONS)
        poll_until(members, lambda: len(read()) + len(leaving.read) >= 120, 30, "every message")
        everything = read() + leaving.read
        assert sorted(everything) == sorted(first + second)  # each exactly once
        assert not [e for m in members for e in m.errors if e.code() != KafkaError._PARTITION_EOF]

        # The committed offsets are where the members stopped: at the end.
        checker = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kip848"})
        try:
            committed = checker.committed(
                [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10
            )
        finally:
            checker.close()
        assert sum(tp.offset for tp in committed) == 120
    finally:
        for member in members:
            member.consumer.close()


def test_members_rejoin_after_a_broker_restart(make_broker: Any, topic: str) -> None:
    """Membership is in memory: members rejoin; committed offsets survive."""
    broker: BrokerProcess = make_broker(**BROKER_CONFIG)
    create_topic(broker.bootstrap, topic, PARTITIONS)
    first = [f"a{i}" for i in range(30)]
    produce(broker.bootstrap, topic, first, PARTITIONS)
    member = Member(broker.bootstrap, topic, "restart")
    try:
        poll_until([member], lambda: len(member.read) == 30, 30, "the first messages")
        broker.stop()
        broker.start()
        second = [f"b{i}" for i in range(30)]
        produce(broker.bootstrap, topic, second, PARTITIONS)
        poll_until([member], lambda: len(member.read) >= 60, 40, "the messages after restart")
        assert sorted(member.read) == sorted(first + second)
        assert len(member.assigned()) == PARTITIONS
    finally:
        member.consumer.close()


def child(bootstrap: str, topic: str, group: str) -> None:
    """A member in its own process (to be killed): prints "assigned" once it has partitions."""
    consumer = new_consumer(bootstrap, group)
    consumer.subscribe([topic])
    told = False
    while True:
        consumer.poll(0.1)
        if consumer.assignment() and not told:
            print("assigned", flush=True)
            told = True


def test_a_killed_member_expires_after_the_broker_session_timeout(
    make_broker: Any, topic: str
) -> None:
    broker: BrokerProcess = make_broker(**BROKER_CONFIG)
    create_topic(broker.bootstrap, topic, PARTITIONS)
    code = (
        "from tests.broker.test_consumer_protocol import child; "
        f"child({broker.bootstrap!r}, {topic!r}, 'expiry')"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    survivor: Member | None = None
    try:
        # The child first (a member that does not poll would hold up the handover).
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "assigned"
        survivor = Member(broker.bootstrap, topic, "expiry")
        poll_until([survivor], lambda: len(survivor.assigned()) == 3, 30, "a share of three")
        process.kill()
        process.wait(timeout=10)
        killed = time.monotonic()
        poll_until([survivor], lambda: len(survivor.assigned()) == 6, 30, "every partition")
        # Not before the broker's session timeout (6 s) has passed since its last heartbeat.
        assert time.monotonic() - killed > 4
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
        if survivor is not None:
            survivor.consumer.close()


def test_classic_and_consumer_protocols_do_not_share_a_group(make_broker: Any, topic: str) -> None:
    broker: BrokerProcess = make_broker(**BROKER_CONFIG)
    create_topic(broker.bootstrap, topic, PARTITIONS)
    base = {
        "bootstrap.servers": broker.bootstrap,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    classic_config = {**base, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}

    def wait_assigned(consumer: Consumer) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not consumer.assignment():
            consumer.poll(0.1)
        assert len(consumer.assignment()) == PARTITIONS

    def errors_of(consumer: Consumer, other: Consumer, seconds: float) -> list[KafkaError]:
        found: list[KafkaError] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not found:
            message = consumer.poll(0.1)
            other.poll(0.01)
            error = message.error() if message is not None else None
            if error is not None:
                found.append(error)
        return found

    # A classic group with a member: a KIP-848 consumer is told the group is not its kind.
    classic = Consumer({**classic_config, "group.id": "classic-first"})
    classic.subscribe([topic])
    wait_assigned(classic)
    newer = new_consumer(broker.bootstrap, "classic-first")
    newer.subscribe([topic])
    described = describe(broker.bootstrap, "classic-first")
    assert (described.type, described.state) == (
        ConsumerGroupType.CLASSIC,
        ConsumerGroupState.STABLE,
    )
    errors = errors_of(newer, classic, 15)
    assert errors and "group id does not exist" in errors[0].str().lower()
    assert newer.assignment() == []
    newer.close()
    classic.close()

    # A KIP-848 group with a member: a classic JoinGroup is inconsistent.
    newer = new_consumer(broker.bootstrap, "consumer-first")
    newer.subscribe([topic])
    wait_assigned(newer)
    classic = Consumer({**classic_config, "group.id": "consumer-first"})
    classic.subscribe([topic])
    errors = errors_of(classic, newer, 15)
    assert errors and errors[0].code() == KafkaError.INCONSISTENT_GROUP_PROTOCOL
    assert classic.assignment() == []
    assert len(newer.assignment()) == PARTITIONS
    described = describe(broker.bootstrap, "consumer-first")
    assert (described.type, described.state) == (
        ConsumerGroupType.CONSUMER,
        ConsumerGroupState.STABLE,
    )
    assert len(described.members) == 1
    classic.close()
    newer.close()
