"""CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords, DescribeConfigs,
IncrementalAlterConfigs.

Every change to topics creates, renames or removes files and fsyncs them: it
runs on a worker thread (``asyncio.to_thread``), never on the event loop.
:class:`~seglog.storage.log_dir.LogDir` serialises administration with its
own lock and holds the lock readers take only for a moment.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from seglog.broker.state import BrokerState
from seglog.config import BROKER_CONFIGS, CONFIGS_BY_NAME, BrokerConfig, LogConfig, is_sensitive
from seglog.errors import InvalidConfigError, SeglogError, StorageError
from seglog.protocol import error_codes
from seglog.protocol.headers import RequestHeader
from seglog.storage import filenames, retention
from seglog.storage.log import Log

logger = logging.getLogger(__name__)

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
# DescribeConfigs config sources
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5


def _error(exc: SeglogError) -> tuple[int, str]:
    if isinstance(exc, StorageError):
        # The client sees KAFKA_STORAGE_ERROR; the operator needs the cause.
        logger.error("storage error: %s", exc, exc_info=exc)
    return error_codes.code_for_exception(exc), str(exc)


def _internal_topic_refusal(name: str) -> str:
    return (
        f"Creation of internal topic {name} is prohibited: the broker creates it, with the "
        "settings its coordinator needs, when the coordinator first uses it"
    )


async def create_topics(
    state: BrokerState, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """CreateTopics: replication factor must be 1 (or -1 for the default)."""
    results = []
    for topic in body["topics"]:
        name = topic["name"]
        count = topic["num_partitions"]
        if count == -1:
            count = state.settings.num_partitions
        configs = {c["name"]: c["value"] for c in topic.get("configs") or []}
        result: dict[str, Any] = {"name": name, "error_code": 0, "error_message": None}
        try:
            if topic["replication_factor"] not in (-1, 1):
                result["error_code"] = error_codes.code_for("INVALID_REPLICATION_FACTOR")
                result["error_message"] = "replication factor must be 1 on a single broker"
            elif filenames.is_internal(name):
                result["error_code"] = error_codes.code_for("INVALID_REQUEST")
                result["error_message"] = _internal_topic_refusal(name)
            elif topic.get("assignments"):
                result["error_code"] = error_codes.code_for("INVALID_REQUEST")
                result["error_message"] = "manual replica assignment is not supported"
            elif body.get("validate_only"):
                if state.log_dir.has_topic(name):
                    result["error_code"] = error_codes.code_for("TOPIC_ALREADY_EXISTS")
                    result["error_message"] = f"topic '{name}' already exists"
                LogConfig.from_properties(configs, state.log_dir.defaults)
            else:
                info = await asyncio.to_thread(state.log_dir.create_topic, name, count, configs)
                result["topic_id"] = info.topic_id
        except SeglogError as exc:
            result["error_code"], result["error_message"] = _error(exc)
        if result["error_code"] == 0:
            config = LogConfig.from_properties(configs, state.log_dir.defaults)
            result.update(
                num_partitions=count,
                replication_factor=1,
                configs=[
                    {
                        "name": k,
                        "value": v,
                        "read_only": False,
                        "config_source": DYNAMIC_TOPIC_CONFIG if k in configs else DEFAULT_CONFIG,
                        "is_sensitive": False,
                    }
                    for k, v in config.to_properties().items()
                ],
            )
        else:
            result.update(num_partitions=-1, replication_factor=-1, configs=None)
        results.append(result)
    return {"throttle_time_ms": 0, "topics": results}


async def delete_topics(
    state: BrokerState, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """DeleteTopics by name."""
    names = body.get("topic_names") or [t["name"] for t in body.get("topics") or []]
    responses = []
    for name in names:
        entry: dict[str, Any] = {"name": name, "error_code": 0, "error_message": None}
        try:
            await asyncio.to_thread(state.log_dir.delete_topic, name)
        except SeglogError as exc:
            entry["error_code"], entry["error_message"] = _error(exc)
        responses.append(entry)
    return {"throttle_time_ms": 0, "responses": responses}


async def create_partitions(
    state: BrokerState, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """CreatePartitions: grow topics."""
    results = []
    for topic in body["topics"]:
        entry: dict[str, Any] = {"name": topic["name"], "error_code": 0, "error_message": None}
        try:
            if not body.get("validate_only"):
                await asyncio.to_thread(
                    state.log_dir.create_partitions, topic["name"], topic["count"]
                )
        except SeglogError as exc:
            entry["error_code"], entry["error_message"] = _error(exc)
        results.append(entry)
    return {"throttle_time_ms": 0, "results": results}


def _delete_records(log: Log, offset: int) -> int:
    """Move the log start to ``offset`` (-1: the high watermark) and drop whole segments below.

    Blocking (checkpoints and segment files): run on a worker thread.
    """
    target = log.high_watermark if offset == -1 else offset
    low_watermark = log.increment_log_start_offset(target)
    retention.delete_log_start_offset_breached(log)
    return low_watermark


async def delete_records(
    state: BrokerState, header: RequestHeader, body: dict[str, Any]
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
                entry["low_watermark"] = await asyncio.to_thread(
                    _delete_records, log, request["offset"]
                )
            except SeglogError as exc:
                entry["error_code"], _ = _error(exc)
            partitions.append(entry)
        topics.append({"name": topic["name"], "partitions": partitions})
    # The new log start offsets are on disk (fsynced) before the answer, so a reader of the
    # files (a restart, files mode) never serves records the client was told are deleted.
    await asyncio.to_thread(state.log_dir.checkpoint)
    return {"throttle_time_ms": 0, "topics": topics}


def _describe_topic(
    state: BrokerState, name: str, keys: list[str] | None, synonyms: bool
) -> list[dict[str, Any]]:
    info = state.log_dir.topics().get(name)
    if info is None:
        raise SeglogError(f"topic '{name}' does not exist")
    config = state.log_dir.topic_config(name).to_properties()
    defaults = state.log_dir.defaults.to_properties()
    out = []
    for key, value in sorted(config.items()):
        if keys is not None and key not in keys:
            continue
        source = DYNAMIC_TOPIC_CONFIG if key in info.overrides else DEFAULT_CONFIG
        entry: dict[str, Any] = {
            "name": key,
            "value": value,
            "read_only": False,
            "is_default": source == DEFAULT_CONFIG,
            "config_source": source,
            "is_sensitive": CONFIGS_BY_NAME[key].sensitive,
            "synonyms": [],
        }
        if synonyms:
            if key in info.overrides:
                entry["synonyms"].append(
                    {"name": key, "value": value, "source": DYNAMIC_TOPIC_CONFIG}
                )
            entry["synonyms"].append(
                {
                    "name": CONFIGS_BY_NAME[key].broker_name,
                    "value": defaults[key],
                    "source": DEFAULT_CONFIG,
                }
            )
        out.append(entry)
    return out


def _describe_broker(state: BrokerState) -> list[dict[str, Any]]:
    """Every broker setting: the table's, then any other given; secrets as null."""
    given = state.settings.properties
    config = BrokerConfig(given)
    log_defaults = {
        CONFIGS_BY_NAME[k].broker_name: v for k, v in state.log_dir.defaults.to_properties().items()
    }
    values: dict[str, str | None] = {}
    for name, definition in BROKER_CONFIGS.items():
        if definition.internal:
            continue
        # A log default is shown as resolved (log.retention.hours gives log.retention.ms).
        values[name] = log_defaults.get(name, definition.to_string(config[name]))
    for name in given:
        values.setdefault(name, None)
    out: list[dict[str, Any]] = []
    for name, value in sorted(values.items()):
        # Kafka answers a secret (and a setting it cannot type) with a null value.
        sensitive = is_sensitive(name)
        out.append(
            {
                "name": name,
                "value": None if sensitive else value,
                "read_only": True,
                "is_default": name not in given,
                "config_source": STATIC_BROKER_CONFIG if name in given else DEFAULT_CONFIG,
                "is_sensitive": sensitive,
                "synonyms": [],
            }
        )
    return out


async def describe_configs(
    state: BrokerState, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """DescribeConfigs for topics (and the broker's log defaults)."""
    results = []
    for resource in body["resources"]:
        kind, name = resource["resource_type"], resource["resource_name"]
        result: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": kind,
            "resource_name": name,
            "configs": [],
        }
        keys = resource.get("configuration_keys")
        if kind == TOPIC_RESOURCE:
            if not state.log_dir.has_topic(name):
                result["error_code"] = error_codes.code_for("UNKNOWN_TOPIC_OR_PARTITION")
                result["error_message"] = f"topic '{name}' does not exist"
            else:
                try:
                    result["configs"] = _describe_topic(
                        state, name, keys, bool(body.get("include_synonyms"))
                    )
                except SeglogError as exc:  # a stored config that is no longer valid
                    result["error_code"], result["error_message"] = _error(exc)
        elif kind == BROKER_RESOURCE:
            result["configs"] = [
                entry for entry in _describe_broker(state) if keys is None or entry["name"] in keys
            ]
        else:
            result["error_code"] = error_codes.code_for("INVALID_REQUEST")
            result["error_message"] = f"unsupported resource type {kind}"
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}


async def incremental_alter_configs(
    state: BrokerState, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """IncrementalAlterConfigs for topics: SET (0) and DELETE (1)."""
    responses = []
    for resource in body["resources"]:
        kind, name = resource["resource_type"], resource["resource_name"]
        entry: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": kind,
            "resource_name": name,
        }
        try:
            if kind != TOPIC_RESOURCE:
                raise InvalidConfigError("only topic configs can be altered at runtime")
            to_set: dict[str, str] = {}
            to_delete: list[str] = []
            for config in resource["configs"]:
                operation = config["config_operation"]
                if operation == 0:
                    to_set[config["name"]] = config["value"]
                elif operation == 1:
                    to_delete.append(config["name"])
                else:
                    raise InvalidConfigError(
                        f"config operation {operation} (APPEND/SUBTRACT) is not supported"
                    )
            if body.get("validate_only"):
                LogConfig.from_properties(to_set, state.log_dir.defaults)
            else:
                await asyncio.to_thread(state.log_dir.alter_topic_config, name, to_set, to_delete)
        except SeglogError as exc:
            entry["error_code"], entry["error_message"] = _error(exc)
        responses.append(entry)
    return {"throttle_time_ms": 0, "responses": responses}
