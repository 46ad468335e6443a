"""``GET /v1/topics`` and ``GET /v1/topics/{topic}/records``: topic names, lookup by key.

A lookup answers the key's newest record, or with ``all=true`` its records
newest first (up to ``limit``), over one partition or every partition of the
topic, optionally within a time range and read_committed. Keys, values and
header values are given as text where they are UTF-8, else in base64, with
``*_encoding`` saying which (``null`` for a null value).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from typing import Any

from aiohttp import web

from seglog.broker.http_api import lookup
from seglog.broker.http_api.auth import allowed, authenticate, require
from seglog.broker.http_api.errors import ApiError, bad_request, unknown_topic
from seglog.broker.http_api.routes import (
    SECURITY,
    STATE,
    Param,
    Route,
    json_response,
    json_text,
)
from seglog.broker.http_api.topic_access import visible
from seglog.broker.nodes.channel import ControllerUnavailableError
from seglog.broker.security.authorizer import Operation
from seglog.errors import (
    KeyIndexDisabledError,
    NotLeaderOrFollowerError,
    StorageError,
    UnknownTopicOrPartitionError,
)
from seglog.storage.key_search import FoundRecord, record_json

ENCODE_ON_LOOP = 256
"""Answers of up to this many records are encoded on the event loop, larger ones in a thread."""

# ---------------------------------------------------------------- encoding


# ---------------------------------------------------------------- handlers


async def list_topics(request: web.Request) -> web.StreamResponse:
    """The names of the topics the caller may DESCRIBE, sorted."""
    security = request.app[SECURITY]
    principal = await authenticate(request, security)
    host = request.remote or ""
    names = [
        name
        for name, info in request.app[STATE].log_dir.topics().items()
        if visible(info) and allowed(security, principal, host, Operation.DESCRIBE, name)
    ]
    return json_response({"topics": sorted(names)})


def _key(query: dict[str, Any]) -> bytes:
    text, encoded = query["key"], query["key_base64"]
    if (text is None) == (encoded is None):
        raise bad_request("give the key as exactly one of key= (text) or key_base64=")
    if text is not None:
        return str(text).encode("utf-8")
    try:
        return base64.b64decode(str(encoded), validate=True)
    except binascii.Error:
        raise bad_request("key_base64: not valid base64") from None


async def find_records(request: web.Request) -> web.StreamResponse:
    """A key's records in a topic (see the module docstring)."""
    state = request.app[STATE]
    security = request.app[SECURITY]
    query = RECORDS.query(request)
    key = _key(query)
    if query["from"] is not None and query["to"] is not None and query["from"] > query["to"]:
        raise bad_request(f"from ({query['from']}) is after to ({query['to']})")
    principal = await authenticate(request, security)
    topic = request.match_info["topic"]
    host = request.remote or ""
    # DESCRIBE first: a caller who may not see the topic is not told whether it exists.
    require(security, principal, host, Operation.DESCRIBE, topic)
    info = state.log_dir.topic(topic)
    if info is None or not visible(info):
        raise unknown_topic(topic)
    require(security, principal, host, Operation.READ, topic)
    partition = query["partition"]
    if partition is not None and partition >= info.partitions:
        raise unknown_topic(topic, partition)
    if not state.log_dir.topic_config(topic).key_index_enable:
        raise bad_request(
            f"topic '{topic}' keeps no key index: set key.index.enable=true on it "
            "(seglog configs --alter --entity-type topics --add-config ...) "
            "to look records up by key"
        )
    partitions = range(info.partitions) if partition is None else [partition]
    key_query = lookup.KeyQuery(
        key=key,
        limit=query["limit"] if query["all"] else 1,
        from_ms=query["from"],
        to_ms=query["to"],
        read_committed=query["isolation_level"] == "read_committed",
    )
    try:
        found = await lookup.find(
            state.log_dir, state.cluster, info, partitions, key_query, whole_topic=partition is None
        )
    except KeyIndexDisabledError as exc:
        # Turned off between the check above and the lookup.
        raise bad_request(str(exc)) from exc
    except UnknownTopicOrPartitionError as exc:
        raise ApiError(404, "UNKNOWN_TOPIC_OR_PARTITION", str(exc)) from exc
    except (ControllerUnavailableError, NotLeaderOrFollowerError) as exc:
        # The leader is restarting (its supervisor brings it back): try again shortly.
        raise ApiError(503, "LEADER_NOT_AVAILABLE", str(exc)) from exc
    except StorageError as exc:
        raise ApiError(503, "KAFKA_STORAGE_ERROR", str(exc)) from exc
    if len(found) <= ENCODE_ON_LOOP:
        return json_response({"records": [record_json(r) for r in found]})
    # Many records (all=true without a limit): encoding them would hold the loop.
    body = await asyncio.to_thread(_encode, found)
    return web.Response(body=body, content_type="application/json")


def _encode(found: list[FoundRecord]) -> bytes:
    return json_text({"records": [record_json(r) for r in found]}).encode("utf-8")


# ---------------------------------------------------------------- the table

_ENCODING = {"type": "string", "enum": ["utf8", "base64"]}
_NULLABLE_ENCODING = {"type": "string", "enum": ["utf8", "base64"], "nullable": True}
RECORD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": [
        "topic",
        "partition",
        "offset",
        "timestamp",
        "key",
        "key_encoding",
        "value",
        "value_encoding",
        "headers",
    ],
    "properties": {
        "topic": {"type": "string"},
        "partition": {"type": "integer"},
        "offset": {"type": "integer", "format": "int64"},
        "timestamp": {"type": "integer", "format": "int64", "description": "epoch ms"},
        "key": {"type": "string"},
        "key_encoding": _ENCODING,
        "value": {"type": "string", "nullable": True},
        "value_encoding": _NULLABLE_ENCODING,
        "headers": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["key", "value", "value_encoding"],
                "properties": {
                    "key": {"type": "string"},
                    "value": {"type": "string", "nullable": True},
                    "value_encoding": _NULLABLE_ENCODING,
                },
            },
        },
    },
}

TOPICS = Route(
    "GET",
    "/v1/topics",
    list_topics,
    "listTopics",
    "The names of the topics the caller may describe",
    response={
        "type": "object",
        "required": ["topics"],
        "properties": {"topics": {"type": "array", "items": {"type": "string"}}},
    },
    errors=(401,),
)

RECORDS = Route(
    "GET",
    "/v1/topics/{topic}/records",
    find_records,
    "findRecordsByKey",
    "A key's newest record, or all its records newest first",
    params=(
        Param("topic", "string", "the topic", location="path"),
        Param("key", "string", "the key as UTF-8 text (or give key_base64)"),
        Param("key_base64", "string", "the key's bytes in base64 (or give key)"),
        Param("all", "boolean", "every record of the key, not only the newest", default=False),
        Param("limit", "integer", "with all=true: at most this many records", minimum=1),
        Param("partition", "integer", "only this partition (default: all)", minimum=0),
        Param("from", "integer", "only records with a timestamp at or after (epoch ms)"),
        Param("to", "integer", "only records with a timestamp at or before (epoch ms)"),
        Param(
            "isolation_level",
            "string",
            "read_committed: only committed records, below the last stable offset",
            choices=("read_uncommitted", "read_committed"),
            default="read_uncommitted",
        ),
    ),
    response={
        "type": "object",
        "required": ["records"],
        "properties": {"records": {"type": "array", "items": RECORD_SCHEMA}},
    },
    errors=(400, 401, 403, 404, 503),
)

ROUTES = (TOPICS, RECORDS)
