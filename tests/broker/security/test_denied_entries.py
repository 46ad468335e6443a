"""Denied partitions answered with complete entries, and each client reports the denial.

One broker for the module, with the ACL authorizer and
``allow.everyone.if.no.acl.found=false``: alice may DESCRIBE the topic (and
read her group, write her transactional id) but neither READ nor WRITE it;
bob may do nothing with it at all. Every partitioned API is asked as one of
them, on the wire (each field of the failed entry checked against its value
in a failed entry: empty records, -1 offsets), and through confluent-kafka,
kafka-python and aiokafka, which must report the authorization error rather
than a parse failure or a hang.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from aiokafka.errors import TopicAuthorizationFailedError as AioTopicAuthorizationFailed
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import TopicAuthorizationFailedError

from seglog.protocol import entries
from seglog.protocol.api_keys import ApiKey
from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.security.conftest import RawClient
from tests.broker.security.test_acls import ALICE_JAAS
from tests.broker.security.test_sasl import confluent, sasl_settings
from tests.broker.share.raw import uuid_of
from tests.log_dirs import check_log_dirs

TOPIC_FAILED = 29
CLUSTER_FAILED = 31
PASSWORDS = {"admin": "admin-secret", "alice": "alice", "bob": "bob-secret"}
MB = 1 << 20


@dataclass
class Denying:
    """The module's broker: its SASL port and the names its ACLs speak of."""

    port: int
    topic: str
    group: str
    bob_group: str
    txn: str

    @property
    def topic_0119(self) -> str:
        return f"{self.topic}-0119"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def config(self, user: str) -> dict[str, Any]:
        return {**confluent(self.bootstrap, "PLAIN", user, PASSWORDS[user]), "log_level": "0"}

    def python(self, user: str) -> dict[str, Any]:
        """kafka-python's and aiokafka's settings for ``user``."""
        return {
            "bootstrap_servers": self.bootstrap,
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": user,
            "sasl_plain_password": PASSWORDS[user],
        }

    def raw(self, user: str) -> RawClient:
        client = RawClient(self.port)
        client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        answer = client.request(
            ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": f"\0{user}\0{PASSWORDS[user]}".encode()}
        )
        assert answer is not None and answer["error_code"] == 0
        return client


def _allow(
    admin: AdminClient,
    restype: ResourceType,
    name: str,
    op: AclOperation,
    who: str,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> None:
    binding = AclBinding(
        restype, name, ResourcePatternType.LITERAL, f"User:{who}", "*", op, permission
    )
    for future in admin.create_acls([binding]).values():
        future.result(10)


@pytest.fixture(scope="module")
def denying(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Denying]:
    data: Path = tmp_path_factory.mktemp("denying") / "data"
    process = BrokerProcess(data)
    port = free_port()
    process.overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{process.port},SASL_PLAINTEXT://127.0.0.1:{port}",
        **sasl_settings(
            "SASL_PLAINTEXT",
            **{
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": ALICE_JAAS,
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "allow.everyone.if.no.acl.found": "false",
                "super.users": "User:admin",
                "auto.create.topics.enable": "false",
            },
        ),
    }
    process.start()
    name = f"denied-{os.getpid()}"
    broker = Denying(port, name, f"{name}-g", f"{name}-bob-g", f"{name}-txn")
    admin = AdminClient(broker.config("admin"))
    for future in admin.create_topics([NewTopic(name, 1)]).values():
        future.result(10)
    producer = Producer(broker.config("admin"))
    producer.produce(name, b"kept")
    assert producer.flush(20) == 0
    _allow(admin, ResourceType.TOPIC, name, AclOperation.DESCRIBE, "alice")
    _allow(admin, ResourceType.GROUP, broker.group, AclOperation.READ, "alice")
    _allow(admin, ResourceType.TRANSACTIONAL_ID, broker.txn, AclOperation.WRITE, "alice")
    _allow(admin, ResourceType.GROUP, broker.bob_group, AclOperation.READ, "bob")
    # librdkafka's 0119 topic: three partitions, DESCRIBE allowed and READ denied to all.
    for future in admin.create_topics([NewTopic(broker.topic_0119, 3)]).values():
        future.result(10)
    for partition in range(3):
        producer.produce(broker.topic_0119, b"kept", partition=partition)
    assert producer.flush(20) == 0
    _allow(admin, ResourceType.TOPIC, broker.topic_0119, AclOperation.DESCRIBE, "*")
    _allow(
        admin, ResourceType.TOPIC, broker.topic_0119, AclOperation.READ, "*",
        AclPermissionType.DENY,
    )  # fmt: skip
    yield broker
    assert process.alive(), "the broker died during the tests"
    assert process.stop() == 0
    check_log_dirs(data)


# ------------------------------------------------------------------ on the wire


@dataclass(frozen=True)
class Case:
    """One request whose answer holds one failed entry for the topic's partition 0."""

    user: str
    api_key: ApiKey
    version: int
    path: str
    code: int
    identity: dict[str, Any]

    def body(self, broker: Denying) -> dict[str, Any]:
        return _bodies(broker)[self.api_key]


def _bodies(b: Denying) -> dict[ApiKey, dict[str, Any]]:
    t = b.topic
    return {
        ApiKey.FETCH: {
            "replica_id": -1, "max_wait_ms": 5000, "min_bytes": 1, "max_bytes": MB,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": MB}]}],
        },
        ApiKey.PRODUCE: {
            "transactional_id": None, "acks": 1, "timeout_ms": 5000,
            "topic_data": [{"name": t, "partition_data": [{"index": 0, "records": b""}]}],
        },
        ApiKey.LIST_OFFSETS: {
            "replica_id": -1,
            "topics": [{"name": t, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        },
        ApiKey.OFFSET_FOR_LEADER_EPOCH: {
            "replica_id": -1,
            "topics": [{"topic": t, "partitions": [{"partition": 0, "leader_epoch": 0}]}],
        },
        ApiKey.DELETE_RECORDS: {
            "timeout_ms": 5000,
            "topics": [{"name": t, "partitions": [{"partition_index": 0, "offset": 1}]}],
        },
        ApiKey.OFFSET_COMMIT: {
            "group_id": b.group, "generation_id_or_member_epoch": -1, "member_id": "",
            "topics": [{"name": t, "partitions": [
                {"partition_index": 0, "committed_offset": 1}]}],
        },
        ApiKey.OFFSET_FETCH: {
            "group_id": b.bob_group,
            "topics": [{"name": t, "partition_indexes": [0]}],
            "groups": [{"group_id": b.bob_group,
                        "topics": [{"name": t, "partition_indexes": [0]}]}],
        },
        ApiKey.TXN_OFFSET_COMMIT: {
            "transactional_id": b.txn, "group_id": b.group, "producer_id": 0,
            "producer_epoch": 0,
            "topics": [{"name": t, "partitions": [
                {"partition_index": 0, "committed_offset": 1}]}],
        },
        ApiKey.ADD_PARTITIONS_TO_TXN: {
            "v3_and_below_transactional_id": b.txn, "v3_and_below_producer_id": 0,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": t, "partitions": [0]}],
        },
        ApiKey.DESCRIBE_PRODUCERS: {"topics": [{"name": t, "partition_indexes": [0]}]},
        ApiKey.WRITE_TXN_MARKERS: {
            "markers": [{"producer_id": 7, "producer_epoch": 0, "transaction_result": False,
                         "topics": [{"name": t, "partition_indexes": [0]}],
                         "coordinator_epoch": 0}],
        },
        ApiKey.CREATE_PARTITIONS: {
            "topics": [{"name": t, "count": 2, "assignments": None}],
            "timeout_ms": 5000, "validate_only": False,
        },
        ApiKey.DESCRIBE_TOPIC_PARTITIONS: {
            "topics": [{"name": t}], "response_partition_limit": 2000, "cursor": None,
        },
        ApiKey.METADATA: {"topics": [{"name": t}], "allow_auto_topic_creation": False},
    }  # fmt: skip


_P = {"partition_index": 0}
CASES = [
    Case("alice", ApiKey.FETCH, 4, "responses.partitions", TOPIC_FAILED, _P),
    Case("alice", ApiKey.FETCH, 12, "responses.partitions", TOPIC_FAILED, _P),
    Case("alice", ApiKey.PRODUCE, 3, "responses.partition_responses", TOPIC_FAILED, {"index": 0}),
    Case("alice", ApiKey.PRODUCE, 9, "responses.partition_responses", TOPIC_FAILED, {"index": 0}),
    Case("bob", ApiKey.LIST_OFFSETS, 1, "topics.partitions", TOPIC_FAILED, _P),
    Case("bob", ApiKey.LIST_OFFSETS, 7, "topics.partitions", TOPIC_FAILED, _P),
    Case("bob", ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, "topics.partitions", TOPIC_FAILED,
         {"partition": 0}),
    Case("bob", ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, "topics.partitions", TOPIC_FAILED,
         {"partition": 0}),
    Case("alice", ApiKey.DELETE_RECORDS, 0, "topics.partitions", TOPIC_FAILED, _P),
    Case("alice", ApiKey.DELETE_RECORDS, 2, "topics.partitions", TOPIC_FAILED, _P),
    Case("alice", ApiKey.OFFSET_COMMIT, 2, "topics.partitions", TOPIC_FAILED, _P),
    Case("alice", ApiKey.OFFSET_COMMIT, 9, "topics.partitions", TOPIC_FAILED, _P),
    Case("bob", ApiKey.OFFSET_FETCH, 1, "topics.partitions", TOPIC_FAILED, _P),
    Case("bob", ApiKey.OFFSET_FETCH, 7, "topics.partitions", TOPIC_FAILED, _P),
    Case("bob", ApiKey.OFFSET_FETCH, 8, "groups.topics.partitions", TOPIC_FAILED, _P),
    Case("alice", ApiKey.TXN_OFFSET_COMMIT, 0, "topics.partitions", TOPIC_FAILED, _P),
    Case("alice", ApiKey.TXN_OFFSET_COMMIT, 3, "topics.partitions", TOPIC_FAILED, _P),
    Case("alice", ApiKey.ADD_PARTITIONS_TO_TXN, 3,
         "results_by_topic_v3_and_below.results_by_partition", TOPIC_FAILED, _P),
    Case("bob", ApiKey.DESCRIBE_PRODUCERS, 0, "topics.partitions", TOPIC_FAILED, _P),
    Case("alice", ApiKey.WRITE_TXN_MARKERS, 1, "markers.topics.partitions", CLUSTER_FAILED, _P),
    Case("alice", ApiKey.CREATE_PARTITIONS, 0, "results", TOPIC_FAILED, {}),
    Case("alice", ApiKey.CREATE_PARTITIONS, 3, "results", TOPIC_FAILED, {}),
    Case("bob", ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, "topics", TOPIC_FAILED, {}),
    Case("bob", ApiKey.METADATA, 0, "topics", TOPIC_FAILED, {}),
    Case("bob", ApiKey.METADATA, 4, "topics", TOPIC_FAILED, {}),
    Case("bob", ApiKey.METADATA, 12, "topics", TOPIC_FAILED, {}),
]  # fmt: skip


def _entry(api_key: int, answer: dict[str, Any], path: str) -> dict[str, Any]:
    """The first element at each level on the way to ``path``: the one failed entry."""
    value: Any = answer
    parent = ""
    for name in path.split("."):
        found = next(f for f in entries.struct_fields(api_key, parent) if f.name == name)
        value = value[name]
        if found.is_array:
            assert len(value) == 1, f"{path}: {value}"
            value = value[0]
        parent = f"{parent}.{name}" if parent else name
    return value  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "case", CASES, ids=[f"{c.api_key.name}-v{c.version}-{c.user}" for c in CASES]
)
def test_a_denied_partition_is_answered_with_a_complete_entry(denying: Denying, case: Case) -> None:
    client = denying.raw(case.user)
    try:
        answer = client.request(case.api_key, case.version, case.body(denying))
    finally:
        client.close()
    assert answer is not None, "the broker closed the connection instead of answering"
    got = _entry(case.api_key, answer, case.path)
    error = entries.error_field(case.api_key, case.path)
    identity = dict(case.identity)
    if "name" in {f.name for f in entries.struct_fields(case.api_key, case.path)}:
        identity["name"] = denying.topic
    for f in entries.struct_fields(case.api_key, case.path):
        if not f.present(case.version):
            continue
        value = got[f.name]
        if f.name == error:
            assert value == case.code
        elif f.name in identity:
            assert value == identity[f.name]
        elif f.type == "records":
            # The defect librdkafka met: null here is "invalid MessageSetSize -1".
            assert value is not None and bytes(value) == b""
        else:
            assert value == f.failed_value(case.version), f.name


# ------------------------------------------------------------------ confluent-kafka


def _confluent_code(error: Any) -> int:
    if isinstance(error, KafkaException):
        error = error.args[0]
    assert isinstance(error, KafkaError), error
    return int(error.code())


def test_confluent_consumer_without_read_reports_the_denial(denying: Denying) -> None:
    """librdkafka's 0119: DESCRIBE but not READ gets the error, not a parse failure."""
    consumer = Consumer(
        {**denying.config("alice"), "group.id": denying.group, "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(denying.topic, 0, 0)])
        codes: list[int] = []
        for _ in range(60):
            message = consumer.poll(1)
            if message is not None and message.error() is not None:
                codes.append(message.error().code())
                if message.error().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    break
        assert codes and codes[-1] == KafkaError.TOPIC_AUTHORIZATION_FAILED, codes
        assert KafkaError._BAD_MSG not in codes
        # Committing the partition: the group may be read, the topic not.
        with pytest.raises(KafkaException) as raised:
            committed = consumer.commit(
                offsets=[TopicPartition(denying.topic, 0, 1)], asynchronous=False
            )
            # (some versions answer the per-partition errors instead of raising)
            for tp in committed or []:
                if tp.error is not None:
                    raise KafkaException(tp.error)
        assert _confluent_code(raised.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_confluent_subscriber_gets_one_denial_per_partition_as_librdkafka_0119_asks(
    denying: Denying,
) -> None:
    """0119's assertions: one TOPIC_AUTHORIZATION_FAILED per partition, no message, no other."""
    consumer = Consumer(
        {**denying.config("alice"), "group.id": denying.group, "auto.offset.reset": "earliest"}
    )
    denied: list[int] = []
    try:
        consumer.subscribe([denying.topic_0119])
        for _ in range(120):  # a generous wait for the three errors
            _count_0119(consumer.poll(0.5), denied)
            if len(denied) == 3:
                break
        assert sorted(denied) == [0, 1, 2]
        # 0119 keeps consuming: the errors are not repeated, and nothing else comes.
        for _ in range(10):
            _count_0119(consumer.poll(0.5), denied)
        assert sorted(denied) == [0, 1, 2]
    finally:
        consumer.close()


def _count_0119(message: Any, denied: list[int]) -> None:
    if message is None:
        return
    error = message.error()
    assert error is not None, "did not expect a valid message"
    assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error
    denied.append(message.partition())


def _delivery_error(denying: Denying, user: str) -> KafkaError | None:
    producer = Producer({**denying.config(user), "message.timeout.ms": 10000})
    errors: list[KafkaError | None] = []
    producer.produce(denying.topic, b"x", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert len(errors) == 1, user
    return errors[0]


def test_confluent_producer_and_admin_report_the_denial(denying: Denying) -> None:
    for user in ("alice", "bob"):
        error = _delivery_error(denying, user)
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, user
    alice = AdminClient(denying.config("alice"))
    (deleted,) = alice.delete_records([TopicPartition(denying.topic, 0, 1)]).values()
    with pytest.raises(KafkaException) as raised:
        deleted.result(30)
    assert _confluent_code(raised.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    bob = Consumer({**denying.config("bob"), "group.id": denying.bob_group})
    try:
        (committed,) = bob.committed([TopicPartition(denying.topic, 0)], timeout=30)
        assert committed.error is not None
        assert committed.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        bob.close()


def test_confluent_transaction_on_a_denied_topic_reports_the_denial(denying: Denying) -> None:
    producer = Producer(
        {**denying.config("alice"), "transactional.id": denying.txn, "message.timeout.ms": 10000}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    # AddPartitionsToTxn: WRITE on the id, none on the topic.
    producer.produce(denying.topic, b"x")
    with pytest.raises(KafkaException) as raised:
        producer.commit_transaction(30)
    assert _confluent_code(raised.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert raised.value.args[0].txn_requires_abort()
    # TxnOffsetCommit: READ on the group, none on the topic. (A new producer: the
    # first one's transaction never held a partition, and the EndTxn its abort sends
    # is answered INVALID_TXN_STATE, which is not what this test is about.)
    producer = Producer(
        {**denying.config("alice"), "transactional.id": denying.txn, "message.timeout.ms": 10000}
    )
    producer.init_transactions(30)
    consumer = Consumer({**denying.config("alice"), "group.id": denying.group})
    try:
        producer.begin_transaction()
        with pytest.raises(KafkaException) as raised:
            producer.send_offsets_to_transaction(
                [TopicPartition(denying.topic, 0, 1)], consumer.consumer_group_metadata(), 30
            )
        assert _confluent_code(raised.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        consumer.close()


# ------------------------------------------------------------------ kafka-python


def test_kafka_python_reports_the_denial(denying: Denying) -> None:
    partition = KafkaTopicPartition(denying.topic, 0)
    reader = KafkaConsumer(**denying.python("alice"))
    try:
        reader.assign([partition])
        reader.seek(partition, 0)
        with pytest.raises(TopicAuthorizationFailedError):
            for _ in range(60):
                reader.poll(500)
    finally:
        reader.close()
    committer = KafkaConsumer(
        **denying.python("alice"), group_id=denying.group, enable_auto_commit=False
    )
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            committer.commit({partition: OffsetAndMetadata(1, "", -1)})
    finally:
        committer.close()
    for user in ("alice", "bob"):
        producer = KafkaProducer(
            **denying.python(user), max_block_ms=30000, enable_idempotence=False
        )
        try:
            with pytest.raises(TopicAuthorizationFailedError):
                producer.send(denying.topic, b"x").get(timeout=30)
        finally:
            producer.close()


# ------------------------------------------------------------------ aiokafka


def test_aiokafka_reports_the_denial(denying: Denying) -> None:
    async def run() -> None:
        partition = AioTopicPartition(denying.topic, 0)
        consumer = AIOKafkaConsumer(**denying.python("alice"), enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([partition])
            consumer.seek(partition, 0)
            with pytest.raises(AioTopicAuthorizationFailed):
                for _ in range(60):
                    await consumer.getmany(timeout_ms=500)
        finally:
            await consumer.stop()
        producer = AIOKafkaProducer(**denying.python("alice"), request_timeout_ms=30000)
        await producer.start()
        try:
            with pytest.raises(AioTopicAuthorizationFailed):
                await producer.send_and_wait(denying.topic, b"x")
        finally:
            await producer.stop()

    asyncio.run(run())


def test_share_fetch_and_acknowledge_refuse_a_topic_without_read(denying: Denying) -> None:
    """ShareFetch names topics by id: READ on each is checked as the ids are resolved."""
    admin = AdminClient(denying.config("admin"))
    described = admin.describe_topics(TopicCollection([denying.topic]))[denying.topic]
    topic_id = uuid_of(described.result(10).topic_id)
    client = denying.raw("alice")
    try:
        fetched = client.request(
            ApiKey.SHARE_FETCH,
            1,
            {
                "group_id": denying.group,
                "member_id": "alice-member",
                "share_session_epoch": 0,
                "max_wait_ms": 0,
                "min_bytes": 1,
                "max_bytes": MB,
                "max_records": 10,
                "batch_size": 10,
                "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0}]}],
                "forgotten_topics_data": [],
            },
        )
        assert fetched is not None and fetched["error_code"] == 0, fetched
        [entry] = fetched["responses"][0]["partitions"]
        assert entry["error_code"] == TOPIC_FAILED
        assert entry["acquired_records"] == [] and bytes(entry["records"]) == b""
        acked = client.request(
            ApiKey.SHARE_ACKNOWLEDGE,
            1,
            {
                "group_id": denying.group,
                "member_id": "alice-member",
                "share_session_epoch": 1,
                "topics": [
                    {
                        "topic_id": topic_id,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "acknowledgement_batches": [
                                    {"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}
                                ],
                            }
                        ],
                    }
                ],
            },
        )
        assert acked is not None and acked["error_code"] == 0, acked
        assert acked["responses"][0]["partitions"][0]["error_code"] == TOPIC_FAILED
    finally:
        client.close()
    # bob may not even READ the group: the whole request is refused.
    bob = denying.raw("bob")
    try:
        refused = bob.request(
            ApiKey.SHARE_FETCH,
            1,
            {
                "group_id": denying.group,
                "member_id": "bob-member",
                "share_session_epoch": 0,
                "max_wait_ms": 0,
                "min_bytes": 1,
                "max_bytes": MB,
                "max_records": 10,
                "batch_size": 10,
                "topics": [],
                "forgotten_topics_data": [],
            },
        )
        assert refused is not None and refused["error_code"] == 30  # GROUP_AUTHORIZATION_FAILED
    finally:
        bob.close()
