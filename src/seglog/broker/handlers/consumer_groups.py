"""ConsumerGroupHeartbeat and ConsumerGroupDescribe: the KIP-848 consumer group protocol.

Turns the request into a call of
:meth:`~seglog.coordinator.group_coordinator.GroupCoordinator.consumer_group_heartbeat`
and its answer back into the response; the coordinator holds all the logic
(see :mod:`seglog.coordinator.consumer_group`). The wire names topics by id
and the coordinator by name: owned partitions of topics this broker does not
know are dropped (they cannot be assigned), and assigned ones are sent with
their topic's id.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from seglog.broker.security.access import describable_topics
from seglog.broker.security.access.operations import NOT_REQUESTED
from seglog.broker.security.session import Session
from seglog.broker.state import BrokerState
from seglog.coordinator.consumer_group import ASSIGNOR_NAME, HeartbeatRequest
from seglog.protocol import error_codes
from seglog.protocol.headers import RequestHeader
from seglog.storage.log_dir import TopicInfo


async def consumer_group_heartbeat(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """ConsumerGroupHeartbeat: join, heartbeat, reconcile or leave; answered at once."""
    topics = state.log_dir.topics()
    names = {info.topic_id: name for name, info in topics.items()}
    owned: list[tuple[str, int]] | None = None
    if body.get("topic_partitions") is not None:
        owned = [
            (names[item["topic_id"]], partition)
            for item in body["topic_partitions"]
            if item["topic_id"] in names
            for partition in item["partitions"]
        ]
    subscribed = body.get("subscribed_topic_names")
    request = HeartbeatRequest(
        group_id=body["group_id"],
        member_id=body["member_id"],
        member_epoch=body["member_epoch"],
        instance_id=body.get("instance_id"),
        rack_id=body.get("rack_id"),
        rebalance_timeout_ms=body.get("rebalance_timeout_ms", -1),
        subscribed_topic_names=list(subscribed) if subscribed is not None else None,
        subscribed_topic_regex=body.get("subscribed_topic_regex"),
        server_assignor=body.get("server_assignor"),
        owned=owned,
        client_id=header.client_id or "",
        client_host=session.client_host,
        topic_visible=describable_topics(session),
    )
    result = state.coordinator.consumer_group_heartbeat(request)
    assignment = None
    if result.assignment is not None:
        assignment = assignment_by_id(result.assignment, topics)
    return {
        "throttle_time_ms": 0,
        "error_code": error_codes.code_for(result.error),
        "error_message": result.error_message,
        "member_id": result.member_id,
        "member_epoch": result.member_epoch,
        "heartbeat_interval_ms": result.heartbeat_interval_ms,
        "assignment": assignment,
    }


def assignment_by_id(
    partitions: Iterable[tuple[str, int]], topics: dict[str, TopicInfo]
) -> dict[str, Any]:
    """A heartbeat's ``assignment``: partitions by topic id (the zero id for a topic gone)."""
    described = described_assignment(partitions, topics)
    for entry in described["topic_partitions"]:
        del entry["topic_name"]
    return described


def described_assignment(
    partitions: Iterable[tuple[str, int]], topics: dict[str, TopicInfo]
) -> dict[str, Any]:
    """A describe's ``assignment``: partitions by topic id and name."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return {
        "topic_partitions": [
            {
                "topic_id": topics[topic].topic_id if topic in topics else uuid.UUID(int=0),
                "topic_name": topic,
                "partitions": sorted(found),
            }
            for topic, found in sorted(by_topic.items())
        ]
    }


async def consumer_group_describe(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """ConsumerGroupDescribe: epochs, members, and their current and target assignments."""
    topics = state.log_dir.topics()
    described = []
    for group_id in body["group_ids"]:
        error, message, group = state.coordinator.describe_consumer_group(group_id)
        entry: dict[str, Any] = {
            "error_code": error_codes.code_for(error),
            "error_message": message,
            "group_id": group_id,
            "group_state": "",
            "group_epoch": -1,
            "assignment_epoch": -1,
            "assignor_name": "",
            "members": [],
            "authorized_operations": NOT_REQUESTED,
        }
        if group is not None:
            entry.update(
                group_state=group.state.value,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=ASSIGNOR_NAME,
                members=[
                    {
                        "member_id": m.member_id,
                        "instance_id": m.instance_id,
                        "rack_id": m.rack_id,
                        "member_epoch": m.member_epoch,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "subscribed_topic_names": list(m.subscribed),
                        "subscribed_topic_regex": m.subscribed_regex,
                        "assignment": described_assignment(m.assigned, topics),
                        "target_assignment": described_assignment(
                            group.target.get(m.member_id, ()), topics
                        ),
                    }
                    for m in group.members.values()
                ],
            )
        described.append(entry)
    return {"throttle_time_ms": 0, "groups": described}
