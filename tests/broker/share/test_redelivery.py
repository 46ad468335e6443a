"""What becomes of acquired records: lock expiry, release, reject, the delivery limit, dead letters.

Real ShareConsumers (librdkafka 2.16) against a private broker whose lock
bounds let a lock run out in seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import AcknowledgeType, Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.conftest import BrokerProcess
from tests.broker.share.helpers import (
    WAIT,
    create_topic,
    poll_until,
    produce_numbered,
    set_group_configs,
    share_consumer,
)

ROOT = Path(__file__).resolve().parents[3]
FAST_LOCKS = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": "60000",
}


def _holder(
    broker: BrokerProcess, group: str, topic: str
) -> tuple[subprocess.Popen[str], set[int]]:
    """A consumer process that acquired records and holds them: (process, their offsets)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.broker.share.hold_records", broker.bootstrap, group, topic],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.strip(), "the holding consumer got no records"
    return process, {int(n) for n in line.split()}


def _stop(process: subprocess.Popen[str]) -> None:
    """kill -9 the holding consumer and close its pipe."""
    process.kill()
    process.wait()
    if process.stdout is not None:
        process.stdout.close()


def _group(broker: BrokerProcess, **configs: str) -> str:
    group = f"g-{uuid.uuid4().hex[:8]}"
    set_group_configs(broker, group, {"share.auto.offset.reset": "earliest", **configs})
    return group


def _collect(
    broker: BrokerProcess, group: str, topic: str, want: set[int], *, ack: Any = None
) -> dict[int, int]:
    """Offsets of ``want`` as another member gets them: offset → delivery count."""
    got: dict[int, int] = {}
    consumer = share_consumer(broker, group, topic, explicit=ack is not None)
    try:

        def take(message: Any) -> None:
            if message.offset() in want:
                got[message.offset()] = message.delivery_count()
            if ack is not None:
                consumer.acknowledge(message, ack)

        poll_until(consumer, lambda: want <= got.keys(), take)
    finally:
        consumer.close()
    return got


def test_a_hung_consumers_records_come_back_when_the_lock_expires(make_broker: Any) -> None:
    broker: BrokerProcess = make_broker(**FAST_LOCKS)
    topic = create_topic(broker)
    group = _group(broker, **{"share.record.lock.duration.ms": "2000"})
    produce_numbered(broker, topic, 50)
    holder, held = _holder(broker, group, topic)
    try:
        # Stopped, not killed: its connection stays open, so only the lock frees the records.
        holder.send_signal(signal.SIGSTOP)
        got = _collect(broker, group, topic, held)
        assert set(got) >= held
        assert all(got[offset] == 2 for offset in held), got
    finally:
        _stop(holder)


def test_a_killed_consumers_records_are_released_at_once(make_broker: Any) -> None:
    broker: BrokerProcess = make_broker(**FAST_LOCKS)
    topic = create_topic(broker)
    # A lock far longer than the test waits: only the release can free them.
    group = _group(broker, **{"share.record.lock.duration.ms": "60000"})
    produce_numbered(broker, topic, 50)
    holder, held = _holder(broker, group, topic)
    _stop(holder)
    got = _collect(broker, group, topic, held)
    # Kafka lowers the delivery count of records released by a vanished member.
    assert all(got[offset] == 1 for offset in held), got


def test_released_records_are_redelivered_with_the_count_raised(broker: BrokerProcess) -> None:
    topic = create_topic(broker)
    group = _group(broker)
    produce_numbered(broker, topic, 20)
    first = _collect(broker, group, topic, set(range(20)), ack=AcknowledgeType.RELEASE)
    assert set(first.values()) == {1}
    second = _collect(broker, group, topic, set(range(20)), ack=AcknowledgeType.ACCEPT)
    assert set(second.values()) == {2}


def test_rejected_records_are_never_redelivered(broker: BrokerProcess) -> None:
    topic = create_topic(broker)
    group = _group(broker)
    produce_numbered(broker, topic, 10)
    _collect(broker, group, topic, set(range(10)), ack=AcknowledgeType.REJECT)
    produce_numbered(broker, topic, 10, start=10)
    # Only the new records come: the rejected ones are archived.
    got = _collect(broker, group, topic, set(range(10, 20)), ack=AcknowledgeType.ACCEPT)
    assert set(got) == set(range(10, 20))


def _dead_letter_topic(broker: BrokerProcess, topic: str) -> str:
    """The dead-letter topic of ``topic``'s tests: named with the broker's prefix, ``dlq.``."""
    dead = f"dlq.{topic}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(dead, 1, 1)])[dead].result(timeout=WAIT)
    return dead


def _letters(broker: BrokerProcess, dead: str, count: int) -> list[Any]:
    """The first ``count`` records of the dead-letter topic ``dead``."""
    reader = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"dlq-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
        }
    )
    reader.subscribe([dead])
    letters: list[Any] = []
    try:
        while len(letters) < count:
            message = reader.poll(1.0)
            if message is not None and message.error() is None:
                letters.append(message)
    finally:
        reader.close()
    return letters


def test_the_delivery_limit_archives_and_dead_letters(broker: BrokerProcess) -> None:
    topic = create_topic(broker)
    dead = _dead_letter_topic(broker, topic)
    group = _group(
        broker,
        **{
            "share.delivery.count.limit": "2",
            "errors.deadletterqueue.topic.name": dead,
            "errors.deadletterqueue.copy.record.enable": "true",
        },
    )
    produce_numbered(broker, topic, 5)
    for _ in range(2):
        _collect(broker, group, topic, set(range(5)), ack=AcknowledgeType.RELEASE)
    produce_numbered(broker, topic, 5, start=5)
    # After two deliveries the first five are archived: only the new ones come.
    got = _collect(broker, group, topic, set(range(5, 10)), ack=AcknowledgeType.ACCEPT)
    assert not set(got) & set(range(5))
    letters = _letters(broker, dead, 5)
    assert sorted(int(m.value()) for m in letters) == list(range(5))
    headers = dict(letters[0].headers() or [])
    assert headers["__dlq.errors.topic"] == topic.encode()
    assert headers["__dlq.errors.partition"] == b"0"
    assert headers["__dlq.errors.group.id"] == group.encode()
    assert headers["__dlq.errors.delivery.count"] == b"2"
    assert headers["__dlq.errors.reason"] == b"delivery_count_limit"


def test_rejected_records_go_to_the_dead_letter_topic(broker: BrokerProcess) -> None:
    topic = create_topic(broker)
    dead = _dead_letter_topic(broker, topic)
    group = _group(broker, **{"errors.deadletterqueue.topic.name": dead})
    produce_numbered(broker, topic, 3)
    _collect(broker, group, topic, set(range(3)), ack=AcknowledgeType.REJECT)
    letters = _letters(broker, dead, 3)
    offsets = sorted(int(dict(m.headers() or [])["__dlq.errors.offset"]) for m in letters)
    assert offsets == [0, 1, 2]
    # Without errors.deadletterqueue.copy.record.enable the record itself is not copied.
    assert all(m.value() is None for m in letters)
    assert {dict(m.headers() or [])["__dlq.errors.reason"] for m in letters} == {b"rejected"}
