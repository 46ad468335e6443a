"""Every API the broker serves, asked by each kind of principal under each kind of ACL.

One broker for the module: the ACL authorizer, ``allow.everyone.if.no.acl.found=false``,
``super.users=User:admin`` and a SASL_PLAINTEXT listener with PLAIN users. The table
:data:`ROWS` has a row per API key: the versions asked (the lowest and the highest the
broker serves, at least), a minimal valid request body (fields a version lacks are left
out), the resources the API needs and the operation Kafka requires on each
(``KafkaApis``/``AuthHelper``), in the order Kafka checks them, and where the answer
carries the refusal. An API has another row (a ``variant``) where versions answer in
another layout or where another kind of request is checked otherwise (transactional
records, the broker's configs, every topic). One parametrized test asks every row as

- an unauthenticated connection (it never logs in): the broker closes it, except for
  ApiVersions and the SASL handshake, which are answered;
- ``nobody``, a user with no ACLs: refused;
- ``describe-<kind>``, with DESCRIBE on every resource the API needs: allowed only when
  DESCRIBE is all the API needs;
- ``right-<kind>``, with the operations the API needs: allowed, except under ``deny``;
- ``partial-<kind>``, for APIs of several resources: the operations on all but the last
  one Kafka checks (under ``deny``: ALLOW on all, DENY on the last), refused by the last;
- ``admin``, a super user: allowed;

for the ACL kinds ``literal`` (the resource by name), ``prefixed`` (a PREFIXED pattern
the resource's name starts with) and ``deny`` (an ALLOW plus a DENY of the same operation
on the same resource: DENY wins, so refused). Each kind has its own users and each row
its own resource names, so that no case's ACLs grant or deny another's; the cluster has
one name, so a user's ACLs on it serve all its rows (they grant nothing a row does not
expect), and rows on the cluster have no prefixed kind. A refusal is Kafka's error code in
Kafka's place (per partition, per topic, per group, on the whole response) or, for a
listing, the item left out of it.

:func:`test_every_advertised_api_has_a_row` fails when ApiVersions advertises an API with
no row, so a new API cannot ship without its authorization cases.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from seglog.broker.security.access import PLANS
from seglog.protocol.api_keys import REGISTRY, SUPPORTED, ApiKey
from seglog.protocol.schema import Field, validate
from seglog.records.builder import SimpleRecord, build_batch
from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.security.conftest import RawClient
from tests.broker.security.test_sasl import sasl_settings
from tests.log_dirs import check_log_dirs

TOPIC_FAILED = 29
GROUP_FAILED = 30
CLUSTER_FAILED = 31
TXN_FAILED = 53
AUTH_CODES = {TOPIC_FAILED, GROUP_FAILED, CLUSTER_FAILED, TXN_FAILED}
LEFT_OUT = -1000
"""What a listing's outcome is when the item asked about is not in it."""

KINDS = ("literal", "prefixed", "deny")
PRINCIPALS = ("unauthenticated", "nobody", "describe", "right", "partial", "super")

# Kafka's wire codes for ACLs (CreateAcls).
RESOURCE_TYPE = {"topic": 2, "group": 3, "cluster": 4, "txn": 5}
LITERAL, PREFIXED = 3, 4
DENY, ALLOW = 2, 3
OPERATION = {
    "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7, "DESCRIBE": 8,
    "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12,
}  # fmt: skip

USERS = [
    "admin",
    "nobody",
    *(f"{who}-{kind}" for who in ("describe", "right", "partial") for kind in KINDS),
]
PASSWORDS = {user: f"{user}-secret" for user in USERS}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items())
    + ";"
)
MB = 1 << 20
PATIENCE = 120.0
"""Seconds a socket waits for an answer: creating the module's topics on a loaded machine
takes longer than the raw client's default."""
TRANSACTIONAL_BATCH = build_batch(
    [SimpleRecord(b"matrix")], producer_id=0, producer_epoch=0, base_sequence=0,
    is_transactional=True,
)  # fmt: skip


@dataclass(frozen=True)
class Names:
    """The resources one row asks about under one kind of ACL."""

    topic: str
    group: str
    txn: str


@dataclass(frozen=True)
class Need:
    """An operation an API needs on one of its resources, and the code of its refusal."""

    role: str
    """``cluster``, ``topic``, ``group`` or ``txn``: which of the row's resources."""
    operation: str
    refused: int
    """The error code Kafka answers without the operation (or :data:`LEFT_OUT`)."""
    where: tuple[str, ...] = ()
    """Where Kafka puts ``refused`` (every code there is it); empty: the row's paths."""


Body = Callable[[Names], dict[str, Any]]


@dataclass(frozen=True)
class Row:
    """One API key: how to ask it, what it needs, where the answer says so."""

    api: ApiKey
    versions: tuple[int, ...]
    """Versions asked, each with the same answer layout (another layout: another row)."""
    body: Body
    needs: tuple[Need, ...]
    """In the order Kafka checks them: the first one missing decides the refusal."""
    paths: tuple[str, ...] = ("error_code",)
    """Where the answer's error codes are (dotted, through arrays)."""
    listing: Callable[[dict[str, Any], Names], bool] | None = None
    """For listings: whether the row's item is listed (refused means left out)."""
    pre_auth: bool = False
    """Asked before authentication only (SASL): no authenticated column applies."""
    variant: str = ""
    """Names a second row of the same API (another layout or another kind of request)."""
    configs_from: int | None = None
    """CreateTopics: from this version, a created topic's configs are answered only with
    DESCRIBE_CONFIGS on it (here: to the super user), else ``topic_config_error_code``
    says TOPIC_AUTHORIZATION_FAILED (KIP-525)."""

    @property
    def name(self) -> str:
        """The row's name in case ids and resource names."""
        return f"{self.api.name}.{self.variant}" if self.variant else self.api.name

    @property
    def kinds(self) -> tuple[str, ...]:
        """The ACL kinds that make sense: none without resources, no prefix on the cluster."""
        if not self.needs:
            return ("literal",)
        if any(n.role == "cluster" for n in self.needs):
            return ("literal", "deny")
        return KINDS


def _tp(index: str = "partition_index") -> list[dict[str, Any]]:
    return [{index: 0}]


def _c(op: str, *where: str) -> Need:
    return Need("cluster", op, CLUSTER_FAILED, where)


def _t(op: str, *where: str) -> Need:
    return Need("topic", op, TOPIC_FAILED, where)


def _g(op: str, *where: str) -> Need:
    return Need("group", op, GROUP_FAILED, where)


def _x(op: str) -> Need:
    return Need("txn", op, TXN_FAILED)


def _listed_group(answer: dict[str, Any], n: Names) -> bool:
    return n.group in {g["group_id"] for g in answer["groups"]}


def _listed_topic(answer: dict[str, Any], n: Names) -> bool:
    return n.topic in {t["name"] for t in answer["topics"]}


def _listed_txn(answer: dict[str, Any], n: Names) -> bool:
    return n.txn in {t["transactional_id"] for t in answer["transaction_states"]}


def _offsets(n: Names) -> list[dict[str, Any]]:
    return [{"name": n.topic, "partitions": [{"partition_index": 0, "committed_offset": 1}]}]


_NONE_ACL = {
    "resource_type_filter": 2, "resource_name_filter": "no-such-topic-for-acls",
    "pattern_type_filter": 3, "principal_filter": None, "host_filter": None,
    "operation": 1, "permission_type": 1,
}  # fmt: skip

ROWS: tuple[Row, ...] = (
    Row(ApiKey.PRODUCE, (0, 9), lambda n: {
        "transactional_id": None, "acks": 1, "timeout_ms": 5000,
        "topic_data": [{"name": n.topic, "partition_data": [{"index": 0, "records": b""}]}],
    }, (_t("WRITE"),), ("responses.partition_responses.error_code",)),
    # Transactional records: WRITE on the transactional id first (v3+ carry one).
    Row(ApiKey.PRODUCE, (3, 9), lambda n: {
        "transactional_id": n.txn, "acks": -1, "timeout_ms": 5000,
        "topic_data": [{"name": n.topic, "partition_data": [
            {"index": 0, "records": TRANSACTIONAL_BATCH}]}],
    }, (_x("WRITE"), _t("WRITE")), ("responses.partition_responses.error_code",),
        variant="transactional"),
    # A transactional id with records that are not transactional: only the topic counts.
    Row(ApiKey.PRODUCE, (3, 9), lambda n: {
        "transactional_id": n.txn, "acks": 1, "timeout_ms": 5000,
        "topic_data": [{"name": n.topic, "partition_data": [{"index": 0, "records": b""}]}],
    }, (_t("WRITE"),), ("responses.partition_responses.error_code",), variant="plain"),
    Row(ApiKey.FETCH, (4, 12), lambda n: {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": MB,
        "session_epoch": -1,
        "topics": [{"topic": n.topic, "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": MB}]}],
    }, (_t("READ"),), ("responses.partitions.error_code",)),
    # A replica's fetch: CLUSTER_ACTION on the cluster instead of READ on each topic.
    Row(ApiKey.FETCH, (4, 12), lambda n: {
        "replica_id": 1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": MB,
        "session_epoch": -1,
        "topics": [{"topic": n.topic, "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": MB}]}],
    }, (Need("cluster", "CLUSTER_ACTION", TOPIC_FAILED),), ("responses.partitions.error_code",),
        variant="replica"),
    Row(ApiKey.LIST_OFFSETS, (1, 7), lambda n: {
        "replica_id": -1,
        "topics": [{"name": n.topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }, (_t("DESCRIBE"),), ("topics.partitions.error_code",)),
    Row(ApiKey.METADATA, (0, 12), lambda n: {
        "topics": [{"name": n.topic}], "allow_auto_topic_creation": False,
    }, (_t("DESCRIBE"),), ("topics.error_code",)),
    # Every topic: those one may not DESCRIBE are left out (v0 asks with an empty list).
    Row(ApiKey.METADATA, (0,), lambda n: {"topics": []},
        (Need("topic", "DESCRIBE", LEFT_OUT),), listing=_listed_topic, variant="all0"),
    Row(ApiKey.METADATA, (1, 12), lambda n: {"topics": None},
        (Need("topic", "DESCRIBE", LEFT_OUT),), listing=_listed_topic, variant="all"),
    Row(ApiKey.OFFSET_COMMIT, (2, 9), lambda n: {
        "group_id": n.group, "generation_id_or_member_epoch": -1, "member_id": "",
        "topics": _offsets(n),
    }, (_g("READ"), _t("READ")), ("topics.partitions.error_code",)),
    Row(ApiKey.OFFSET_FETCH, (8, 9), lambda n: {
        "groups": [{"group_id": n.group, "topics": [{"name": n.topic, "partition_indexes": [0]}]}],
    }, (_g("DESCRIBE", "groups.error_code"), _t("DESCRIBE", "groups.topics.partitions.error_code")),
        ("groups.error_code", "groups.topics.partitions.error_code")),
    # v1: the group's refusal is in each partition; v2-7 on the whole response.
    Row(ApiKey.OFFSET_FETCH, (1,), lambda n: {
        "group_id": n.group, "topics": [{"name": n.topic, "partition_indexes": [0]}],
    }, (_g("DESCRIBE"), _t("DESCRIBE")), ("topics.partitions.error_code",), variant="v1"),
    Row(ApiKey.OFFSET_FETCH, (2, 7), lambda n: {
        "group_id": n.group, "topics": [{"name": n.topic, "partition_indexes": [0]}],
    }, (_g("DESCRIBE", "error_code"), _t("DESCRIBE", "topics.partitions.error_code")),
        ("error_code", "topics.partitions.error_code"), variant="v2"),
    Row(ApiKey.FIND_COORDINATOR, (0, 3), lambda n: {"key": n.group, "key_type": 0},
        (_g("DESCRIBE"),), variant="v0"),
    Row(ApiKey.FIND_COORDINATOR, (4,), lambda n: {"key_type": 0, "coordinator_keys": [n.group]},
        (_g("DESCRIBE"),), ("coordinators.error_code",)),
    # Before v4 a join with no member id becomes a member at once, whom the next join
    # would wait for: an unknown member id is answered at once instead.
    Row(ApiKey.JOIN_GROUP, (0, 3), lambda n: {
        "group_id": n.group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
        "member_id": "m", "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }, (_g("READ"),), variant="v0"),
    Row(ApiKey.JOIN_GROUP, (4, 9), lambda n: {
        "group_id": n.group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
        "member_id": "", "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }, (_g("READ"),)),
    Row(ApiKey.HEARTBEAT, (0, 4), lambda n: {
        "group_id": n.group, "generation_id": 1, "member_id": "m",
    }, (_g("READ"),)),
    Row(ApiKey.LEAVE_GROUP, (0, 5), lambda n: {
        "group_id": n.group, "member_id": "m", "members": [{"member_id": "m"}],
    }, (_g("READ"),)),
    Row(ApiKey.SYNC_GROUP, (0, 5), lambda n: {
        "group_id": n.group, "generation_id": 1, "member_id": "m",
        "protocol_type": "consumer", "protocol_name": "range", "assignments": [],
    }, (_g("READ"),)),
    Row(ApiKey.DESCRIBE_GROUPS, (0, 6), lambda n: {"groups": [n.group]},
        (_g("DESCRIBE"),), ("groups.error_code",)),
    # Without DESCRIBE on the cluster, Kafka lists only the groups one may DESCRIBE.
    Row(ApiKey.LIST_GROUPS, (0, 5), lambda n: {}, (Need("cluster", "DESCRIBE", LEFT_OUT),),
        listing=_listed_group),
    # Else the groups one may DESCRIBE (the literal users have DESCRIBE on the cluster
    # from other rows: the prefixed ones show this path).
    Row(ApiKey.LIST_GROUPS, (0, 5), lambda n: {}, (Need("group", "DESCRIBE", LEFT_OUT),),
        listing=_listed_group, variant="group"),
    Row(ApiKey.SASL_HANDSHAKE, (0, 1), lambda n: {"mechanism": "PLAIN"}, (), pre_auth=True),
    Row(ApiKey.API_VERSIONS, (0, 3), lambda n: {
        "client_software_name": "matrix", "client_software_version": "1",
    }, ()),
    Row(ApiKey.CREATE_TOPICS, (2, 7), lambda n: {
        "topics": [{"name": n.topic, "num_partitions": 1, "replication_factor": 1}],
        "timeout_ms": 5000, "validate_only": True,
    }, (_t("CREATE"),), ("topics.error_code",), configs_from=5),
    # CREATE on the cluster creates any topic.
    Row(ApiKey.CREATE_TOPICS, (2, 7), lambda n: {
        "topics": [{"name": n.topic, "num_partitions": 1, "replication_factor": 1}],
        "timeout_ms": 5000, "validate_only": True,
    }, (Need("cluster", "CREATE", TOPIC_FAILED),), ("topics.error_code",), variant="cluster",
        configs_from=5),
    Row(ApiKey.DELETE_TOPICS, (1, 5), lambda n: {"topic_names": [n.topic], "timeout_ms": 5000},
        (_t("DELETE"),), ("responses.error_code",)),
    Row(ApiKey.DELETE_RECORDS, (0, 2), lambda n: {
        "timeout_ms": 5000,
        "topics": [{"name": n.topic, "partitions": [{"partition_index": 0, "offset": 0}]}],
    }, (_t("DELETE"),), ("topics.partitions.error_code",)),
    # Idempotent, no transactional id: IDEMPOTENT_WRITE on the cluster (or WRITE on
    # some topic, which the right users have and the others have not).
    Row(ApiKey.INIT_PRODUCER_ID, (0, 4), lambda n: {
        "transactional_id": None, "transaction_timeout_ms": 60000,
        "producer_id": -1, "producer_epoch": -1,
    }, (_c("IDEMPOTENT_WRITE"),), variant="idempotent"),
    Row(ApiKey.INIT_PRODUCER_ID, (0, 4), lambda n: {
        "transactional_id": n.txn, "transaction_timeout_ms": 60000,
        "producer_id": -1, "producer_epoch": -1,
    }, (_x("WRITE"),)),
    Row(ApiKey.OFFSET_FOR_LEADER_EPOCH, (2, 4), lambda n: {
        "replica_id": -1,
        "topics": [{"topic": n.topic, "partitions": [{"partition": 0, "leader_epoch": 0}]}],
    }, (_t("DESCRIBE"),), ("topics.partitions.error_code",)),
    # CLUSTER_ACTION on the cluster answers every topic.
    Row(ApiKey.OFFSET_FOR_LEADER_EPOCH, (2, 4), lambda n: {
        "replica_id": -1,
        "topics": [{"topic": n.topic, "partitions": [{"partition": 0, "leader_epoch": 0}]}],
    }, (Need("cluster", "CLUSTER_ACTION", TOPIC_FAILED),), ("topics.partitions.error_code",),
        variant="cluster"),
    # v3, what clients send; v4 is the brokers' own (CLUSTER_ACTION, KIP-890).
    Row(ApiKey.ADD_PARTITIONS_TO_TXN, (0, 3), lambda n: {
        "v3_and_below_transactional_id": n.txn, "v3_and_below_producer_id": 0,
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": n.topic, "partitions": [0]}],
    }, (_x("WRITE"), _t("WRITE")),
        ("results_by_topic_v3_and_below.results_by_partition.partition_error_code",)),
    Row(ApiKey.ADD_PARTITIONS_TO_TXN, (4,), lambda n: {"transactions": [{
        "transactional_id": n.txn, "producer_id": 0, "producer_epoch": 0, "verify_only": True,
        "topics": [{"name": n.topic, "partitions": [0]}],
    }]}, (_c("CLUSTER_ACTION"),), variant="v4"),
    Row(ApiKey.ADD_OFFSETS_TO_TXN, (0, 4), lambda n: {
        "transactional_id": n.txn, "producer_id": 0, "producer_epoch": 0, "group_id": n.group,
    }, (_x("WRITE"), _g("READ"))),
    Row(ApiKey.END_TXN, (0, 4), lambda n: {
        "transactional_id": n.txn, "producer_id": 0, "producer_epoch": 0, "committed": False,
    }, (_x("WRITE"),)),
    Row(ApiKey.WRITE_TXN_MARKERS, (0, 1), lambda n: {
        "markers": [{"producer_id": 7, "producer_epoch": 0, "transaction_result": False,
                     "topics": [{"name": n.topic, "partition_indexes": [0]}],
                     "coordinator_epoch": 0}],
    }, (_c("CLUSTER_ACTION"),), ("markers.topics.partitions.error_code",)),
    Row(ApiKey.TXN_OFFSET_COMMIT, (0, 4), lambda n: {
        "transactional_id": n.txn, "group_id": n.group, "producer_id": 0, "producer_epoch": 0,
        "generation_id": -1, "member_id": "", "topics": _offsets(n),
    }, (_x("WRITE"), _g("READ"), _t("READ")), ("topics.partitions.error_code",)),
    Row(ApiKey.DESCRIBE_ACLS, (1, 3), lambda n: dict(_NONE_ACL), (_c("DESCRIBE"),)),
    Row(ApiKey.CREATE_ACLS, (1, 3), lambda n: {"creations": [{
        "resource_type": 2, "resource_name": f"{n.topic}-harmless", "resource_pattern_type": 3,
        "principal": "User:no-such-user", "host": "*", "operation": 3, "permission_type": 3,
    }]}, (_c("ALTER"),), ("results.error_code",)),
    Row(ApiKey.DELETE_ACLS, (1, 3), lambda n: {"filters": [{
        "resource_type_filter": 2, "resource_name_filter": "no-such-topic-for-acls",
        "pattern_type_filter": 3, "principal_filter": None, "host_filter": None,
        "operation": 1, "permission_type": 1,
    }]}, (_c("ALTER"),), ("filter_results.error_code",)),
    Row(ApiKey.DESCRIBE_CONFIGS, (1, 4), lambda n: {
        "resources": [{"resource_type": 2, "resource_name": n.topic, "configuration_keys": None}],
    }, (_t("DESCRIBE_CONFIGS"),), ("results.error_code",)),
    # The broker's configs (the cluster-wide default, named ""): the cluster's operations.
    Row(ApiKey.DESCRIBE_CONFIGS, (1, 4), lambda n: {
        "resources": [{"resource_type": 4, "resource_name": "", "configuration_keys": None}],
    }, (_c("DESCRIBE_CONFIGS"),), ("results.error_code",), variant="broker"),
    Row(ApiKey.ALTER_CONFIGS, (0, 2), lambda n: {
        "resources": [{"resource_type": 4, "resource_name": "",
                       "configs": [{"name": "log.retention.ms", "value": "100000000"}]}],
        "validate_only": True,
    }, (_c("ALTER_CONFIGS"),), ("responses.error_code",), variant="broker"),
    Row(ApiKey.INCREMENTAL_ALTER_CONFIGS, (0, 1), lambda n: {
        "resources": [{"resource_type": 4, "resource_name": "", "configs": [
            {"name": "log.retention.ms", "config_operation": 0, "value": "100000000"}]}],
        "validate_only": True,
    }, (_c("ALTER_CONFIGS"),), ("responses.error_code",), variant="broker"),
    Row(ApiKey.ALTER_CONFIGS, (0, 2), lambda n: {
        "resources": [{"resource_type": 2, "resource_name": n.topic,
                       "configs": [{"name": "retention.ms", "value": "100000"}]}],
        "validate_only": True,
    }, (_t("ALTER_CONFIGS"),), ("responses.error_code",)),
    # A group's configs (KIP-848): the group's operations, as Kafka checks them.
    Row(ApiKey.DESCRIBE_CONFIGS, (1, 4), lambda n: {
        "resources": [{"resource_type": 32, "resource_name": n.group,
                       "configuration_keys": None}],
    }, (_g("DESCRIBE_CONFIGS"),), ("results.error_code",), variant="group"),
    Row(ApiKey.INCREMENTAL_ALTER_CONFIGS, (0, 1), lambda n: {
        "resources": [{"resource_type": 32, "resource_name": n.group, "configs": [
            {"name": "consumer.session.timeout.ms", "config_operation": 0, "value": "50000"}]}],
        "validate_only": True,
    }, (_g("ALTER_CONFIGS"),), ("responses.error_code",), variant="group"),
    Row(ApiKey.ALTER_REPLICA_LOG_DIRS, (1, 2), lambda n: {
        "dirs": [{"path": "/no/such/dir", "topics": [{"name": n.topic, "partitions": [0]}]}],
    }, (_c("ALTER"),), ("results.partitions.error_code",)),
    # v1-2 have no error code: a refusal is an empty answer.
    Row(ApiKey.DESCRIBE_LOG_DIRS, (1, 2), lambda n: {"topics": None},
        (Need("cluster", "DESCRIBE", LEFT_OUT),), listing=lambda a, n: bool(a["results"]),
        variant="v1"),
    Row(ApiKey.DESCRIBE_LOG_DIRS, (3, 4), lambda n: {"topics": None}, (_c("DESCRIBE"),)),
    Row(ApiKey.SASL_AUTHENTICATE, (0, 2), lambda n: {"auth_bytes": b"\0admin\0admin-secret"}, (),
        pre_auth=True),
    Row(ApiKey.CREATE_PARTITIONS, (0, 3), lambda n: {
        "topics": [{"name": n.topic, "count": 2, "assignments": None}],
        "timeout_ms": 5000, "validate_only": True,
    }, (_t("ALTER"),), ("results.error_code",)),
    Row(ApiKey.DELETE_GROUPS, (0, 2), lambda n: {"groups_names": [n.group]},
        (_g("DELETE"),), ("results.error_code",)),
    # v0 has no error code on the whole response.
    Row(ApiKey.ELECT_LEADERS, (0,), lambda n: {
        "election_type": 0, "topic_partitions": [{"topic": n.topic, "partitions": [0]}],
        "timeout_ms": 5000,
    }, (_c("ALTER"),), ("replica_election_results.partition_result.error_code",),
        variant="v0"),
    Row(ApiKey.ELECT_LEADERS, (1, 2), lambda n: {
        "election_type": 0, "topic_partitions": [{"topic": n.topic, "partitions": [0]}],
        "timeout_ms": 5000,
    }, (_c("ALTER"),), ("error_code", "replica_election_results.partition_result.error_code")),
    Row(ApiKey.INCREMENTAL_ALTER_CONFIGS, (0, 1), lambda n: {
        "resources": [{"resource_type": 2, "resource_name": n.topic, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "100000"}]}],
        "validate_only": True,
    }, (_t("ALTER_CONFIGS"),), ("responses.error_code",)),
    Row(ApiKey.ALTER_PARTITION_REASSIGNMENTS, (0,), lambda n: {
        "timeout_ms": 5000,
        "topics": [{"name": n.topic, "partitions": [{"partition_index": 0, "replicas": None}]}],
    }, (_c("ALTER"),), ("error_code", "responses.partitions.error_code")),
    Row(ApiKey.LIST_PARTITION_REASSIGNMENTS, (0,), lambda n: {"timeout_ms": 5000, "topics": None},
        (_c("DESCRIBE"),)),
    Row(ApiKey.OFFSET_DELETE, (0,), lambda n: {
        "group_id": n.group, "topics": [{"name": n.topic, "partitions": _tp()}],
    }, (_g("DELETE", "error_code"), _t("READ", "topics.partitions.error_code")),
        ("error_code", "topics.partitions.error_code")),
    Row(ApiKey.DESCRIBE_CLIENT_QUOTAS, (0, 1), lambda n: {"components": [], "strict": False},
        (_c("DESCRIBE_CONFIGS"),)),
    Row(ApiKey.ALTER_CLIENT_QUOTAS, (0, 1), lambda n: {
        "entries": [{"entity": [{"entity_type": "user", "entity_name": "no-such-user"}],
                     "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}]}],
        "validate_only": True,
    }, (_c("ALTER_CONFIGS"),), ("entries.error_code",)),
    Row(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, (0,), lambda n: {"users": [{"name": "no-such"}]},
        (_c("DESCRIBE"),), ("error_code", "results.error_code")),
    Row(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, (0,), lambda n: {
        "deletions": [{"name": "no-such-user", "mechanism": 1}], "upsertions": [],
    }, (_c("ALTER"),), ("results.error_code",)),
    Row(ApiKey.DESCRIBE_CLUSTER, (0, 1), lambda n: {}, ()),
    # READ, not DESCRIBE: KafkaApis.handleDescribeProducersRequest.
    Row(ApiKey.DESCRIBE_PRODUCERS, (0,), lambda n: {
        "topics": [{"name": n.topic, "partition_indexes": [0]}],
    }, (_t("READ"),), ("topics.partitions.error_code",)),
    Row(ApiKey.DESCRIBE_TRANSACTIONS, (0,), lambda n: {"transactional_ids": [n.txn]},
        (_x("DESCRIBE"),), ("transaction_states.error_code",)),
    Row(ApiKey.LIST_TRANSACTIONS, (0, 1), lambda n: {
        "state_filters": [], "producer_id_filters": [], "duration_filter": -1,
    }, (Need("txn", "DESCRIBE", LEFT_OUT),), listing=_listed_txn),
    Row(ApiKey.CONSUMER_GROUP_HEARTBEAT, (0, 1), lambda n: {
        "group_id": n.group, "member_id": "matrix-member-0000000", "member_epoch": 0,
        "rebalance_timeout_ms": 5000, "subscribed_topic_names": [n.topic],
        "topic_partitions": [],
    }, (_g("READ"), _t("DESCRIBE"))),
    Row(ApiKey.CONSUMER_GROUP_DESCRIBE, (0,), lambda n: {"group_ids": [n.group]},
        (_g("DESCRIBE"),), ("groups.error_code",)),
    Row(ApiKey.SHARE_GROUP_HEARTBEAT, (1,), lambda n: {
        "group_id": n.group, "member_id": "matrix-share-member", "member_epoch": 0,
        "rack_id": None, "subscribed_topic_names": [n.topic],
    }, (_g("READ"), _t("DESCRIBE"))),
    Row(ApiKey.SHARE_GROUP_DESCRIBE, (1,), lambda n: {
        "group_ids": [n.group], "include_authorized_operations": False,
    }, (_g("DESCRIBE"),), ("groups.error_code",)),
    # Topics are named by id in ShareFetch and ShareAcknowledge: their READ is checked as
    # the handler resolves the ids.
    Row(ApiKey.SHARE_FETCH, (1,), lambda n: {
        "group_id": n.group, "member_id": "matrix-share-member", "share_session_epoch": 0,
        "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1024, "max_records": 1,
        "batch_size": 1, "topics": [], "forgotten_topics_data": [],
    }, (_g("READ"),)),
    Row(ApiKey.SHARE_ACKNOWLEDGE, (1,), lambda n: {
        "group_id": n.group, "member_id": "matrix-share-member", "share_session_epoch": -1,
        "topics": [],
    }, (_g("READ"),)),
    Row(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, (0,), lambda n: {
        "groups": [{"group_id": n.group, "topics": None}],
    }, (_g("DESCRIBE"),), ("groups.error_code",)),
    Row(ApiKey.ALTER_SHARE_GROUP_OFFSETS, (0,), lambda n: {
        "group_id": n.group,
        "topics": [{"topic_name": n.topic, "partitions": [
            {"partition_index": 0, "start_offset": 0}]}],
    }, (_g("READ"), _t("READ"))),
    Row(ApiKey.DELETE_SHARE_GROUP_OFFSETS, (0,), lambda n: {
        "group_id": n.group, "topics": [{"topic_name": n.topic}],
    }, (_g("DELETE"), _t("READ"))),
    Row(ApiKey.DESCRIBE_TOPIC_PARTITIONS, (0,), lambda n: {
        "topics": [], "response_partition_limit": 2000, "cursor": None,
    }, (Need("topic", "DESCRIBE", LEFT_OUT),), listing=_listed_topic, variant="all"),
    Row(ApiKey.DESCRIBE_TOPIC_PARTITIONS, (0,), lambda n: {
        "topics": [{"name": n.topic}], "response_partition_limit": 100, "cursor": None,
    }, (_t("DESCRIBE"),), ("topics.error_code",)),
)  # fmt: skip
"""A row per API key the broker serves, and its variants (see the module's docstring)."""

BY_KEY: dict[ApiKey, list[Row]] = {}
for _row in ROWS:
    BY_KEY.setdefault(_row.api, []).append(_row)


def _names(base: str, row: Row, kind: str) -> Names:
    prefix = _prefix(base, row, kind)
    return Names(f"{prefix}topic", f"{prefix}group", f"{prefix}txn")


def _prefix(base: str, row: Row, kind: str) -> str:
    """What every resource name of the row under ``kind`` starts with (the PREFIXED pattern)."""
    return f"{base}-{row.name.lower()}-{kind}-"


def _resource(base: str, row: Row, kind: str, role: str) -> str:
    if role == "cluster":
        return "kafka-cluster"
    return str(getattr(_names(base, row, kind), role))


def _acls(base: str) -> list[dict[str, Any]]:
    """Every ACL of the module: for each row and kind, the describe, right and partial users'."""
    made: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in ROWS:
        for kind in row.kinds:
            for index, need in enumerate(row.needs):
                last = index == len(row.needs) - 1
                grants = [("describe", "DESCRIBE", True), ("right", need.operation, True)]
                if len(row.needs) > 1 and (not last or kind == "deny"):
                    grants.append(("partial", need.operation, last))
                for who, operation, denied in grants:
                    name = _resource(base, row, kind, need.role)
                    pattern = LITERAL
                    if kind == "prefixed":
                        name, pattern = _prefix(base, row, kind), PREFIXED
                    permissions = (ALLOW, DENY) if kind == "deny" and denied else (ALLOW,)
                    for permission in permissions:
                        acl = {
                            "resource_type": RESOURCE_TYPE[need.role],
                            "resource_name": name,
                            "resource_pattern_type": pattern,
                            "principal": f"User:{who}-{kind}",
                            "host": "*",
                            "operation": OPERATION[operation],
                            "permission_type": permission,
                        }
                        made[tuple(acl.values())] = acl
    return list(made.values())


def expected(row: Row, principal: str, kind: str) -> Need | None:
    """The need whose refusal Kafka answers, or None if the request is allowed."""
    if principal == "super" or not row.needs:
        return None
    if principal == "partial":
        return row.needs[-1]
    if principal == "nobody" or kind == "deny":
        # Deny: DENY beats the ALLOW on every resource, the first checked refuses.
        return row.needs[0]
    if principal == "describe":
        missing = [n for n in row.needs if n.operation != "DESCRIBE"]
        return missing[0] if missing else None
    return None


# ------------------------------------------------------------------ the broker


class Connections:
    """One logged-in connection per user, reused by every case; reopened if one closes."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.open: dict[str, RawClient] = {}

    def login(self, user: str) -> RawClient:
        client = _raw(self.port)
        try:
            client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
            answer = client.request(
                ApiKey.SASL_AUTHENTICATE,
                2,
                {"auth_bytes": f"\0{user}\0{PASSWORDS[user]}".encode()},
            )
            assert answer is not None and answer["error_code"] == 0, answer
        except BaseException:
            client.close()
            raise
        return client

    def request(
        self, user: str, api_key: int, version: int, body: dict[str, Any]
    ) -> dict[str, Any] | None:
        client = self.open.get(user)
        if client is None:
            client = self.open[user] = self.login(user)
        try:
            answer = client.request(api_key, version, body)
        except BaseException:
            self.drop(user)
            raise
        if answer is None:
            self.drop(user)
        return answer

    def drop(self, user: str) -> None:
        client = self.open.pop(user, None)
        if client is not None:
            client.close()

    def close(self) -> None:
        for user in list(self.open):
            self.drop(user)


def _raw(port: int) -> RawClient:
    client = RawClient(port)
    client.sock.settimeout(PATIENCE)
    return client


@dataclass
class Matrix:
    """The module's broker: its SASL port, its connections, the prefix of its names."""

    port: int
    base: str
    connections: Connections


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    data: Path = tmp_path_factory.mktemp("matrix") / "data"
    process = BrokerProcess(data)
    port = free_port()
    process.overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{process.port},SASL_PLAINTEXT://127.0.0.1:{port}",
        **sasl_settings(
            "SASL_PLAINTEXT",
            **{
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "allow.everyone.if.no.acl.found": "false",
                "super.users": "User:admin",
                "auto.create.topics.enable": "false",
            },
        ),
    }
    process.start()
    connections = Connections(port)
    try:
        base = f"mx{os.getpid()}"
        m = Matrix(port, base, connections)
        _prepare(m)
        yield m
    finally:
        connections.close()
        alive = process.alive()
        code = process.stop() if alive else None
    assert alive, "the broker died during the tests"
    assert code == 0, f"the broker exited with {code}"
    check_log_dirs(data)


def _admin(m: Matrix, api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
    answer = m.connections.request("admin", api_key, version, body)
    assert answer is not None, f"{api_key.name}: the broker closed the connection"
    return answer


def _prepare(m: Matrix) -> None:
    """The ACLs, and what the listings list: a group with offsets, transactional ids."""
    acls = _acls(m.base)
    answer = _admin(m, ApiKey.CREATE_ACLS, 3, {"creations": acls})
    assert [r["error_code"] for r in answer["results"]] == [0] * len(acls), answer
    # The topics exist (but CreateTopics'), so that an allowed request really succeeds
    # and a refused one cannot be told apart from a missing topic by its code.
    topics = [
        _names(m.base, row, kind).topic
        for row in ROWS
        if row.needs and row.api != ApiKey.CREATE_TOPICS
        for kind in row.kinds
    ]
    answer = _admin(
        m,
        ApiKey.CREATE_TOPICS,
        7,
        {
            "topics": [{"name": t, "num_partitions": 1, "replication_factor": 1} for t in topics],
            "timeout_ms": int(PATIENCE * 1000),
        },
    )
    assert [t["error_code"] for t in answer["topics"]] == [0] * len(topics), answer
    for row in BY_KEY[ApiKey.LIST_GROUPS]:
        for kind in row.kinds:
            names = _names(m.base, row, kind)
            body = {
                "group_id": names.group,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "topics": [{"name": names.topic, "partitions": [{"partition_index": 0}]}],
            }
            answer = _admin(m, ApiKey.OFFSET_COMMIT, 9, body)
            assert answer["topics"][0]["partitions"][0]["error_code"] == 0, answer
    for row in BY_KEY[ApiKey.LIST_TRANSACTIONS]:
        for kind in row.kinds:
            txn = _names(m.base, row, kind).txn
            body = {"transactional_id": txn, "transaction_timeout_ms": 60000}
            answer = _admin(m, ApiKey.INIT_PRODUCER_ID, 4, body)
            assert answer["error_code"] == 0, answer


# ------------------------------------------------------------------ the cases


def _codes(answer: dict[str, Any], paths: tuple[str, ...]) -> list[int]:
    """The values at each dotted path, through arrays at any level."""
    found: list[int] = []
    for path in paths:
        *parents, last = path.split(".")
        level: list[Any] = [answer]
        for name in parents:
            below: list[Any] = []
            for item in level:
                value = item.get(name)
                below.extend(value if isinstance(value, list) else [] if value is None else [value])
            level = below
        found.extend(item[last] for item in level)
    return found


XFAIL = {
    (ApiKey.SASL_AUTHENTICATE, "unauthenticated"): (
        "Kafka closes a connection whose first SASL request is SaslAuthenticate without "
        "answering it (SaslServerAuthenticator: IllegalSaslStateException before any "
        "response); seglog answers ILLEGAL_SASL_STATE, then closes"
    ),
}
"""Where the broker answers otherwise than Kafka, and how."""


def _cases() -> Iterator[Any]:
    for row in ROWS:
        for version in row.versions:
            for kind in row.kinds:
                for principal in PRINCIPALS:
                    if principal == "unauthenticated" and kind != row.kinds[0]:
                        continue  # an unauthenticated connection has no ACLs to vary
                    if principal == "partial" and len(row.needs) < 2:
                        continue  # with one resource, partial rights are no rights
                    marks: list[pytest.MarkDecorator] = []
                    if row.pre_auth and principal != "unauthenticated":
                        marks.append(pytest.mark.skip(reason="asked before authentication only"))
                    reason = XFAIL.get((row.api, principal))
                    if reason is not None:
                        marks.append(pytest.mark.xfail(strict=True, reason=reason))
                    case = f"{row.name}-v{version}-{kind}-{principal}"
                    yield pytest.param(row, version, kind, principal, id=case, marks=marks)


def _fit(fields: tuple[Field, ...], version: int, value: dict[str, Any]) -> dict[str, Any]:
    """``value`` without the fields ``version`` lacks: a row's body serves all its versions."""
    fitted = {}
    for f in fields:
        if f.name not in value or not f.present(version):
            continue
        item = value[f.name]
        if f.fields and isinstance(item, list):
            item = [_fit(f.fields, version, i) for i in item]
        elif f.fields and isinstance(item, dict):
            item = _fit(f.fields, version, item)
        fitted[f.name] = item
    return fitted


USER = {"nobody": "nobody", "super": "admin"}


@pytest.mark.parametrize(("row", "version", "kind", "principal"), list(_cases()))
def test_authorization(matrix: Matrix, row: Row, version: int, kind: str, principal: str) -> None:
    names = _names(matrix.base, row, kind)
    request = REGISTRY[row.api].request
    body = _fit(request.fields, version, row.body(names))
    validate(request, version, body)
    if principal == "unauthenticated":
        client = _raw(matrix.port)
        try:
            answer = client.request(row.api, version, body)
        finally:
            client.close()
        if row.api in (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE):
            assert answer is not None and answer["error_code"] == 0, answer
        else:
            assert answer is None, f"answered before authentication: {answer}"
        return
    user = USER.get(principal, f"{principal}-{kind}")
    answer = matrix.connections.request(user, row.api, version, body)
    assert answer is not None, "the broker closed the connection instead of answering"
    refusal = expected(row, principal, kind)
    if row.listing is not None:
        listed = row.listing(answer, names)
        assert listed is (refusal is None), answer
        return
    if refusal is None:
        paths = tuple(dict.fromkeys([*row.paths, *(p for n in row.needs for p in n.where)]))
        got = _codes(answer, paths)
        assert got, f"no error code at {paths}: {answer}"
        assert not AUTH_CODES & set(got), answer
        if row.configs_from is not None and version >= row.configs_from:
            hidden = 0 if principal == "super" else TOPIC_FAILED
            assert _codes(answer, ("topics.topic_config_error_code",)) == [hidden], answer
            assert bool(answer["topics"][0]["configs"]) is (hidden == 0), answer
        return
    for path in refusal.where or row.paths:
        got = _codes(answer, (path,))
        assert got and set(got) == {refusal.refused}, f"{path}: {got} in {answer}"


def test_every_advertised_api_has_a_row(matrix: Matrix) -> None:
    client = _raw(matrix.port)
    try:
        answer = client.request(ApiKey.API_VERSIONS, 3, {})
    finally:
        client.close()
    assert answer is not None and answer["error_code"] == 0
    advertised = {ApiKey(a["api_key"]) for a in answer["api_keys"]}
    assert advertised - set(BY_KEY) == set(), "advertised APIs without an authorization row"
    assert set(BY_KEY) - advertised == set(), "rows for APIs the broker does not advertise"
    for key, rows in BY_KEY.items():
        assert key in PLANS, f"{key.name} has no plan in seglog.broker.security.access"
        asked = [v for row in rows for v in row.versions]
        low, high = SUPPORTED[key]
        assert low in asked and high in asked, f"{key.name}: ask the lowest and highest versions"
        assert all(low <= v <= high for v in asked), key.name
