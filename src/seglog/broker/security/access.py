"""Which operations each API needs, checked in one place before its handler runs.

Theory of operation
-------------------
With an authorizer configured, :func:`check` is consulted by the dispatcher
for every request. For each API, a *plan* (the table :data:`PLANS`) reads the
request and either

- refuses it whole: it returns the response body to send (an error code on
  the whole response, as Kafka answers a JoinGroup without READ on the group
  with GROUP_AUTHORIZATION_FAILED), and the handler never runs; or
- removes from the request the items the principal may not touch (topics,
  groups, configuration resources), lets the handler answer the rest, and
  adds an error entry for each removed item to the handler's response
  (TOPIC_AUTHORIZATION_FAILED per partition for Produce, for instance).

The operations are Kafka's (``KafkaApis`` and ``AuthHelper``): Produce WRITE
on the topic (and on the transactional id for transactional records), Fetch
READ (a replica's fetch CLUSTER_ACTION on the cluster), ListOffsets DESCRIBE,
OffsetForLeaderEpoch DESCRIBE (or CLUSTER_ACTION on the cluster), Metadata
DESCRIBE (topics not allowed are left out of a list of all topics; creating
one needs CREATE on the cluster or the topic), CreateTopics CREATE,
DeleteTopics DELETE, CreatePartitions ALTER, DeleteRecords DELETE,
DescribeProducers READ, DescribeConfigs DESCRIBE_CONFIGS and the config
changes ALTER_CONFIGS (on the topic, or on the cluster for a broker), the
group APIs READ on the group (OffsetCommit also READ on each topic,
OffsetFetch DESCRIBE), DescribeGroups DESCRIBE, DeleteGroups DELETE,
ListGroups DESCRIBE on the cluster or else only the groups it may DESCRIBE,
InitProducerId WRITE on the transactional id or IDEMPOTENT_WRITE on the
cluster (or WRITE on some topic), and the ACL and SCRAM APIs ALTER or
DESCRIBE on the cluster. ``tests/broker/security/test_authorization_matrix.py``
asks each of them.

Every error entry and refusal is built by :func:`seglog.protocol.entries.failed`
from the API's response description: each field at its value in a failed
entry (empty records, -1 offsets), so no plan can leave one out.

An API with no plan is refused to everyone but super users (the connection is
closed and a warning logged): a new API is then closed until its checks are
written, never open by omission.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from seglog.broker.security.authorizer import (
    CLUSTER_NAME,
    Authorizer,
    Operation,
    ResourceType,
)
from seglog.protocol import entries, error_codes
from seglog.protocol.api_keys import ApiKey
from seglog.protocol.entries import failed
from seglog.records import batch

logger = logging.getLogger(__name__)

TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
CLUSTER = ResourceType.CLUSTER
TXN = ResourceType.TRANSACTIONAL_ID

TOPIC_FAILED = error_codes.code_for("TOPIC_AUTHORIZATION_FAILED")
GROUP_FAILED = error_codes.code_for("GROUP_AUTHORIZATION_FAILED")
CLUSTER_FAILED = error_codes.code_for("CLUSTER_AUTHORIZATION_FAILED")
TXN_FAILED = error_codes.code_for("TRANSACTIONAL_ID_AUTHORIZATION_FAILED")

Fix = Callable[[dict[str, Any]], None]


@dataclass
class Decision:
    """What to do with a request: answer ``response`` at once, or run the handler then ``fix``."""

    response: dict[str, Any] | None = None
    fixes: list[Fix] = field(default_factory=list)
    close: str | None = None
    """Set when the request must not be answered at all (the connection closes)."""

    def fix(self, response: dict[str, Any]) -> None:
        """Add the error entries of the items removed from the request."""
        for fix in self.fixes:
            fix(response)


@dataclass
class Access:
    """One request's principal, host and the broker's authorizer."""

    authorizer: Authorizer
    principal: str
    host: str
    topic_exists: Callable[[str], bool]
    topic_names: Callable[[], Iterable[str]] = tuple
    """Every topic's name, for the requests that ask about all of them."""

    def allowed(self, operation: Operation, resource_type: int, name: str) -> bool:
        """Whether the principal may do ``operation`` on the resource."""
        return self.authorizer.authorize(self.principal, self.host, operation, resource_type, name)

    def cluster(self, operation: Operation) -> bool:
        """Whether the principal may do ``operation`` on the cluster."""
        return self.allowed(operation, CLUSTER, CLUSTER_NAME)


Plan = Callable[[Access, int, dict[str, Any]], Decision]


def _allow(access: Access, version: int, body: dict[str, Any]) -> Decision:
    return Decision()


@dataclass(frozen=True)
class Layout:
    """Where an API keeps topics and partitions, in its request and in its response."""

    topics: str
    name: str
    partitions: str
    index: str
    response_topics: str
    response_name: str
    response_partitions: str
    response_index: str


_COMMON = Layout(*("topics", "name", "partitions", "partition_index") * 2)
_PRODUCE = Layout(
    "topic_data", "name", "partition_data", "index",
    "responses", "name", "partition_responses", "index",
)  # fmt: skip
_FETCH = Layout(
    "topics", "topic", "partitions", "partition",
    "responses", "topic", "partitions", "partition_index",
)  # fmt: skip
_EPOCHS = Layout(*("topics", "topic", "partitions", "partition") * 2)


def _partitioned(api_key: int, layout: Layout, operation: Operation) -> Plan:
    """A plan for APIs of topics with partitions: unauthorized topics fail per partition."""

    def plan(access: Access, version: int, body: dict[str, Any]) -> Decision:
        kept, denied = [], []
        for topic in body.get(layout.topics) or []:
            name = topic.get(layout.name)
            if name is None or access.allowed(operation, TOPIC, name):
                kept.append(topic)
            else:
                denied.append(topic)
        if not denied:
            return Decision()
        body[layout.topics] = kept
        return Decision(fixes=[_partition_errors(api_key, layout, denied, TOPIC_FAILED)])

    return plan


def _partition_errors(api_key: int, layout: Layout, denied: list[dict[str, Any]], code: int) -> Fix:
    def fix(response: dict[str, Any]) -> None:
        response.setdefault(layout.response_topics, []).extend(
            _failed_topic(api_key, layout, topic, code) for topic in denied
        )

    return fix


def _failed_partitions(
    api_key: int,
    path: str,
    partitions: str,
    code: int,
    indexes: Iterable[int],
    index: str = "partition_index",
    **topic: Any,
) -> dict[str, Any]:
    """The topic entry at ``path`` (``topic``: its name) whose ``indexes`` all failed."""
    inner = f"{path}.{partitions}"
    failures = [failed(api_key, inner, code, **{index: i}) for i in indexes]
    return entries.entry(api_key, path, **topic, **{partitions: failures})


def _failed_topic(api_key: int, layout: Layout, topic: dict[str, Any], code: int) -> dict[str, Any]:
    """A topic's entry in which each requested partition failed with ``code``."""
    return _failed_partitions(
        api_key,
        layout.response_topics,
        layout.response_partitions,
        code,
        (p[layout.index] for p in topic.get(layout.partitions) or []),
        layout.response_index,
        **{layout.response_name: topic[layout.name]},
    )


def _failed_topics(api_key: int, layout: Layout, body: dict[str, Any], code: int) -> dict[str, Any]:
    """A whole response in which every requested partition failed with ``code``."""
    topics = body.get(layout.topics) or []
    return entries.entry(
        api_key,
        "",
        **{layout.response_topics: [_failed_topic(api_key, layout, t, code) for t in topics]},
    )


def _named(
    request_list: str,
    name_of: Callable[[Any], str],
    allowed: Callable[[Access, Any], bool],
    response_list: str,
    entry: Callable[[Any], dict[str, Any]],
) -> Plan:
    """A plan for APIs of named items (topics, groups, resources), each allowed or not.

    ``entry`` builds a denied item's answer (with :func:`failed`).
    """

    def plan(access: Access, version: int, body: dict[str, Any]) -> Decision:
        items = body.get(request_list)
        if not items:
            return Decision()
        kept = [i for i in items if allowed(access, i)]
        denied = [i for i in items if not allowed(access, i)]
        if not denied:
            return Decision()
        body[request_list] = kept

        def fix(response: dict[str, Any]) -> None:
            response.setdefault(response_list, []).extend(entry(i) for i in denied)

        return Decision(fixes=[fix])

    return plan


def _group(api_key: int, operation: Operation, key: str = "group_id") -> Plan:
    """A whole request about one group: GROUP_AUTHORIZATION_FAILED without ``operation``."""

    def plan(access: Access, version: int, body: dict[str, Any]) -> Decision:
        if access.allowed(operation, GROUP, body[key]):
            return Decision()
        return Decision(response=failed(api_key, "", GROUP_FAILED))

    return plan


def _cluster(operation: Operation, response: Callable[[dict[str, Any]], dict[str, Any]]) -> Plan:
    def plan(access: Access, version: int, body: dict[str, Any]) -> Decision:
        if access.cluster(operation):
            return Decision()
        return Decision(response=response(body))

    return plan


# ------------------------------------------------------------------ the plans


def _produce(access: Access, version: int, body: dict[str, Any]) -> Decision:
    # As Kafka, the transactional id is checked when the records are transactional,
    # and then a request without one is refused too.
    txn = body.get("transactional_id")
    if _has_transactional_records(body) and (
        txn is None or not access.allowed(Operation.WRITE, TXN, txn)
    ):
        return Decision(response=_failed_topics(ApiKey.PRODUCE, _PRODUCE, body, TXN_FAILED))
    return _partitioned(ApiKey.PRODUCE, _PRODUCE, Operation.WRITE)(access, version, body)


def _fetch(access: Access, version: int, body: dict[str, Any]) -> Decision:
    """READ on each topic; a replica's fetch (``replica_id`` >= 0) needs CLUSTER_ACTION.

    As Kafka: a replica allowed CLUSTER_ACTION fetches every topic, one without it
    none of them (each partition TOPIC_AUTHORIZATION_FAILED).
    """
    if body.get("replica_id", -1) >= 0:
        if access.cluster(Operation.CLUSTER_ACTION):
            return Decision()
        return Decision(response=_failed_topics(ApiKey.FETCH, _FETCH, body, TOPIC_FAILED))
    return _partitioned(ApiKey.FETCH, _FETCH, Operation.READ)(access, version, body)


def _offset_for_leader_epoch(access: Access, version: int, body: dict[str, Any]) -> Decision:
    """DESCRIBE on each topic, or CLUSTER_ACTION on the cluster for all of them (Kafka's)."""
    if access.cluster(Operation.CLUSTER_ACTION):
        return Decision()
    return _partitioned(ApiKey.OFFSET_FOR_LEADER_EPOCH, _EPOCHS, Operation.DESCRIBE)(
        access, version, body
    )


def _has_transactional_records(body: dict[str, Any]) -> bool:
    """Whether some partition's first batch is transactional (Kafka looks at the first only).

    A malformed batch is not judged here: the append refuses it.
    """
    for topic in body.get("topic_data") or []:
        for partition in topic.get("partition_data") or []:
            records = partition.get("records")
            if (
                records is not None
                and len(records) >= batch.HEADER_SIZE
                and records[batch.MAGIC_OFFSET] == batch.CURRENT_MAGIC
                and batch.BatchHeader._make(batch.HEADER.unpack_from(records, 0)).is_transactional
            ):
                return True
    return False


def _metadata(access: Access, version: int, body: dict[str, Any]) -> Decision:
    requested = body.get("topics")
    hide: Fix = _hide_topics(access)
    if requested is None or (version == 0 and not requested):
        return Decision(fixes=[hide])
    kept, denied = [], []
    may_create_any = access.cluster(Operation.CREATE)
    for item in requested:
        name = item.get("name")
        if name is None:
            kept.append(item)  # by id: the answer is filtered below
        elif not access.allowed(Operation.DESCRIBE, TOPIC, name) or (
            # A topic that would be created needs CREATE too.
            not access.topic_exists(name)
            and body.get("allow_auto_topic_creation", True)
            and not (may_create_any or access.allowed(Operation.CREATE, TOPIC, name))
        ):
            denied.append(name)
        else:
            kept.append(item)
    body["topics"] = kept

    def fix(response: dict[str, Any]) -> None:
        hide(response)
        if version == 0 and not kept:
            # v0 reads the emptied list as "every topic": none of those was asked for.
            response["topics"] = []
        response.setdefault("topics", []).extend(
            failed(ApiKey.METADATA, "topics", TOPIC_FAILED, name=name) for name in denied
        )

    # (v0 reads an empty list as "every topic": those are then filtered by ``hide``.)
    return Decision(fixes=[fix])


def _hide_topics(access: Access) -> Fix:
    def hide(response: dict[str, Any]) -> None:
        response["topics"] = [
            t
            for t in response.get("topics") or []
            if t.get("name") is None
            or t.get("error_code") == TOPIC_FAILED
            or access.allowed(Operation.DESCRIBE, TOPIC, t["name"])
        ]

    return hide


def _create_topics(access: Access, version: int, body: dict[str, Any]) -> Decision:
    if access.cluster(Operation.CREATE):
        decision = Decision()
    else:
        decision = _named(
            "topics",
            lambda t: t["name"],
            lambda a, t: a.allowed(Operation.CREATE, TOPIC, t["name"]),
            "topics",
            lambda t: failed(
                ApiKey.CREATE_TOPICS,
                "topics",
                TOPIC_FAILED,
                name=t["name"],
                error_message="Authorization failed.",
            ),
        )(access, version, body)
    decision.fixes.append(_hide_created_configs(access))
    return decision


def _hide_created_configs(access: Access) -> Fix:
    """A created topic's configs, partitions and replicas need DESCRIBE_CONFIGS on it.

    As Kafka's controller (KIP-525): without it they are left out (empty, -1)
    and ``topic_config_error_code`` says TOPIC_AUTHORIZATION_FAILED.
    """

    def hide(response: dict[str, Any]) -> None:
        for topic in response.get("topics") or []:
            if topic.get("error_code") or access.allowed(
                Operation.DESCRIBE_CONFIGS, TOPIC, topic["name"]
            ):
                continue
            topic.update(
                topic_config_error_code=TOPIC_FAILED,
                configs=[],
                num_partitions=-1,
                replication_factor=-1,
            )

    return hide


def _delete_topics(access: Access, version: int, body: dict[str, Any]) -> Decision:
    key = "topics" if body.get("topics") else "topic_names"

    def name(item: Any) -> str:
        return str(item["name"] if isinstance(item, dict) else item)

    return _named(
        key,
        name,
        lambda a, t: (
            (isinstance(t, dict) and t.get("name") is None)
            or a.allowed(Operation.DELETE, TOPIC, name(t))
        ),
        "responses",
        lambda t: failed(ApiKey.DELETE_TOPICS, "responses", TOPIC_FAILED, name=name(t)),
    )(access, version, body)


def _config_resource(operation: Operation) -> Callable[[Access, Any], bool]:
    def allowed(access: Access, resource: Any) -> bool:
        if resource["resource_type"] == 2:  # TOPIC
            return access.allowed(operation, TOPIC, resource["resource_name"])
        if resource["resource_type"] == 32:  # GROUP: checked on the group, as Kafka does
            return access.allowed(operation, GROUP, resource["resource_name"])
        return access.cluster(operation)  # BROKER, BROKER_LOGGER

    return allowed


def _config_error(api_key: int, path: str) -> Callable[[Any], dict[str, Any]]:
    def entry(resource: Any) -> dict[str, Any]:
        return failed(
            api_key,
            path,
            TOPIC_FAILED
            if resource["resource_type"] == 2
            else GROUP_FAILED
            if resource["resource_type"] == 32
            else CLUSTER_FAILED,
            resource_type=resource["resource_type"],
            resource_name=resource["resource_name"],
        )

    return entry


def _offset_commit(access: Access, version: int, body: dict[str, Any]) -> Decision:
    if not access.allowed(Operation.READ, GROUP, body["group_id"]):
        return Decision(response=_failed_topics(ApiKey.OFFSET_COMMIT, _COMMON, body, GROUP_FAILED))
    return _partitioned(ApiKey.OFFSET_COMMIT, _COMMON, Operation.READ)(access, version, body)


def _offset_fetch(access: Access, version: int, body: dict[str, Any]) -> Decision:
    if version >= 8:
        denied = [
            g["group_id"]
            for g in body.get("groups") or []
            if not access.allowed(Operation.DESCRIBE, GROUP, g["group_id"])
        ]
        body["groups"] = [g for g in body.get("groups") or [] if g["group_id"] not in denied]

        asked_all = {g["group_id"] for g in body["groups"] if g.get("topics") is None}

        def fix_groups(response: dict[str, Any]) -> None:
            for group in response.get("groups") or []:
                group["topics"] = _visible(
                    access,
                    group.get("topics") or [],
                    "groups.topics",
                    leave_out=group.get("group_id") in asked_all,
                )
            response.setdefault("groups", []).extend(
                failed(ApiKey.OFFSET_FETCH, "groups", GROUP_FAILED, group_id=g) for g in denied
            )

        return Decision(fixes=[fix_groups])
    if not access.allowed(Operation.DESCRIBE, GROUP, body["group_id"]):
        if version < 2:
            # v0-1 have no error code on the whole response: Kafka fails each partition.
            key = ApiKey.OFFSET_FETCH
            return Decision(
                response=entries.entry(
                    key,
                    "",
                    topics=[
                        _failed_partitions(
                            key,
                            "topics",
                            "partitions",
                            GROUP_FAILED,
                            t.get("partition_indexes") or [],
                            name=t["name"],
                        )
                        for t in body.get("topics") or []
                    ],
                )
            )
        return Decision(response=failed(ApiKey.OFFSET_FETCH, "", GROUP_FAILED))

    every = body.get("topics") is None

    def fix(response: dict[str, Any]) -> None:
        response["topics"] = _visible(
            access, response.get("topics") or [], "topics", leave_out=every
        )

    return Decision(fixes=[fix])


def _visible(
    access: Access, topics: list[dict[str, Any]], path: str, *, leave_out: bool = False
) -> list[Any]:
    """Offsets of topics the principal may DESCRIBE; the others fail per partition.

    ``leave_out``: the request asked for every topic, and Kafka then leaves out
    the topics the principal may not DESCRIBE instead of naming them.
    """
    result = []
    partitions = f"{path}.partitions"
    for topic in topics:
        if not access.allowed(Operation.DESCRIBE, TOPIC, topic["name"]):
            if leave_out:
                continue
            topic["partitions"] = [
                failed(
                    ApiKey.OFFSET_FETCH,
                    partitions,
                    TOPIC_FAILED,
                    partition_index=p["partition_index"],
                )
                for p in topic.get("partitions") or []
            ]
        result.append(topic)
    return result


def _consumer_group_heartbeat(access: Access, version: int, body: dict[str, Any]) -> Decision:
    """READ on the group; each topic subscribed to by name needs DESCRIBE, as in Kafka.

    Topics matched by a regular expression are filtered by the coordinator
    with :func:`describable_topics`, as they appear.
    """
    key = ApiKey.CONSUMER_GROUP_HEARTBEAT
    if not access.allowed(Operation.READ, GROUP, body["group_id"]):
        return Decision(response=failed(key, "", GROUP_FAILED))
    names = body.get("subscribed_topic_names") or []
    denied = sorted({n for n in names if not access.allowed(Operation.DESCRIBE, TOPIC, n)})
    if denied:
        message = "The following topics are unauthorized: " + ", ".join(denied)
        return Decision(response=failed(key, "", TOPIC_FAILED, error_message=message))
    return Decision()


_UNDESCRIBABLE_GROUP = (
    "The described group uses topics that the client is not authorized to describe."
)


def _consumer_group_describe(access: Access, version: int, body: dict[str, Any]) -> Decision:
    """DESCRIBE on each group; a group whose members use a topic the principal may not
    DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED, without its members, as Kafka does."""
    decision = _named(
        "group_ids",
        str,
        lambda a, g: a.allowed(Operation.DESCRIBE, GROUP, g),
        "groups",
        lambda g: failed(ApiKey.CONSUMER_GROUP_DESCRIBE, "groups", GROUP_FAILED, group_id=g),
    )(access, version, body)

    def hide(response: dict[str, Any]) -> None:
        for index, group in enumerate(response.get("groups") or []):
            topics: set[str] = set()
            for member in group.get("members") or []:
                topics.update(member.get("subscribed_topic_names") or [])
                for which in ("assignment", "target_assignment"):
                    for part in (member.get(which) or {}).get("topic_partitions") or []:
                        topics.add(part.get("topic_name") or "")
            topics.discard("")
            if any(not access.allowed(Operation.DESCRIBE, TOPIC, t) for t in topics):
                response["groups"][index] = failed(
                    ApiKey.CONSUMER_GROUP_DESCRIBE,
                    "groups",
                    TOPIC_FAILED,
                    group_id=group["group_id"],
                    error_message=_UNDESCRIBABLE_GROUP,
                )

    decision.fixes.append(hide)
    return decision


def describable_topics(session: Any) -> Callable[[str], bool] | None:
    """Whether the connection's principal may DESCRIBE a topic; None when nothing is checked.

    For the coordinator, which matches regular expressions against topics as
    they appear: a member sees only the topics its principal may DESCRIBE.
    """
    security = getattr(session, "security", None)
    authorizer = getattr(security, "authorizer", None)
    if authorizer is None:
        return None
    principal, host = session.principal, session.host

    def allowed(topic: str) -> bool:
        return bool(authorizer.authorize(principal, host, Operation.DESCRIBE, TOPIC, topic))

    return allowed


def _find_coordinator(access: Access, version: int, body: dict[str, Any]) -> Decision:
    kind = body.get("key_type", 0)
    resource, code = (TXN, TXN_FAILED) if kind == 1 else (GROUP, GROUP_FAILED)
    if version >= 4:
        keys = body.get("coordinator_keys") or []
        denied = [k for k in keys if not access.allowed(Operation.DESCRIBE, resource, k)]
        if not denied:
            return Decision()
        body["coordinator_keys"] = [k for k in keys if k not in denied]

        def fix(response: dict[str, Any]) -> None:
            response.setdefault("coordinators", []).extend(
                failed(ApiKey.FIND_COORDINATOR, "coordinators", code, key=k, node_id=-1, port=-1)
                for k in denied
            )

        return Decision(fixes=[fix])
    if access.allowed(Operation.DESCRIBE, resource, body.get("key", "")):
        return Decision()
    return Decision(response=failed(ApiKey.FIND_COORDINATOR, "", code, node_id=-1, port=-1))


def _list_groups(access: Access, version: int, body: dict[str, Any]) -> Decision:
    if access.cluster(Operation.DESCRIBE):
        return Decision()

    def fix(response: dict[str, Any]) -> None:
        response["groups"] = [
            g
            for g in response.get("groups") or []
            if access.allowed(Operation.DESCRIBE, GROUP, g["group_id"])
        ]

    return Decision(fixes=[fix])


def _init_producer_id(access: Access, version: int, body: dict[str, Any]) -> Decision:
    txn = body.get("transactional_id")
    if txn is not None:
        if access.allowed(Operation.WRITE, TXN, txn):
            return Decision()
        return Decision(
            response=failed(
                ApiKey.INIT_PRODUCER_ID, "", TXN_FAILED, producer_id=-1, producer_epoch=-1
            )
        )
    if access.cluster(Operation.IDEMPOTENT_WRITE) or access.authorizer.authorize_any(
        access.principal, access.host, Operation.WRITE, TOPIC
    ):
        return Decision()
    return Decision(
        response=failed(
            ApiKey.INIT_PRODUCER_ID, "", CLUSTER_FAILED, producer_id=-1, producer_epoch=-1
        )
    )


def _offset_delete(access: Access, version: int, body: dict[str, Any]) -> Decision:
    if not access.allowed(Operation.DELETE, GROUP, body["group_id"]):
        return Decision(response=failed(ApiKey.OFFSET_DELETE, "", GROUP_FAILED))
    return _partitioned(ApiKey.OFFSET_DELETE, _COMMON, Operation.READ)(access, version, body)


def _alter_replica_log_dirs(body: dict[str, Any]) -> dict[str, Any]:
    key = ApiKey.ALTER_REPLICA_LOG_DIRS
    return entries.entry(
        key,
        "",
        results=[
            _failed_partitions(
                key,
                "results",
                "partitions",
                CLUSTER_FAILED,
                t.get("partitions") or [],
                topic_name=t["name"],
            )
            for d in body.get("dirs") or []
            for t in d.get("topics") or []
        ],
    )


def _alter_client_quotas(body: dict[str, Any]) -> dict[str, Any]:
    key = ApiKey.ALTER_CLIENT_QUOTAS
    return entries.entry(
        key,
        "",
        entries=[
            failed(key, "entries", CLUSTER_FAILED, entity=e.get("entity", []))
            for e in body.get("entries") or []
        ],
    )


def _elect_leaders(body: dict[str, Any]) -> dict[str, Any]:
    """Refused: the whole response and each requested partition, as Kafka's error response."""
    key = ApiKey.ELECT_LEADERS
    return failed(
        key,
        "",
        CLUSTER_FAILED,
        replica_election_results=[
            entries.entry(
                key,
                "replica_election_results",
                topic=t["topic"],
                partition_result=[
                    failed(
                        key,
                        "replica_election_results.partition_result",
                        CLUSTER_FAILED,
                        partition_id=p,
                    )
                    for p in t.get("partitions") or []
                ],
            )
            for t in body.get("topic_partitions") or []
        ],
    )


def _alter_partition_reassignments(body: dict[str, Any]) -> dict[str, Any]:
    """Refused: the whole response and each requested partition, as Kafka's error response."""
    key = ApiKey.ALTER_PARTITION_REASSIGNMENTS
    return failed(
        key,
        "",
        CLUSTER_FAILED,
        responses=[
            _failed_partitions(
                key,
                "responses",
                "partitions",
                CLUSTER_FAILED,
                (p["partition_index"] for p in t.get("partitions") or []),
                name=t["name"],
            )
            for t in body.get("topics") or []
        ],
    )


def _describe_user_scram_credentials(body: dict[str, Any]) -> dict[str, Any]:
    """Refused: the whole response and one failed result per user asked about.

    Kafka's error response leaves each result's user empty; so does this one.
    """
    key = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
    return failed(
        key,
        "",
        CLUSTER_FAILED,
        results=[failed(key, "results", CLUSTER_FAILED) for _ in body.get("users") or []],
    )


def _topic_names(
    request_list: str,
    response_list: str,
    entry: Callable[[Any], dict[str, Any]],
    operation: Operation = Operation.DESCRIBE,
) -> Plan:
    """Topics by name that each need ``operation`` (DescribeProducers, DescribeTopicPartitions)."""
    return _named(
        request_list,
        lambda t: t["name"],
        lambda a, t: a.allowed(operation, TOPIC, t["name"]),
        response_list,
        entry,
    )


def _describe_topic_partitions(access: Access, version: int, body: dict[str, Any]) -> Decision:
    """Named topics without DESCRIBE fail; a listing of all topics leaves them out."""
    key = ApiKey.DESCRIBE_TOPIC_PARTITIONS
    named = bool(body.get("topics"))
    decision = _topic_names(
        "topics", "topics", lambda t: failed(key, "topics", TOPIC_FAILED, name=t["name"])
    )(access, version, body)
    if named and not body["topics"]:
        # Every named topic refused: the emptied list must not reach the handler,
        # which reads an empty list as "every topic".
        response = entries.entry(key, "")
        decision.fix(response)
        return Decision(response=response)
    if not named:
        # Every topic: the handler pages through the ones the principal may
        # DESCRIBE, so that neither a page nor next_cursor names another.
        visible = sorted(
            n for n in access.topic_names() if access.allowed(Operation.DESCRIBE, TOPIC, n)
        )
        if not visible:
            return Decision(response=entries.entry(key, ""))
        body["topics"] = [{"name": n} for n in visible]
    decision.fixes.insert(0, _hide_topics(access))
    return decision


# ------------------------------------------------------------------ transactions
# Kafka's rules: WRITE on the transactional id for every transaction request,
# WRITE on each topic added to a transaction, READ on the group whose offsets
# join it; DESCRIBE on an id to see it in DescribeTransactions/ListTransactions.

_NOT_ATTEMPTED = error_codes.code_for("OPERATION_NOT_ATTEMPTED")


def _txn_error(api_key: int, code: int) -> dict[str, Any]:
    return failed(api_key, "", code)


def _add_partitions_to_txn(access: Access, version: int, body: dict[str, Any]) -> Decision:
    if version >= 4:
        # Broker to broker in Kafka (KIP-890 verification): a cluster action.
        if access.cluster(Operation.CLUSTER_ACTION):
            return Decision()
        return Decision(response=failed(ApiKey.ADD_PARTITIONS_TO_TXN, "", CLUSTER_FAILED))
    topics = body.get("v3_and_below_topics") or []
    txn_ok = access.allowed(Operation.WRITE, TXN, body["v3_and_below_transactional_id"])
    denied = {t["name"] for t in topics if not access.allowed(Operation.WRITE, TOPIC, t["name"])}
    if txn_ok and not denied:
        return Decision()

    def code(name: str) -> int:
        if not txn_ok:
            return TXN_FAILED
        return TOPIC_FAILED if name in denied else _NOT_ATTEMPTED

    key = ApiKey.ADD_PARTITIONS_TO_TXN
    topic_path = "results_by_topic_v3_and_below"
    return Decision(
        response=entries.entry(
            key,
            "",
            results_by_topic_v3_and_below=[
                _failed_partitions(
                    key,
                    topic_path,
                    "results_by_partition",
                    code(t["name"]),
                    t.get("partitions") or [],
                    name=t["name"],
                )
                for t in topics
            ],
        )
    )


def _add_offsets_to_txn(access: Access, version: int, body: dict[str, Any]) -> Decision:
    if not access.allowed(Operation.WRITE, TXN, body["transactional_id"]):
        return Decision(response=_txn_error(ApiKey.ADD_OFFSETS_TO_TXN, TXN_FAILED))
    if not access.allowed(Operation.READ, GROUP, body["group_id"]):
        return Decision(response=_txn_error(ApiKey.ADD_OFFSETS_TO_TXN, GROUP_FAILED))
    return Decision()


def _end_txn(access: Access, version: int, body: dict[str, Any]) -> Decision:
    if not access.allowed(Operation.WRITE, TXN, body["transactional_id"]):
        return Decision(response=_txn_error(ApiKey.END_TXN, TXN_FAILED))
    return Decision()


def _write_txn_markers(access: Access, version: int, body: dict[str, Any]) -> Decision:
    # Broker to broker: CLUSTER_ACTION on the cluster, else every partition fails.
    if access.cluster(Operation.CLUSTER_ACTION):
        return Decision()
    key = ApiKey.WRITE_TXN_MARKERS
    return Decision(
        response=entries.entry(
            key,
            "",
            markers=[
                entries.entry(
                    key,
                    "markers",
                    producer_id=m["producer_id"],
                    topics=[
                        _failed_partitions(
                            key,
                            "markers.topics",
                            "partitions",
                            CLUSTER_FAILED,
                            t.get("partition_indexes") or [],
                            name=t["name"],
                        )
                        for t in m.get("topics") or []
                    ],
                )
                for m in body.get("markers") or []
            ],
        )
    )


def _txn_offset_commit(access: Access, version: int, body: dict[str, Any]) -> Decision:
    code = None
    if not access.allowed(Operation.WRITE, TXN, body["transactional_id"]):
        code = TXN_FAILED
    elif not access.allowed(Operation.READ, GROUP, body["group_id"]):
        code = GROUP_FAILED
    if code is not None:
        return Decision(response=_failed_topics(ApiKey.TXN_OFFSET_COMMIT, _COMMON, body, code))
    return _partitioned(ApiKey.TXN_OFFSET_COMMIT, _COMMON, Operation.READ)(access, version, body)


def _list_transactions(access: Access, version: int, body: dict[str, Any]) -> Decision:
    def hide(response: dict[str, Any]) -> None:
        response["transaction_states"] = [
            t
            for t in response.get("transaction_states") or []
            if access.allowed(Operation.DESCRIBE, TXN, t["transactional_id"])
        ]

    return Decision(fixes=[hide])


def _delete_acls_denied(body: dict[str, Any]) -> dict[str, Any]:
    key = ApiKey.DELETE_ACLS
    return entries.entry(
        key,
        "",
        filter_results=[
            failed(key, "filter_results", CLUSTER_FAILED) for _ in body.get("filters") or []
        ],
    )


def _cluster_failed(api_key: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A refusal of the whole request: CLUSTER_AUTHORIZATION_FAILED, nothing listed."""
    return lambda body: failed(api_key, "", CLUSTER_FAILED)


PLANS: dict[int, Plan] = {
    ApiKey.API_VERSIONS: _allow,
    ApiKey.SASL_HANDSHAKE: _allow,
    ApiKey.SASL_AUTHENTICATE: _allow,
    ApiKey.DESCRIBE_CLUSTER: _allow,
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _partitioned(ApiKey.LIST_OFFSETS, _COMMON, Operation.DESCRIBE),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
    ApiKey.DELETE_RECORDS: _partitioned(ApiKey.DELETE_RECORDS, _COMMON, Operation.DELETE),
    ApiKey.METADATA: _metadata,
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.CREATE_PARTITIONS: _named(
        "topics",
        lambda t: t["name"],
        lambda a, t: a.allowed(Operation.ALTER, TOPIC, t["name"]),
        "results",
        lambda t: failed(ApiKey.CREATE_PARTITIONS, "results", TOPIC_FAILED, name=t["name"]),
    ),
    ApiKey.DESCRIBE_CONFIGS: _named(
        "resources",
        lambda r: r["resource_name"],
        _config_resource(Operation.DESCRIBE_CONFIGS),
        "results",
        _config_error(ApiKey.DESCRIBE_CONFIGS, "results"),
    ),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _named(
        "resources",
        lambda r: r["resource_name"],
        _config_resource(Operation.ALTER_CONFIGS),
        "responses",
        _config_error(ApiKey.INCREMENTAL_ALTER_CONFIGS, "responses"),
    ),
    ApiKey.ALTER_CONFIGS: _named(
        "resources",
        lambda r: r["resource_name"],
        _config_resource(Operation.ALTER_CONFIGS),
        "responses",
        _config_error(ApiKey.ALTER_CONFIGS, "responses"),
    ),
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.JOIN_GROUP: _group(ApiKey.JOIN_GROUP, Operation.READ),
    ApiKey.SYNC_GROUP: _group(ApiKey.SYNC_GROUP, Operation.READ),
    ApiKey.HEARTBEAT: _group(ApiKey.HEARTBEAT, Operation.READ),
    ApiKey.LEAVE_GROUP: _group(ApiKey.LEAVE_GROUP, Operation.READ),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _consumer_group_heartbeat,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.OFFSET_DELETE: _offset_delete,
    ApiKey.LIST_GROUPS: _list_groups,
    ApiKey.DESCRIBE_GROUPS: _named(
        "groups",
        str,
        lambda a, g: a.allowed(Operation.DESCRIBE, GROUP, g),
        "groups",
        lambda g: failed(ApiKey.DESCRIBE_GROUPS, "groups", GROUP_FAILED, group_id=g),
    ),
    ApiKey.CONSUMER_GROUP_DESCRIBE: _consumer_group_describe,
    ApiKey.DELETE_GROUPS: _named(
        "groups_names",
        str,
        lambda a, g: a.allowed(Operation.DELETE, GROUP, g),
        "results",
        lambda g: failed(ApiKey.DELETE_GROUPS, "results", GROUP_FAILED, group_id=g),
    ),
    ApiKey.CREATE_ACLS: _cluster(
        Operation.ALTER,
        lambda body: entries.entry(
            ApiKey.CREATE_ACLS,
            "",
            results=[
                failed(ApiKey.CREATE_ACLS, "results", CLUSTER_FAILED)
                for _ in body.get("creations") or []
            ],
        ),
    ),
    ApiKey.DELETE_ACLS: _cluster(Operation.ALTER, _delete_acls_denied),
    ApiKey.DESCRIBE_ACLS: _cluster(Operation.DESCRIBE, _cluster_failed(ApiKey.DESCRIBE_ACLS)),
    # Cluster tools: Kafka checks the cluster (or, for reads of topics, DESCRIBE on each).
    ApiKey.DESCRIBE_LOG_DIRS: _cluster(
        Operation.DESCRIBE, _cluster_failed(ApiKey.DESCRIBE_LOG_DIRS)
    ),
    ApiKey.ALTER_REPLICA_LOG_DIRS: _cluster(Operation.ALTER, _alter_replica_log_dirs),
    ApiKey.ELECT_LEADERS: _cluster(Operation.ALTER, _elect_leaders),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _cluster(Operation.ALTER, _alter_partition_reassignments),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: _cluster(
        Operation.DESCRIBE, _cluster_failed(ApiKey.LIST_PARTITION_REASSIGNMENTS)
    ),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: _cluster(
        Operation.DESCRIBE_CONFIGS, _cluster_failed(ApiKey.DESCRIBE_CLIENT_QUOTAS)
    ),
    ApiKey.ALTER_CLIENT_QUOTAS: _cluster(Operation.ALTER_CONFIGS, _alter_client_quotas),
    ApiKey.DESCRIBE_PRODUCERS: _topic_names(
        "topics",
        "topics",
        lambda t: _failed_partitions(
            ApiKey.DESCRIBE_PRODUCERS,
            "topics",
            "partitions",
            TOPIC_FAILED,
            t.get("partition_indexes") or [],
            name=t["name"],
        ),
        # READ, as Kafka: a topic's producers are read from its log, not its metadata.
        Operation.READ,
    ),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: _describe_topic_partitions,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: _add_offsets_to_txn,
    ApiKey.END_TXN: _end_txn,
    ApiKey.WRITE_TXN_MARKERS: _write_txn_markers,
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.DESCRIBE_TRANSACTIONS: _named(
        "transactional_ids",
        str,
        lambda a, t: a.allowed(Operation.DESCRIBE, TXN, t),
        "transaction_states",
        lambda t: failed(
            ApiKey.DESCRIBE_TRANSACTIONS,
            "transaction_states",
            TXN_FAILED,
            transactional_id=t,
            transaction_start_time_ms=-1,
            producer_id=-1,
            producer_epoch=-1,
        ),
    ),
    ApiKey.LIST_TRANSACTIONS: _list_transactions,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _cluster(
        Operation.DESCRIBE, _describe_user_scram_credentials
    ),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _cluster(
        Operation.ALTER,
        lambda body: entries.entry(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            "",
            results=[
                failed(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "results", CLUSTER_FAILED, user=u)
                for u in dict.fromkeys(
                    i["name"] for i in [*body.get("deletions", []), *body.get("upsertions", [])]
                )
            ],
        ),
    ),
}
"""API key → its plan."""


def check(access: Access, api_key: int, version: int, body: dict[str, Any]) -> Decision:
    """The decision for one request (``body`` may be changed: items removed)."""
    plan = PLANS.get(api_key)
    if plan is None:
        if access.principal in access.authorizer.super_users:
            return Decision()
        logger.warning(
            "refusing api key %d to %s: no authorization rule is defined for it",
            api_key,
            access.principal,
        )
        return Decision(close=f"api key {api_key} has no authorization rule")
    return plan(access, version, body)
