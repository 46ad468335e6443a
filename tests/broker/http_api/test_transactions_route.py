"""``GET /v1/transactions``: a transaction left open is shown, hanging once past its timeout."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Producer

from tests.broker.http_api.conftest import TIMEOUT, ApiBroker, create_topic

StartBroker = Callable[..., ApiBroker]


def test_an_open_transaction_hangs_past_its_timeout(api_broker: StartBroker, topic: str) -> None:
    # The broker's abort of timed-out transactions is held off, so the one left open stays.
    served = api_broker(
        **{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "3600000"}
    )
    create_topic(served.bootstrap, topic, partitions=2)
    tid = f"t-{topic}"
    producer = Producer(
        {
            "bootstrap.servers": served.bootstrap,
            "transactional.id": tid,
            "transaction.timeout.ms": 3000,
            "linger.ms": 0,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=1)
    assert producer.flush(30) == 0
    before = int(time.time() * 1000)
    [txn] = served.api.get("/v1/transactions").body["transactions"]
    assert txn["transactional_id"] == tid
    assert txn["state"] == "Ongoing"
    assert txn["timeout_ms"] == 3000
    assert txn["partitions"] == [{"topic": topic, "partition": 1}]
    assert txn["producer_id"] >= 0 and txn["producer_epoch"] >= 0
    assert 0 < txn["start_time_ms"] <= before
    if before - txn["start_time_ms"] < 3000:
        assert txn["hanging"] is False
    deadline = time.monotonic() + TIMEOUT
    while not txn["hanging"]:
        assert time.monotonic() < deadline, txn
        time.sleep(0.2)
        [txn] = served.api.get("/v1/transactions").body["transactions"]
    assert int(time.time() * 1000) - txn["start_time_ms"] > 3000
    assert txn["state"] == "Ongoing"
