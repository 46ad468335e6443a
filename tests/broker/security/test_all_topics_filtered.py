"""Requests about every topic answer only the topics the principal may DESCRIBE.

One broker for the module, with the ACL authorizer and
``allow.everyone.if.no.acl.found=false``: alice may DESCRIBE the topic
``visible`` but not ``secret``, and READ and DESCRIBE her groups; bob may do
nothing. Each request that means "every topic" (or matches topics by a regular
expression) is asked as them, on the wire, and must neither list nor reveal
``secret``, as Kafka filters each.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from seglog.protocol.api_keys import ApiKey
from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.security.conftest import RawClient
from tests.broker.security.test_acls import ALICE_JAAS
from tests.broker.security.test_sasl import confluent, sasl_settings

TOPIC_FAILED = 29
CLUSTER_FAILED = 31
PASSWORDS = {"admin": "admin-secret", "alice": "alice", "bob": "bob-secret"}


@dataclass
class Broker:
    port: int
    visible: str
    secret: str
    group: str
    shared_group: str
    clients: list[RawClient] = field(default_factory=list)

    def raw(self, user: str) -> RawClient:
        client = RawClient(self.port)
        self.clients.append(client)
        client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        answer = client.request(
            ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": f"\0{user}\0{PASSWORDS[user]}".encode()}
        )
        assert answer is not None and answer["error_code"] == 0
        return client

    def config(self, user: str) -> dict[str, Any]:
        return {
            **confluent(f"127.0.0.1:{self.port}", "PLAIN", user, PASSWORDS[user]),
            "log_level": "0",
        }


def _allow(admin: AdminClient, restype: ResourceType, name: str, op: AclOperation) -> None:
    binding = AclBinding(
        restype, name, ResourcePatternType.LITERAL, "User:alice", "*", op,
        AclPermissionType.ALLOW,
    )  # fmt: skip
    for future in admin.create_acls([binding]).values():
        future.result(10)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    data: Path = tmp_path_factory.mktemp("filtered") / "data"
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
    name = f"f{os.getpid()}"
    b = Broker(port, f"{name}-visible", f"{name}-secret", f"{name}-g", f"{name}-shared")
    admin = AdminClient(b.config("admin"))
    for future in admin.create_topics([NewTopic(b.visible, 1), NewTopic(b.secret, 1)]).values():
        future.result(10)
    _allow(admin, ResourceType.TOPIC, b.visible, AclOperation.DESCRIBE)
    for group in (b.group, b.shared_group):
        _allow(admin, ResourceType.GROUP, group, AclOperation.READ)
    # Offsets of alice's group on both topics, committed by the super user.
    committer = Consumer({**b.config("admin"), "group.id": b.group})
    committer.commit(
        offsets=[TopicPartition(b.visible, 0, 1), TopicPartition(b.secret, 0, 1)],
        asynchronous=False,
    )
    committer.close()
    yield b
    assert process.alive(), "the broker died during the tests"
    assert process.stop() == 0


@pytest.fixture(autouse=True)
def close_clients(broker: Broker) -> Iterator[None]:
    yield
    while broker.clients:
        broker.clients.pop().close()


def test_describe_topic_partitions_of_every_topic_pages_only_through_visible_ones(
    broker: Broker,
) -> None:
    bob = broker.raw("bob")
    answer = bob.request(
        ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [], "response_partition_limit": 1}
    )
    assert answer is not None
    assert answer["topics"] == [] and answer["next_cursor"] is None
    alice = broker.raw("alice")
    answer = alice.request(
        ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [], "response_partition_limit": 1}
    )
    assert answer is not None
    assert [t["name"] for t in answer["topics"]] == [broker.visible]
    assert answer["next_cursor"] is None  # the secret topic is not "the next one"


def test_offset_fetch_of_every_topic_leaves_out_the_undescribable(broker: Broker) -> None:
    alice = broker.raw("alice")
    every = alice.request(
        ApiKey.OFFSET_FETCH,
        8,
        {"groups": [{"group_id": broker.group, "topics": None}], "require_stable": False},
    )
    assert every is not None
    (group,) = every["groups"]
    assert [t["name"] for t in group["topics"]] == [broker.visible]
    named = alice.request(
        ApiKey.OFFSET_FETCH,
        8,
        {
            "groups": [
                {
                    "group_id": broker.group,
                    "topics": [{"name": broker.secret, "partition_indexes": [0]}],
                }
            ],
            "require_stable": False,
        },
    )
    assert named is not None
    (topic,) = named["groups"][0]["topics"]
    assert topic["partitions"][0]["error_code"] == TOPIC_FAILED
    old = alice.request(ApiKey.OFFSET_FETCH, 7, {"group_id": broker.group, "topics": None})
    assert old is not None
    assert [t["name"] for t in old["topics"]] == [broker.visible]


def _heartbeat(
    client: RawClient, group: str, *, names: list[str] | None = None, regex: str | None = None
) -> dict[str, Any]:
    answer = client.request(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        1,
        {
            "group_id": group,
            "member_id": str(uuid.uuid4()),
            "member_epoch": 0,
            "rebalance_timeout_ms": 30000,
            "subscribed_topic_names": names if names is not None else [],
            "subscribed_topic_regex": regex,
            "topic_partitions": [],
        },
    )
    assert answer is not None
    return answer


def test_a_heartbeat_naming_an_undescribable_topic_is_refused(broker: Broker) -> None:
    answer = _heartbeat(broker.raw("alice"), broker.shared_group, names=[broker.secret])
    assert answer["error_code"] == TOPIC_FAILED
    assert broker.secret in (answer["error_message"] or "")


def test_a_regex_matches_only_describable_topics(broker: Broker) -> None:
    alice = broker.raw("alice")
    group = f"{broker.group}-regex"
    answer = _heartbeat(alice, broker.group, regex=f"{broker.visible[:-8]}.*")
    assert answer["error_code"] == 0
    for _ in range(50):  # the assignment comes with a heartbeat once the target is computed
        if answer.get("assignment") is not None:
            break
        answer = (
            alice.request(
                ApiKey.CONSUMER_GROUP_HEARTBEAT,
                1,
                {
                    "group_id": broker.group,
                    "member_id": answer["member_id"],
                    "member_epoch": answer["member_epoch"],
                    "topic_partitions": [],
                },
            )
            or {}
        )
    assert answer.get("assignment") is not None, answer
    describe = broker.raw("admin").request(
        ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False}
    )
    assert describe is not None
    ids = {t["topic_id"]: t["name"] for t in describe["topics"]}
    assigned = {ids[p["topic_id"]] for p in answer["assignment"]["topic_partitions"]}
    assert assigned == {broker.visible}, (assigned, group)


def test_a_group_using_an_undescribable_topic_is_not_described(broker: Broker) -> None:
    member = _heartbeat(broker.raw("admin"), broker.shared_group, names=[broker.secret])
    assert member["error_code"] == 0
    answer = broker.raw("alice").request(
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        0,
        {"group_ids": [broker.shared_group], "include_authorized_operations": False},
    )
    assert answer is not None
    (group,) = answer["groups"]
    assert group["error_code"] == TOPIC_FAILED
    assert group["members"] == []
    assert group["error_message"] == (
        "The described group uses topics that the client is not authorized to describe."
    )


def test_describe_log_dirs_without_cluster_describe_is_refused(broker: Broker) -> None:
    answer = broker.raw("bob").request(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
    assert answer is not None
    assert answer["error_code"] == CLUSTER_FAILED
    assert answer["results"] == []
