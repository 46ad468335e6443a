"""``POST /v3/clusters/{c}/topics/{t}/records``: produce one record (REST Proxy v3's body).

The record goes through the broker's own Produce path as the caller: a
Produce request, built here, is handled by the broker's handler with the
caller's principal and address (:func:`~.kafka_calls.ask`), so the ACLs (WRITE on the
topic), quotas and metrics are those of a Kafka client; with ``--nodes`` it
is sent to the partition's leader in an Envelope, as a node forwards
administration to the controller. Only when ``console.write.enable`` is true:
otherwise the console is read-only and the route answers 403.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import random
from typing import Any

from aiohttp import web

from seglog.broker.http_api.errors import ApiError, bad_request
from seglog.broker.http_api.kafka_calls import ask
from seglog.broker.http_api.routes import STATE, Param, Route, json_response
from seglog.broker.http_api.topic_access import caller, check_cluster, partition_of, topic_for
from seglog.protocol import error_codes
from seglog.protocol.api_keys import ApiKey
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage.key_index import key_hash

PRODUCE_VERSION = 9
"""The Produce version sent (the first flexible one; any the broker serves would do)."""
PRODUCE_TIMEOUT_MS = 30_000
READ_ONLY = "the console is read-only: set console.write.enable=true"

# ---------------------------------------------------------------- the body


def _data(what: str, given: Any) -> tuple[bytes | None, dict[str, Any] | None]:
    """The bytes of a key or value (``{"type", "data"}``), and its answer's ``{"type", "size"}``."""
    if given is None:
        return None, None
    if not isinstance(given, dict):
        raise bad_request(f"{what}: expected an object with type and data")
    kind = str(given.get("type", "JSON")).upper()
    data = given.get("data")
    if data is None:
        return None, None
    if kind == "STRING":
        if not isinstance(data, str):
            raise bad_request(f"{what}.data: a STRING is a JSON string")
        raw = data.encode("utf-8")
    elif kind == "JSON":
        raw = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    elif kind == "BINARY":
        if not isinstance(data, str):
            raise bad_request(f"{what}.data: BINARY data is base64 text")
        try:
            raw = base64.b64decode(data, validate=True)
        except binascii.Error:
            raise bad_request(f"{what}.data: not valid base64") from None
    else:
        raise bad_request(f"{what}.type: expected STRING, JSON or BINARY, got {kind!r}")
    return raw, {"type": kind, "size": len(raw)}


def _headers(given: Any) -> list[tuple[str, bytes | None]]:
    if given is None:
        return []
    if not isinstance(given, list):
        raise bad_request("headers: expected a list of {name, value}")
    out: list[tuple[str, bytes | None]] = []
    for header in given:
        if not isinstance(header, dict) or not isinstance(header.get("name"), str):
            raise bad_request("headers: each is {name: text, value: base64 or null}")
        value = header.get("value")
        if value is None:
            out.append((header["name"], None))
            continue
        try:
            out.append((header["name"], base64.b64decode(str(value), validate=True)))
        except binascii.Error:
            raise bad_request(f"headers: the value of {header['name']!r} is not base64") from None
    return out


def _timestamp(given: Any) -> int:
    """Epoch ms from ISO 8601 text or a number of ms; now when absent."""
    if given is None:
        return int(datetime.datetime.now(datetime.UTC).timestamp() * 1000)
    if isinstance(given, int) and not isinstance(given, bool):
        if given < 0:
            # As a Kafka producer refuses one: -1 means "no timestamp" in a batch.
            raise bad_request(f"timestamp: must not be negative, got {given}")
        return given
    if isinstance(given, str):
        try:
            parsed = datetime.datetime.fromisoformat(given.replace("Z", "+00:00"))
        except ValueError:
            raise bad_request(f"timestamp: not ISO 8601: {given!r}") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=datetime.UTC)
        ms = int(parsed.timestamp() * 1000)
        if ms < 0:
            raise bad_request(f"timestamp: before 1970 is not a Kafka timestamp: {given!r}")
        return ms
    raise bad_request("timestamp: ISO 8601 text or epoch milliseconds")


def _iso(ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


_STATUS = {
    "TOPIC_AUTHORIZATION_FAILED": 403,
    "CLUSTER_AUTHORIZATION_FAILED": 403,
    "UNKNOWN_TOPIC_OR_PARTITION": 404,
    "INVALID_RECORD": 400,
    "INVALID_TIMESTAMP": 400,
    "RECORD_LIST_TOO_LARGE": 400,
    "MESSAGE_TOO_LARGE": 400,
    "INVALID_REQUIRED_ACKS": 400,
    "UNKNOWN_SERVER_ERROR": 500,
}


async def produce(request: web.Request) -> web.StreamResponse:
    """Produce one record (see the module docstring)."""
    check_cluster(request)
    who = await caller(request)
    state = request.app[STATE]
    if not state.settings.console_write_enable:
        raise ApiError(403, "INVALID_REQUEST", READ_ONLY)
    info = topic_for(request, who, request.match_info["topic"])
    try:
        body = await request.json()
    except ValueError:
        raise bad_request("the body is not JSON") from None
    if not isinstance(body, dict):
        raise bad_request("the body is a JSON object")
    unknown = set(body) - {"partition_id", "key", "value", "headers", "timestamp"}
    if unknown:
        raise bad_request(f"unknown fields: {', '.join(sorted(unknown))}")
    key, key_info = _data("key", body.get("key"))
    value, value_info = _data("value", body.get("value"))
    headers = _headers(body.get("headers"))
    timestamp = _timestamp(body.get("timestamp"))
    partition = body.get("partition_id")
    if partition is None:
        # Kafka's default partitioner for a keyed record; any partition for one without.
        partition = (
            (key_hash(key) & 0x7FFFFFFF) % info.partitions
            if key is not None
            else random.randrange(info.partitions)
        )
    elif not isinstance(partition, int) or isinstance(partition, bool):
        raise bad_request("partition_id: expected an integer")
    partition_of(info, partition)
    records = build_batch([SimpleRecord(value, key, timestamp, headers)])
    produce_request = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": PRODUCE_TIMEOUT_MS,
        "topic_data": [
            {"name": info.name, "partition_data": [{"index": partition, "records": records}]}
        ],
    }
    leader = state.cluster.leader(info, partition)
    response = await ask(request, ApiKey.PRODUCE, PRODUCE_VERSION, produce_request, node_id=leader)
    [topic_answer] = response["responses"]
    [answer] = topic_answer["partition_responses"]
    code = int(answer["error_code"])
    if code != 0:
        name = error_codes.name_for(code)
        message = answer.get("error_message") or f"the broker refused the record: {name}"
        # Unlisted: a retriable error (a leader moving, a timeout) is worth trying again
        # (503); any other is the request's own fault and would fail again alike (400).
        status = _STATUS.get(name, 503 if error_codes.is_retriable(code) else 400)
        raise ApiError(status, name, str(message))
    appended = int(answer.get("log_append_time_ms", -1))
    stamp = appended if appended >= 0 else timestamp
    return json_response(
        {
            "error_code": 200,
            "cluster_id": state.cluster_id,
            "topic_name": info.name,
            "partition_id": partition,
            "offset": int(answer["base_offset"]),
            "timestamp": _iso(stamp),
            "timestamp_ms": stamp,
            "key": key_info,
            "value": value_info,
        }
    )


_SIZE = {
    "type": "object",
    "nullable": True,
    "properties": {"type": {"type": "string"}, "size": {"type": "integer"}},
}

ROUTES = (
    Route(
        "POST",
        "/v3/clusters/{cluster_id}/topics/{topic}/records",
        produce,
        "produceRecord",
        "Produce one record as the caller (REST Proxy v3 body; console.write.enable=true only)",
        params=(
            Param("cluster_id", "string", "the cluster's id", location="path"),
            Param("topic", "string", "the topic", location="path"),
        ),
        response={
            "type": "object",
            "properties": {
                "error_code": {"type": "integer"},
                "cluster_id": {"type": "string"},
                "topic_name": {"type": "string"},
                "partition_id": {"type": "integer"},
                "offset": {"type": "integer", "format": "int64"},
                "timestamp": {"type": "string", "format": "date-time"},
                "timestamp_ms": {"type": "integer", "format": "int64"},
                "key": _SIZE,
                "value": _SIZE,
            },
        },
        errors=(400, 401, 403, 404, 503),
    ),
)
