"""ShareFetch and ShareAcknowledge: records handed to a share group's members, and their acks.

A ShareFetch first opens, continues or closes the member's share session
(:mod:`seglog.broker.share.sessions`), then applies the acknowledgements it
carries, then acquires records of the session's partitions for the member
(:mod:`seglog.broker.share.partitions`), waiting up to ``max_wait_ms`` when
none can be acquired yet. Each partition's answer carries the bytes of the
batches that hold acquired records, straight from the segment file, and the
acquired offset ranges with their delivery counts: the client hands out only
those records. ShareAcknowledge applies acknowledgements alone.

Acknowledgements are written to ``__share_group_state`` before the answer
goes out, so an answered acknowledgement survives a crash. Epoch -1 closes
the session after its acknowledgements; what the member still holds is
released for others at once.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from seglog.broker.delayed_fetch import READY, DelayedFetch, PartitionSeen
from seglog.broker.security.access.share import readable_topics
from seglog.broker.security.session import Session
from seglog.broker.share.partitions import SharePartitions
from seglog.broker.share.sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    ShareSession,
    ShareSessionError,
    TopicIdPartition,
)
from seglog.broker.state import BrokerState
from seglog.errors import SeglogError, StorageError
from seglog.protocol import error_codes
from seglog.protocol.headers import RequestHeader
from seglog.share.partition import AckBatch, SharePartition
from seglog.storage.region import release_regions

_NONE = 0


class DelayedShareFetch(DelayedFetch):
    """A waiting ShareFetch: ready once one of its share-partitions may acquire something."""

    __slots__ = ("share_partitions",)

    def __init__(
        self,
        partitions: list[PartitionSeen],
        share_partitions: list[SharePartition],
        *,
        read_committed: bool,
    ) -> None:
        super().__init__(partitions, found=0, min_bytes=1, read_committed=read_committed)
        self.share_partitions = share_partitions

    def ready(self) -> bool:
        """Whether a share-partition has records to hand out: new in the log, or freed."""
        for seen, share_partition in zip(self.partitions, self.share_partitions, strict=True):
            log = seen.log
            if log.closed or log.offline_reason is not None:
                return True  # the read says what happened
            end = log.last_stable_offset if self.read_committed else log.high_watermark
            if share_partition.can_acquire() and share_partition.next_fetch_offset() < end:
                return True
        return False


def _error(code_name: str, message: str | None = None) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": error_codes.code_for(code_name),
        "error_message": message,
        "acquisition_lock_timeout_ms": 0,
        "responses": [],
        "node_endpoints": [],
    }


def _ack_batches(raw: list[dict[str, Any]]) -> list[AckBatch]:
    return [
        AckBatch(b["first_offset"], b["last_offset"], tuple(b["acknowledge_types"])) for b in raw
    ]


def _topic_names(state: BrokerState) -> dict[uuid.UUID, str]:
    return {info.topic_id: name for name, info in state.log_dir.topics().items()}


async def _acknowledge_all(
    state: BrokerState,
    session: Session,
    shares: SharePartitions,
    group_id: str,
    member_id: str,
    topics: list[dict[str, Any]],
    names: dict[uuid.UUID, str],
) -> dict[TopicIdPartition, tuple[int, str | None]]:
    """Apply every partition's acknowledgements: (error code, message) by partition."""
    results: dict[TopicIdPartition, tuple[int, str | None]] = {}
    touched: list[SharePartition] = []
    readable = readable_topics(session)
    for topic in topics:
        topic_id = topic["topic_id"]
        for partition in topic["partitions"]:
            batches = partition.get("acknowledgement_batches") or []
            if not batches:
                continue
            key = (topic_id, partition["partition_index"])
            name = names.get(topic_id)
            if name is None:
                results[key] = (error_codes.code_for("UNKNOWN_TOPIC_ID"), None)
                continue
            if readable is not None and not readable(name):
                results[key] = (error_codes.code_for("TOPIC_AUTHORIZATION_FAILED"), None)
                continue
            try:
                share_partition = await shares.get(group_id, name, partition["partition_index"])
            except SeglogError as exc:
                results[key] = (error_codes.code_for_exception(exc), str(exc))
                continue
            error = shares.acknowledge(share_partition, member_id, _ack_batches(batches))
            if error is not None:
                results[key] = (error_codes.code_for(error), None)
                continue
            results[key] = (_NONE, None)
            touched.append(share_partition)
    for share_partition in touched:
        try:
            await shares.persist(share_partition)
        except SeglogError as exc:
            if isinstance(exc, StorageError):
                state.storage_errors.report(
                    "a write of the share state of", share_partition.topic, 0, exc
                )
            code = error_codes.code_for_exception(exc)
            for topic in topics:
                if names.get(topic["topic_id"]) == share_partition.topic:
                    key = (topic["topic_id"], share_partition.key.partition)
                    if key in results:
                        results[key] = (code, str(exc))
    return results


def _watch_connection(state: BrokerState, session: Session) -> None:
    """Close the share sessions a connection opened once it ends (once per connection)."""
    if session.extra.get("share_sessions_watched") or session.gone is None:
        return
    session.extra["share_sessions_watched"] = True
    assert state.shares is not None
    sessions = state.shares.sessions

    def ended(_: object) -> None:
        sessions.connection_closed(session)

    session.gone.add_done_callback(ended)


def _requested(body: dict[str, Any]) -> list[TopicIdPartition]:
    return [
        (topic["topic_id"], partition["partition_index"])
        for topic in body["topics"]
        for partition in topic["partitions"]
    ]


async def share_fetch(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """ShareFetch: session, acknowledgements, then records acquired for the member."""
    if state.shares is None:
        return _error("UNSUPPORTED_VERSION", "share groups are not enabled (group.share.enable)")
    await state.shares.start(state.log_dir.env)
    shares = state.shares.partitions
    group_id = body.get("group_id") or ""
    member_id = body.get("member_id") or ""
    if not group_id or not member_id:
        return _error("INVALID_REQUEST", "a share fetch needs a group id and a member id")
    epoch = body["share_session_epoch"]
    has_acks = any(
        p.get("acknowledgement_batches") for t in body["topics"] for p in t["partitions"]
    )
    sessions = state.shares.sessions
    try:
        if epoch == FINAL_EPOCH:
            share_session = sessions.get(group_id, member_id)
            if share_session is None:
                raise ShareSessionError(
                    "SHARE_SESSION_NOT_FOUND",
                    f"no share session for member {member_id} of group {group_id}",
                )
        elif epoch == INITIAL_EPOCH:
            if has_acks:
                return _error(
                    "INVALID_REQUEST", "acknowledgements in a share session's first fetch"
                )
            share_session = sessions.open(group_id, member_id, _requested(body), session)
            _watch_connection(state, session)
        else:
            share_session = sessions.continue_(group_id, member_id, epoch)
            share_session.partitions.update(dict.fromkeys(_requested(body)))
            for forgotten in body.get("forgotten_topics_data") or []:
                for index in forgotten["partitions"]:
                    share_session.partitions.pop((forgotten["topic_id"], index), None)
    except ShareSessionError as exc:
        return _error(exc.error, str(exc))
    names = _topic_names(state)
    acks = await _acknowledge_all(
        state, session, shares, group_id, member_id, body["topics"], names
    )
    settings = shares.settings(group_id)
    answer: dict[str, Any] = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "acquisition_lock_timeout_ms": settings.record_lock_duration_ms,
        "responses": [],
        "node_endpoints": [],
    }
    fetched: dict[TopicIdPartition, dict[str, Any]] = {}
    if epoch == FINAL_EPOCH:
        sessions.close(group_id, member_id)
    elif body.get("max_records", 0) > 0 and share_session.partitions:
        fetched = await _fetch(state, shares, share_session, body, session, names)
    for key, (code, message) in acks.items():
        entry = fetched.setdefault(key, _partition_entry(key[1]))
        entry["acknowledge_error_code"] = code
        entry["acknowledge_error_message"] = message
    if epoch == INITIAL_EPOCH:
        for key in share_session.partitions:
            fetched.setdefault(key, _partition_entry(key[1]))
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for (topic_id, _), entry in fetched.items():
        by_topic.setdefault(topic_id, []).append(entry)
    answer["responses"] = [
        {"topic_id": topic_id, "partitions": sorted(entries, key=lambda e: e["partition_index"])}
        for topic_id, entries in by_topic.items()
    ]
    return answer


def _partition_entry(index: int) -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": 0,
        "error_message": None,
        "acknowledge_error_code": 0,
        "acknowledge_error_message": None,
        "current_leader": {"leader_id": -1, "leader_epoch": -1},
        "records": b"",
        "acquired_records": [],
    }


async def _fetch(
    state: BrokerState,
    shares: SharePartitions,
    share_session: ShareSession,
    body: dict[str, Any],
    session: Session,
    names: dict[uuid.UUID, str],
) -> dict[TopicIdPartition, dict[str, Any]]:
    """Acquire records of the session's partitions, waiting up to max_wait_ms for some."""
    deadline = time.monotonic() + max(body.get("max_wait_ms", 0), 0) / 1000
    group_id, member_id = share_session.group_id, share_session.member_id
    keys = list(share_session.partitions)
    readable = readable_topics(session)
    # Round robin: each fetch starts one partition further, so that no partition starves.
    rotation = share_session.epoch % len(keys)
    keys = keys[rotation:] + keys[:rotation]
    while True:
        entries: dict[TopicIdPartition, dict[str, Any]] = {}
        seen: list[PartitionSeen] = []
        waiting: list[SharePartition] = []
        max_bytes = max(body.get("max_bytes", 0x7FFFFFFF), 1)
        max_records = body["max_records"]
        found = False
        for key in keys:
            topic_id, index = key
            name = names.get(topic_id)
            entry = _partition_entry(index)
            if name is None:
                entry["error_code"] = error_codes.code_for("UNKNOWN_TOPIC_ID")
                entries[key] = entry
                continue
            if readable is not None and not readable(name):
                entry["error_code"] = error_codes.code_for("TOPIC_AUTHORIZATION_FAILED")
                entries[key] = entry
                continue
            try:
                share_partition = await shares.get(group_id, name, index)
                log = state.log_dir.log(name, index)
                if max_records <= 0 or max_bytes <= 0:
                    continue
                acquired = shares.acquire(
                    share_partition, member_id, max_bytes=max_bytes, max_records=max_records
                )
                await shares.persist(share_partition)
            except SeglogError as exc:
                if isinstance(exc, StorageError):
                    state.storage_errors.report("a share fetch of", name, index, exc)
                entry["error_code"] = error_codes.code_for_exception(exc)
                entry["error_message"] = str(exc)
                entries[key] = entry
                continue
            if acquired.ranges:
                found = True
                entry["records"] = acquired.records
                entry["acquired_records"] = [
                    {
                        "first_offset": r.first_offset,
                        "last_offset": r.last_offset,
                        "delivery_count": r.delivery_count,
                    }
                    for r in acquired.ranges
                ]
                size = acquired.records.length if acquired.records is not None else 0
                max_bytes -= size
                max_records -= sum(r.last_offset - r.first_offset + 1 for r in acquired.ranges)
                entries[key] = entry
                if size:
                    state.metrics.fetched(name, size)
            else:
                read_committed = shares.settings(group_id).read_committed
                end = log.last_stable_offset if read_committed else log.high_watermark
                seen.append(
                    PartitionSeen((name, index), share_partition.next_fetch_offset(), log, end)
                )
                waiting.append(share_partition)
        wait = deadline - time.monotonic()
        if found or wait <= 0 or not waiting or any(e["error_code"] for e in entries.values()):
            return entries
        release_regions(e["records"] for e in entries.values())
        read_committed = shares.settings(group_id).read_committed
        delayed = DelayedShareFetch(seen, waiting, read_committed=read_committed)
        if await state.fetch_purgatory.wait(delayed, wait, session.gone) != READY:
            deadline = time.monotonic()  # one more pass, then answer


async def share_acknowledge(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """ShareAcknowledge: apply the acknowledgements of a member's share session."""
    empty: dict[str, Any] = {
        "throttle_time_ms": 0,
        "error_message": None,
        "responses": [],
        "node_endpoints": [],
    }
    if state.shares is None:
        return {**empty, "error_code": error_codes.code_for("UNSUPPORTED_VERSION")}
    await state.shares.start(state.log_dir.env)
    shares = state.shares.partitions
    group_id = body.get("group_id") or ""
    member_id = body.get("member_id") or ""
    if not group_id or not member_id:
        return {**empty, "error_code": error_codes.code_for("INVALID_REQUEST")}
    epoch = body["share_session_epoch"]
    sessions = state.shares.sessions
    try:
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(
                "INVALID_SHARE_SESSION_EPOCH", "a share acknowledgement cannot open a share session"
            )
        if epoch == FINAL_EPOCH:
            if sessions.get(group_id, member_id) is None:
                raise ShareSessionError(
                    "SHARE_SESSION_NOT_FOUND",
                    f"no share session for member {member_id} of group {group_id}",
                )
        else:
            sessions.continue_(group_id, member_id, epoch)
    except ShareSessionError as exc:
        return {**empty, "error_code": error_codes.code_for(exc.error), "error_message": str(exc)}
    names = _topic_names(state)
    acks = await _acknowledge_all(
        state, session, shares, group_id, member_id, body["topics"], names
    )
    if epoch == FINAL_EPOCH:
        sessions.close(group_id, member_id)
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for (topic_id, index), (code, message) in acks.items():
        by_topic.setdefault(topic_id, []).append(
            {
                "partition_index": index,
                "error_code": code,
                "error_message": message,
                "current_leader": {"leader_id": -1, "leader_epoch": -1},
            }
        )
    return {
        **empty,
        "error_code": 0,
        "responses": [
            {"topic_id": topic_id, "partitions": entries} for topic_id, entries in by_topic.items()
        ],
    }
