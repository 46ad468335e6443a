"""Share groups with confluent-kafka's ShareConsumer (librdkafka 2.16) against a real broker."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType

from tests.broker.conftest import BrokerProcess
from tests.broker.share.helpers import (
    create_topic,
    poll_until,
    produce_numbered,
    set_group_configs,
    share_consumer,
    wait_for_members,
)

RECORDS = 100_000
CONSUMERS = 10
BATCH = 1_000


@pytest.mark.parametrize("explicit", [False, True], ids=["implicit", "explicit"])
def test_ten_consumers_share_one_partition_each_record_once(
    broker: BrokerProcess, explicit: bool
) -> None:
    topic = create_topic(broker)
    group = f"g-{uuid.uuid4().hex[:8]}"
    set_group_configs(broker, group, {"share.auto.offset.reset": "earliest"})
    seen: Counter[int] = Counter()
    per_consumer: list[int] = [0] * CONSUMERS
    lock = threading.Lock()
    failures: list[BaseException] = []

    def run(index: int) -> None:
        try:
            consumer = share_consumer(broker, group, topic, explicit=explicit)
            try:

                def take(message: Any) -> None:
                    with lock:
                        seen[message.offset()] += 1
                        per_consumer[index] += 1
                    if explicit:
                        consumer.acknowledge(message, AcknowledgeType.ACCEPT)

                poll_until(consumer, lambda: len(seen) >= RECORDS, take)
                # What the last poll returned is acknowledged (in implicit mode, accepted)
                # by a commit; librdkafka's close() alone releases it.
                consumer.commit_sync()
            finally:
                consumer.close()
        except BaseException as exc:  # reported by the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(CONSUMERS)]
    for thread in threads:
        thread.start()
    # Every member in the group first, then the records, a thousand at a time: each
    # batch wakes the members waiting for records, the one waiting longest first, so
    # that each gets a share (a share group hands out whole batches).
    wait_for_members(broker, group, CONSUMERS)
    for start in range(0, RECORDS, BATCH):
        produce_numbered(broker, topic, BATCH, start=start)
    for thread in threads:
        thread.join()
    assert not failures, failures
    assert len(seen) == RECORDS, f"{RECORDS - len(seen)} records never delivered"
    assert set(seen) == set(range(RECORDS))
    twice = {offset: n for offset, n in seen.items() if n > 1}
    assert not twice, f"{len(twice)} records delivered more than once"
    assert sum(per_consumer) == RECORDS
    # The partition was shared: every member got records.
    assert all(per_consumer), per_consumer
