"""Fetch, with long polling and zero-copy records, and ListOffsets, OffsetForLeaderEpoch."""

from __future__ import annotations

import time
from typing import Any

from seglog.broker.delayed_fetch import READY, DelayedFetch, PartitionSeen
from seglog.broker.security.session import Session
from seglog.broker.state import BrokerState
from seglog.errors import SeglogError, StorageError
from seglog.protocol import error_codes
from seglog.protocol.api_keys import ApiKey
from seglog.protocol.entries import failed
from seglog.protocol.headers import RequestHeader
from seglog.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from seglog.storage.region import release_regions
from seglog.storage.segment import TimestampAndOffset

READ_COMMITTED = 1


def _read_all(
    state: BrokerState, body: dict[str, Any], version: int
) -> tuple[list[dict[str, Any]], int, list[PartitionSeen]]:
    """One pass over the requested partitions: (responses, bytes found, what each showed).

    What each partition showed is taken before it is read, so that a change
    made meanwhile (a marker written by another thread) counts as new.
    """
    remaining = body.get("max_bytes", 0x7FFFFFFF) if version >= 3 else 0x7FFFFFFF
    # read_committed: data only up to the last stable offset, with the aborted
    # transactions it overlaps so that the client drops their records.
    read_committed = body.get("isolation_level", 0) == READ_COMMITTED
    total = 0
    responses = []
    seen: list[PartitionSeen] = []
    first = True
    for topic in body["topics"]:
        name = topic["topic"]
        partitions = []
        for request in topic["partitions"]:
            index = request["partition"]
            entry: dict[str, Any] = {
                "partition_index": index,
                "error_code": 0,
                "high_watermark": -1,
                "last_stable_offset": -1,
                "log_start_offset": -1,
                "aborted_transactions": None,
                "preferred_read_replica": -1,
                "records": b"",  # Kafka answers errors with empty records, never null
            }
            try:
                log = state.log_dir.log(name, index)
                limit = min(request["partition_max_bytes"], remaining)
                lso = log.last_stable_offset
                shown = PartitionSeen(
                    (name, index),
                    request["fetch_offset"],
                    log,
                    lso if read_committed else log.high_watermark,
                )
                result = log.read(
                    request["fetch_offset"],
                    max(limit, 0),
                    max_offset=lso if read_committed else None,
                    min_one_message=first,
                )
            except SeglogError as exc:
                if isinstance(exc, StorageError):
                    state.storage_errors.report("a read of", name, index, exc)
                code = error_codes.code_for_exception(exc)
                entry = failed(ApiKey.FETCH, "responses.partitions", code, partition_index=index)
                if exc.kafka_error == "OFFSET_OUT_OF_RANGE":
                    log = state.log_dir.log(name, index)
                    entry["high_watermark"] = log.high_watermark
                    entry["log_start_offset"] = log.log_start_offset
                partitions.append(entry)
                continue
            entry["high_watermark"] = result.high_watermark
            entry["last_stable_offset"] = min(lso, result.high_watermark)
            if read_committed:
                entry["aborted_transactions"] = [
                    {"producer_id": aborted.producer_id, "first_offset": aborted.first_offset}
                    for aborted in log.aborted_transactions(request["fetch_offset"], lso)
                ]
            entry["log_start_offset"] = result.log_start_offset
            if result.data is not None and result.data.region.length > 0:
                region = result.data.region
                entry["records"] = region
                total += region.length
                remaining -= region.length
                first = False
            else:
                entry["records"] = b""
            partitions.append(entry)
            seen.append(shown)
        responses.append({"topic": name, "partitions": partitions})
    return responses, total, seen


def _count_out(state: BrokerState, responses: list[dict[str, Any]]) -> None:
    """Count the bytes of each topic an answer sends (once, after the last pass)."""
    for topic in responses:
        size = sum(
            p["records"].length for p in topic["partitions"] if not isinstance(p["records"], bytes)
        )
        if size:
            state.metrics.fetched(topic["topic"], size)


async def fetch(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """Fetch: wait up to max_wait_ms for min_bytes, then answer with file regions.

    Fetch sessions are declined: the answer always carries session id 0, so
    clients keep sending full fetch requests.
    """
    version = header.api_version
    deadline = time.monotonic() + max(body.get("max_wait_ms", 0), 0) / 1000
    min_bytes = max(body.get("min_bytes", 1), 1)
    read_committed = body.get("isolation_level", 0) == READ_COMMITTED
    # Nothing to read (every partition refused by authorization, say): answered at
    # once, as Kafka does, rather than held for max_wait_ms.
    last = not any(topic["partitions"] for topic in body["topics"])
    while True:
        responses, total, seen = _read_all(state, body, version)
        if last or total >= min_bytes:
            break
        wait = deadline - time.monotonic()
        if wait <= 0 or any(p["error_code"] for t in responses for p in t["partitions"]):
            break
        # Not enough yet: the next pass reads again, so let go of these files
        # rather than keep a deleted segment open for the whole wait.
        release_regions(p["records"] for t in responses for p in t["partitions"])
        delayed = DelayedFetch(
            seen, found=total, min_bytes=min_bytes, read_committed=read_committed
        )
        # Woken: read again (and wait again if still short). Expired, or the
        # client gone: read once more and answer.
        last = await state.fetch_purgatory.wait(delayed, wait, session.gone) != READY
    if total:
        _count_out(state, responses)
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": responses,
    }


async def list_offsets(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """ListOffsets: -1 latest, -2 earliest, -3 max timestamp, else the first offset at a time."""
    version = header.api_version
    read_committed = body.get("isolation_level", 0) == READ_COMMITTED
    topics = []
    for topic in body["topics"]:
        name = topic["name"]
        partitions = []
        seen: set[int] = set()
        for request in topic["partitions"]:
            index = request["partition_index"]
            target = request["timestamp"]
            entry: dict[str, Any] = {
                "partition_index": index,
                "error_code": 0,
                "timestamp": -1,
                "offset": -1,
                "leader_epoch": 0,
            }
            if index in seen:
                entry = _list_offsets_failed("INVALID_REQUEST", index)
            elif target == MAX_TIMESTAMP and version < 7:
                entry = _list_offsets_failed("UNSUPPORTED_VERSION", index)
            else:
                try:
                    log = state.log_dir.log(name, index)
                    found = log.find_offset_by_timestamp(target)
                    if found is not None and read_committed:
                        lso = log.last_stable_offset
                        if target == LATEST_TIMESTAMP:
                            found = TimestampAndOffset(found.timestamp, lso)
                        elif found.offset >= lso and target != EARLIEST_TIMESTAMP:
                            found = None  # not yet stable: not visible to this reader
                    if found is not None:
                        entry["offset"] = found.offset
                        if target not in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP):
                            entry["timestamp"] = found.timestamp
                except SeglogError as exc:
                    entry = _list_offsets_failed(exc, index)
            seen.add(index)
            partitions.append(entry)
        topics.append({"name": name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


def _list_offsets_failed(error: str | SeglogError, index: int) -> dict[str, Any]:
    """A ListOffsets partition that failed: unknown timestamp, offset and epoch (-1)."""
    code = (
        error_codes.code_for(error)
        if isinstance(error, str)
        else error_codes.code_for_exception(error)
    )
    return failed(ApiKey.LIST_OFFSETS, "topics.partitions", code, partition_index=index)


async def offset_for_leader_epoch(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """OffsetForLeaderEpoch: one epoch (0) that ends at the log end offset."""
    topics = []
    for topic in body["topics"]:
        name = topic["topic"]
        partitions = []
        for request in topic["partitions"]:
            index = request["partition"]
            entry: dict[str, Any] = {
                "error_code": 0,
                "partition": index,
                "leader_epoch": 0,
                "end_offset": -1,
            }
            try:
                log = state.log_dir.log(name, index)
                if request["leader_epoch"] > 0:
                    # An epoch this broker never had: Kafka answers "undefined".
                    entry["leader_epoch"] = -1
                else:
                    entry["end_offset"] = log.log_end_offset
            except SeglogError as exc:
                code = error_codes.code_for_exception(exc)
                entry = failed(
                    ApiKey.OFFSET_FOR_LEADER_EPOCH, "topics.partitions", code, partition=index
                )
            partitions.append(entry)
        topics.append({"topic": name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
