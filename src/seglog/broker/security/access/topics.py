"""The plans of the topic APIs: records in and out, topic metadata, topic admin, configs.

Produce WRITE on each topic (and on the transactional id for transactional
records), Fetch READ (a replica's fetch CLUSTER_ACTION on the cluster),
ListOffsets DESCRIBE, OffsetForLeaderEpoch DESCRIBE (or CLUSTER_ACTION),
Metadata DESCRIBE (topics not allowed are left out of a list of all topics;
creating one needs CREATE on the cluster or the topic), CreateTopics CREATE
(a created topic's configs need DESCRIBE_CONFIGS), DeleteTopics DELETE,
CreatePartitions ALTER, DeleteRecords DELETE, DescribeProducers READ,
DescribeTopicPartitions DESCRIBE, DescribeConfigs DESCRIBE_CONFIGS and the
config changes ALTER_CONFIGS (on the topic, the group, or on the cluster for
a broker).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from seglog.broker.security.access import shapes
from seglog.broker.security.access.base import (
    CLUSTER_FAILED,
    GROUP,
    GROUP_FAILED,
    TOPIC,
    TOPIC_FAILED,
    TXN,
    TXN_FAILED,
    Access,
    Decision,
    Fix,
    Plan,
)
from seglog.broker.security.authorizer import Operation
from seglog.protocol import entries
from seglog.protocol.api_keys import ApiKey
from seglog.protocol.entries import failed
from seglog.records import batch


def _produce(access: Access, version: int, body: dict[str, Any]) -> Decision:
    # As Kafka, the transactional id is checked when the records are transactional,
    # and then a request without one is refused too.
    txn = body.get("transactional_id")
    if _has_transactional_records(body) and (
        txn is None or not access.allowed(Operation.WRITE, TXN, txn)
    ):
        return Decision(
            response=shapes.failed_topics(ApiKey.PRODUCE, shapes.PRODUCE, body, TXN_FAILED)
        )
    return shapes.partitioned(ApiKey.PRODUCE, shapes.PRODUCE, Operation.WRITE)(
        access, version, body
    )


def _fetch(access: Access, version: int, body: dict[str, Any]) -> Decision:
    """READ on each topic; a replica's fetch (``replica_id`` >= 0) needs CLUSTER_ACTION.

    As Kafka: a replica allowed CLUSTER_ACTION fetches every topic, one without it
    none of them (each partition TOPIC_AUTHORIZATION_FAILED).
    """
    if body.get("replica_id", -1) >= 0:
        if access.cluster(Operation.CLUSTER_ACTION):
            return Decision()
        return Decision(
            response=shapes.failed_topics(ApiKey.FETCH, shapes.FETCH, body, TOPIC_FAILED)
        )
    return shapes.partitioned(ApiKey.FETCH, shapes.FETCH, Operation.READ)(access, version, body)


def _offset_for_leader_epoch(access: Access, version: int, body: dict[str, Any]) -> Decision:
    """DESCRIBE on each topic, or CLUSTER_ACTION on the cluster for all of them (Kafka's)."""
    if access.cluster(Operation.CLUSTER_ACTION):
        return Decision()
    return shapes.partitioned(ApiKey.OFFSET_FOR_LEADER_EPOCH, shapes.EPOCHS, Operation.DESCRIBE)(
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
        decision = shapes.named(
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

    return shapes.named(
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


def _describe_topic_partitions(access: Access, version: int, body: dict[str, Any]) -> Decision:
    """Named topics without DESCRIBE fail; a listing of all topics leaves them out."""
    key = ApiKey.DESCRIBE_TOPIC_PARTITIONS
    named = bool(body.get("topics"))
    decision = shapes.topic_names(
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


PLANS: dict[int, Plan] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: shapes.partitioned(ApiKey.LIST_OFFSETS, shapes.COMMON, Operation.DESCRIBE),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
    ApiKey.DELETE_RECORDS: shapes.partitioned(
        ApiKey.DELETE_RECORDS, shapes.COMMON, Operation.DELETE
    ),
    ApiKey.METADATA: _metadata,
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.CREATE_PARTITIONS: shapes.named(
        "topics",
        lambda t: t["name"],
        lambda a, t: a.allowed(Operation.ALTER, TOPIC, t["name"]),
        "results",
        lambda t: failed(ApiKey.CREATE_PARTITIONS, "results", TOPIC_FAILED, name=t["name"]),
    ),
    ApiKey.DESCRIBE_CONFIGS: shapes.named(
        "resources",
        lambda r: r["resource_name"],
        _config_resource(Operation.DESCRIBE_CONFIGS),
        "results",
        _config_error(ApiKey.DESCRIBE_CONFIGS, "results"),
    ),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: shapes.named(
        "resources",
        lambda r: r["resource_name"],
        _config_resource(Operation.ALTER_CONFIGS),
        "responses",
        _config_error(ApiKey.INCREMENTAL_ALTER_CONFIGS, "responses"),
    ),
    ApiKey.ALTER_CONFIGS: shapes.named(
        "resources",
        lambda r: r["resource_name"],
        _config_resource(Operation.ALTER_CONFIGS),
        "responses",
        _config_error(ApiKey.ALTER_CONFIGS, "responses"),
    ),
    ApiKey.DESCRIBE_PRODUCERS: shapes.topic_names(
        "topics",
        "topics",
        lambda t: shapes.failed_partitions(
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
}
"""API key → its plan, for the topic APIs."""
