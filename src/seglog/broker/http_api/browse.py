"""A partition's segments, and its records browsed by offset or by time (seglog's, ``/v1``).

Both are answered by the partition's leader (:mod:`.partition_facts`, asked
through :mod:`.partition_query`), so any node answers for any partition.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from seglog.broker.http_api import partition_facts, partition_query
from seglog.broker.http_api.errors import bad_request
from seglog.broker.http_api.routes import Param, Route, json_response
from seglog.broker.http_api.topic_access import (
    caller,
    partition_of,
    path_int,
    state_of,
    storage_errors,
    topic_for,
)
from seglog.broker.http_api.topics import RECORD_SCHEMA
from seglog.broker.security.authorizer import Operation

BROWSED_RECORD_SCHEMA: dict[str, Any] = {
    **RECORD_SCHEMA,
    "properties": {
        **RECORD_SCHEMA["properties"],
        # Unlike a key lookup's, a browsed record may have no key.
        "key": {"type": "string", "nullable": True},
        "key_encoding": {"type": "string", "enum": ["utf8", "base64"], "nullable": True},
    },
}
"""A record as :data:`~.topics.RECORD_SCHEMA`, its key nullable."""

MAX_LIMIT = 500
"""The most records one page holds."""


async def segments(request: web.Request) -> web.StreamResponse:
    """The partition's segments (DESCRIBE on the topic)."""
    SEGMENTS.query(request)
    partition = path_int(request, "partition")
    topic = request.match_info["topic"]
    info = topic_for(request, await caller(request), topic)
    partition_of(info, partition)
    state = state_of(request)
    with storage_errors():
        [answer] = await partition_query.ask(
            state.log_dir, state.cluster, info, [partition], partition_facts.SEGMENTS
        )
    return json_response({"topic": topic, "partition": partition, **answer})


async def records(request: web.Request) -> web.StreamResponse:
    """A page of the partition's records from an offset or a time (READ on the topic)."""
    query = RECORDS.query(request)
    if (query["offset"] is None) == (query["timestamp"] is None):
        raise bad_request("give exactly one of offset= or timestamp=")
    if query["limit"] > MAX_LIMIT:
        raise bad_request(f"limit: at most {MAX_LIMIT}, got {query['limit']}")
    partition = path_int(request, "partition")
    topic = request.match_info["topic"]
    info = topic_for(request, await caller(request), topic, Operation.READ)
    partition_of(info, partition)
    state = state_of(request)
    args = {
        "offset": query["offset"],
        "timestamp": query["timestamp"],
        "limit": query["limit"],
        "read_committed": query["isolation_level"] == "read_committed",
    }
    with storage_errors():
        [answer] = await partition_query.ask(
            state.log_dir, state.cluster, info, [partition], partition_facts.RECORDS, args
        )
    return json_response(answer)


# ---------------------------------------------------------------- the table

_INT = {"type": "integer", "format": "int64"}
_PATH = (
    Param("topic", "string", "the topic", location="path"),
    Param("partition", "integer", "the partition", location="path", minimum=0),
)
SEGMENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "base_offset": _INT,
        "next_offset": _INT,
        "size_bytes": _INT,
        "max_timestamp": {**_INT, "nullable": True},
        "index_entries": {"type": "integer"},
        "index_max_entries": {"type": "integer"},
        "time_index_entries": {"type": "integer"},
        "time_index_max_entries": {"type": "integer"},
        "key_index": {"type": "boolean"},
        "active": {"type": "boolean"},
        "past_retention": {
            "type": "boolean",
            "description": "the next retention pass deletes it (time or size)",
        },
        "cleaner": {
            "type": "string",
            "enum": ["next", "cleaned"],
            "nullable": True,
            "description": "cleaned: below the cleaner's checkpoint; next: the cleaner "
            "would clean it now (dirty, and the log eligible)",
        },
    },
}

SEGMENTS = Route(
    "GET",
    "/v1/topics/{topic}/partitions/{partition}/segments",
    segments,
    "listSegments",
    "A partition's segments, with what retention and the cleaner would do next",
    params=_PATH,
    response={
        "type": "object",
        "properties": {
            "topic": {"type": "string"},
            "partition": {"type": "integer"},
            "log_start_offset": _INT,
            "high_watermark": _INT,
            "last_stable_offset": _INT,
            "now_ms": _INT,
            "retention_ms": _INT,
            "retention_bytes": _INT,
            "cleanup_policy": {"type": "string", "enum": ["delete", "compact", "compact,delete"]},
            "dirty_ratio": {"type": "number", "nullable": True},
            "min_cleanable_dirty_ratio": {"type": "number"},
            "segments": {"type": "array", "items": SEGMENT_SCHEMA},
        },
    },
    errors=(400, 401, 403, 404, 503),
)

RECORDS = Route(
    "GET",
    "/v1/topics/{topic}/partitions/{partition}/records",
    records,
    "browseRecords",
    "A partition's records from an offset, or from the first at or after a time",
    params=(
        *_PATH,
        Param("offset", "integer", "the first offset (below the log start: from it)", minimum=0),
        Param("timestamp", "integer", "from the first record at or after (epoch ms)", minimum=0),
        Param(
            "limit",
            "integer",
            f"at most this many records (at most {MAX_LIMIT})",
            minimum=1,
            default=20,
        ),
        Param(
            "isolation_level",
            "string",
            "read_committed: below the last stable offset, aborted records skipped",
            choices=("read_uncommitted", "read_committed"),
            default="read_uncommitted",
        ),
    ),
    response={
        "type": "object",
        "required": ["records", "next_offset", "log_start_offset", "high_watermark"],
        "properties": {
            "records": {"type": "array", "items": BROWSED_RECORD_SCHEMA},
            "next_offset": _INT,
            "log_start_offset": _INT,
            "high_watermark": _INT,
        },
    },
    errors=(400, 401, 403, 404, 503),
)

ROUTES = (SEGMENTS, RECORDS)
