"""``seglog serve --nodes N`` against aiokafka: producers, groups and transactions."""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError

from seglog.coordinator.offset_store import partition_for
from tests.broker.nodes.conftest import Cluster, listening


async def create(cluster: Cluster, via: int, topic: str, partitions: int) -> dict[int, int]:
    """Create ``topic``; each partition's leader from node ``via``'s Metadata."""
    admin = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap(via))
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()
    return await leaders(cluster, via, topic)


async def leaders(cluster: Cluster, via: int, topic: str) -> dict[int, int]:
    producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap(via))
    await producer.start()
    try:
        for _ in range(50):
            partitions = await producer.partitions_for(topic)
            found = {
                p: producer.client.cluster.leader_for_partition(TopicPartition(topic, p))
                for p in partitions
            }
            if all(v is not None and v >= 0 for v in found.values()):
                return found  # type: ignore[return-value]
            await asyncio.sleep(0.1)
        return found  # type: ignore[return-value]
    finally:
        await producer.stop()


async def read_all(
    cluster: Cluster,
    via: int,
    topic: str,
    partitions: list[int],
    count: int,
    isolation_level: str = "read_uncommitted",
) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of ``partitions`` from the start: (offset, value) per partition."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=cluster.bootstrap(via),
        enable_auto_commit=False,
        isolation_level=isolation_level,
    )
    await consumer.start()
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in partitions}
    try:
        assigned = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(assigned)
        await consumer.seek_to_beginning(*assigned)
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < count and time.monotonic() < deadline:
            for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                got[tp.partition].extend((r.offset, r.value) for r in records)  # type: ignore[misc]
    finally:
        await consumer.stop()
    return got


async def restarted(cluster: Cluster, node: int, old: int) -> None:
    """Wait for the supervisor to bring node ``node`` (pid ``old``) back."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if cluster.node_pid(node) != old and listening(cluster.port(node)):
                return
        except LookupError:
            pass
        await asyncio.sleep(0.05)
    raise AssertionError(f"node {node} was not restarted")


async def two_nodes(cluster: Cluster) -> None:
    led = await create(cluster, 1, "many", 8)
    assert sorted(led.values()) == [1, 1, 1, 1, 2, 2, 2, 2]
    assert await leaders(cluster, 2, "many") == led
    values = {p: [f"{p}-{i}".encode() for i in range(25)] for p in range(8)}
    producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap(2), acks="all", linger_ms=5)
    await producer.start()
    try:
        sent = [
            await producer.send(topic="many", value=value, partition=p)
            for p, items in values.items()
            for value in items
        ]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()
    got = await read_all(cluster, 1, "many", list(range(8)), 8 * 25)
    assert {p: [v for _, v in records] for p, records in got.items()} == values
    assert all([o for o, _ in records] == list(range(25)) for records in got.values())

    # A group whose members bootstrap from different nodes, coordinated by the
    # node leading its __consumer_offsets partition (found with a first group).
    warm = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap(1), group_id="warm-up")
    await warm.start()
    await warm.committed(TopicPartition("many", 0))
    await warm.stop()
    offsets_leaders = await leaders(cluster, 2, "__consumer_offsets")
    group = "aio-group"
    expected = offsets_leaders[partition_for(group, len(offsets_leaders))]
    members = [
        AIOKafkaConsumer(
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

    async def run(index: int, stop: asyncio.Event) -> None:
        member = members[index]
        while not stop.is_set():
            batches = await member.getmany(timeout_ms=100)
            for tp, records in batches.items():
                seen[index].setdefault(tp.partition, []).extend(r.value for r in records)  # type: ignore[misc]
            if batches:
                await member.commit()

    for member in members:
        await member.start()
    stop = asyncio.Event()
    tasks = [asyncio.create_task(run(i, stop)) for i in range(2)]
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            owned = [{tp.partition for tp in m.assignment()} for m in members]
            if all(owned) and owned[0] | owned[1] == set(range(8)):
                positions = [
                    await members[0].committed(TopicPartition("many", p)) for p in range(8)
                ]
                if positions == [25] * 8:
                    break
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    assert all(owned) and not owned[0] & owned[1], owned
    assert [m._coordinator.coordinator_id for m in members] == [expected, expected]
    for p in range(8):
        reads = [by_member.get(p, []) for by_member in seen]
        assert set(reads[0]) | set(reads[1]) == set(values[p])
        for read in reads:
            indexes = [values[p].index(v) for v in read]
            assert indexes == sorted(indexes), (p, read)
    for member in members:
        await member.stop()

    # The coordinator is killed; once restarted it has the offsets committed.
    old = cluster.kill_node(expected)
    await restarted(cluster, expected, old)
    other = 3 - expected
    reader = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap(other), group_id=group)
    await reader.start()
    try:
        committed = [await reader.committed(TopicPartition("many", p)) for p in range(8)]
    finally:
        await reader.stop()
    assert committed == [25] * 8


def test_two_nodes_with_aiokafka(make_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster: Cluster = make_cluster(2, **{"group.initial.rebalance.delay.ms": "0"})
    asyncio.run(two_nodes(cluster))


async def produce_through_a_kill(cluster: Cluster) -> None:
    led = await create(cluster, 2, "loop", 4)
    assert sorted(led.values()) == [1, 1, 2, 2]
    producer = AIOKafkaProducer(
        bootstrap_servers=cluster.bootstrap(2),
        acks="all",
        enable_idempotence=True,
        linger_ms=2,
        # A batch waits this long for its leader: long enough for a node restarted on a
        # loaded machine, so that a failed send means a broker's fault, not the machine's.
        request_timeout_ms=120_000,
        retry_backoff_ms=50,
    )
    await producer.start()
    acknowledged: dict[int, list[bytes]] = {p: [] for p in range(4)}
    failed: list[BaseException] = []

    def on_done(partition: int, value: bytes) -> object:
        def done(future: asyncio.Future[object]) -> None:
            if future.exception() is not None:
                failed.append(future.exception())  # type: ignore[arg-type]
            else:
                acknowledged[partition].append(value)

        return done

    old = None
    back_at = None
    sent = 0
    pending = []
    deadline = time.monotonic() + 120
    try:
        while (back_at is None or sent < back_at + 200) and time.monotonic() < deadline:
            partition = sent % 4
            value = b"v%d" % sent
            future = await producer.send("loop", value=value, partition=partition)
            future.add_done_callback(on_done(partition, value))  # type: ignore[arg-type]
            pending.append(future)
            sent += 1
            if sent == 200:
                old = cluster.kill_node(1)
            if old is not None and back_at is None:
                try:
                    if cluster.node_pid(1) != old and listening(cluster.port(1)):
                        back_at = sent
                except LookupError:
                    pass
            await asyncio.sleep(0.002)
        await asyncio.wait(pending, timeout=150)
    finally:
        await producer.stop()
    assert back_at is not None, "node 1 was not restarted"
    assert failed == []
    got = await read_all(cluster, 2, "loop", list(range(4)), sent)
    for partition in range(4):
        assert [v for _, v in got[partition]] == acknowledged[partition], (partition, led)
    assert sum(map(len, acknowledged.values())) == sent


def test_a_node_killed_during_an_aiokafka_produce_loop(make_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster: Cluster = make_cluster(2)
    asyncio.run(produce_through_a_kill(cluster))


async def transactions_across_nodes(cluster: Cluster) -> None:
    led = await create(cluster, 1, "txn", 4)
    assert sorted(led.values()) == [1, 1, 2, 2]
    producer = AIOKafkaProducer(
        bootstrap_servers=cluster.bootstrap(2), transactional_id="aio-txn", linger_ms=2
    )
    await producer.start()
    try:
        # Each transaction writes to every partition, so to both nodes.
        for round_ in range(3):
            async with producer.transaction():
                for p in range(4):
                    await producer.send("txn", value=b"kept-%d-%d" % (round_, p), partition=p)
            await producer.begin_transaction()
            for p in range(4):
                await producer.send("txn", value=b"aborted-%d-%d" % (round_, p), partition=p)
            await producer.abort_transaction()
        # A transaction that only ever aborts, last: nothing of it is read.
        try:
            async with producer.transaction():
                await producer.send("txn", value=b"aborted-late", partition=0)
                raise KafkaError("abort")
        except KafkaError:
            pass
    finally:
        await producer.stop()

    got = await read_all(cluster, 1, "txn", list(range(4)), 12, isolation_level="read_committed")
    # Six control markers and the aborted data leave gaps in the offsets.
    assert {p: [v for _, v in got[p]] for p in range(4)} == {
        p: [b"kept-%d-%d" % (r, p) for r in range(3)] for p in range(4)
    }
    uncommitted = await read_all(cluster, 2, "txn", list(range(4)), 25)
    assert sum(map(len, uncommitted.values())) == 25  # 12 kept, 12 aborted, one late


def test_a_transaction_spans_partitions_led_by_both_nodes(make_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster: Cluster = make_cluster(2)
    asyncio.run(transactions_across_nodes(cluster))
