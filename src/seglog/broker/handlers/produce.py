"""Produce and InitProducerId."""

from __future__ import annotations

import asyncio
from typing import Any

from seglog.broker.handlers.metadata import auto_create
from seglog.broker.state import BrokerState
from seglog.errors import SeglogError
from seglog.protocol import error_codes
from seglog.protocol.headers import RequestHeader
from seglog.records import batch

_REQUIRED_ACKS = (0, 1, -1)


def _single_batch_error(records: Any) -> str | None:
    """Kafka's rule for Produce v3+: exactly one v2 batch per partition."""
    if batch.peek_magic(records, 0) != batch.CURRENT_MAGIC:
        return None  # a legacy message set: converted on append
    _, size = batch.peek_offset_and_size(records, 0)
    if size < len(records):
        return (
            "produce requests of version 3 and later may hold only one record batch per partition"
        )
    return None


def _append(
    state: BrokerState, topic: str, partition: int, records: Any, version: int
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "index": partition,
        "error_code": 0,
        "base_offset": -1,
        "log_append_time_ms": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": None,
    }
    if records is None or len(records) == 0:
        result["error_code"] = error_codes.code_for("INVALID_RECORD")
        result["error_message"] = "the produce request holds no records"
        return result
    if version >= 3 and len(records) >= batch.HEADER_SIZE:
        message = _single_batch_error(records)
        if message is not None:
            result["error_code"] = error_codes.code_for("INVALID_RECORD")
            result["error_message"] = message
            return result
    try:
        log = state.log_dir.log(topic, partition)
        info = log.append(records)
    except SeglogError as exc:
        result["error_code"] = error_codes.code_for_exception(exc)
        result["error_message"] = str(exc)
        return result
    state.metrics.bytes_in += info.size
    result.update(
        base_offset=info.first_offset,
        log_append_time_ms=info.log_append_time,
        log_start_offset=info.log_start_offset,
    )
    return result


async def produce(
    state: BrokerState, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any] | None:
    """Produce: validate and append each partition's batches; None for acks=0."""
    acks = body["acks"]
    responses = []
    for topic_data in body["topic_data"]:
        name = topic_data["name"]
        known = state.log_dir.has_topic(name)
        error = 0 if known else (await auto_create(state, name))[name]
        partitions = []
        for partition_data in topic_data["partition_data"]:
            index = partition_data["index"]
            if acks not in _REQUIRED_ACKS:
                partitions.append(
                    {"index": index, "error_code": error_codes.code_for("INVALID_REQUIRED_ACKS")}
                )
            elif error and not state.log_dir.has_topic(name):
                partitions.append({"index": index, "error_code": error, "base_offset": -1})
            else:
                partitions.append(
                    _append(state, name, index, partition_data["records"], header.api_version)
                )
        responses.append({"name": name, "partition_responses": partitions})
    await state.notify_data()
    if acks == 0:
        return None
    return {"responses": responses, "throttle_time_ms": 0}


async def init_producer_id(
    state: BrokerState, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """InitProducerId for idempotent producers (transactions are not supported)."""
    if body.get("transactional_id") is not None:
        return {
            "throttle_time_ms": 0,
            "error_code": error_codes.code_for("TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
            "producer_id": -1,
            "producer_epoch": -1,
        }
    producer_id = body.get("producer_id", -1)
    epoch = body.get("producer_epoch", -1)
    if producer_id >= 0 and 0 <= epoch < 32766:
        # A producer bumping its epoch after an error keeps its id.
        await asyncio.sleep(0)
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "producer_id": producer_id,
            "producer_epoch": epoch + 1,
        }
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "producer_id": state.next_producer_id(),
        "producer_epoch": 0,
    }
