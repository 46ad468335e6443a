"""Transactions across nodes: markers written by each partition's leader, offsets included."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition

from seglog.protocol import ApiKey
from tests.broker.nodes.conftest import Cluster, Raw
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


def test_a_commit_completes_once_a_leader_killed_during_it_is_back(make_cluster) -> None:  # type: ignore[no-untyped-def]
    # The client's retried EndTxn writes the markers again (the periodic pass
    # would as well, but not within this test).
    cluster: Cluster = make_cluster(
        3, **{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "600000"}
    )
    create(cluster, 1, "txn-crash", 3)
    led = {node: p for p, node in leaders(cluster, 1, "txn-crash").items()}
    # An id coordinated by node 1, so that node 3 only leads a partition of it.
    candidates = (f"crash-{i}" for i in range(200))
    transactional_id = next(t for t in candidates if coordinator(cluster, t) == 1)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap(1), "transactional.id": transactional_id}
    )
    producer.init_transactions(15)
    producer.begin_transaction()
    for node in (1, 2, 3):
        producer.produce("txn-crash", value=b"kept-%d" % node, partition=led[node])
    assert producer.flush(15) == 0
    cluster.kill_node(3)  # its marker cannot be written until the supervisor restarts it
    producer.commit_transaction(30)

    reader = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap(2),
            "group.id": "txn-crash-reader",
            "isolation.level": "read_committed",
        }
    )
    reader.assign([TopicPartition("txn-crash", p, 0) for p in range(3)])
    values: set[bytes] = set()
    deadline = time.monotonic() + 20
    while len(values) < 3 and time.monotonic() < deadline:
        message = reader.poll(0.5)
        if message is not None and message.error() is None:
            values.add(message.value())
    reader.close()
    assert values == {b"kept-1", b"kept-2", b"kept-3"}


def coordinator(cluster: Cluster, transactional_id: str) -> int:
    raw = Raw(cluster.port(1))
    try:
        answer = raw.call(
            ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [transactional_id]}
        )
    finally:
        raw.close()
    return int(answer["coordinators"][0]["node_id"])
