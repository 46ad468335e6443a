"""Share groups across a broker's kill -9, and with transactions (read_committed)."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import AcknowledgeType, Producer

from tests.broker.conftest import BrokerProcess
from tests.broker.share.helpers import (
    WAIT,
    create_topic,
    poll_until,
    produce_numbered,
    set_group_configs,
    share_consumer,
)

RECORDS = 2_000


def test_kill_9_keeps_every_answered_acknowledgement(make_broker: Any) -> None:
    broker: BrokerProcess = make_broker()
    topic = create_topic(broker)
    group = f"g-{uuid.uuid4().hex[:8]}"
    set_group_configs(broker, group, {"share.auto.offset.reset": "earliest"})
    for start in range(0, RECORDS, 100):  # batches of 100
        produce_numbered(broker, topic, 100, start=start)
    # Small fetches (about one batch), so that some records are acknowledged and later
    # ones only acquired.
    small = {"fetch.max.bytes": 1024, "message.max.bytes": 1000}
    consumer = share_consumer(broker, group, topic, explicit=True, **small)
    accepted: set[int] = set()
    held: set[int] = set()
    while len(accepted) < RECORDS // 4:
        batch = [m for m in consumer.poll(0.5) if m.error() is None]
        for message in batch:
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        results = consumer.commit_sync()
        assert all(error is None for error in results.values()), results
        accepted.update(m.offset() for m in batch)
    while not held:  # acquired, never acknowledged
        held.update(m.offset() for m in consumer.poll(0.5) if m.error() is None)
    broker.kill()
    broker.start()
    after: dict[int, int] = {}
    other = share_consumer(broker, group, topic)
    try:

        def take(message: Any) -> None:
            after[message.offset()] = after.get(message.offset(), 0) + 1

        want = set(range(RECORDS)) - accepted
        poll_until(other, lambda: want <= after.keys(), take)
    finally:
        other.close()
        consumer.close()
    assert not accepted & after.keys(), "acknowledged records were delivered again"
    assert set(after) == set(range(RECORDS)) - accepted
    assert held <= after.keys()
    assert all(n == 1 for n in after.values())


def test_read_committed_share_group_never_gets_aborted_records(broker: BrokerProcess) -> None:
    topic = create_topic(broker)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": f"t-{uuid.uuid4().hex[:8]}"}
    )
    producer.init_transactions(WAIT)
    for outcome in ("abort", "commit", "abort", "commit"):
        producer.begin_transaction()
        for n in range(10):
            producer.produce(topic, f"{outcome}-{n}".encode(), partition=0)
        if outcome == "abort":
            # Written first: librdkafka drops records still in its queue on abort.
            assert producer.flush(WAIT) == 0
            producer.abort_transaction(WAIT)
        else:
            producer.commit_transaction(WAIT)
    produce_numbered(broker, topic, 1)  # a plain record after the last marker
    uncommitted = f"g-{uuid.uuid4().hex[:8]}"
    committed = f"g-{uuid.uuid4().hex[:8]}"
    set_group_configs(broker, uncommitted, {"share.auto.offset.reset": "earliest"})
    set_group_configs(
        broker,
        committed,
        {"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"},
    )
    for group, want_aborted in ((committed, False), (uncommitted, True)):
        values = _values(broker, group, topic)
        aborted = [v for v in values if v.startswith(b"abort-")]
        assert len([v for v in values if v.startswith(b"commit-")]) == 20
        assert bool(aborted) is want_aborted, aborted


def _values(broker: BrokerProcess, group: str, topic: str) -> list[bytes]:
    """Every value ``group`` gets until the plain record ``b"0"`` that ends the topic."""
    values: list[bytes] = []
    consumer = share_consumer(broker, group, topic)
    try:
        poll_until(consumer, lambda: b"0" in values, lambda m: values.append(m.value()))
    finally:
        consumer.close()
    return values
