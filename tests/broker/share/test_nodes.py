"""Share groups under ``seglog serve --nodes 2``: partitions, state and members on both nodes."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from typing import Any

from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.coordinator.offset_store import partition_for
from seglog.protocol.api_keys import ApiKey
from seglog.share.state import SharePartitionKey
from seglog.share.state_store import STATE_TOPIC
from tests.broker.nodes.conftest import Cluster, Raw, make_cluster
from tests.broker.share.helpers import group_configs_request, state_records

__all__ = ["make_cluster"]

WAIT = 120.0


def create_topic(cluster: Cluster, partitions: int) -> str:
    topic = f"share-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(1)})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=WAIT)
    return topic


def metadata(cluster: Cluster, topic: str) -> dict[str, Any]:
    """The topic's Metadata entry (v12: its id and each partition's leader)."""
    raw = Raw(cluster.port(1))
    try:
        body = raw.call(
            ApiKey.METADATA,
            12,
            {
                "topics": [{"topic_id": uuid.UUID(int=0), "name": topic}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
    finally:
        raw.close()
    [entry] = body["topics"]
    assert entry["error_code"] == 0, entry
    return dict(entry)


def leaders(cluster: Cluster, topic: str) -> dict[int, int]:
    return {p["partition_index"]: p["leader_id"] for p in metadata(cluster, topic)["partitions"]}


def earliest(cluster: Cluster, group: str, **configs: str) -> None:
    """The group starts at the beginning of each partition (and ``configs``: group configs)."""
    configs = {"share.auto.offset.reset": "earliest", **configs}
    raw = Raw(cluster.port(1))
    try:
        body = group_configs_request(group, configs)
        [answer] = raw.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"]
    finally:
        raw.close()
    assert answer["error_code"] == 0, answer


def produce(cluster: Cluster, topic: str, count: int, partitions: int, start: int = 0) -> None:
    """Values ``b"<n>"``, record n to partition n % ``partitions``, all acknowledged."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap(1), "linger.ms": 20})
    for n in range(start, start + count):
        while True:
            try:
                producer.produce(topic, str(n).encode(), partition=n % partitions)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(WAIT) == 0


def number(message: Any) -> int:
    """The record's value, a number written by :func:`produce`."""
    return int(message.value())


def number_of_partition(message: Any) -> int:
    return int(message.partition())


def consumer_of(cluster: Cluster, group: str, topic: str, **extra: Any) -> ShareConsumer:
    consumer = ShareConsumer(
        {"bootstrap.servers": cluster.bootstrap(1), "group.id": group, **extra}
    )
    consumer.subscribe([topic])
    return consumer


def take_until(
    consumers: list[ShareConsumer],
    seen: Counter[int],
    want: set[int],
    *,
    explicit: bool = False,
    ack: AcknowledgeType = AcknowledgeType.ACCEPT,
) -> None:
    """Poll every consumer in turn, counting each delivered value, until ``want`` all came."""
    deadline = time.monotonic() + WAIT
    while not want <= seen.keys() and time.monotonic() < deadline:
        for consumer in consumers:
            batch = [m for m in consumer.poll(0.3) if m.error() is None]
            for message in batch:
                seen[number(message)] += 1
                if explicit:
                    consumer.acknowledge(message, ack)
            if explicit and batch:
                results = consumer.commit_sync()
                assert all(error is None for error in results.values()), results


def test_members_on_both_nodes_get_every_record_once(make_cluster: Any) -> None:
    cluster: Cluster = make_cluster(2)
    topic = create_topic(cluster, 4)
    assert sorted(set(leaders(cluster, topic).values())) == [1, 2]
    group = f"g-{uuid.uuid4().hex[:8]}"
    # The longest lock allowed: a member slowed by a loaded machine keeps its records.
    earliest(cluster, group, **{"share.record.lock.duration.ms": "60000"})
    produce(cluster, topic, 400, 4)
    consumers = [consumer_of(cluster, group, topic) for _ in range(2)]
    seen: Counter[int] = Counter()
    try:
        take_until(consumers, seen, set(range(400)))
        # Late records too, written once the members are in.
        produce(cluster, topic, 100, 4, start=400)
        take_until(consumers, seen, set(range(500)))
    finally:
        for consumer in consumers:
            consumer.close()
    assert set(seen) == set(range(500))
    assert [n for n, times in seen.items() if times != 1] == []


def test_acknowledgements_survive_a_restart_of_the_cluster(make_cluster: Any) -> None:
    cluster: Cluster = make_cluster(2)
    topic = create_topic(cluster, 4)
    group = f"g-{uuid.uuid4().hex[:8]}"
    earliest(cluster, group)
    produce(cluster, topic, 200, 4)
    first = consumer_of(cluster, group, topic, **{"share.acknowledgement.mode": "explicit"})
    accepted: Counter[int] = Counter()
    try:
        take_until([first], accepted, set(range(200)), explicit=True)
    finally:
        first.close()
    assert set(accepted) == set(range(200))
    cluster.stop()
    cluster.start()
    produce(cluster, topic, 200, 4, start=200)
    second = consumer_of(cluster, group, topic)
    after: Counter[int] = Counter()
    try:
        take_until([second], after, set(range(200, 400)))
    finally:
        second.close()
    assert set(after) == set(range(200, 400)), "acknowledged records were delivered again"


def _group_with_state_on(cluster: Cluster, topic: str, node: int) -> str:
    """A group whose state for ``topic``-0 is kept by ``node`` (it leads its state partition)."""
    # DescribeShareGroupOffsets makes the node create __share_group_state on first use.
    raw = Raw(cluster.port(1))
    try:
        body = {"groups": [{"group_id": "warm-up", "topics": None}]}
        raw.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, body)
    finally:
        raw.close()
    topic_id = metadata(cluster, topic)["topic_id"]
    state_leaders = leaders(cluster, STATE_TOPIC)
    for _ in range(1000):
        group = f"g-{uuid.uuid4().hex[:8]}"
        key = SharePartitionKey(group, topic_id, 0)
        if state_leaders[partition_for(key.coordinator_key(), len(state_leaders))] == node:
            return group
    raise AssertionError(f"no group id has its state on node {node}")


def _group_elsewhere(cluster: Cluster, topic: str) -> tuple[str, int, int]:
    """A group whose state partition for ``topic``-0 is led by the node not leading ``topic``-0."""
    data_leader = leaders(cluster, topic)[0]
    state_leader = 3 - data_leader
    return _group_with_state_on(cluster, topic, state_leader), data_leader, state_leader


def test_state_on_the_other_node_keeps_answered_acknowledgements_across_kill_9(
    make_cluster: Any,
) -> None:
    cluster: Cluster = make_cluster(2)
    topic = create_topic(cluster, 1)
    group, data_leader, state_leader = _group_elsewhere(cluster, topic)
    assert data_leader != state_leader
    earliest(cluster, group)
    total = 1000
    for start in range(0, total, 100):  # batches of 100
        produce(cluster, topic, 100, 1, start=start)
    # Small fetches (about one batch): some records acknowledged, later ones only acquired.
    small = {"fetch.max.bytes": 1024, "message.max.bytes": 1000}
    consumer = consumer_of(
        cluster, group, topic, **{"share.acknowledgement.mode": "explicit"}, **small
    )
    accepted: set[int] = set()
    held: set[int] = set()
    deadline = time.monotonic() + WAIT
    while len(accepted) < total // 4 and time.monotonic() < deadline:
        batch = [m for m in consumer.poll(0.5) if m.error() is None]
        for message in batch:
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        results = consumer.commit_sync()
        assert all(error is None for error in results.values()), results
        accepted.update(number(m) for m in batch)
    assert len(accepted) >= total // 4
    while not held and time.monotonic() < deadline:  # acquired, never acknowledged
        held.update(number(m) for m in consumer.poll(0.5) if m.error() is None)
    cluster.kill()
    consumer.close()
    cluster.start()
    after: Counter[int] = Counter()
    other = consumer_of(cluster, group, topic)
    try:
        take_until([other], after, set(range(total)) - accepted)
    finally:
        other.close()
    assert not accepted & after.keys(), "acknowledged records were delivered again"
    assert set(after) == set(range(total)) - accepted
    assert held <= after.keys()


def test_a_deleted_topics_state_goes_on_the_node_that_keeps_it(make_cluster: Any) -> None:
    """The controller deletes the topic; the other node keeps its share state and drops it
    when its refresh finds the topic gone, as each of Kafka's share coordinators does."""
    cluster: Cluster = make_cluster(2)
    topic = create_topic(cluster, 1)
    controller = metadata_controller(cluster)
    group = _group_with_state_on(cluster, topic, 3 - controller)
    earliest(cluster, group)
    produce(cluster, topic, 10, 1)
    consumer = consumer_of(cluster, group, topic, **{"share.acknowledgement.mode": "explicit"})
    accepted: Counter[int] = Counter()
    try:
        take_until([consumer], accepted, set(range(10)), explicit=True)
    finally:
        consumer.close()
    key = SharePartitionKey(group, metadata(cluster, topic)["topic_id"], 0)
    assert (key, False) in state_records(cluster.bootstrap(1))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(1)})
    admin.delete_topics([topic])[topic].result(timeout=WAIT)
    deadline = time.monotonic() + WAIT
    while (key, True) not in state_records(cluster.bootstrap(1)):
        assert time.monotonic() < deadline, "the deleted topic's share state was kept"
        time.sleep(0.2)


def metadata_controller(cluster: Cluster) -> int:
    """The node id Metadata names as the controller (the one that deletes topics)."""
    raw = Raw(cluster.port(1))
    try:
        body = raw.call(
            ApiKey.METADATA,
            12,
            {"topics": [], "allow_auto_topic_creation": False,
             "include_topic_authorized_operations": False},
        )  # fmt: skip
    finally:
        raw.close()
    return int(body["controller_id"])


def coordinator_of(cluster: Cluster, group: str) -> int:
    raw = Raw(cluster.port(1))
    try:
        found = raw.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
    finally:
        raw.close()
    [entry] = found["coordinators"]
    assert entry["error_code"] == 0, entry
    return int(entry["node_id"])


def group_call(cluster: Cluster, group: str, api: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` sent to ``group``'s coordinator (retried while the member is still leaving)."""
    deadline = time.monotonic() + WAIT
    while True:
        raw = Raw(cluster.port(coordinator_of(cluster, group)))
        try:
            answer = raw.call(api, 0, body)
        finally:
            raw.close()
        code = answer.get("error_code", 0)
        if code != 0 and time.monotonic() < deadline:
            time.sleep(0.2)  # NON_EMPTY_GROUP until the closed member's leave is seen
            continue
        return answer


def start_offsets(cluster: Cluster, group: str) -> dict[tuple[str, int], int]:
    body = {"groups": [{"group_id": group, "topics": None}]}
    raw = Raw(cluster.port(coordinator_of(cluster, group)))
    try:
        [described] = raw.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, body)["groups"]
    finally:
        raw.close()
    assert described["error_code"] == 0, described
    return {
        (topic["topic_name"], p["partition_index"]): p["start_offset"]
        for topic in described["topics"]
        for p in topic["partitions"]
    }


def test_dead_letters_offsets_and_deletion_reach_every_node(make_cluster: Any) -> None:
    cluster: Cluster = make_cluster(2)
    topic = create_topic(cluster, 2)
    led = leaders(cluster, topic)
    assert sorted(led.values()) == [1, 2]
    # Each dead-letter partition led by the node that does not lead the records' partition.
    dead = f"dlq.{topic}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(1)})
    assignment = [[3 - led[0]], [3 - led[1]]]
    admin.create_topics([NewTopic(dead, 2, replica_assignment=assignment)])[dead].result(WAIT)
    group = f"g-{uuid.uuid4().hex[:8]}"
    earliest(cluster, group, **{"errors.deadletterqueue.topic.name": dead})
    produce(cluster, topic, 20, 2)
    explicit = {"share.acknowledgement.mode": "explicit"}
    rejecting = consumer_of(cluster, group, topic, **explicit)
    rejected: Counter[int] = Counter()
    try:
        take_until([rejecting], rejected, set(range(20)), explicit=True, ack=AcknowledgeType.REJECT)
    finally:
        rejecting.close()
    letters = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap(1),
            "group.id": f"read-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
        }
    )
    letters.subscribe([dead])
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + WAIT
    try:
        while len(got) < 20 and time.monotonic() < deadline:
            message = letters.poll(0.5)
            if message is not None and message.error() is None:
                headers = dict(message.headers() or [])
                source = (
                    int(headers["__dlq.errors.partition"] or b""),
                    number_of_partition(message),
                )
                got.append(source)
    finally:
        letters.close()
    assert len(got) == 20
    assert all(source == written for source, written in got)  # partition n to partition n
    # Every record was rejected: both share-partitions start at the end now.
    assert start_offsets(cluster, group) == {(topic, 0): 10, (topic, 1): 10}

    # AlterShareGroupOffsets back to 0 reaches both partitions' leaders.
    alter = {
        "group_id": group,
        "topics": [
            {
                "topic_name": topic,
                "partitions": [{"partition_index": p, "start_offset": 0} for p in (0, 1)],
            }
        ],
    }
    answer = group_call(cluster, group, ApiKey.ALTER_SHARE_GROUP_OFFSETS, alter)
    assert answer["error_code"] == 0, answer
    assert all(p["error_code"] == 0 for t in answer["responses"] for p in t["partitions"]), answer
    again = consumer_of(cluster, group, topic)
    seen: Counter[int] = Counter()
    try:
        take_until([again], seen, set(range(20)))
    finally:
        again.close()
    assert set(seen) == set(range(20))

    # DeleteShareGroupOffsets forgets the topic's state on every node.
    remove = {"group_id": group, "topics": [{"topic_name": topic}]}
    answer = group_call(cluster, group, ApiKey.DELETE_SHARE_GROUP_OFFSETS, remove)
    assert answer["error_code"] == 0, answer
    assert start_offsets(cluster, group) == {}
    # A member starts over from the beginning (earliest) on both nodes.
    fresh = consumer_of(cluster, group, topic)
    seen.clear()
    try:
        take_until([fresh], seen, set(range(20)))
    finally:
        fresh.close()
    assert set(seen) == set(range(20))

    # DeleteGroups deletes the state kept on both nodes.
    deadline = time.monotonic() + WAIT
    while True:
        future = admin.delete_consumer_groups([group], request_timeout=30)[group]
        try:
            future.result(WAIT)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)  # the closed member may not have left yet
    # The state is deleted after the answer (in the background), on both nodes.
    deadline = time.monotonic() + WAIT
    while start_offsets(cluster, group) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert start_offsets(cluster, group) == {}
