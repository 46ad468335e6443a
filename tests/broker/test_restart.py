"""Restarts in the middle of a produce stream: nothing acknowledged is lost or doubled."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from tests.broker.clients.test_confluent_kafka import consume_all


def _produce_until(broker, topic: str, stop_after: int, on_stop) -> list[bytes]:  # type: ignore[no-untyped-def]
    acked: list[bytes] = []

    def delivered(err, message) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            acked.append(message.value())

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "linger.ms": 1,
            "message.timeout.ms": 3000,
            "retries": 0,
        }
    )
    stopped = False
    for i in range(100_000):
        producer.produce(topic, value=b"m%06d" % i, on_delivery=delivered)
        producer.poll(0)
        if not stopped and len(acked) >= stop_after:
            on_stop()
            stopped = True
            break
        if i % 100 == 99:
            producer.flush(5)
    producer.flush(5)
    producer.purge()
    producer.poll(0)
    return acked


@pytest.mark.parametrize("how", ["sigterm", "kill9"])
def test_acknowledged_messages_survive_a_restart(make_broker, topic: str, how: str) -> None:  # type: ignore[no-untyped-def]
    broker = make_broker(**{"log.flush.interval.messages": "1"})
    stop = broker.stop if how == "sigterm" else broker.kill
    acked = _produce_until(broker, topic, 500, stop)
    assert len(acked) >= 500
    time.sleep(0.2)
    broker.start()
    acked_set = set(acked)
    # Everything acknowledged is there, once, in the order it was sent.
    got = [m.value() for m in consume_all(broker.bootstrap, topic, len(acked))]
    assert len(got) == len(set(got))
    assert got == sorted(got)
    assert acked_set <= set(got) | set()
    assert [v for v in got if v in acked_set] == acked
