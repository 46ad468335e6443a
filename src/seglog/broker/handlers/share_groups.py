"""ShareGroupHeartbeat and ShareGroupDescribe: the membership of share groups (KIP-932).

Turns the requests into calls of the coordinator
(:meth:`~seglog.coordinator.group_coordinator.GroupCoordinator.share_group_heartbeat`,
:meth:`~seglog.coordinator.group_coordinator.GroupCoordinator.describe_share_group`)
and the answers back into responses; the logic is in
:mod:`seglog.coordinator.share_group`. Assignments go out by topic id (and
name, in ShareGroupDescribe).

With ``group.share.enable=false`` both are answered UNSUPPORTED_VERSION, as
Kafka's request handler does, and ApiVersions leaves every share API out
(:data:`seglog.protocol.api_keys.SHARE_APIS`).
"""

from __future__ import annotations

from typing import Any

from seglog.broker.handlers.consumer_groups import assignment_by_id, described_assignment
from seglog.broker.security.access.operations import NOT_REQUESTED
from seglog.broker.security.session import Session
from seglog.broker.state import BrokerState
from seglog.config import BrokerConfig
from seglog.coordinator.share_group import SHARE_ASSIGNOR_NAME, ShareHeartbeatRequest
from seglog.protocol import error_codes
from seglog.protocol.headers import RequestHeader

_UNSUPPORTED = error_codes.code_for("UNSUPPORTED_VERSION")


def share_groups_enabled(state: BrokerState) -> bool:
    """Whether the broker serves share groups (``group.share.enable``, true by default)."""
    return bool(BrokerConfig(state.settings.properties)["group.share.enable"])


async def share_group_heartbeat(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """ShareGroupHeartbeat: join, heartbeat or leave; answered at once."""
    answer: dict[str, Any] = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "member_id": None,
        "member_epoch": 0,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }
    if not share_groups_enabled(state):
        answer["error_code"] = _UNSUPPORTED
        return answer
    subscribed = body.get("subscribed_topic_names")
    result = state.coordinator.share_group_heartbeat(
        ShareHeartbeatRequest(
            group_id=body["group_id"],
            member_id=body["member_id"],
            member_epoch=body["member_epoch"],
            rack_id=body.get("rack_id"),
            subscribed_topic_names=list(subscribed) if subscribed is not None else None,
            client_id=header.client_id or "",
            client_host=session.client_host,
        )
    )
    answer.update(
        error_code=error_codes.code_for(result.error),
        error_message=result.error_message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
    )
    if result.assignment is not None:
        topics = state.log_dir.topics()
        answer["assignment"] = assignment_by_id(result.assignment, topics)
    return answer


async def share_group_describe(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """ShareGroupDescribe: state, epochs, assignor and members with their assignments."""
    described = []
    enabled = share_groups_enabled(state)
    topics = state.log_dir.topics()
    for group_id in body["group_ids"]:
        entry: dict[str, Any] = {
            "error_code": _UNSUPPORTED,
            "error_message": None,
            "group_id": group_id,
            "group_state": "",
            "group_epoch": -1,
            "assignment_epoch": -1,
            "assignor_name": "",
            "members": [],
            "authorized_operations": NOT_REQUESTED,
        }
        if enabled:
            error, message, group = state.coordinator.describe_share_group(group_id)
            entry.update(error_code=error_codes.code_for(error), error_message=message)
            if group is not None:
                entry.update(
                    group_state=group.state.value,
                    group_epoch=group.group_epoch,
                    assignment_epoch=group.assignment_epoch,
                    assignor_name=SHARE_ASSIGNOR_NAME,
                    members=[
                        {
                            "member_id": m.member_id,
                            "rack_id": m.rack_id,
                            "member_epoch": m.member_epoch,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "subscribed_topic_names": list(m.subscribed),
                            "assignment": described_assignment(m.assigned, topics),
                        }
                        for m in group.members.values()
                    ],
                )
        described.append(entry)
    return {"throttle_time_ms": 0, "groups": described}
