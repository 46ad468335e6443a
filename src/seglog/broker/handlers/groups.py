"""FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
ListGroups, DescribeGroups, DeleteGroups and OffsetDelete.

Each handler turns the request dict of its version into a call of
:class:`~seglog.coordinator.group_coordinator.GroupCoordinator` and its result
back into the response dict of that version; the coordinator holds all the
logic. JoinGroup and SyncGroup may be held for a whole rebalance: they wait on
a future that the coordinator resolves. An OffsetCommit is answered only after
the ``__consumer_offsets`` partition it went to has been fsynced (in a worker
thread), so an acknowledged commit survives a crash of the machine.

Alone, this broker is the coordinator of every group; one node of several
coordinates the groups whose ``__consumer_offsets`` partition it leads, and
FindCoordinator names the node for the others.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from seglog.broker.blocking import run_blocking
from seglog.broker.handlers.transactions import load_transactions
from seglog.broker.security.access.operations import NOT_REQUESTED
from seglog.broker.security.session import Session
from seglog.broker.settings import Listener
from seglog.broker.state import BrokerState
from seglog.coordinator import txn_log
from seglog.coordinator.group_coordinator import (
    GroupCoordinator,
    JoinRequest,
    JoinResult,
    OffsetCommitEntry,
    SyncResult,
)
from seglog.coordinator.offset_store import TOPIC as OFFSETS_TOPIC
from seglog.protocol import error_codes
from seglog.protocol.headers import RequestHeader

logger = logging.getLogger(__name__)

GROUP_KEY = 0
TRANSACTION_KEY = 1
"""FindCoordinator key types: 0 a group, 1 a transactional id."""


R = TypeVar("R")


def _code(name: str) -> int:
    return error_codes.code_for(name)


async def _wait(register: Callable[[Callable[[R], None]], None]) -> R:
    """Call ``register(respond)`` and wait until the coordinator calls ``respond``."""
    future: asyncio.Future[R] = asyncio.get_running_loop().create_future()

    def respond(result: R) -> None:
        if not future.done():  # the connection may be gone (the task cancelled)
            future.set_result(result)

    register(respond)
    return await future


async def load_groups(state: BrokerState) -> None:
    """Read ``__consumer_offsets`` off the event loop, then let the coordinator serve."""
    coordinator = state.coordinator
    try:
        loaded = await run_blocking(state.log_dir.env, coordinator.load)
    except Exception:
        # Serving without the stored offsets would rewind every group: stay "loading".
        logger.exception("cannot load __consumer_offsets; group requests will be refused")
        return
    coordinator.finish_loading(loaded)
    await load_transactions(state)


# ------------------------------------------------------------ FindCoordinator


async def find_coordinator(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """FindCoordinator: the node leading the key's ``__consumer_offsets`` or
    ``__transaction_state`` partition (this broker, when alone)."""
    version = header.api_version
    key_type = body.get("key_type", GROUP_KEY)
    keys = body["coordinator_keys"] if version >= 4 else [body["key"]]
    listener = state.settings.advertised_for(session.listener.name)
    error, message = 0, None
    if key_type not in (GROUP_KEY, TRANSACTION_KEY):
        error = _code("INVALID_REQUEST")
        message = f"unknown coordinator key type {key_type}"
    else:
        ensure = (
            state.coordinator.store.ensure_topic
            if key_type == GROUP_KEY
            else state.transactions.ensure_topic
        )
        try:
            ensure()
        except Exception as exc:
            logger.exception("cannot create the coordinator's topic")
            error, message = _code("COORDINATOR_NOT_AVAILABLE"), str(exc)
    node = state.settings.node_id if error == 0 else -1
    host = listener.host if error == 0 else ""
    port = listener.port if error == 0 else -1

    def answer(key: str) -> dict[str, Any]:
        elsewhere = _other_coordinator(state, listener, key_type, key) if error == 0 else None
        if elsewhere is not None:
            return {"key": key, **elsewhere, "error_message": None}
        # A group whose __consumer_offsets partition could not be loaded has no
        # coordinator, as in Kafka when that partition has no leader.
        failed = (
            state.coordinator.coordinator_error(key)
            if error == 0 and key_type == GROUP_KEY
            else None
        )
        if failed is None:
            return {
                "key": key,
                "node_id": node,
                "host": host,
                "port": port,
                "error_code": error,
                "error_message": message,
            }
        return {
            "key": key,
            "node_id": -1,
            "host": "",
            "port": -1,
            "error_code": _code(failed),
            "error_message": f"the __consumer_offsets partition of group {key} is unavailable",
        }

    if version >= 4:
        return {"throttle_time_ms": 0, "coordinators": [answer(key) for key in keys]}
    single = answer(keys[0])
    del single["key"]
    return {"throttle_time_ms": 0, **single}


def _other_coordinator(
    state: BrokerState, advertised: Listener, key_type: int, key: str
) -> dict[str, Any] | None:
    """Where another node coordinates ``key``: that node's address, or no coordinator
    while it is down; None when this node coordinates it."""
    cluster = state.cluster
    if key_type == GROUP_KEY:
        topic, partition = OFFSETS_TOPIC, state.coordinator.store.partition_for(key)
    else:
        topic, partition = txn_log.TOPIC, state.transactions.partition_for(key)
    info = state.log_dir.topic(topic)
    if info is None:
        return None
    leader = cluster.leader(info, partition)
    if leader == cluster.node_id:
        return None
    if not cluster.alive(leader):
        return {
            "node_id": -1,
            "host": "",
            "port": -1,
            "error_code": _code("COORDINATOR_NOT_AVAILABLE"),
        }
    listener = cluster.advertised(advertised, leader)
    return {"node_id": leader, "host": listener.host, "port": listener.port, "error_code": 0}


# ------------------------------------------------------- membership requests


def _join_response(version: int, result: JoinResult) -> dict[str, Any]:
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""  # nullable only from v7
    return {
        "throttle_time_ms": 0,
        "error_code": _code(result.error),
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": protocol_name,
        "leader": result.leader_id,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [
            {"member_id": member_id, "group_instance_id": instance, "metadata": metadata}
            for member_id, instance, metadata in result.members
        ],
    }


async def join_group(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """JoinGroup: held until the join round of the group ends."""
    version = header.api_version
    request = JoinRequest(
        group_id=body["group_id"],
        member_id=body["member_id"],
        group_instance_id=body.get("group_instance_id"),
        client_id=header.client_id or "",
        client_host=session.client_host,
        session_timeout_ms=body["session_timeout_ms"],
        rebalance_timeout_ms=body["rebalance_timeout_ms"] if version >= 1 else -1,
        protocol_type=body["protocol_type"],
        protocols=[(p["name"], bytes(p["metadata"])) for p in body["protocols"]],
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
    )
    coordinator = state.coordinator
    result: JoinResult = await _wait(lambda respond: coordinator.join_group(request, respond))
    return _join_response(version, result)


async def sync_group(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """SyncGroup: held until the leader brings the assignment."""
    coordinator = state.coordinator
    assignments = {a["member_id"]: bytes(a["assignment"]) for a in body["assignments"]}
    result: SyncResult = await _wait(
        lambda respond: coordinator.sync_group(
            body["group_id"],
            body["generation_id"],
            body["member_id"],
            body.get("group_instance_id"),
            assignments,
            respond,
            protocol_type=body.get("protocol_type"),
            protocol_name=body.get("protocol_name"),
        )
    )
    return {
        "throttle_time_ms": 0,
        "error_code": _code(result.error),
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "assignment": result.assignment,
    }


async def heartbeat(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """Heartbeat."""
    error = state.coordinator.heartbeat(
        body["group_id"], body["generation_id"], body["member_id"], body.get("group_instance_id")
    )
    return {"throttle_time_ms": 0, "error_code": _code(error)}


async def leave_group(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """LeaveGroup: one member (v0-2) or a batch of members (v3+)."""
    leaving: list[tuple[str, str | None]]
    if header.api_version < 3:
        leaving = [(body["member_id"], None)]
    else:
        leaving = [(m["member_id"], m.get("group_instance_id")) for m in body["members"]]
    error, errors = state.coordinator.leave_group(body["group_id"], leaving)
    if header.api_version < 3:
        top = error if error != "NONE" else errors[0]
        return {"throttle_time_ms": 0, "error_code": _code(top)}
    return {
        "throttle_time_ms": 0,
        "error_code": _code(error),
        "members": [
            {"member_id": member_id, "group_instance_id": instance, "error_code": _code(e)}
            for (member_id, instance), e in zip(leaving, errors, strict=True)
        ],
    }


# -------------------------------------------------------------------- offsets


async def offset_commit(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """OffsetCommit: validated by the coordinator, fsynced before the answer."""
    coordinator = state.coordinator
    entries = [
        OffsetCommitEntry(
            topic["name"],
            p["partition_index"],
            p["committed_offset"],
            p.get("committed_leader_epoch", -1),
            p.get("committed_metadata"),
        )
        for topic in body["topics"]
        for p in topic["partitions"]
    ]
    retention = body.get("retention_time_ms", -1) if header.api_version <= 4 else -1
    outcome = coordinator.commit_offsets(
        body["group_id"],
        body.get("generation_id_or_member_epoch", -1),
        body.get("member_id", ""),
        body.get("group_instance_id"),
        entries,
        retention_ms=retention,
    )
    if outcome.flush is not None:
        await run_blocking(state.log_dir.env, coordinator.store.flush, *outcome.flush)
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": topic["name"],
                "partitions": [
                    {
                        "partition_index": p["partition_index"],
                        "error_code": _code(outcome.errors[(topic["name"], p["partition_index"])]),
                    }
                    for p in topic["partitions"]
                ],
            }
            for topic in body["topics"]
        ],
    }


def _fetch_group(
    coordinator: GroupCoordinator, group_id: str, topics: list[dict[str, Any]] | None
) -> tuple[str, list[dict[str, Any]]]:
    """One group's OffsetFetch answer: (group error, topics with their partitions)."""
    wanted = (
        None if topics is None else [(t["name"], p) for t in topics for p in t["partition_indexes"]]
    )
    error, found = coordinator.fetch_offsets(group_id, wanted)
    partition_error = _code(error) if error != "NONE" else 0
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for topic, partition, committed in found:
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": committed.offset if committed else -1,
                "committed_leader_epoch": committed.leader_epoch if committed else -1,
                "metadata": committed.metadata if committed else "",
                "error_code": partition_error,
            }
        )
    return error, [{"name": name, "partitions": parts} for name, parts in by_topic.items()]


async def offset_fetch(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """OffsetFetch: -1 for partitions without a committed offset."""
    coordinator = state.coordinator
    if header.api_version >= 8:
        groups = []
        for group in body["groups"]:
            # v9+: a KIP-848 member's fetch is checked against its member epoch.
            stale = coordinator.validate_consumer_fetch(
                group["group_id"], group.get("member_id"), group.get("member_epoch", -1)
            )
            if stale is not None:
                groups.append(
                    {"group_id": group["group_id"], "topics": [], "error_code": _code(stale)}
                )
                continue
            error, topics = _fetch_group(coordinator, group["group_id"], group["topics"])
            if body.get("require_stable"):
                _mark_unstable(state, group["group_id"], topics)
            groups.append(
                {"group_id": group["group_id"], "topics": topics, "error_code": _code(error)}
            )
        return {"throttle_time_ms": 0, "groups": groups}
    error, topics = _fetch_group(coordinator, body["group_id"], body["topics"])
    if body.get("require_stable"):
        _mark_unstable(state, body["group_id"], topics)
    return {"throttle_time_ms": 0, "topics": topics, "error_code": _code(error)}


def _mark_unstable(state: BrokerState, group_id: str, topics: list[dict[str, Any]]) -> None:
    """require_stable (v7+): a partition with an offset in an open transaction is unstable."""
    for topic in topics:
        for partition in topic["partitions"]:
            if state.transactions.has_pending_offset(
                group_id, topic["name"], partition["partition_index"]
            ):
                partition["error_code"] = _code("UNSTABLE_OFFSET_COMMIT")
                partition["committed_offset"] = -1


# ------------------------------------------------------------- administration


async def list_groups(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """ListGroups, with the state (v4) and type (v5) filters."""
    error, groups = state.coordinator.list_groups(
        body.get("states_filter"), body.get("types_filter")
    )
    return {
        "throttle_time_ms": 0,
        "error_code": _code(error),
        "groups": [
            {
                "group_id": group_id,
                "protocol_type": protocol_type,
                "group_state": group_state,
                "group_type": state.coordinator.group_type(group_id),
            }
            for group_id, protocol_type, group_state in groups
        ],
    }


async def describe_groups(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """DescribeGroups: members' subscriptions and assignments while the group is stable."""
    described = []
    for group_id in body["groups"]:
        d = state.coordinator.describe_group(group_id)
        error, message = d.error, None
        if d.missing is not None and header.api_version >= 6:
            error, message = "GROUP_ID_NOT_FOUND", d.missing  # KIP-1043
        described.append(
            {
                "error_code": _code(error),
                "error_message": message,
                "group_id": d.group_id,
                "group_state": d.state,
                "protocol_type": d.protocol_type,
                "protocol_data": d.protocol_data,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata,
                        "member_assignment": m.assignment,
                    }
                    for m in d.members
                ],
                "authorized_operations": NOT_REQUESTED,
            }
        )
    return {"throttle_time_ms": 0, "groups": described}


async def delete_groups(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """DeleteGroups: only empty groups can be deleted."""
    results = state.coordinator.delete_groups(list(body["groups_names"]))
    return {
        "throttle_time_ms": 0,
        "results": [
            {"group_id": group_id, "error_code": _code(error)}
            for group_id, error in results.items()
        ],
    }


async def offset_delete(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """OffsetDelete: not for topics the group's members subscribe to."""
    wanted = [(t["name"], p["partition_index"]) for t in body["topics"] for p in t["partitions"]]
    error, errors = state.coordinator.delete_offsets(body["group_id"], wanted)
    topics = []
    if error == "NONE":
        for t in body["topics"]:
            topics.append(
                {
                    "name": t["name"],
                    "partitions": [
                        {
                            "partition_index": p["partition_index"],
                            "error_code": _code(errors[(t["name"], p["partition_index"])]),
                        }
                        for p in t["partitions"]
                    ],
                }
            )
    return {"throttle_time_ms": 0, "error_code": _code(error), "topics": topics}
