"""Transactions across nodes: markers written by each partition's leader, offsets included."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.broker.nodes.conftest import Cluster
from tests.broker.nodes.test_nodes_confluent import create, leaders


def test_transactions_span_partitions_and_groups_of_every_node(make_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster: Cluster = make_cluster(3)
    create(cluster, 2, "txn-out", 3)
    create(cluster, 3, "txn-in", 3)
    assert sorted(leaders(cluster, 1, "txn-out").values()) == [1, 2, 3]
    source = Producer({"bootstrap.servers": cluster.bootstrap(1)})
    for i in range(30):
        source.produce("txn-in", value=b"in-%d" % i, partition=i % 3)
    assert source.flush(10) == 0

    group = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap(3),
            "group.id": "txn-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    group.subscribe(["txn-in"])
    read = 0
    deadline = time.monotonic() + 20
    while read < 30 and time.monotonic() < deadline:
        message = group.poll(0.5)
        if message is not None and message.error() is None:
            read += 1
    assert read == 30

    # Several ids, so that their coordinators are spread over the nodes: each
    # transaction writes to partitions of all three and commits the group's
    # offsets, whose coordinator is another node for most of them.
    ids = [f"txn-{i}" for i in range(6)]
    for number, transactional_id in enumerate(ids, start=1):
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap(2), "transactional.id": transactional_id}
        )
        producer.init_transactions(15)
        producer.begin_transaction()
        for i in range(6):
            producer.produce("txn-out", value=f"{transactional_id}-{i}".encode(), partition=i % 3)
        producer.send_offsets_to_transaction(
            [TopicPartition("txn-in", p, number) for p in range(3)],
            group.consumer_group_metadata(),
            15,
        )
        producer.commit_transaction(15)
        producer.begin_transaction()
        for i in range(3):
            producer.produce("txn-out", value=f"{transactional_id}-aborted".encode(), partition=i)
        producer.abort_transaction(15)

    reader = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap(1),
            "group.id": "txn-reader",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    reader.assign([TopicPartition("txn-out", p, 0) for p in range(3)])
    values: list[bytes] = []
    ended: set[int] = set()
    deadline = time.monotonic() + 20
    while len(ended) < 3 and time.monotonic() < deadline:
        message = reader.poll(0.5)
        if message is None:
            continue
        if message.error() is None:
            values.append(message.value())
        elif message.error().code() == -191:  # _PARTITION_EOF: past the last stable offset
            ended.add(message.partition())
    reader.close()
    assert len(values) == 6 * 6
    assert not [v for v in values if v.endswith(b"aborted")]
    committed = group.committed([TopicPartition("txn-in", p) for p in range(3)], timeout=10)
    group.close()
    assert [tp.offset for tp in committed] == [len(ids)] * 3
