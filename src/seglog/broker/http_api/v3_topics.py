"""REST Proxy v3 topics: the list, one topic, its configs, its partitions.

Shapes follow Confluent's REST Proxy v3 (``kind``, ``metadata.self``,
``data``), with seglog's additions: sizes, record counts, whether the topic
keeps a key index. Only topics the caller may DESCRIBE are listed; a topic's
partitions' offsets and sizes come from each partition's leader
(:mod:`.partition_facts`'s ``summary``, from memory: no file is read, so a
list of a thousand topics is cheap).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from seglog.broker.handlers import configs as config_handler
from seglog.broker.http_api import partition_facts, partition_query
from seglog.broker.http_api.auth import allowed, require
from seglog.broker.http_api.errors import unknown_topic
from seglog.broker.http_api.routes import SECURITY, Param, Route, json_response
from seglog.broker.http_api.topic_access import (
    Caller,
    as_clients_see,
    caller,
    check_cluster,
    partition_of,
    path_int,
    state_of,
    storage_errors,
    topic_for,
)
from seglog.broker.security.authorizer import Operation
from seglog.storage.filenames import is_internal
from seglog.storage.topic_list import TopicInfo

_SOURCES = {
    config_handler.TOPIC_CONFIG: "DYNAMIC_TOPIC_CONFIG",
    config_handler.DYNAMIC_BROKER_CONFIG: "DYNAMIC_BROKER_CONFIG",
    config_handler.DYNAMIC_DEFAULT_BROKER_CONFIG: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    config_handler.STATIC_BROKER_CONFIG: "STATIC_BROKER_CONFIG",
    config_handler.DEFAULT_CONFIG: "DEFAULT_CONFIG",
}
"""Kafka's config source codes by REST Proxy's names for them."""


def _topic_url(request: web.Request, topic: str) -> str:
    return f"/v3/clusters/{state_of(request).cluster_id}/topics/{topic}"


def _listing(kind: str, url: str, data: list[dict[str, Any]]) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"self": url, "next": None}, "data": data}


async def _summaries(
    request: web.Request, infos: list[TopicInfo], *, tolerant: bool = False
) -> dict[str, list[dict[str, Any]]]:
    """Each topic's partitions' summaries, asked of their leaders all at once.

    ``tolerant``: a partition that cannot be read (offline) is left out of
    its topic's sums rather than failing the answer.
    """
    state = state_of(request)
    targets = [(info, p) for info in infos for p in range(info.partitions)]
    with storage_errors():
        answers = await partition_query.ask_many(
            state.log_dir, state.cluster, targets, partition_facts.SUMMARY, {"tolerant": tolerant}
        )
    out: dict[str, list[dict[str, Any]]] = {info.name: [] for info in infos}
    for (info, _), answer in zip(targets, answers, strict=True):
        if answer is not None:
            out[info.name].append(answer)
    return out


def _topic_item(
    request: web.Request, info: TopicInfo, parts: list[dict[str, Any]]
) -> dict[str, Any]:
    state = state_of(request)
    return {
        "kind": "KafkaTopic",
        "metadata": {"self": _topic_url(request, info.name)},
        "cluster_id": state.cluster_id,
        "topic_name": info.name,
        "is_internal": is_internal(info.name),
        "replication_factor": 1,
        "partitions_count": info.partitions,
        "size_bytes": sum(p["size_bytes"] for p in parts),
        "record_count": sum(p["high_watermark"] - p["log_start_offset"] for p in parts),
        "key_index": state.log_dir.topic_config(info.name).key_index_enable,
    }


def _partition_item(
    request: web.Request, info: TopicInfo, partition: int, part: dict[str, Any]
) -> dict[str, Any]:
    state = state_of(request)
    return {
        "kind": "KafkaPartition",
        "metadata": {"self": f"{_topic_url(request, info.name)}/partitions/{partition}"},
        "cluster_id": state.cluster_id,
        "topic_name": info.name,
        "partition_id": partition,
        "leader": {"broker_id": state.cluster.leader(info, partition)},
        "log_start_offset": part["log_start_offset"],
        "high_watermark": part["high_watermark"],
        "last_stable_offset": part["last_stable_offset"],
        "log_end_offset": part["log_end_offset"],
        "size_bytes": part["size_bytes"],
        "segment_count": part["segment_count"],
    }


async def list_topics(request: web.Request) -> web.StreamResponse:
    """The topics the caller may DESCRIBE, by name."""
    check_cluster(request)
    who: Caller = await caller(request)
    security = request.app[SECURITY]
    seen = (as_clients_see(info) for info in state_of(request).log_dir.topics().values())
    infos = sorted(
        (
            info
            for info in seen
            if info is not None
            and allowed(security, who.principal, who.host, Operation.DESCRIBE, info.name)
        ),
        key=lambda info: info.name,
    )
    # A topic deleted or a partition gone offline meanwhile must not fail the whole list.
    summaries = await _summaries(request, infos, tolerant=True)
    data = [_topic_item(request, info, summaries[info.name]) for info in infos]
    url = f"/v3/clusters/{state_of(request).cluster_id}/topics"
    return json_response(_listing("KafkaTopicList", url, data))


async def get_topic(request: web.Request) -> web.StreamResponse:
    """One topic."""
    check_cluster(request)
    info = topic_for(request, await caller(request), request.match_info["topic"])
    summaries = await _summaries(request, [info])
    return json_response(_topic_item(request, info, summaries[info.name]))


async def topic_configs(request: web.Request) -> web.StreamResponse:
    """The topic's configs, each with its source; a sensitive value is null."""
    check_cluster(request)
    who = await caller(request)
    name = request.match_info["topic"]
    # DESCRIBE_CONFIGS alone, as Kafka's DescribeConfigs asks (it does not imply DESCRIBE,
    # nor does DESCRIBE imply it); checked before the topic's existence is told.
    require(request.app[SECURITY], who.principal, who.host, Operation.DESCRIBE_CONFIGS, name)
    state = state_of(request)
    info = as_clients_see(state.log_dir.topic(name))
    if info is None:
        raise unknown_topic(name)
    values = state.log_dir.topic_config(info.name).to_properties()
    entries = config_handler.topic_entries(state, values, info.overrides)
    base = _topic_url(request, info.name)
    data = [
        {
            "kind": "KafkaTopicConfig",
            "metadata": {"self": f"{base}/configs/{entry['name']}"},
            "cluster_id": state.cluster_id,
            "topic_name": info.name,
            "name": entry["name"],
            "value": None if entry["is_sensitive"] else entry["value"],
            "is_default": entry["config_source"] == config_handler.DEFAULT_CONFIG,
            "is_read_only": bool(entry["read_only"]),
            "is_sensitive": bool(entry["is_sensitive"]),
            "source": _SOURCES.get(entry["config_source"], "UNKNOWN"),
        }
        for entry in entries
    ]
    return json_response(_listing("KafkaTopicConfigList", f"{base}/configs", data))


async def list_partitions(request: web.Request) -> web.StreamResponse:
    """The topic's partitions, with their leaders' offsets and sizes."""
    check_cluster(request)
    info = topic_for(request, await caller(request), request.match_info["topic"])
    parts = (await _summaries(request, [info]))[info.name]
    data = [_partition_item(request, info, p, part) for p, part in enumerate(parts)]
    url = f"{_topic_url(request, info.name)}/partitions"
    return json_response(_listing("KafkaPartitionList", url, data))


async def get_partition(request: web.Request) -> web.StreamResponse:
    """One partition."""
    check_cluster(request)
    partition = path_int(request, "partition_id")
    info = topic_for(request, await caller(request), request.match_info["topic"])
    partition_of(info, partition)
    state = state_of(request)
    with storage_errors():
        [part] = await partition_query.ask(
            state.log_dir, state.cluster, info, [partition], partition_facts.SUMMARY
        )
    return json_response(_partition_item(request, info, partition, part))


# ---------------------------------------------------------------- the table

_CLUSTER = Param("cluster_id", "string", "the cluster's id", location="path")
_TOPIC = Param("topic", "string", "the topic", location="path")
_PARTITION = Param("partition_id", "integer", "the partition", location="path", minimum=0)
_META = {"type": "object", "properties": {"self": {"type": "string"}}}
_INT = {"type": "integer", "format": "int64"}

TOPIC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": [
        "topic_name",
        "is_internal",
        "replication_factor",
        "partitions_count",
        "size_bytes",
        "record_count",
        "key_index",
    ],
    "properties": {
        "kind": {"type": "string"},
        "metadata": _META,
        "cluster_id": {"type": "string"},
        "topic_name": {"type": "string"},
        "is_internal": {"type": "boolean"},
        "replication_factor": {"type": "integer"},
        "partitions_count": {"type": "integer"},
        "size_bytes": _INT,
        "record_count": _INT,
        "key_index": {"type": "boolean"},
    },
}
PARTITION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": [
        "partition_id",
        "leader",
        "log_start_offset",
        "high_watermark",
        "last_stable_offset",
        "size_bytes",
        "segment_count",
    ],
    "properties": {
        "kind": {"type": "string"},
        "metadata": _META,
        "topic_name": {"type": "string"},
        "partition_id": {"type": "integer"},
        "leader": {"type": "object", "properties": {"broker_id": {"type": "integer"}}},
        "log_start_offset": _INT,
        "high_watermark": _INT,
        "last_stable_offset": _INT,
        "log_end_offset": _INT,
        "size_bytes": _INT,
        "segment_count": {"type": "integer"},
    },
}
CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name", "value", "is_default", "is_read_only", "is_sensitive", "source"],
    "properties": {
        "name": {"type": "string"},
        "value": {"type": "string", "nullable": True},
        "is_default": {"type": "boolean"},
        "is_read_only": {"type": "boolean"},
        "is_sensitive": {"type": "boolean"},
        "source": {"type": "string"},
    },
}


def list_schema(item: dict[str, Any]) -> dict[str, Any]:
    """A REST Proxy v3 list of ``item``."""
    return {
        "type": "object",
        "required": ["kind", "metadata", "data"],
        "properties": {
            "kind": {"type": "string"},
            "metadata": _META,
            "data": {"type": "array", "items": item},
        },
    }


ROUTES = (
    Route(
        "GET",
        "/v3/clusters/{cluster_id}/topics",
        list_topics,
        "listTopicsV3",
        "The topics the caller may describe, with sizes and record counts",
        params=(_CLUSTER,),
        response=list_schema(TOPIC_SCHEMA),
        errors=(401, 404, 503),
    ),
    Route(
        "GET",
        "/v3/clusters/{cluster_id}/topics/{topic}",
        get_topic,
        "getTopic",
        "One topic",
        params=(_CLUSTER, _TOPIC),
        response=TOPIC_SCHEMA,
        errors=(401, 403, 404, 503),
    ),
    Route(
        "GET",
        "/v3/clusters/{cluster_id}/topics/{topic}/configs",
        topic_configs,
        "listTopicConfigs",
        "The topic's configs and their sources (sensitive values null)",
        params=(_CLUSTER, _TOPIC),
        response=list_schema(CONFIG_SCHEMA),
        errors=(401, 403, 404),
    ),
    Route(
        "GET",
        "/v3/clusters/{cluster_id}/topics/{topic}/partitions",
        list_partitions,
        "listPartitions",
        "The topic's partitions: leader, offsets, sizes",
        params=(_CLUSTER, _TOPIC),
        response=list_schema(PARTITION_SCHEMA),
        errors=(401, 403, 404, 503),
    ),
    Route(
        "GET",
        "/v3/clusters/{cluster_id}/topics/{topic}/partitions/{partition_id}",
        get_partition,
        "getPartition",
        "One partition",
        params=(_CLUSTER, _TOPIC, _PARTITION),
        response=PARTITION_SCHEMA,
        errors=(400, 401, 403, 404, 503),
    ),
)
