"""Transactions across broker crashes and stalls: kill -9 mid-transaction and at random
points, and a stalled transaction aborted by the coordinator after its timeout."""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaException

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
        worker.start()
        time.sleep(rng.uniform(0.4, 1.0))
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
