"""Files and broker, one topic: the same bounds and the same records at both isolation levels.

Hypothesis writes a topic through a real broker (plain batches, committed and
aborted transactions, perhaps one left open), then the topic is read twice:
over the network, and from the broker's log directory while it runs.
"""

from __future__ import annotations

import uuid

import confluent_kafka as ck
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.records.record import Record
from seglog.topic_source import TopicSource
from seglog.topic_source.files import FilesTopicSource
from tests.broker.conftest import BrokerProcess
from tests.topic_source.conftest import create_topic
from tests.topic_source.test_broker import open_source

TS = 1_700_000_000_000

RecordSpec = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]

records = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=8),
        st.none() | st.binary(max_size=24),
        st.lists(
            st.tuples(st.text("hk", min_size=1, max_size=3), st.none() | st.binary(max_size=4)),
            max_size=2,
        ),
    ),
    min_size=1,
    max_size=4,
)
operations = st.lists(st.tuples(st.sampled_from(["plain", "commit", "abort"]), records), max_size=6)


def _send(producer: ck.Producer, topic: str, batch: list[RecordSpec], clock: list[int]) -> None:
    for key, value, headers in batch:
        clock[0] += 1
        producer.produce(
            topic, value, key, partition=0, timestamp=TS + clock[0], headers=headers or None
        )
    assert producer.flush(30) == 0


def _content(source: TopicSource, topic: str) -> tuple[tuple[int, int], list[Record]]:
    start, end = source.bounds(topic, 0)
    return (start, end), list(source.records(topic, 0, start, end))


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=operations, left_open=st.none() | records)
def test_files_and_broker_read_the_same(
    broker: BrokerProcess,
    ops: list[tuple[str, list[RecordSpec]]],
    left_open: list[RecordSpec] | None,
) -> None:
    topic = f"same-{uuid.uuid4().hex}"
    create_topic(broker.bootstrap, topic)
    plain = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    txn = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic})
    txn.init_transactions(30)
    clock = [0]
    for kind, batch in ops:
        if kind == "plain":
            _send(plain, topic, batch, clock)
            continue
        txn.begin_transaction()
        _send(txn, topic, batch, clock)
        if kind == "commit":
            txn.commit_transaction(30)
        else:
            txn.abort_transaction(30)
    if left_open is not None:
        txn.begin_transaction()
        _send(txn, topic, left_open, clock)
    try:
        read: dict[str, list[Record]] = {}
        for level in ("read_committed", "read_uncommitted"):
            files = FilesTopicSource(broker.data, read_committed=level == "read_committed")
            with open_source(broker.bootstrap, **{"isolation.level": level}) as network:
                from_broker = _content(network, topic)
            from_files = _content(files, topic)
            assert from_files == from_broker, level
            read[level] = from_files[1]
        # Every record written, in order, at read_uncommitted; read_committed leaves out
        # the aborted transactions and the open one.
        everything = [r for _, batch in ops for r in batch] + (left_open or [])
        decided = [r for kind, batch in ops if kind != "abort" for r in batch]
        assert [(r.key, r.value) for r in read["read_uncommitted"]] == [
            (k, v) for k, v, _ in everything
        ]
        assert [(r.key, r.value) for r in read["read_committed"]] == [(k, v) for k, v, _ in decided]
    finally:
        if left_open is not None:
            txn.abort_transaction(30)
