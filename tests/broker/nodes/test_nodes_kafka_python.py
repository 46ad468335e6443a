"""``seglog serve --nodes N`` against kafka-python: admin, producer and group consumers."""

from __future__ import annotations

import threading
import time
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from seglog.coordinator.offset_store import partition_for
from tests.broker.nodes.conftest import Cluster, listening


def describe(cluster: Cluster, via: int, topic: str) -> dict[int, int]:
    """Each partition's leader, from the Metadata of node ``via``."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(via))
    try:
        (found,) = admin.describe_topics([topic])
    finally:
        admin.close()
    assert found["error_code"] == 0, found
    return {p["partition_index"]: p["leader_id"] for p in found["partitions"]}


def produce(cluster: Cluster, via: int, topic: str, values: dict[int, list[bytes]]) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap(via), acks="all", linger_ms=5)
    futures = [
        producer.send(topic, value=value, partition=partition)
        for partition, items in values.items()
        for value in items
    ]
    producer.flush(30)
    producer.close()
    assert all(f.succeeded() for f in futures)


def consume(cluster: Cluster, via: int, topic: str, partitions: list[int], count: int) -> Any:
    """Every record of ``partitions`` from the start, per partition in order of offset."""
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap(via), enable_auto_commit=False)
    assigned = [TopicPartition(topic, p) for p in partitions]
    consumer.assign(assigned)
    consumer.seek_to_beginning(*assigned)
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in partitions}
    deadline = time.monotonic() + 30
    while sum(map(len, got.values())) < count and time.monotonic() < deadline:
        for tp, records in consumer.poll(timeout_ms=500).items():
            got[tp.partition].extend((r.offset, r.value) for r in records)
    consumer.close()
    return got


def test_three_nodes_with_kafka_python(make_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster: Cluster = make_cluster(3, **{"group.initial.rebalance.delay.ms": "0"})
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(2))
    described = admin.describe_cluster()
    assert described["controller_id"] == 1
    assert {b["broker_id"]: b["port"] for b in described["brokers"]} == {
        n: cluster.port(n) for n in (1, 2, 3)
    }
    # The admin client sends CreateTopics to the controller Metadata names; Kafka 4
    # names any broker there and the broker forwards. Send it to node 2 instead.
    admin._controller_id = 2
    created = admin.create_topics({"many": {"num_partitions": 9, "replication_factor": 1}})
    assert [t["error_code"] for t in created["topics"]] == [0]
    admin.close()

    # Metadata from any node names every partition's leader, the same everywhere.
    led = describe(cluster, 1, "many")
    assert sorted(led) == list(range(9))
    assert sorted(led.values()) == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert describe(cluster, 2, "many") == led == describe(cluster, 3, "many")

    values = {p: [f"{p}-{i}".encode() for i in range(30)] for p in range(9)}
    produce(cluster, 3, "many", values)
    got = consume(cluster, 2, "many", list(range(9)), 9 * 30)
    assert {p: [v for _, v in records] for p, records in got.items()} == values
    assert all([o for o, _ in records] == list(range(30)) for records in got.values())

    # A group coordinated by node 3 whose members bootstrap from nodes 1 and 2.
    finder = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(1))
    finder.describe_groups(["warm-up"])  # creates __consumer_offsets
    finder.close()
    offsets_leaders = describe(cluster, 3, "__consumer_offsets")
    group = next(
        g
        for g in (f"kp-group-{i}" for i in range(500))
        if offsets_leaders[partition_for(g, len(offsets_leaders))] == 3
    )
    members = [
        KafkaConsumer(
            "many",
            bootstrap_servers=cluster.bootstrap(via),
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )
        for via in (1, 2)
    ]
    seen: list[dict[int, list[bytes]]] = [{}, {}]
    # One thread polls both members in turn: kafka-python's poll returns at its
    # timeout even while a rebalance waits for the other member.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for index, member in enumerate(members):
            batches = member.poll(timeout_ms=50)
            for tp, records in batches.items():
                seen[index].setdefault(tp.partition, []).extend(r.value for r in records)
            if batches:
                member.commit()
        owned = [{tp.partition for tp in m.assignment()} for m in members]
        read = sum(len(v) for by_member in seen for v in by_member.values())
        # Both members own partitions once the second join has settled.
        if all(owned) and owned[0] | owned[1] == set(range(9)) and read >= 9 * 30:
            pairs = zip(members, owned, strict=True)
            committed = [m.committed(TopicPartition("many", p)) for m, o in pairs for p in o]
            if committed == [30] * 9:
                break
    assert all(owned) and not owned[0] & owned[1], owned
    # kafka-python names its connection to the coordinator "coordinator-<node id>".
    assert [m._coordinator.coordinator_id for m in members] == ["coordinator-3"] * 2
    assert members[0]._client.cluster.broker_metadata("coordinator-3").port == cluster.port(3)
    # Every record arrives; each member reads a partition in order (one that
    # moved at the rebalance is read on from the offset its first owner committed).
    for p in range(9):
        reads = [by_member.get(p, []) for by_member in seen]
        assert set(reads[0]) | set(reads[1]) == set(values[p])
        for read in reads:
            positions = [values[p].index(v) for v in read]
            assert positions == sorted(positions), (p, read)
    for member in members:
        member.close()

    # Committed offsets survive a restart as two nodes, where another node
    # leads the group's __consumer_offsets partition.
    assert cluster.stop() == 0
    cluster.start(nodes=2)
    moved = describe(cluster, 1, "__consumer_offsets")[partition_for(group, len(offsets_leaders))]
    assert moved in (1, 2)
    reader = KafkaConsumer(bootstrap_servers=cluster.bootstrap(2), group_id=group)
    committed = {p: reader.committed(TopicPartition("many", p)) for p in range(9)}
    reader.close()
    assert committed == {p: 30 for p in range(9)}


def test_a_node_killed_during_a_kafka_python_produce_loop(make_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster: Cluster = make_cluster(2)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(1))
    admin.create_topics({"loop": {"num_partitions": 4, "replication_factor": 1}})
    admin.close()
    led = describe(cluster, 1, "loop")
    assert sorted(led.values()) == [1, 1, 2, 2]
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap(1),
        acks="all",
        linger_ms=2,
        retries=1_000_000,
        retry_backoff_ms=50,
        request_timeout_ms=5000,
        delivery_timeout_ms=30000,
    )
    acknowledged: dict[int, list[bytes]] = {p: [] for p in range(4)}
    failed: list[Exception] = []
    lock = threading.Lock()

    def delivered(partition: int, value: bytes) -> Any:
        def callback(_metadata: Any) -> None:
            with lock:
                acknowledged[partition].append(value)

        return callback

    old = None
    restarted_at = None
    sent = 0
    deadline = time.monotonic() + 30
    # Keep producing until well after the killed node is back.
    while (restarted_at is None or sent < restarted_at + 200) and time.monotonic() < deadline:
        partition = sent % 4
        value = b"v%d" % sent
        future = producer.send("loop", value=value, partition=partition)
        future.add_callback(delivered(partition, value))
        future.add_errback(failed.append)
        sent += 1
        if sent == 200:
            old = cluster.kill_node(2)
        if old is not None and restarted_at is None:
            try:
                if cluster.node_pid(2) != old and listening(cluster.port(2)):
                    restarted_at = sent
            except LookupError:
                pass
        time.sleep(0.002)
    producer.flush(40)
    producer.close()
    assert restarted_at is not None, "node 2 was not restarted"
    assert failed == []
    # Every record acknowledged, on either node, is there after the restart, in
    # order and once (the producer is idempotent).
    got = consume(cluster, 1, "loop", list(range(4)), sent)
    for partition in range(4):
        values = [v for _, v in got[partition]]
        assert values == acknowledged[partition], (partition, led[partition])
    assert sum(map(len, acknowledged.values())) == sent
