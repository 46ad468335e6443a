"""``seglog serve --nodes N`` against confluent-kafka: one cluster of real processes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from seglog.broker.nodes.assignment import plan
from seglog.coordinator.offset_store import partition_for
from seglog.protocol import ApiKey, error_codes
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage import checkpoints
from seglog.storage.log_dir import TopicInfo
from tests.broker.conftest import free_port
from tests.broker.nodes.conftest import Cluster, Raw, listening, node_pids


def code(name: str) -> int:
    return error_codes.code_for(name)


def create(cluster: Cluster, via: int, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(via)})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def produce(cluster: Cluster, via: int, topic: str, values: dict[int, list[bytes]]) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap(via), "acks": "all"})
    failures: list[Any] = []
    for partition, items in values.items():
        for value in items:
            producer.produce(
                topic,
                value=value,
                partition=partition,
                on_delivery=lambda err, _msg: failures.append(err) if err else None,
            )
    assert producer.flush(30) == 0
    assert failures == []


def consume(cluster: Cluster, via: int, topic: str, partition: int, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap(via),
            "group.id": f"reader-{uuid.uuid4()}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


def topics(cluster: Cluster, via: int) -> set[str]:
    """The topics node ``via`` knows of."""
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap(via)}).list_topics(timeout=10)
    return set(metadata.topics)


def leaders(cluster: Cluster, via: int, topic: str) -> dict[int, int]:
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap(via)}).list_topics(timeout=10)
    return {p.id: p.leader for p in metadata.topics[topic].partitions.values()}


def raw_produce(port: int, topic: str, partition: int) -> dict[str, Any]:
    raw = Raw(port)
    try:
        body = raw.call(
            ApiKey.PRODUCE,
            9,
            {
                "transactional_id": None,
                "acks": -1,
                "timeout_ms": 10_000,
                "topic_data": [
                    {
                        "name": topic,
                        "partition_data": [
                            {"index": partition, "records": build_batch([SimpleRecord(b"x")])}
                        ],
                    }
                ],
            },
        )
    finally:
        raw.close()
    return body["responses"][0]["partition_responses"][0]  # type: ignore[no-any-return]


def test_three_nodes_serve_one_cluster(make_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster: Cluster = make_cluster(3)
    # Created through a node that is not the controller: it forwards to node 1.
    create(cluster, 2, "spread", 6)
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap(3)}).list_topics(timeout=10)
    assert {b.id: b.port for b in metadata.brokers.values()} == {
        n: cluster.port(n) for n in (1, 2, 3)
    }
    assert metadata.controller_id == 1
    led = leaders(cluster, 3, "spread")
    assert sorted(led.values()) == [1, 1, 2, 2, 3, 3]

    # A partition another node leads: NOT_LEADER_OR_FOLLOWER, as Kafka answers.
    partition = next(p for p, node in led.items() if node == 2)
    assert raw_produce(cluster.port(1), "spread", partition)["error_code"] == code(
        "NOT_LEADER_OR_FOLLOWER"
    )
    assert raw_produce(cluster.port(2), "spread", partition)["error_code"] == 0
    raw = Raw(cluster.port(3))
    listed = raw.call(
        ApiKey.LIST_OFFSETS,
        5,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": "spread",
                    "partitions": [
                        {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                        for p in range(6)
                    ],
                }
            ],
        },
    )
    raw.close()
    answers = {a["partition_index"]: a for a in listed["topics"][0]["partitions"]}
    for p, node in led.items():
        expected_code = 0 if node == 3 else code("NOT_LEADER_OR_FOLLOWER")
        assert answers[p]["error_code"] == expected_code

    # A group whose members talk to different nodes; both have partitions
    # before anything is produced, so that both consume.
    members = [
        Consumer(
            {
                "bootstrap.servers": cluster.bootstrap(via),
                "group.id": "spread-group",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
            }
        )
        for via in (1, 3)
    ]
    for member in members:
        member.subscribe(["spread"])
    seen: dict[int, int] = {}

    def take(member: Consumer) -> None:
        message = member.poll(0.1)
        if message is not None and message.error() is None:
            seen[message.partition()] = seen.get(message.partition(), 0) + 1
            member.commit(message=message, asynchronous=False)

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for member in members:
            take(member)
        if sum(len(m.assignment()) for m in members) == 6 and all(m.assignment() for m in members):
            break
    owned = [{tp.partition for tp in m.assignment()} for m in members]
    assert all(owned) and owned[0] | owned[1] == set(range(6)), owned

    values = {p: [f"{p}-{i}".encode() for i in range(40)] for p in range(6)}
    produce(cluster, 3, "spread", values)
    expected = {p: 40 + (p == partition) for p in range(6)}
    deadline = time.monotonic() + 30
    while seen != expected and time.monotonic() < deadline:
        for member in members:
            take(member)
    assert seen == expected
    for member in members:
        member.close()
    reader = Consumer({"bootstrap.servers": cluster.bootstrap(2), "group.id": "spread-group"})
    committed = reader.committed([TopicPartition("spread", p) for p in range(6)], timeout=10)
    reader.close()
    assert sum(tp.offset for tp in committed) == sum(seen.values())

    # Group requests to a node that does not coordinate the group: NOT_COORDINATOR.
    raw = Raw(cluster.port(1))
    found = raw.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]})
    coordinator = found["coordinators"][0]["node_id"]
    raw.close()
    other = next(n for n in (1, 2, 3) if n != coordinator)
    raw = Raw(cluster.port(other))
    again = raw.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]})
    assert again["coordinators"][0]["node_id"] == coordinator
    beat = raw.call(
        ApiKey.HEARTBEAT,
        4,
        {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None},
    )
    raw.close()
    assert beat["error_code"] == code("NOT_COORDINATOR")

    # Producer ids are unique across the nodes: each carries its node's index.
    ids = []
    for node in (1, 2, 3):
        raw = Raw(cluster.port(node))
        answer = raw.call(
            ApiKey.INIT_PRODUCER_ID,
            4,
            {
                "transactional_id": None,
                "transaction_timeout_ms": 60000,
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
        raw.close()
        assert answer["error_code"] == 0
        ids.append(answer["producer_id"])
    assert [i % 1024 for i in ids] == [0, 1, 2]

    # Auto-creation, config changes and deletion through nodes that are not the controller.
    auto = Producer({"bootstrap.servers": cluster.bootstrap(3)})
    auto.produce("auto-created", value=b"v")
    assert auto.flush(30) == 0
    assert list(leaders(cluster, 1, "auto-created")) == [0]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(2)})
    resource = ConfigResource("topic", "spread")
    admin.incremental_alter_configs(
        [
            ConfigResource(
                "topic",
                "spread",
                incremental_configs=[
                    ConfigEntry(
                        "retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET
                    )
                ],
            )
        ]
    )[resource].result(30)
    for node in (1, 3):
        other_admin = AdminClient({"bootstrap.servers": cluster.bootstrap(node)})
        described = other_admin.describe_configs([ConfigResource("topic", "spread")])
        configs = next(iter(described.values())).result(30)
        assert configs["retention.ms"].value == "3600000"
    admin.delete_topics(["spread"])["spread"].result(30)
    assert not list(cluster.data.glob("spread-*"))
    for node in (1, 2, 3):
        metadata = AdminClient({"bootstrap.servers": cluster.bootstrap(node)}).list_topics(
            timeout=10
        )
        assert "spread" not in metadata.topics
    create(cluster, 3, "spread", 2)  # the name is free again
    assert sorted(leaders(cluster, 1, "spread")) == [0, 1]
    grower = AdminClient({"bootstrap.servers": cluster.bootstrap(3)})
    grower.create_partitions([NewPartitions("spread", 5)])["spread"].result(30)
    grown = leaders(cluster, 2, "spread")
    assert sorted(grown) == [0, 1, 2, 3, 4] and set(grown.values()) == {1, 2, 3}
    produce(cluster, 1, "spread", {p: [b"grown"] for p in range(5)})

    assert cluster.stop() == 0
    assert (cluster.data / checkpoints.CLEAN_SHUTDOWN_FILE).exists()


def test_a_killed_node_is_restarted_and_the_others_serve_meanwhile(make_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster: Cluster = make_cluster(3)
    create(cluster, 1, "crash", 3)
    led = {node: p for p, node in leaders(cluster, 1, "crash").items()}
    before = {led[n]: [f"{n}-{i}".encode() for i in range(50)] for n in (1, 2, 3)}
    produce(cluster, 1, "crash", before)
    supervisor = cluster.process
    assert supervisor is not None

    for victim in (2, 1):  # a node, then the controller
        old = cluster.kill_node(victim)
        survivors = [n for n in (1, 2, 3) if n != victim]
        if victim == 2:
            # Until it is back, the others show its partition without a leader.
            assert offline_seen(cluster, 3, "crash", led[2], victim)
        for node in survivors:
            assert raw_produce(cluster.port(node), "crash", led[node])["error_code"] == 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if cluster.node_pid(victim) != old and listening(cluster.port(victim)):
                    break
            except LookupError:
                pass
            time.sleep(0.1)
        else:
            raise AssertionError(f"node {victim} was not restarted")
        # Every acknowledged record is still there after its recovery.
        got = consume(cluster, victim, "crash", led[victim], 50)
        assert got[:50] == before[led[victim]]

    # Topic administration works again through any node once the controller is back.
    create(cluster, 3, "after-crash", 2)
    assert sorted(leaders(cluster, 2, "after-crash").values()) in ([1, 2], [1, 3], [2, 3])
    pids = node_pids(supervisor.pid)
    assert cluster.stop() == 0
    time.sleep(0.2)
    assert all(not listening(cluster.port(n)) for n in (1, 2, 3))
    assert all(subprocess.run(["kill", "-0", str(p)], capture_output=True).returncode for p in pids)


def test_three_nodes_restarted_as_two_reassign_leadership(make_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster: Cluster = make_cluster(3)
    create(cluster, 1, "shrink", 6)
    values = {p: [f"{p}-{i}".encode() for i in range(20)] for p in range(6)}
    produce(cluster, 2, "shrink", values)
    assert cluster.stop() == 0

    cluster.start(nodes=2)
    led = leaders(cluster, 1, "shrink")
    assert set(led.values()) == {1, 2}
    for partition in range(6):
        assert consume(cluster, led[partition], "shrink", partition, 20) == values[partition]
    topics = json.loads((cluster.data / "seglog-topics.json").read_text())
    assert all(r[0] in (1, 2) for r in topics["topics"]["shrink"]["replicas"])
    # The files never moved: one directory per partition, as before.
    assert sorted(p.name for p in cluster.data.glob("shrink-*")) == [
        f"shrink-{p}" for p in range(6)
    ]

    # Replicas named by the client are where its partitions go, whichever node it asks.
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(2)})
    admin.create_topics([NewTopic("placed", 3, replica_assignment=[[2], [2], [1]])])[
        "placed"
    ].result(30)
    assert leaders(cluster, 1, "placed") == {0: 2, 1: 2, 2: 1}
    admin.create_partitions([NewPartitions("placed", 4, replica_assignment=[[1]])])[
        "placed"
    ].result(30)
    assert leaders(cluster, 2, "placed")[3] == 1
    refused = admin.create_topics([NewTopic("twice", 1, replica_assignment=[[1, 2]])])["twice"]
    with pytest.raises(KafkaException, match="one replica"):
        refused.result(30)

    # A second, unrelated serve of the same directory is refused.
    other = subprocess.run(
        [
            sys.executable,
            "-m",
            "seglog",
            "serve",
            "--override",
            f"log.dirs={cluster.data}",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert other.returncode != 0 and "in use by another process" in other.stderr
    assert cluster.stop() == 0


def test_a_node_that_cannot_start_stops_the_supervisor(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cluster = Cluster(tmp_path / "busy", 2)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", cluster.port(2)))  # node 2's port, bound (not listening)
        try:
            # The supervisor exits by itself: start() sees it gone before it listens.
            with pytest.raises(RuntimeError, match="node 2 could not start"):
                cluster.start()
        finally:
            cluster.kill()
        assert not listening(cluster.port(1))


def test_nodes_stop_when_the_supervisor_is_killed(make_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster: Cluster = make_cluster(2)
    create(cluster, 1, "orphans", 2)
    values = {p: [f"{p}-{i}".encode() for i in range(10)] for p in range(2)}
    produce(cluster, 2, "orphans", values)
    assert cluster.process is not None
    pids = node_pids(cluster.process.pid)
    cluster.process.kill()
    cluster.process.wait(10)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(
        subprocess.run(["kill", "-0", str(p)], capture_output=True).returncode == 0 for p in pids
    ):
        time.sleep(0.1)
    assert not any(listening(cluster.port(n)) for n in (1, 2))
    # No clean-shutdown marker: the next start recovers, and nothing acknowledged is lost.
    assert not (cluster.data / checkpoints.CLEAN_SHUTDOWN_FILE).exists()
    cluster.start()
    for partition in range(2):
        leader = leaders(cluster, 1, "orphans")[partition]
        assert consume(cluster, leader, "orphans", partition, 10) == values[partition]


def offline_seen(cluster: Cluster, via: int, topic: str, partition: int, node: int) -> bool:
    """Whether Metadata from ``via`` shows ``partition`` leaderless and ``node`` gone (briefly)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        raw = Raw(cluster.port(via))
        body = raw.call(
            ApiKey.METADATA,
            12,
            {
                "topics": [{"topic_id": uuid.UUID(int=0), "name": topic}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        raw.close()
        entry = body["topics"][0]["partitions"][partition]
        brokers = {b["node_id"] for b in body["brokers"]}
        if entry["leader_id"] == -1:
            assert entry["error_code"] == code("LEADER_NOT_AVAILABLE")
            assert node not in brokers
            return True
        time.sleep(0.02)
    return False


def commit(cluster: Cluster, via: int, group: str, offsets: dict[int, int], topic: str) -> None:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(via), "group.id": group})
    try:
        done = consumer.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
        )
        assert done is not None and all(tp.error is None for tp in done)
    finally:
        consumer.close()


def test_two_nodes_restarted_as_three_spread_leadership(make_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster: Cluster = make_cluster(2)
    create(cluster, 1, "grow", 6)
    values = {p: [f"{p}-{i}".encode() for i in range(20)] for p in range(6)}
    produce(cluster, 2, "grow", values)
    commit(cluster, 1, "warm-up", {0: 1}, "grow")  # creates __consumer_offsets
    # A group whose __consumer_offsets partition node 3 will lead: its
    # committed offsets are then read from files the two nodes wrote.
    before = {
        name: TopicInfo(name, uuid.uuid4(), len(led), {}, [[led[p]] for p in range(len(led))])
        for name, led in ((t, leaders(cluster, 1, t)) for t in ("grow", "__consumer_offsets"))
    }
    to_node_3 = {m.partition for m in plan(before, [1, 2, 3]) if m.topic == "__consumer_offsets"}
    offsets_count = before["__consumer_offsets"].partitions
    candidates = (f"spread-{i}" for i in range(500))
    group = next(g for g in candidates if partition_for(g, offsets_count) in to_node_3)
    commit(cluster, 2, group, {p: 10 + p for p in range(6)}, "grow")
    assert cluster.stop() == 0

    cluster.start(nodes=3)
    led = leaders(cluster, 2, "grow")
    assert Counter(led.values()) == {1: 2, 2: 2, 3: 2}
    # Only partitions that went to node 3 changed leader.
    assert all(led[p] in (3, before["grow"].replicas_of(p)[0]) for p in range(6))  # type: ignore[index]
    offsets_led = leaders(cluster, 3, "__consumer_offsets")
    assert sorted(Counter(offsets_led.values()).values()) == [16, 17, 17]
    # Every record is read back from its new leader.
    for partition in range(6):
        assert consume(cluster, led[partition], "grow", partition, 20) == values[partition]
    # The group is coordinated by node 3 now, its committed offsets intact.
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(1)})
    described = admin.describe_consumer_groups([group])[group].result(30)
    assert described.coordinator.id == 3
    reader = Consumer({"bootstrap.servers": cluster.bootstrap(1), "group.id": group})
    committed = reader.committed([TopicPartition("grow", p) for p in range(6)], timeout=30)
    reader.close()
    assert {tp.partition: tp.offset for tp in committed} == {p: 10 + p for p in range(6)}
    # The files never moved.
    assert sorted(p.name for p in cluster.data.glob("grow-*")) == [f"grow-{p}" for p in range(6)]
    log = cluster.log.read_text()
    assert log.count("of topic grow: leader node") == 2
    assert "given a leader among nodes [1, 2, 3]" in log
    assert cluster.stop() == 0

    # Started again as three nodes: nothing moves.
    cluster.start(nodes=3)
    assert leaders(cluster, 1, "grow") == led
    assert leaders(cluster, 1, "__consumer_offsets") == offsets_led


def raw_create(port: int, name: str, timeout_ms: int) -> dict[str, Any]:
    raw = Raw(port)
    try:
        body = raw.call(
            ApiKey.CREATE_TOPICS,
            5,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": 2,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": timeout_ms,
                "validate_only": False,
            },
        )
    finally:
        raw.close()
    return body["topics"][0]  # type: ignore[no-any-return]


def wait_restarted(cluster: Cluster, node_id: int, old: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if cluster.node_pid(node_id) != old and listening(cluster.port(node_id)):
                return
        except LookupError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"node {node_id} was not restarted")


def test_admin_requests_wait_for_a_restarting_controller(make_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster: Cluster = make_cluster(2)
    create(cluster, 1, "ready", 1)  # both nodes are up and serving

    # Sent to node 2 at once after the controller died: node 2 holds the
    # request until the controller is back, then answers it created.
    old = cluster.kill_node(1)
    answer = raw_create(cluster.port(2), "during", 120_000)
    assert answer["error_code"] == 0, answer["error_message"]
    wait_restarted(cluster, 1, old)
    assert sorted(leaders(cluster, 2, "during")) == [0, 1]

    # The same through confluent-kafka's AdminClient.
    old = cluster.kill_node(1)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(2)})
    admin.create_topics([NewTopic("during-admin", 3, 1)], request_timeout=120)[
        "during-admin"
    ].result(150)
    wait_restarted(cluster, 1, old)
    assert sorted(leaders(cluster, 1, "during-admin")) == [0, 1, 2]

    # Auto-creation through node 2 waits for the controller too.
    def auto_create() -> dict[str, Any]:
        raw = Raw(cluster.port(2))
        try:
            return raw.call(  # type: ignore[no-any-return]
                ApiKey.METADATA,
                12,
                {
                    "topics": [{"topic_id": uuid.UUID(int=0), "name": "auto-during"}],
                    "allow_auto_topic_creation": True,
                    "include_topic_authorized_operations": False,
                },
            )["topics"][0]
        finally:
            raw.close()

    old = cluster.kill_node(1)
    answer = auto_create()
    assert answer["error_code"] == code("LEADER_NOT_AVAILABLE"), answer
    wait_restarted(cluster, 1, old)
    # The creation completes once the controller is back (at once if it came back
    # within the wait, else when the client asks again, as clients do after
    # LEADER_NOT_AVAILABLE); node 2 learns of it after.
    deadline = time.monotonic() + 120
    while "auto-during" not in topics(cluster, 2) and time.monotonic() < deadline:
        auto_create()
        time.sleep(0.1)
    assert sorted(leaders(cluster, 2, "auto-during")) == [0]

    # A controller that does not come back within the request's timeout: REQUEST_TIMED_OUT.
    old = cluster.kill_node(1)
    answer = raw_create(cluster.port(2), "too-late", 1)
    assert answer["error_code"] == code("REQUEST_TIMED_OUT"), answer
    wait_restarted(cluster, 1, old)
