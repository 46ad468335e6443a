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
from typing import Any, TypeVar

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
    Plan,
)
from seglog.broker.security.access.shapes import may, remove_denied
from seglog.broker.security.authorizer import Operation
from seglog.protocol.api_keys import ApiKey
from seglog.protocol.bodies import admin, fetch, metadata, offsets, produce, replicas
from seglog.protocol.entries import entry_as, failed_as
from seglog.records import batch

# ------------------------------------------------------------------ records


def _produce(
    access: Access, version: int, body: produce.ProduceRequest
) -> Decision[produce.ProduceResponse]:
    # As Kafka, the transactional id is checked when the records are transactional,
    # and then a request without one is refused too.
    txn = body.get("transactional_id")
    if _has_transactional_records(body) and (
        txn is None or not access.allowed(Operation.WRITE, TXN, txn)
    ):
        return Decision(response=_produce_failed(body["topic_data"], TXN_FAILED))
    denied = remove_denied(body["topic_data"], lambda t: may(access, Operation.WRITE)(t["name"]))
    if not denied:
        return Decision()

    def fix(response: produce.ProduceResponse) -> None:
        response.setdefault("responses", []).extend(
            _produce_failed(denied, TOPIC_FAILED)["responses"]
        )

    return Decision(fixes=[fix])


def _produce_failed(
    topics: list[produce.ProduceRequestTopicData], code: int
) -> produce.ProduceResponse:
    """A Produce answer in which each partition of ``topics`` failed with ``code``."""
    return entry_as(
        produce.ProduceResponse,
        responses=[
            produce.ProduceResponseResponses(
                name=t["name"],
                partition_responses=[
                    failed_as(
                        produce.ProduceResponseResponsesPartitionResponses, code, index=p["index"]
                    )
                    for p in t["partition_data"]
                ],
            )
            for t in topics
        ],
    )


def _has_transactional_records(body: produce.ProduceRequest) -> bool:
    """Whether some partition's first batch is transactional (Kafka looks at the first only).

    A malformed batch is not judged here: the append refuses it.
    """
    for topic in body["topic_data"]:
        for partition in topic["partition_data"]:
            records = partition["records"]
            if (
                records is not None
                and len(records) >= batch.HEADER_SIZE
                and records[batch.MAGIC_OFFSET] == batch.CURRENT_MAGIC
                and batch.BatchHeader._make(batch.HEADER.unpack_from(records, 0)).is_transactional
            ):
                return True
    return False


def _fetch(access: Access, version: int, body: fetch.FetchRequest) -> Decision[fetch.FetchResponse]:
    """READ on each topic; a replica's fetch (``replica_id`` >= 0) needs CLUSTER_ACTION.

    As Kafka: a replica allowed CLUSTER_ACTION fetches every topic, one without it
    none of them (each partition TOPIC_AUTHORIZATION_FAILED).
    """
    if body.get("replica_id", -1) >= 0:
        if access.cluster(Operation.CLUSTER_ACTION):
            return Decision()
        return Decision(
            response=entry_as(fetch.FetchResponse, responses=_fetch_failed(body["topics"]))
        )
    # (Topics by id, v13+, carry no name: seglog serves Fetch up to v12.)
    denied = remove_denied(body["topics"], lambda t: may(access, Operation.READ)(t.get("topic")))
    if not denied:
        return Decision()

    def fix(response: fetch.FetchResponse) -> None:
        response.setdefault("responses", []).extend(_fetch_failed(denied))

    return Decision(fixes=[fix])


def _fetch_failed(topics: list[fetch.FetchRequestTopics]) -> list[fetch.FetchResponseResponses]:
    """Each partition of ``topics`` TOPIC_AUTHORIZATION_FAILED: empty records, -1 offsets."""
    return [
        fetch.FetchResponseResponses(
            topic=t["topic"],
            partitions=[
                failed_as(
                    fetch.FetchResponseResponsesPartitions,
                    TOPIC_FAILED,
                    partition_index=p["partition"],
                )
                for p in t["partitions"]
            ],
        )
        for t in topics
    ]


def _list_offsets(
    access: Access, version: int, body: offsets.ListOffsetsRequest
) -> Decision[offsets.ListOffsetsResponse]:
    denied = remove_denied(body["topics"], lambda t: may(access, Operation.DESCRIBE)(t["name"]))
    if not denied:
        return Decision()

    def fix(response: offsets.ListOffsetsResponse) -> None:
        response.setdefault("topics", []).extend(
            offsets.ListOffsetsResponseTopics(
                name=t["name"],
                partitions=[
                    failed_as(
                        offsets.ListOffsetsResponseTopicsPartitions,
                        TOPIC_FAILED,
                        partition_index=p["partition_index"],
                    )
                    for p in t["partitions"]
                ],
            )
            for t in denied
        )

    return Decision(fixes=[fix])


def _offset_for_leader_epoch(
    access: Access, version: int, body: offsets.OffsetForLeaderEpochRequest
) -> Decision[offsets.OffsetForLeaderEpochResponse]:
    """DESCRIBE on each topic, or CLUSTER_ACTION on the cluster for all of them (Kafka's)."""
    if access.cluster(Operation.CLUSTER_ACTION):
        return Decision()
    denied = remove_denied(body["topics"], lambda t: may(access, Operation.DESCRIBE)(t["topic"]))
    if not denied:
        return Decision()

    def fix(response: offsets.OffsetForLeaderEpochResponse) -> None:
        response.setdefault("topics", []).extend(
            offsets.OffsetForLeaderEpochResponseTopics(
                topic=t["topic"],
                partitions=[
                    failed_as(
                        offsets.OffsetForLeaderEpochResponseTopicsPartitions,
                        TOPIC_FAILED,
                        partition=p["partition"],
                    )
                    for p in t["partitions"]
                ],
            )
            for t in denied
        )

    return Decision(fixes=[fix])


def _delete_records(
    access: Access, version: int, body: admin.DeleteRecordsRequest
) -> Decision[admin.DeleteRecordsResponse]:
    denied = remove_denied(body["topics"], lambda t: may(access, Operation.DELETE)(t["name"]))
    if not denied:
        return Decision()

    def fix(response: admin.DeleteRecordsResponse) -> None:
        response.setdefault("topics", []).extend(
            admin.DeleteRecordsResponseTopics(
                name=t["name"],
                partitions=[
                    failed_as(
                        admin.DeleteRecordsResponseTopicsPartitions,
                        TOPIC_FAILED,
                        partition_index=p["partition_index"],
                    )
                    for p in t["partitions"]
                ],
            )
            for t in denied
        )

    return Decision(fixes=[fix])


# ------------------------------------------------------------------ metadata


def _metadata(
    access: Access, version: int, body: metadata.MetadataRequest
) -> Decision[metadata.MetadataResponse]:
    requested = body["topics"]

    def hide(response: metadata.MetadataResponse) -> None:
        _visible_only(access, response)

    if requested is None or (version == 0 and not requested):
        return Decision(fixes=[hide])
    may_create_any = access.cluster(Operation.CREATE)

    def allowed(item: metadata.MetadataRequestTopics) -> bool:
        name = item["name"]
        if name is None:
            return True  # by id: the answer is filtered below
        return access.allowed(Operation.DESCRIBE, TOPIC, name) and (
            # A topic that would be created needs CREATE too.
            access.topic_exists(name)
            or not body.get("allow_auto_topic_creation", True)
            or may_create_any
            or access.allowed(Operation.CREATE, TOPIC, name)
        )

    denied = remove_denied(requested, allowed)

    def fix(response: metadata.MetadataResponse) -> None:
        hide(response)
        if version == 0 and not requested:
            # v0 reads the emptied list as "every topic": none of those was asked for.
            response["topics"] = []
        response.setdefault("topics", []).extend(
            failed_as(metadata.MetadataResponseTopics, TOPIC_FAILED, name=t["name"]) for t in denied
        )

    # (v0 reads an empty list as "every topic": those are then filtered by ``hide``.)
    return Decision(fixes=[fix])


_Listed = TypeVar("_Listed", metadata.MetadataResponse, replicas.DescribeTopicPartitionsResponse)
"""An answer that lists topics by name, with an error code each."""


def _visible_only(access: Access, response: _Listed) -> None:
    """Leave out of the answer's topics those the principal may not DESCRIBE."""
    kept = []
    for topic in response.get("topics") or []:
        name = topic.get("name")  # (.get: the handler's answer is read, never trusted)
        if (
            name is None
            or topic.get("error_code") == TOPIC_FAILED
            or access.allowed(Operation.DESCRIBE, TOPIC, name)
        ):
            kept.append(topic)
    response["topics"] = kept


def _describe_topic_partitions(
    access: Access, version: int, body: replicas.DescribeTopicPartitionsRequest
) -> Decision[replicas.DescribeTopicPartitionsResponse]:
    """Named topics without DESCRIBE fail; a listing of all topics leaves them out."""
    response_type = replicas.DescribeTopicPartitionsResponse

    def hide(response: replicas.DescribeTopicPartitionsResponse) -> None:
        _visible_only(access, response)

    if not body["topics"]:
        # Every topic: the handler pages through the ones the principal may
        # DESCRIBE, so that neither a page nor next_cursor names another.
        visible = sorted(
            n for n in access.topic_names() if access.allowed(Operation.DESCRIBE, TOPIC, n)
        )
        if not visible:
            return Decision(response=entry_as(response_type))
        body["topics"] = [replicas.DescribeTopicPartitionsRequestTopics(name=n) for n in visible]
        return Decision(fixes=[hide])
    denied = remove_denied(body["topics"], lambda t: may(access, Operation.DESCRIBE)(t["name"]))

    def fix(response: replicas.DescribeTopicPartitionsResponse) -> None:
        response.setdefault("topics", []).extend(
            failed_as(replicas.DescribeTopicPartitionsResponseTopics, TOPIC_FAILED, name=t["name"])
            for t in denied
        )

    if not body["topics"]:
        # Every named topic refused: the emptied list must not reach the handler,
        # which reads an empty list as "every topic".
        response = entry_as(response_type)
        fix(response)
        return Decision(response=response)
    return Decision(fixes=[hide, fix])


def _describe_producers(
    access: Access, version: int, body: replicas.DescribeProducersRequest
) -> Decision[replicas.DescribeProducersResponse]:
    # READ, as Kafka: a topic's producers are read from its log, not its metadata.
    denied = remove_denied(body["topics"], lambda t: may(access, Operation.READ)(t["name"]))
    if not denied:
        return Decision()

    def fix(response: replicas.DescribeProducersResponse) -> None:
        response.setdefault("topics", []).extend(
            replicas.DescribeProducersResponseTopics(
                name=t["name"],
                partitions=[
                    failed_as(
                        replicas.DescribeProducersResponseTopicsPartitions,
                        TOPIC_FAILED,
                        partition_index=i,
                    )
                    for i in t["partition_indexes"]
                ],
            )
            for t in denied
        )

    return Decision(fixes=[fix])


# ------------------------------------------------------------------ topic admin


def _create_topics(
    access: Access, version: int, body: admin.CreateTopicsRequest
) -> Decision[admin.CreateTopicsResponse]:
    denied: list[admin.CreateTopicsRequestTopics] = []
    if not access.cluster(Operation.CREATE):
        denied = remove_denied(body["topics"], lambda t: may(access, Operation.CREATE)(t["name"]))

    def fix(response: admin.CreateTopicsResponse) -> None:
        response.setdefault("topics", []).extend(
            failed_as(
                admin.CreateTopicsResponseTopics,
                TOPIC_FAILED,
                name=t["name"],
                error_message="Authorization failed.",
            )
            for t in denied
        )

    return Decision(fixes=[fix, _hide_created_configs(access)])


def _hide_created_configs(access: Access) -> Callable[[admin.CreateTopicsResponse], None]:
    """A created topic's configs, partitions and replicas need DESCRIBE_CONFIGS on it.

    As Kafka's controller (KIP-525): without it they are left out (empty, -1)
    and ``topic_config_error_code`` says TOPIC_AUTHORIZATION_FAILED.
    """

    def hide(response: admin.CreateTopicsResponse) -> None:
        for topic in response.get("topics") or []:
            if topic.get("error_code") or access.allowed(
                Operation.DESCRIBE_CONFIGS, TOPIC, topic["name"]
            ):
                continue
            topic["topic_config_error_code"] = TOPIC_FAILED
            topic["configs"] = []
            topic["num_partitions"] = -1
            topic["replication_factor"] = -1

    return hide


def _delete_topics(
    access: Access, version: int, body: admin.DeleteTopicsRequest
) -> Decision[admin.DeleteTopicsResponse]:
    if body.get("topics"):  # v6+: by name or by id (those are checked by the handler)
        denied = [
            t["name"]
            for t in remove_denied(
                body.get("topics"), lambda t: may(access, Operation.DELETE)(t["name"])
            )
            if t["name"] is not None
        ]
    else:
        denied = remove_denied(body.get("topic_names"), may(access, Operation.DELETE))
    if not denied:
        return Decision()

    def fix(response: admin.DeleteTopicsResponse) -> None:
        response.setdefault("responses", []).extend(
            failed_as(admin.DeleteTopicsResponseResponses, TOPIC_FAILED, name=name)
            for name in denied
        )

    return Decision(fixes=[fix])


def _create_partitions(
    access: Access, version: int, body: admin.CreatePartitionsRequest
) -> Decision[admin.CreatePartitionsResponse]:
    denied = remove_denied(body["topics"], lambda t: may(access, Operation.ALTER)(t["name"]))
    if not denied:
        return Decision()

    def fix(response: admin.CreatePartitionsResponse) -> None:
        response.setdefault("results", []).extend(
            failed_as(admin.CreatePartitionsResponseResults, TOPIC_FAILED, name=t["name"])
            for t in denied
        )

    return Decision(fixes=[fix])


# ------------------------------------------------------------------ configs
# A config resource is a topic (2), a group (32: checked on the group, as Kafka
# does) or a broker or broker logger (checked on the cluster).

_CONFIG_TOPIC = 2
_CONFIG_GROUP = 32


def _config_allowed(access: Access, operation: Operation, kind: int, name: str) -> bool:
    if kind == _CONFIG_TOPIC:
        return access.allowed(operation, TOPIC, name)
    if kind == _CONFIG_GROUP:
        return access.allowed(operation, GROUP, name)
    return access.cluster(operation)


def _config_code(kind: int) -> int:
    if kind == _CONFIG_TOPIC:
        return TOPIC_FAILED
    return GROUP_FAILED if kind == _CONFIG_GROUP else CLUSTER_FAILED


def _config_resources(
    access: Access,
    operation: Operation,
    resources: list[Any],
    answers: str,
    answer_type: type[Any],
) -> Decision[Any]:
    """The three config APIs' one plan: each resource the principal may not touch is
    taken out of the request and answered, in the response list ``answers``, as failed."""
    denied = remove_denied(
        resources,
        lambda r: _config_allowed(access, operation, r["resource_type"], r["resource_name"]),
    )
    if not denied:
        return Decision()

    def fix(response: Any) -> None:
        response.setdefault(answers, []).extend(
            failed_as(
                answer_type,
                _config_code(r["resource_type"]),
                resource_type=r["resource_type"],
                resource_name=r["resource_name"],
            )
            for r in denied
        )

    return Decision(fixes=[fix])


def _describe_configs(
    access: Access, version: int, body: admin.DescribeConfigsRequest
) -> Decision[admin.DescribeConfigsResponse]:
    return _config_resources(
        access,
        Operation.DESCRIBE_CONFIGS,
        body["resources"],
        "results",
        admin.DescribeConfigsResponseResults,
    )


def _alter_configs(
    access: Access, version: int, body: admin.AlterConfigsRequest
) -> Decision[admin.AlterConfigsResponse]:
    return _config_resources(
        access,
        Operation.ALTER_CONFIGS,
        body["resources"],
        "responses",
        admin.AlterConfigsResponseResponses,
    )


def _incremental_alter_configs(
    access: Access, version: int, body: admin.IncrementalAlterConfigsRequest
) -> Decision[admin.IncrementalAlterConfigsResponse]:
    return _config_resources(
        access,
        Operation.ALTER_CONFIGS,
        body["resources"],
        "responses",
        admin.IncrementalAlterConfigsResponseResponses,
    )


PLANS: dict[int, Plan] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
    ApiKey.DELETE_RECORDS: _delete_records,
    ApiKey.METADATA: _metadata,
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.DESCRIBE_CONFIGS: _describe_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _incremental_alter_configs,
    ApiKey.ALTER_CONFIGS: _alter_configs,
    ApiKey.DESCRIBE_PRODUCERS: _describe_producers,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: _describe_topic_partitions,
}
"""API key → its plan, for the topic APIs."""
