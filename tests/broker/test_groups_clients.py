"""Consumer groups with kafka-python and aiokafka, resuming after broker restarts, and
commits of stale generations or unknown members refused over the wire."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer
from kafka.structs import OffsetAndMetadata

from seglog.protocol import ApiKey, decode_response, encode_request, error_codes
from tests.broker.conftest import BrokerProcess
from tests.broker.test_bad_input import (  # noqa: F401 (the fixture is used by name)
    _close_sockets,
    connect,
    recv_frame,
    send_frame,
)
from tests.broker.test_groups_confluent import Member, create_topic, produce

pytestmark = pytest.mark.usefixtures("_close_sockets")

NO_DELAY = {"group.initial.rebalance.delay.ms": "0"}


def _name(code: int) -> str:
    return error_codes.name_for(code)


# ---------------------------------------------------------------- kafka-python


class KafkaPythonMember(threading.Thread):
    """A kafka-python consumer polling on its own thread, committing after each record."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(daemon=True)
        self.consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )
        self.read: list[str] = []
        self.assigned: list[int] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                # A poll that times out while a join is in flight leaves kafka-python
                # 3.0.12 without heartbeats after that join completes: give joins time.
                for tp, records in self.consumer.poll(timeout_ms=1000).items():
                    for record in records:
                        self.consumer.commit({tp: OffsetAndMetadata(record.offset + 1, "", -1)})
                        self.read.append(record.value.decode())
                self.assigned = sorted(tp.partition for tp in self.consumer.assignment())
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            self.consumer.close()


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_kafka_python_members_share_partitions_and_take_over(
    make_broker: Callable[..., BrokerProcess], topic: str
) -> None:
    broker = make_broker(**NO_DELAY)
    create_topic(broker.bootstrap, topic, 4)
    first = [f"a-{i}" for i in range(40)]
    produce(broker.bootstrap, topic, first, 4)
    group = f"{topic}-group"
    one = KafkaPythonMember(broker.bootstrap, topic, group)
    two = KafkaPythonMember(broker.bootstrap, topic, group)
    one.start()
    two.start()
    try:
        wait_for(lambda: len(one.read) + len(two.read) == 40, 60, "the first batch")
        wait_for(
            lambda: (
                sorted(one.assigned + two.assigned) == [0, 1, 2, 3]
                and len(one.assigned) == len(two.assigned) == 2
            ),
            30,
            "two partitions each",
        )
        one.stop.set()
        one.join(20)  # closing leaves the group
        second = [f"b-{i}" for i in range(40)]
        produce(broker.bootstrap, topic, second, 4)
        wait_for(lambda: len(one.read) + len(two.read) == 80, 60, "the second batch")
        wait_for(lambda: two.assigned == [0, 1, 2, 3], 30, "the take-over")
    finally:
        for member in (one, two):
            member.stop.set()
            member.join(20)
    assert one.error is None and two.error is None, (one.error, two.error)
    everything = one.read + two.read
    assert sorted(everything) == sorted(first + second)
    assert len(set(everything)) == len(everything)


# -------------------------------------------------------------------- aiokafka


def test_aiokafka_members_share_partitions_and_take_over(
    make_broker: Callable[..., BrokerProcess], topic: str
) -> None:
    broker = make_broker(**NO_DELAY)
    create_topic(broker.bootstrap, topic, 4)
    values = [f"v-{i}" for i in range(40)]
    produce(broker.bootstrap, topic, values[:20], 4)
    group = f"{topic}-group"

    async def member(read: list[str], stop: asyncio.Event, assigned: list[int]) -> None:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )
        await consumer.start()
        try:
            while not stop.is_set():
                batches = await consumer.getmany(timeout_ms=100)
                for tp, records in batches.items():
                    for record in records:
                        read.append(record.value.decode())
                        await consumer.commit({tp: record.offset + 1})
                assigned[:] = sorted(tp.partition for tp in consumer.assignment())
        finally:
            await consumer.stop()

    async def scenario() -> tuple[list[str], list[str], list[int]]:
        reads: tuple[list[str], list[str]] = ([], [])
        stops = (asyncio.Event(), asyncio.Event())
        assigned: tuple[list[int], list[int]] = ([], [])
        tasks = [asyncio.create_task(member(reads[i], stops[i], assigned[i])) for i in (0, 1)]

        async def until(condition: Callable[[], bool], what: str) -> None:
            deadline = time.monotonic() + 60
            while not condition():
                assert time.monotonic() < deadline, f"timed out waiting for {what}"
                for task in tasks:
                    if task.done():
                        task.result()
                await asyncio.sleep(0.05)

        await until(lambda: len(reads[0]) + len(reads[1]) == 20, "the first half")
        await until(lambda: len(assigned[0]) == len(assigned[1]) == 2, "two partitions each")
        stops[0].set()
        await tasks[0]
        await asyncio.to_thread(produce, broker.bootstrap, topic, values[20:], 4)
        await until(lambda: len(reads[0]) + len(reads[1]) == 40, "the second half")
        await until(lambda: assigned[1] == [0, 1, 2, 3], "the take-over")
        stops[1].set()
        await tasks[1]
        return reads[0], reads[1], assigned[1]

    first, second, _ = asyncio.run(scenario())
    assert sorted(first + second) == sorted(values)
    assert len(set(first + second)) == 40


# -------------------------------------------------------------------- restarts


@pytest.mark.parametrize("how", ["sigterm", "kill9"])
def test_consumption_resumes_from_committed_offsets_after_a_restart(
    make_broker: Callable[..., BrokerProcess], topic: str, how: str
) -> None:
    broker = make_broker(**NO_DELAY)
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, [f"m-{i}" for i in range(40)], 2)
    group = f"{topic}-group"
    # kafka-python reads 8 messages of each partition and commits them, then leaves.
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=1,
    )
    seen: dict[int, int] = {0: 0, 1: 0}
    deadline = time.monotonic() + 60
    try:
        while min(seen.values()) < 8:
            assert time.monotonic() < deadline, f"timed out after reading {seen}"
            for tp, records in consumer.poll(timeout_ms=1000).items():  # see KafkaPythonMember
                for record in records:
                    if seen[tp.partition] < 8:
                        seen[tp.partition] += 1
                        consumer.commit({tp: OffsetAndMetadata(record.offset + 1, "", -1)})
                    else:
                        consumer.seek(tp, 8)
    finally:
        consumer.close()
    (broker.stop if how == "sigterm" else broker.kill)()
    broker.start()

    async def resume() -> dict[int, int]:
        aio = AIOKafkaConsumer(
            topic, bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False
        )
        await aio.start()
        first: dict[int, int] = {}
        try:
            while len(first) < 2:
                batches = await asyncio.wait_for(aio.getmany(timeout_ms=500), 30)
                for tp, records in batches.items():
                    first.setdefault(tp.partition, records[0].offset)
            committed = await aio.committed(AioTopicPartition(topic, 0))
            assert committed == 8
        finally:
            await aio.stop()
        return first

    assert asyncio.run(resume()) == {0: 8, 1: 8}
    # librdkafka sees the same committed offsets.
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        offsets = reader.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=10)
    finally:
        reader.close()
    assert [tp.offset for tp in offsets] == [8, 8]


# --------------------------------------------------------------- over the wire


def _call(sock: socket.socket, api: ApiKey, version: int, body: dict[str, Any]) -> Any:
    send_frame(sock, encode_request(api, version, 7, "groups-test", body))
    _, response = decode_response(api, version, memoryview(recv_frame(sock)))
    return response


def _commit(sock: socket.socket, group: str, generation: int, member: str, offset: int) -> str:
    response = _call(
        sock,
        ApiKey.OFFSET_COMMIT,
        8,
        {
            "group_id": group,
            "generation_id_or_member_epoch": generation,
            "member_id": member,
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": offset,
                            "committed_metadata": None,
                        }
                    ],
                }
            ],
        },
    )
    return _name(response["topics"][0]["partitions"][0]["error_code"])


def _fetch(sock: socket.socket, group: str) -> int:
    response = _call(
        sock,
        ApiKey.OFFSET_FETCH,
        8,
        {"groups": [{"group_id": group, "topics": [{"name": "t", "partition_indexes": [0]}]}]},
    )
    return int(response["groups"][0]["topics"][0]["partitions"][0]["committed_offset"])


def test_the_group_apis_over_the_wire(make_broker: Callable[..., BrokerProcess]) -> None:
    broker = make_broker(**NO_DELAY)
    create_topic(broker.bootstrap, "t", 1)
    sock = connect(broker)
    found = _call(sock, ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]})
    assert found["coordinators"][0]["port"] == broker.port
    assert _call(sock, ApiKey.FIND_COORDINATOR, 0, {"key": "g"})["node_id"] == 1
    join = {
        "group_id": "g",
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 10_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"sub"}],
    }
    first = _call(sock, ApiKey.JOIN_GROUP, 5, join)
    assert _name(first["error_code"]) == "MEMBER_ID_REQUIRED"
    member = first["member_id"]
    joined = _call(sock, ApiKey.JOIN_GROUP, 5, {**join, "member_id": member})
    assert (joined["error_code"], joined["generation_id"], joined["leader"]) == (0, 1, member)
    assert joined["members"][0]["metadata"] == b"sub"
    synced = _call(
        sock,
        ApiKey.SYNC_GROUP,
        3,
        {
            "group_id": "g",
            "generation_id": 1,
            "member_id": member,
            "assignments": [{"member_id": member, "assignment": b"all of it"}],
        },
    )
    assert (synced["error_code"], synced["assignment"]) == (0, b"all of it")
    heartbeat = {"group_id": "g", "generation_id": 1, "member_id": member}
    assert _call(sock, ApiKey.HEARTBEAT, 0, heartbeat)["error_code"] == 0

    # Commits: only from the current generation's members; refusals change nothing.
    assert _commit(sock, "g", 1, member, 5) == "NONE"
    assert _commit(sock, "g", 0, member, 99) == "ILLEGAL_GENERATION"
    assert _commit(sock, "g", 1, "intruder", 99) == "UNKNOWN_MEMBER_ID"
    assert _commit(sock, "g", -1, "", 99) == "UNKNOWN_MEMBER_ID"
    assert _fetch(sock, "g") == 5
    topics = [{"name": "t", "partition_indexes": [0, 1]}]
    old = _call(sock, ApiKey.OFFSET_FETCH, 1, {"group_id": "g", "topics": topics})
    assert [p["committed_offset"] for p in old["topics"][0]["partitions"]] == [5, -1]
    everything = _call(sock, ApiKey.OFFSET_FETCH, 5, {"group_id": "g", "topics": None})
    assert everything["topics"][0]["partitions"][0]["committed_offset"] == 5

    listed = _call(sock, ApiKey.LIST_GROUPS, 4, {"states_filter": ["Stable"]})
    assert [(g["group_id"], g["group_state"]) for g in listed["groups"]] == [("g", "Stable")]
    described = _call(sock, ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g", "nope"]})
    assert [g["group_state"] for g in described["groups"]] == ["Stable", "Dead"]
    # v6 (KIP-1043): an unknown group is GROUP_ID_NOT_FOUND, with Kafka's message.
    described = _call(sock, ApiKey.DESCRIBE_GROUPS, 6, {"groups": ["g", "nope"]})
    assert [(_name(g["error_code"]), g["error_message"]) for g in described["groups"]] == [
        ("NONE", None),
        ("GROUP_ID_NOT_FOUND", "Group nope not found."),
    ]
    assert described["groups"][0]["members"][0]["member_assignment"] == b"all of it"
    deleted = _call(sock, ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]})
    assert _name(deleted["results"][0]["error_code"]) == "NON_EMPTY_GROUP"
    subscribed = _call(
        sock,
        ApiKey.OFFSET_DELETE,
        0,
        {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]},
    )
    assert _name(subscribed["error_code"]) == "NON_EMPTY_GROUP"  # not a consumer subscription

    left = _call(sock, ApiKey.LEAVE_GROUP, 3, {"group_id": "g", "members": [{"member_id": member}]})
    assert left["error_code"] == 0 and left["members"][0]["error_code"] == 0
    assert _name(_call(sock, ApiKey.HEARTBEAT, 0, heartbeat)["error_code"]) == "UNKNOWN_MEMBER_ID"
    assert _commit(sock, "g", 1, member, 99) == "UNKNOWN_MEMBER_ID"
    assert _fetch(sock, "g") == 5
    assert (
        _call(sock, ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]})["results"][0]["error_code"]
        == 0
    )
    assert _fetch(sock, "g") == -1


def test_a_mixed_group_of_librdkafka_and_kafka_python(
    make_broker: Callable[..., BrokerProcess], topic: str
) -> None:
    # Both clients offer the "range" assignor, so they can share a group.
    broker = make_broker(**NO_DELAY)
    create_topic(broker.bootstrap, topic, 4)
    values = [f"x-{i}" for i in range(40)]
    group = f"{topic}-group"
    librdkafka = Member(broker.bootstrap, topic, group)
    python = KafkaPythonMember(broker.bootstrap, topic, group)
    python.start()
    try:
        deadline = time.monotonic() + 60
        while not (
            sorted(librdkafka.assigned() + python.assigned) == [0, 1, 2, 3]
            and len(python.assigned) == 2
        ):
            assert time.monotonic() < deadline, "timed out waiting for two partitions each"
            librdkafka.poll()
        produce(broker.bootstrap, topic, values, 4)
        while len(librdkafka.read) + len(python.read) < 40:
            assert time.monotonic() < deadline, "timed out waiting for the messages"
            librdkafka.poll()
    finally:
        python.stop.set()
        python.join(20)
        librdkafka.consumer.close()
    assert python.error is None
    assert sorted(librdkafka.read + python.read) == sorted(values)
    assert len(librdkafka.read) == len(python.read) == 20
