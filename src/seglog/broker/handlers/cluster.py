"""The cluster tools' APIs, answered as a Kafka cluster of this one node answers them.

DescribeLogDirs, AlterReplicaLogDirs, DescribeProducers,
DescribeTopicPartitions (KIP-966), ElectLeaders, ListPartitionReassignments
and AlterPartitionReassignments. Every partition has one replica, here: it
leads, it is the whole ISR, its leader is the preferred one (so no election is
ever needed) and no reassignment is ever in progress. There is one log
directory, so a replica can move to no other.
"""

from __future__ import annotations

import os
import shutil
import uuid
from typing import Any

from seglog.broker.security.access.operations import NOT_REQUESTED
from seglog.broker.security.session import Session
from seglog.broker.state import BrokerState
from seglog.errors import SeglogError
from seglog.protocol import error_codes
from seglog.protocol.headers import RequestHeader
from seglog.storage import filenames

_NONE = 0
_UNKNOWN = error_codes.code_for("UNKNOWN_TOPIC_OR_PARTITION")


def _log_dir_path(state: BrokerState) -> str:
    return os.path.abspath(state.log_dir.path)


def _partitions_of(state: BrokerState, topic: str) -> int:
    """How many partitions ``topic`` has (0 if it does not exist)."""
    info = state.log_dir.topic(topic)
    return info.partitions if info is not None else 0


def registered_nodes(state: BrokerState) -> list[int]:
    """The node ids a replica assignment may name: every node of the cluster."""
    return state.cluster.node_ids()


def replica_list_error(
    node_ids: int | list[int], brokers: list[int], expected: int | None
) -> str | None:
    """Why a partition's replica list cannot be placed on the nodes ``node_ids``, or None.

    Kafka's ``validateManualPartitionAssignment``: the list is not empty,
    names registered brokers only, none twice, and has ``expected`` replicas
    when given (the topic's replication factor).
    """
    registered = {node_ids} if isinstance(node_ids, int) else set(node_ids)
    if not brokers:
        return "The manual partition assignment includes an empty replica list."
    previous = None
    for broker in sorted(brokers):
        if broker not in registered:
            return (
                f"The manual partition assignment includes broker {broker}, but no such broker "
                "is registered."
            )
        if broker == previous:
            return f"The manual partition assignment includes the broker {broker} more than once."
        previous = broker
    if expected is not None and len(brokers) != expected:
        return (
            f"The manual partition assignment includes a partition with {len(brokers)} "
            "replica(s), but this is not consistent with previous partitions, which have "
            f"{expected} replica(s)."
        )
    return None


# ------------------------------------------------------------------ log directories


def _disk_usage(path: str) -> tuple[int, int]:
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return -1, -1
    return usage.total, usage.free


async def describe_log_dirs(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """DescribeLogDirs: the one log directory, each partition's size, offset lag 0."""
    requested = body.get("topics")
    topics = state.log_dir.topics()
    if requested is None:
        wanted = {name: list(range(info.partitions)) for name, info in sorted(topics.items())}
    else:
        wanted = {t["topic"]: t["partitions"] for t in requested}
    described = []
    for name, partitions in wanted.items():
        entries = []
        for index in partitions:
            try:
                log = state.log_dir.log(name, index)
            except SeglogError:
                continue  # Kafka leaves out the partitions it does not host
            entries.append(
                {
                    "partition_index": index,
                    "partition_size": log.size,
                    "offset_lag": 0,
                    "is_future_key": False,
                }
            )
        if entries:
            described.append({"name": name, "partitions": entries})
    path = _log_dir_path(state)
    total, usable = _disk_usage(path)
    return {
        "throttle_time_ms": 0,
        "error_code": _NONE,
        "results": [
            {
                "error_code": _NONE,
                "log_dir": path,
                "topics": described,
                "total_bytes": total,
                "usable_bytes": usable,
            }
        ],
    }


async def alter_replica_log_dirs(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """AlterReplicaLogDirs: a replica may only "move" to the directory it is in.

    seglog has one log directory; any other path is LOG_DIR_NOT_FOUND, as
    Kafka answers a path that is not in its ``log.dirs``.
    """
    here = _log_dir_path(state)
    results: dict[str, list[dict[str, Any]]] = {}
    for directory in body["dirs"]:
        same = os.path.abspath(directory["path"]) == here
        for topic in directory["topics"]:
            count = _partitions_of(state, topic["name"])
            for index in topic["partitions"]:
                if not 0 <= index < count:
                    code = error_codes.code_for("REPLICA_NOT_AVAILABLE")
                elif same:
                    code = _NONE
                else:
                    code = error_codes.code_for("LOG_DIR_NOT_FOUND")
                results.setdefault(topic["name"], []).append(
                    {"partition_index": index, "error_code": code}
                )
    return {
        "throttle_time_ms": 0,
        "results": [
            {"topic_name": name, "partitions": partitions} for name, partitions in results.items()
        ],
    }


# ------------------------------------------------------------------------ producers


async def describe_producers(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """DescribeProducers: each partition's active producers, from its producer state."""
    topics = []
    for topic in body["topics"]:
        partitions = []
        for index in topic["partition_indexes"]:
            entry: dict[str, Any] = {
                "partition_index": index,
                "error_code": _NONE,
                "error_message": None,
                "active_producers": [],
            }
            try:
                log = state.log_dir.log(topic["name"], index)
            except SeglogError as exc:
                entry["error_code"] = error_codes.code_for_exception(exc)
                entry["error_message"] = str(exc)
            else:
                entry["active_producers"] = [
                    {
                        "producer_id": producer.producer_id,
                        "producer_epoch": producer.epoch,
                        "last_sequence": producer.last_sequence,
                        "last_timestamp": producer.last_timestamp,
                        "coordinator_epoch": producer.coordinator_epoch,
                        "current_txn_start_offset": producer.current_txn_first_offset,
                    }
                    for producer in sorted(log.active_producers(), key=lambda p: p.producer_id)
                ]
            partitions.append(entry)
        topics.append({"name": topic["name"], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


# ------------------------------------------------------------------------ partitions


def _partition_entry(state: BrokerState, topic: str, index: int) -> dict[str, Any]:
    node = state.settings.node_id
    offline = (topic, index) in state.log_dir.offline()
    error = "KAFKA_STORAGE_ERROR"
    cluster = state.cluster
    info = state.log_dir.topic(topic)
    if info is not None:
        node = cluster.leader(info, index)
        if node != cluster.node_id:
            # Another node's partition: without a leader while that node is down.
            offline, error = not cluster.alive(node), "LEADER_NOT_AVAILABLE"
    return {
        "error_code": error_codes.code_for(error) if offline else _NONE,
        "partition_index": index,
        "leader_id": -1 if offline else node,
        "leader_epoch": 0,
        "replica_nodes": [node],
        "isr_nodes": [] if offline else [node],
        "eligible_leader_replicas": [],
        "last_known_elr": [],
        "offline_replicas": [node] if offline else [],
    }


async def describe_topic_partitions(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """DescribeTopicPartitions (KIP-966): topics in name order, paged by partition count.

    No topics named means every topic. At most ``response_partition_limit``
    partitions are answered; ``next_cursor`` names where the next page starts.
    """
    known = state.log_dir.topics()
    names = sorted({t["name"] for t in body["topics"]}) if body["topics"] else sorted(known)
    cursor = body.get("cursor")
    limit = max(1, body.get("response_partition_limit") or 2000)
    if cursor is not None:
        names = [n for n in names if n >= cursor["topic_name"]]
    topics: list[dict[str, Any]] = []
    next_cursor = None
    budget = limit
    for name in names:
        info = known.get(name)
        if info is None:
            topics.append(
                {
                    "error_code": _UNKNOWN,
                    "name": name,
                    "topic_id": uuid.UUID(int=0),
                    "is_internal": False,
                    "partitions": [],
                    "topic_authorized_operations": NOT_REQUESTED,
                }
            )
            continue
        if budget == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        first = cursor["partition_index"] if cursor and name == cursor["topic_name"] else 0
        last = min(info.partitions, first + budget)
        partitions = [_partition_entry(state, name, i) for i in range(first, last)]
        budget -= len(partitions)
        topics.append(
            {
                "error_code": _NONE,
                "name": name,
                "topic_id": info.topic_id,
                "is_internal": filenames.is_internal(name),
                "partitions": partitions,
                "topic_authorized_operations": NOT_REQUESTED,
            }
        )
        if last < info.partitions:
            next_cursor = {"topic_name": name, "partition_index": last}
            break
    return {"throttle_time_ms": 0, "topics": topics, "next_cursor": next_cursor}


# --------------------------------------------------------------------- leadership


async def elect_leaders(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """ElectLeaders: the one replica already leads, so no election is ever needed.

    Named partitions answer ELECTION_NOT_NEEDED (unknown ones
    UNKNOWN_TOPIC_OR_PARTITION); with none named, Kafka elects everywhere and
    leaves out the partitions that need no election, so every topic answers
    an empty list.
    """
    election = body.get("election_type", 0)
    if election not in (0, 1):
        return {
            "throttle_time_ms": 0,
            "error_code": error_codes.code_for("INVALID_REQUEST"),
            "replica_election_results": [],
        }
    requested = body.get("topic_partitions")
    results: list[dict[str, Any]] = []
    if requested is None:
        for name in sorted(state.log_dir.topics()):
            results.append({"topic": name, "partition_result": []})
    else:
        not_needed = error_codes.code_for("ELECTION_NOT_NEEDED")
        for topic in requested:
            name = topic["topic"]
            count = _partitions_of(state, name)
            partition_results = []
            for index in topic["partitions"]:
                if not state.log_dir.has_topic(name):
                    code, message = _UNKNOWN, f"No such topic as {name}"
                elif not 0 <= index < count:
                    code, message = _UNKNOWN, f"No such partition as {name}-{index}"
                else:
                    code, message = not_needed, "Leader election not needed for topic partition."
                partition_results.append(
                    {"partition_id": index, "error_code": code, "error_message": message}
                )
            results.append({"topic": name, "partition_result": partition_results})
    return {"throttle_time_ms": 0, "error_code": _NONE, "replica_election_results": results}


# ------------------------------------------------------------------- reassignments


async def list_partition_reassignments(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """ListPartitionReassignments: none is ever in progress on one node."""
    return {"throttle_time_ms": 0, "error_code": _NONE, "error_message": None, "topics": []}


def _reassignment_error(
    state: BrokerState, topic: str, index: int, replicas: Any
) -> tuple[int, str | None]:
    """Kafka's checks of one partition's target replicas, on a cluster of this node."""
    if not 0 <= index < _partitions_of(state, topic):
        if not state.log_dir.has_topic(topic):
            return _UNKNOWN, f"Unable to find a topic named {topic}."
        return _UNKNOWN, f"Unable to find partition {topic}:{index}."
    if replicas is None:
        return (
            error_codes.code_for("NO_REASSIGNMENT_IN_PROGRESS"),
            "No partition reassignment is in progress.",
        )
    problem = replica_list_error(state.settings.node_id, replicas, None)
    if problem is not None:
        return error_codes.code_for("INVALID_REPLICA_ASSIGNMENT"), problem
    return _NONE, None  # the partition is already where it is asked to be


async def alter_partition_reassignments(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """AlterPartitionReassignments: only "this node" is a valid target, and it is a no-op.

    Cancelling (null replicas) answers NO_REASSIGNMENT_IN_PROGRESS, as no
    reassignment is ever running.
    """
    responses = []
    for topic in body["topics"]:
        partitions = []
        for partition in topic["partitions"]:
            code, message = _reassignment_error(
                state, topic["name"], partition["partition_index"], partition["replicas"]
            )
            partitions.append(
                {
                    "partition_index": partition["partition_index"],
                    "error_code": code,
                    "error_message": message,
                }
            )
        responses.append({"name": topic["name"], "partitions": partitions})
    return {
        "throttle_time_ms": 0,
        "error_code": _NONE,
        "error_message": None,
        "responses": responses,
    }
