"""CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords, AlterConfigs,
IncrementalAlterConfigs (DescribeConfigs is in :mod:`seglog.broker.handlers.configs`).

Every change to topics creates, renames or removes files and fsyncs them: it
runs on the storage environment's threads (:mod:`seglog.broker.blocking`), never on
the event loop.
:class:`~seglog.storage.log_dir.LogDir` serialises administration with its
own lock and holds the lock readers take only for a moment.

With several nodes, a node other than the controller forwards these changes
to it; while the controller is down (being restarted) the request waits for
it, on the event loop, up to the request's ``timeout_ms`` (REQUEST_TIMED_OUT
after that), as Kafka's brokers wait for their controller.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from seglog.broker.blocking import run_blocking
from seglog.broker.handlers.broker_configs import (
    alter_broker,
    alter_group,
    incremental_alter_broker,
    incremental_alter_group,
)
from seglog.broker.handlers.cluster import registered_nodes, replica_list_error
from seglog.broker.handlers.configs import (
    BROKER_RESOURCE,
    GROUP_RESOURCE,
    TOPIC_RESOURCE,
    topic_entries,
)
from seglog.broker.nodes.channel import ControllerTimeoutError, ControllerUnavailableError
from seglog.broker.security.session import Session
from seglog.broker.state import BrokerState
from seglog.config import (
    CONFIGS_BY_NAME,
    LogConfig,
    Type,
)
from seglog.errors import (
    InvalidConfigError,
    OffsetOutOfRangeError,
    SeglogError,
    StorageError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from seglog.protocol import error_codes
from seglog.protocol.api_keys import ApiKey
from seglog.protocol.entries import failed
from seglog.protocol.headers import RequestHeader
from seglog.storage import filenames, retention
from seglog.storage.log import Log

logger = logging.getLogger(__name__)

R = TypeVar("R")

CONFIG_CHANGE_WAIT = 30.0
"""How long a config change waits for a restarting controller (its request has no timeout)."""

# The fields of a DescribeConfigs entry that CreateTopics v5+ answers too.
_CREATED_CONFIG_FIELDS = ("name", "value", "read_only", "config_source", "is_sensitive")


def _error(exc: SeglogError) -> tuple[int, str]:
    if isinstance(exc, StorageError):
        # The client sees KAFKA_STORAGE_ERROR; the operator needs the cause.
        logger.error("storage error: %s", exc, exc_info=exc)
    return error_codes.code_for_exception(exc), str(exc)


class _Controller:
    """Runs a request's topic changes, waiting for a restarting controller up to a deadline."""

    def __init__(self, state: BrokerState, seconds: float) -> None:
        self.state = state
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    async def run(self, fn: Callable[[], R]) -> R:
        """``fn()`` on the storage threads; forwarded again while the controller is away.

        A controller that died while carrying out ``fn`` may have done it:
        the next attempt then answers what the controller has (a topic
        created already says so), as a client retrying the request would see.
        """
        cluster = self.state.cluster
        while True:
            await cluster.await_controller(self.deadline - time.monotonic())
            try:
                return await run_blocking(self.state.log_dir.env, fn)
            except ControllerUnavailableError as exc:
                if isinstance(exc, ControllerTimeoutError):
                    raise
                if time.monotonic() >= self.deadline:
                    raise ControllerTimeoutError(
                        f"the controller (node {cluster.controller_id}) did not answer within "
                        f"{self.seconds:g} s: {exc}"
                    ) from exc
                await asyncio.sleep(0.05)


def _request_timeout(body: dict[str, Any]) -> float:
    """A request's ``timeout_ms`` in seconds."""
    return max(0, int(body.get("timeout_ms") or 0)) / 1000


def _internal_topic_refusal(name: str) -> str:
    return (
        f"Creation of internal topic {name} is prohibited: the broker creates it, with the "
        "settings its coordinator needs, when the coordinator first uses it"
    )


def _assigned_partitions(state: BrokerState, topic: dict[str, Any]) -> int:
    """The partition count of an explicit replica assignment, checked as Kafka's controller does.

    Raises :class:`_Refusal` (INVALID_REQUEST or INVALID_REPLICA_ASSIGNMENT,
    with Kafka's message) for anything but one replica per partition on this
    node, for consecutive partitions from 0.
    """
    if topic["replication_factor"] != -1:
        raise _Refusal(
            "INVALID_REQUEST",
            "A manual partition assignment was specified, but replication factor was not set "
            "to -1.",
        )
    if topic["num_partitions"] != -1:
        raise _Refusal(
            "INVALID_REQUEST",
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        )
    seen: set[int] = set()
    replicas: int | None = None
    for assignment in topic["assignments"]:
        index = assignment["partition_index"]
        if index in seen:
            raise _Refusal(
                "INVALID_REPLICA_ASSIGNMENT",
                f"Found multiple manual partition assignments for partition {index}",
            )
        brokers = assignment["broker_ids"]
        problem = replica_list_error(registered_nodes(state), brokers, replicas)
        if problem is not None:
            raise _Refusal("INVALID_REPLICA_ASSIGNMENT", problem)
        if len(brokers) > 1:
            raise _Refusal("INVALID_REPLICATION_FACTOR", _ONE_REPLICA)
        replicas = len(brokers)
        seen.add(index)
    if seen != set(range(len(seen))):
        raise _Refusal(
            "INVALID_REPLICA_ASSIGNMENT",
            "partitions should be a consecutive 0-based integer sequence",
        )
    return len(seen)


class InvalidRequestError(SeglogError):
    """A request Kafka refuses with INVALID_REQUEST."""

    kafka_error = "INVALID_REQUEST"


class PolicyViolationError(SeglogError):
    """A request that breaks the policy of the resource it names."""

    kafka_error = "POLICY_VIOLATION"


class _Refusal(Exception):
    """A request refused with a Kafka error name and message."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


_ONE_REPLICA = "seglog keeps one replica of each partition: each replica list names one node."


def _explicit_replicas(
    state: BrokerState, assignments: list[dict[str, Any]] | None
) -> Callable[[int, int], list[list[int]]] | None:
    """The replicas a request names (already checked), for the nodes of a cluster.

    A cluster of one leads every partition whatever is recorded.
    """
    if not assignments:
        return None
    ordered = sorted(assignments, key=lambda a: int(a.get("partition_index", 0)))
    chosen = [[int(a["broker_ids"][0])] for a in ordered]

    def replicas(first: int, count: int) -> list[list[int]]:
        return chosen[:count]

    return replicas


def _partition_count(state: BrokerState, topic: dict[str, Any]) -> int:
    """The partitions to create: KIP-464's defaults (-1) and Kafka's checks, on one node."""
    if topic.get("assignments"):
        return _assigned_partitions(state, topic)
    factor, count = topic["replication_factor"], topic["num_partitions"]
    if factor < -1 or factor == 0:
        raise _Refusal(
            "INVALID_REPLICATION_FACTOR",
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if count < -1 or count == 0:
        raise _Refusal(
            "INVALID_PARTITIONS", "Number of partitions was set to an invalid non-positive value."
        )
    # default.replication.factor is 1, the only factor a single node can place.
    if factor > 1:
        raise _Refusal(
            "INVALID_REPLICATION_FACTOR",
            f"Unable to replicate the partition {factor} time(s): The target replication "
            f"factor of {factor} cannot be reached because only 1 broker(s) are registered.",
        )
    return state.settings.num_partitions if count == -1 else count


def _check_new_topic(state: BrokerState, name: str, configs: dict[str, str | None]) -> None:
    """What creating ``name`` would check, without creating it (validate_only)."""
    filenames.validate_topic_name(name)
    if state.log_dir.has_topic(name):
        raise TopicExistsError(f"topic '{name}' already exists")  # as create_topic says
    LogConfig.from_properties(configs, state.log_dir.defaults)


async def create_topics(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """CreateTopics, as Kafka's controller answers on a cluster of this one node.

    KIP-464's defaults (-1 partitions, -1 replication factor), an explicit
    assignment of one replica per partition on this node, and
    ``validate_only`` (every check made, nothing created).
    """
    results = []
    names = [topic["name"] for topic in body["topics"]]
    controller = _Controller(state, _request_timeout(body))
    for topic in body["topics"]:
        name = topic["name"]
        configs = {c["name"]: c["value"] for c in topic.get("configs") or []}
        result: dict[str, Any] = {"name": name, "error_code": 0, "error_message": None}
        try:
            if names.count(name) > 1:
                raise _Refusal("INVALID_REQUEST", "Duplicate topic name.")
            if filenames.is_internal(name):
                raise _Refusal("INVALID_REQUEST", _internal_topic_refusal(name))
            count = _partition_count(state, topic)
            if body.get("validate_only"):
                _check_new_topic(state, name, configs)
                result["topic_id"] = uuid.uuid4()  # Kafka answers the id it would have used
            else:
                info = await controller.run(
                    functools.partial(
                        state.topic_admin.create_topic,
                        name,
                        count,
                        configs,
                        replicas=_explicit_replicas(state, topic.get("assignments")),
                    ),
                )
                result["topic_id"] = info.topic_id
        except _Refusal as refusal:
            result["error_code"] = error_codes.code_for(refusal.error)
            result["error_message"] = refusal.message
        except SeglogError as exc:
            result["error_code"], result["error_message"] = _error(exc)
        if result["error_code"] == 0:
            config = LogConfig.from_properties(configs, state.log_dir.defaults)
            entries = topic_entries(state, config.to_properties(), configs)
            result.update(
                num_partitions=count,
                replication_factor=1,
                configs=[{k: entry[k] for k in _CREATED_CONFIG_FIELDS} for entry in entries],
            )
        else:
            result.update(num_partitions=-1, replication_factor=-1, configs=None)
        results.append(result)
    return {"throttle_time_ms": 0, "topics": results}


async def delete_topics(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """DeleteTopics by name."""
    names = body.get("topic_names") or [t["name"] for t in body.get("topics") or []]
    responses = []
    controller = _Controller(state, _request_timeout(body))
    for name in names:
        entry: dict[str, Any] = {"name": name, "error_code": 0, "error_message": None}
        try:
            await controller.run(functools.partial(state.topic_admin.delete_topic, name))
        except SeglogError as exc:
            entry["error_code"], entry["error_message"] = _error(exc)
        responses.append(entry)
    return {"throttle_time_ms": 0, "responses": responses}


def _check_partitions(state: BrokerState, topic: dict[str, Any]) -> None:
    """Kafka's checks of a CreatePartitions entry, on a cluster of this one node."""
    name, count = topic["name"], topic["count"]
    info = state.log_dir.topic(name)
    if info is None:
        raise _Refusal(
            "UNKNOWN_TOPIC_OR_PARTITION", "This server does not host this topic-partition."
        )
    if count == info.partitions:
        raise _Refusal("INVALID_PARTITIONS", f"Topic already has {count} partition(s).")
    if count < info.partitions:
        # The log directory's own words (Kafka: "... would not be an increase").
        raise _Refusal(
            "INVALID_PARTITIONS",
            f"topic '{name}' has {info.partitions} partitions; the new count must be larger, "
            f"got {count}",
        )
    assignments = topic.get("assignments")
    if assignments is not None:
        additional = count - info.partitions
        if len(assignments) != additional:
            raise _Refusal(
                "INVALID_REPLICA_ASSIGNMENT",
                f"Attempted to add {additional} additional partition(s), but only "
                f"{len(assignments)} assignment(s) were specified.",
            )
        for assignment in assignments:
            problem = replica_list_error(registered_nodes(state), assignment["broker_ids"], 1)
            if problem is not None:
                raise _Refusal("INVALID_REPLICA_ASSIGNMENT", problem)


async def create_partitions(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """CreatePartitions: grow topics; explicit assignments may only name this node."""
    results = []
    controller = _Controller(state, _request_timeout(body))
    for topic in body["topics"]:
        entry: dict[str, Any] = {"name": topic["name"], "error_code": 0, "error_message": None}
        try:
            _check_partitions(state, topic)
            if not body.get("validate_only"):
                await controller.run(
                    functools.partial(
                        state.topic_admin.create_partitions,
                        topic["name"],
                        topic["count"],
                        replicas=_explicit_replicas(state, topic.get("assignments")),
                    ),
                )
        except _Refusal as refusal:
            entry["error_code"] = error_codes.code_for(refusal.error)
            entry["error_message"] = refusal.message
        except SeglogError as exc:
            entry["error_code"], entry["error_message"] = _error(exc)
        results.append(entry)
    return {"throttle_time_ms": 0, "results": results}


def _delete_records(log: Log, offset: int) -> int:
    """Move the log start to ``offset`` (-1: the high watermark) and drop whole segments below.

    Blocking (checkpoints and segment files): run on a worker thread. A log
    whose cleanup.policy lacks ``delete`` keeps its start (POLICY_VIOLATION),
    as Kafka's Partition.deleteRecordsOnLeader.
    """
    if not log.config.delete:
        raise PolicyViolationError(
            f"Records of partition {log.directory.name} can not be deleted due to the "
            "configured policy"
        )
    target = log.high_watermark if offset == -1 else offset
    if target < 0:
        # Only -1 stands for the high watermark; any other negative offset (librdkafka
        # sends -1001 for "not given") is out of range, as Kafka answers it.
        raise OffsetOutOfRangeError(
            f"The offset {target} for partition {log.directory.name} is not valid"
        )
    low_watermark = log.increment_log_start_offset(target)
    retention.delete_log_start_offset_breached(log)
    return low_watermark


async def delete_records(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """DeleteRecords: move the log start offset (-1 means the high watermark)."""
    topics = []
    for topic in body["topics"]:
        partitions = []
        for request in topic["partitions"]:
            entry: dict[str, Any] = {
                "partition_index": request["partition_index"],
                "low_watermark": -1,
                "error_code": 0,
            }
            try:
                log = state.log_dir.log(topic["name"], request["partition_index"])
                entry["low_watermark"] = await run_blocking(
                    state.log_dir.env, _delete_records, log, request["offset"]
                )
                # Fetches waiting below the new log start answer OFFSET_OUT_OF_RANGE.
                await state.notify_data([(topic["name"], request["partition_index"])])
            except SeglogError as exc:
                code, _ = _error(exc)
                index = request["partition_index"]
                entry = failed(
                    ApiKey.DELETE_RECORDS, "topics.partitions", code, partition_index=index
                )
            partitions.append(entry)
        topics.append({"name": topic["name"], "partitions": partitions})
    # The new log start offsets are on disk (fsynced) before the answer, so a reader of the
    # files (a restart, files mode) never serves records the client was told are deleted.
    await run_blocking(state.log_dir.env, state.log_dir.checkpoint)
    return {"throttle_time_ms": 0, "topics": topics}


def _list_items(state: BrokerState, name: str, key: str) -> list[str]:
    """The items of list config ``key`` of topic ``name``: its override, else Kafka's default."""
    info = state.log_dir.topic(name)
    value = info.overrides.get(key) if info is not None else None
    if value is None:
        definition = CONFIGS_BY_NAME.get(key)
        value = definition.to_string(definition.default) if definition is not None else None
    return [item for item in (value or "").split(",") if item]


def _incremental_changes(
    state: BrokerState, name: str, configs: list[dict[str, Any]]
) -> tuple[dict[str, str], list[str]]:
    """IncrementalAlterConfigs operations as (values to set, overrides to delete).

    SET (0), DELETE (1), and for LIST configs APPEND (2) and SUBTRACT (3), as
    Kafka's ConfigurationControlManager applies them.
    """
    to_set: dict[str, str] = {}
    to_delete: list[str] = []
    for config in configs:
        key, operation, value = config["name"], config["config_operation"], config["value"]
        if operation == 0:
            to_set[key] = value
        elif operation == 1:
            to_delete.append(key)
        elif operation in (2, 3):
            definition = CONFIGS_BY_NAME.get(key)
            verb = "APPEND" if operation == 2 else "SUBTRACT"
            if definition is None or definition.type is not Type.LIST:
                raise InvalidConfigError(f"Can't {verb} to key {key} because its type is not LIST.")
            items = to_set[key].split(",") if key in to_set else _list_items(state, name, key)
            for item in (value or "").split(","):
                if operation == 2 and item not in items:
                    items.append(item)
                elif operation == 3:
                    items = [x for x in items if x != item]
            to_set[key] = ",".join(items)
        else:
            raise InvalidRequestError(f"Unknown alter configs operation {operation}")
    return to_set, to_delete


async def _alter_topic(
    state: BrokerState,
    name: str,
    to_set: dict[str, str],
    to_delete: list[str],
    validate_only: bool,
    controller: _Controller,
) -> None:
    info = state.log_dir.topic(name)
    if info is None:
        raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
    if validate_only:
        overrides = {k: v for k, v in info.overrides.items() if k not in to_delete}
        LogConfig.from_properties({**overrides, **to_set}, state.log_dir.defaults)
    else:
        await controller.run(
            functools.partial(state.topic_admin.alter_topic_config, name, to_set, to_delete)
        )


async def alter_configs(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """AlterConfigs (the non-incremental form): the given configs replace all others.

    A topic's overrides become exactly those given (a null value, or a key not
    given, falls back to the default), as Kafka's legacyAlterConfigs does; so do
    a broker's dynamic configs (:mod:`seglog.broker.handlers.broker_configs`).
    """
    responses = []
    controller = _Controller(state, CONFIG_CHANGE_WAIT)
    for resource in body["resources"]:
        kind, name = resource["resource_type"], resource["resource_name"]
        entry: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": kind,
            "resource_name": name,
        }
        try:
            given = {c["name"]: c["value"] for c in resource["configs"]}
            if kind == TOPIC_RESOURCE:
                info = state.log_dir.topic(name)
                current = list(info.overrides) if info is not None else []
                to_set = {k: v for k, v in given.items() if v is not None}
                to_delete = [k for k in current if k not in to_set]
                await _alter_topic(
                    state, name, to_set, to_delete, bool(body.get("validate_only")), controller
                )
            elif kind == BROKER_RESOURCE:
                await alter_broker(
                    state, name, resource["configs"], bool(body.get("validate_only"))
                )
            elif kind == GROUP_RESOURCE:
                await alter_group(state, name, resource["configs"], bool(body.get("validate_only")))
            else:
                raise InvalidRequestError(f"Unexpected resource type {kind}")
        except SeglogError as exc:
            entry["error_code"], entry["error_message"] = _error(exc)
        responses.append(entry)
    return {"throttle_time_ms": 0, "responses": responses}


async def incremental_alter_configs(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """IncrementalAlterConfigs for topics and brokers: SET, DELETE, APPEND and SUBTRACT."""
    responses = []
    controller = _Controller(state, CONFIG_CHANGE_WAIT)
    for resource in body["resources"]:
        kind, name = resource["resource_type"], resource["resource_name"]
        entry: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": kind,
            "resource_name": name,
        }
        try:
            if kind == TOPIC_RESOURCE:
                to_set, to_delete = _incremental_changes(state, name, resource["configs"])
                await _alter_topic(
                    state, name, to_set, to_delete, bool(body.get("validate_only")), controller
                )
            elif kind == BROKER_RESOURCE:
                await incremental_alter_broker(
                    state, name, resource["configs"], bool(body.get("validate_only"))
                )
            elif kind == GROUP_RESOURCE:
                await incremental_alter_group(
                    state, name, resource["configs"], bool(body.get("validate_only"))
                )
            else:
                raise InvalidRequestError(f"Unexpected resource type {kind}")
        except SeglogError as exc:
            entry["error_code"], entry["error_message"] = _error(exc)
        responses.append(entry)
    return {"throttle_time_ms": 0, "responses": responses}
