"""Transactions across broker crashes and stalls: kill -9 mid-transaction and at random
points, a stalled transaction aborted by the coordinator after its timeout, and a
consume-transform-produce loop across kills."""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.conftest import BrokerProcess
from tests.broker.test_transactions import _committed_end, _create, _producer, _read


def test_a_kill_mid_transaction_leaves_it_invisible_and_the_id_usable(
    make_broker: Callable[..., BrokerProcess], topic: str
) -> None:
    broker = make_broker()
    _create(broker.bootstrap, topic)
    txn_id = f"txn-{topic}"
    producer = _producer(broker.bootstrap, txn_id)
    producer.init_transactions(10)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"before-{i}".encode())
    producer.commit_transaction(10)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"lost-{i}".encode())
    producer.flush(10)
    broker.kill()
    broker.start()
    # Until the open transaction ends, read_committed readers stop before it.
    assert _read(broker.bootstrap, topic) == [f"before-{i}".encode() for i in range(5)]
    assert _committed_end(broker.bootstrap, topic) == 6
    successor = _producer(broker.bootstrap, txn_id)
    successor.init_transactions(10)  # aborts the transaction the crash left open
    successor.begin_transaction()
    successor.produce(topic, b"after")
    successor.commit_transaction(10)
    assert _read(broker.bootstrap, topic) == [
        *(f"before-{i}".encode() for i in range(5)),
        b"after",
    ]
    broker.kill()
    broker.start()
    assert _read(broker.bootstrap, topic)[-1] == b"after"


def test_kills_at_random_points_leave_every_transaction_whole(
    make_broker: Callable[..., BrokerProcess], topic: str
) -> None:
    """kill -9 the broker while a producer runs transactions, several times: after the
    restarts each transaction is wholly visible or wholly invisible to read_committed
    readers, every acknowledged commit is there, and the id is still usable."""
    broker = make_broker()
    _create(broker.bootstrap, topic, 2)
    txn_id = f"txn-{topic}"
    rng = random.Random(13)
    acknowledged: set[int] = set()
    numbers = itertools.count()

    def run(bootstrap: str, stop: threading.Event) -> None:
        try:
            producer = _producer(bootstrap, txn_id, **{"message.timeout.ms": 2000})
            producer.init_transactions(5)
            while not stop.is_set():
                n = next(numbers)
                producer.begin_transaction()
                for i in range(6):
                    producer.produce(topic, f"{n}-{i}".encode(), partition=i % 2)
                producer.commit_transaction(2)
                acknowledged.add(n)
        except KafkaException:
            return  # the broker died under it

    for _ in range(3):
        stop = threading.Event()
        worker = threading.Thread(target=run, args=(broker.bootstrap, stop))
        before = len(acknowledged)
        worker.start()
        # Each kill comes at a random point after a commit of this round, however
        # long a busy machine takes to get there.
        deadline = time.monotonic() + 120
        while len(acknowledged) == before and worker.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.5))
        broker.kill()
        stop.set()
        worker.join(30)
        assert not worker.is_alive()
        broker.start()
    assert acknowledged, "no transaction completed before the kills"
    closer = _producer(broker.bootstrap, txn_id)
    closer.init_transactions(10)  # aborts whatever the last kill left open
    by_txn: dict[int, set[int]] = {}
    for value in _read(broker.bootstrap, topic, 2):
        n, i = map(int, value.split(b"-"))
        by_txn.setdefault(n, set()).add(i)
    assert all(parts == set(range(6)) for parts in by_txn.values()), by_txn
    assert acknowledged <= set(by_txn)


def test_a_stalled_transaction_is_aborted_after_its_timeout(
    make_broker: Callable[..., BrokerProcess], topic: str
) -> None:
    broker = make_broker(**{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"})
    _create(broker.bootstrap, topic)
    producer = _producer(broker.bootstrap, f"txn-{topic}", **{"transaction.timeout.ms": 3000})
    producer.init_transactions(10)
    began = time.monotonic()
    producer.begin_transaction()
    producer.produce(topic, b"stalled")
    producer.flush(10)
    deadline = time.monotonic() + 120
    while _committed_end(broker.bootstrap, topic) == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    # The coordinator aborted it, not before its timeout: the marker moved the LSO past
    # the record.
    assert _committed_end(broker.bootstrap, topic) == 2
    assert time.monotonic() - began >= 3.0
    assert _read(broker.bootstrap, topic) == []
    with pytest.raises(KafkaException):
        producer.commit_transaction(10)


def test_a_consume_transform_produce_loop_survives_broker_kills_exactly_once(
    tmp_path: Path,
) -> None:
    """Each input record is in the output once, read_committed, after kill -9s mid-loop.

    The producer sets ``metadata.recovery.strategy=none``: with librdkafka's default
    (re-bootstrap once every broker is down, KIP-899) a kill of a one-broker cluster
    leaves ``send_offsets_to_transaction`` blocked past its timeout on a broker handle
    librdkafka has decommissioned (its log repeats "Handle is terminating"), whatever
    the broker does; Kafka's single broker would meet the same client.
    """
    broker = BrokerProcess(tmp_path / "data", {"group.initial.rebalance.delay.ms": "0"})
    broker.start()
    count = 6000
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic("in", 2, 1), NewTopic("out", 2, 1)]).values():
            future.result(30)
        source = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(count):
            source.produce("in", str(i).encode(), partition=i % 2)
        assert source.flush(30) == 0
        done = threading.Event()
        failures: list[BaseException] = []
        loop = threading.Thread(
            target=_transform_loop, args=(broker.bootstrap, count, done, failures), daemon=True
        )
        loop.start()
        for _ in range(4):
            time.sleep(1.5)
            if done.is_set():
                break
            broker.kill()
            broker.start()
        loop.join(timeout=240)
        assert not failures, failures
        assert done.is_set(), "the loop did not finish"
        out = _read_committed(broker.bootstrap, "out", count)
        assert sorted(int(v) for v in out) == list(range(count))
    finally:
        if broker.alive():
            broker.kill()


def _transform_loop(
    bootstrap: str, count: int, done: threading.Event, failures: list[BaseException]
) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "transform",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": 6000,
            "log_level": 0,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": "transform-1",
            "metadata.recovery.strategy": "none",
            "log_level": 0,
        }
    )
    try:
        consumer.subscribe(["in"])
        inputs = [TopicPartition("in", 0), TopicPartition("in", 1)]
        producer.init_transactions(60)
        moved = 0
        deadline = time.monotonic() + 240
        while moved < count and time.monotonic() < deadline:
            batch = [m for m in consumer.consume(200, 1.0) if m.error() is None]
            if not batch:
                continue
            try:
                producer.begin_transaction()
                for message in batch:
                    producer.produce("out", message.value(), partition=message.partition())
                positions = consumer.position(consumer.assignment())
                producer.send_offsets_to_transaction(
                    positions, consumer.consumer_group_metadata(), 30
                )
                producer.commit_transaction(30)
            except KafkaException as exc:
                if not exc.args[0].txn_requires_abort() and not exc.args[0].retriable():
                    raise
                if exc.args[0].txn_requires_abort():
                    producer.abort_transaction(30)
                # Back to the last committed offsets: what was not committed is redone.
                for partition in consumer.committed(consumer.assignment(), 30):
                    partition.offset = max(partition.offset, 0)
                    consumer.seek(partition)
            moved = _committed_total(consumer.committed(inputs, 30))
        if moved >= count:
            done.set()
    except BaseException as exc:
        failures.append(exc)
    finally:
        consumer.close()


def _committed_total(partitions: list[TopicPartition]) -> int:
    return sum(max(p.offset, 0) for p in partitions)


def _read_committed(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            message = consumer.poll(2.0)
            if message is None:
                if len(values) >= count:
                    break
                continue
            if message.error() is None:
                values.append(message.value() or b"")
    finally:
        consumer.close()
    return values
