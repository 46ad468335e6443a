"""The plans of the group APIs: membership, offsets, listing and describing groups.

The group APIs need READ on the group (OffsetCommit also READ on each topic,
OffsetFetch DESCRIBE on each topic it answers), DescribeGroups DESCRIBE,
DeleteGroups DELETE, OffsetDelete DELETE, ListGroups DESCRIBE on the cluster
or else only the groups it may DESCRIBE; FindCoordinator DESCRIBE on the group
or transactional id it looks up; ConsumerGroupHeartbeat DESCRIBE on each topic
subscribed to by name (by pattern: :func:`describable_topics`, for the
coordinator). ShareGroupHeartbeat and ShareGroupDescribe are checked as their
consumer group counterparts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from seglog.broker.security.access.base import (
    GROUP,
    GROUP_FAILED,
    TOPIC,
    TOPIC_FAILED,
    TXN,
    TXN_FAILED,
    Access,
    Decision,
    Plan,
)
from seglog.broker.security.access.shapes import may, on_group, remove_denied
from seglog.broker.security.authorizer import Operation
from seglog.protocol.api_keys import ApiKey
from seglog.protocol.bodies import groups as g
from seglog.protocol.bodies import share as sh
from seglog.protocol.entries import entry_as, failed_as

# ------------------------------------------------------------------ membership


def _join_group(
    access: Access, version: int, body: g.JoinGroupRequest
) -> Decision[g.JoinGroupResponse]:
    return on_group(access, Operation.READ, body["group_id"], g.JoinGroupResponse)


def _sync_group(
    access: Access, version: int, body: g.SyncGroupRequest
) -> Decision[g.SyncGroupResponse]:
    return on_group(access, Operation.READ, body["group_id"], g.SyncGroupResponse)


def _heartbeat(
    access: Access, version: int, body: g.HeartbeatRequest
) -> Decision[g.HeartbeatResponse]:
    return on_group(access, Operation.READ, body["group_id"], g.HeartbeatResponse)


def _leave_group(
    access: Access, version: int, body: g.LeaveGroupRequest
) -> Decision[g.LeaveGroupResponse]:
    return on_group(access, Operation.READ, body["group_id"], g.LeaveGroupResponse)


def _consumer_group_heartbeat(
    access: Access, version: int, body: g.ConsumerGroupHeartbeatRequest
) -> Decision[g.ConsumerGroupHeartbeatResponse]:
    """READ on the group; each topic subscribed to by name needs DESCRIBE, as in Kafka.

    Topics matched by a regular expression are filtered by the coordinator
    with :func:`describable_topics`, as they appear.
    """
    kind = g.ConsumerGroupHeartbeatResponse
    if not access.allowed(Operation.READ, GROUP, body["group_id"]):
        return Decision(response=failed_as(kind, GROUP_FAILED))
    names = body["subscribed_topic_names"] or []
    denied = sorted({n for n in names if not access.allowed(Operation.DESCRIBE, TOPIC, n)})
    if denied:
        message = "The following topics are unauthorized: " + ", ".join(denied)
        return Decision(response=failed_as(kind, TOPIC_FAILED, error_message=message))
    return Decision()


def _share_group_heartbeat(
    access: Access, version: int, body: sh.ShareGroupHeartbeatRequest
) -> Decision[sh.ShareGroupHeartbeatResponse]:
    """READ on the group; each subscribed topic needs DESCRIBE (KafkaApis, without a message)."""
    kind = sh.ShareGroupHeartbeatResponse
    if not access.allowed(Operation.READ, GROUP, body["group_id"]):
        return Decision(response=failed_as(kind, GROUP_FAILED))
    names = body["subscribed_topic_names"] or []
    if any(not access.allowed(Operation.DESCRIBE, TOPIC, n) for n in set(names)):
        return Decision(response=failed_as(kind, TOPIC_FAILED))
    return Decision()


def describable_topics(session: Any) -> Callable[[str], bool] | None:
    """Whether the connection's principal may DESCRIBE a topic; None when nothing is checked.

    For the coordinator, which matches regular expressions against topics as
    they appear: a member sees only the topics its principal may DESCRIBE.
    """
    return topics_allowed(session, Operation.DESCRIBE)


def topics_allowed(session: Any, operation: Operation) -> Callable[[str], bool] | None:
    """Whether the connection's principal may do ``operation`` on a topic, asked topic by
    topic as a handler meets them; None when no authorizer checks anything."""
    security = getattr(session, "security", None)
    authorizer = getattr(security, "authorizer", None)
    if authorizer is None:
        return None
    principal, host = session.principal, session.host

    def allowed(topic: str) -> bool:
        return bool(authorizer.authorize(principal, host, operation, TOPIC, topic))

    return allowed


def _find_coordinator(
    access: Access, version: int, body: g.FindCoordinatorRequest
) -> Decision[g.FindCoordinatorResponse]:
    kind = body.get("key_type", 0)
    resource, code = (TXN, TXN_FAILED) if kind == 1 else (GROUP, GROUP_FAILED)
    if version >= 4:
        denied = remove_denied(
            body.get("coordinator_keys"),
            lambda k: access.allowed(Operation.DESCRIBE, resource, k),
        )
        if not denied:
            return Decision()

        def fix(response: g.FindCoordinatorResponse) -> None:
            response.setdefault("coordinators", []).extend(
                failed_as(g.FindCoordinatorResponseCoordinators, code, key=k, node_id=-1, port=-1)
                for k in denied
            )

        return Decision(fixes=[fix])
    if access.allowed(Operation.DESCRIBE, resource, body.get("key", "")):
        return Decision()
    return Decision(response=failed_as(g.FindCoordinatorResponse, code, node_id=-1, port=-1))


# ------------------------------------------------------------------ offsets


def _offset_commit(
    access: Access, version: int, body: g.OffsetCommitRequest
) -> Decision[g.OffsetCommitResponse]:
    if not access.allowed(Operation.READ, GROUP, body["group_id"]):
        return Decision(
            response=entry_as(
                g.OffsetCommitResponse, topics=_commit_failed(body["topics"], GROUP_FAILED)
            )
        )
    denied = remove_denied(body["topics"], lambda t: may(access, Operation.READ)(t["name"]))
    if not denied:
        return Decision()

    def fix(response: g.OffsetCommitResponse) -> None:
        response.setdefault("topics", []).extend(_commit_failed(denied, TOPIC_FAILED))

    return Decision(fixes=[fix])


def _commit_failed(
    topics: list[g.OffsetCommitRequestTopics], code: int
) -> list[g.OffsetCommitResponseTopics]:
    return [
        g.OffsetCommitResponseTopics(
            name=t["name"],
            partitions=[
                failed_as(
                    g.OffsetCommitResponseTopicsPartitions,
                    code,
                    partition_index=p["partition_index"],
                )
                for p in t["partitions"]
            ],
        )
        for t in topics
    ]


def _offset_fetch(
    access: Access, version: int, body: g.OffsetFetchRequest
) -> Decision[g.OffsetFetchResponse]:
    if version >= 8:
        denied = remove_denied(
            body.get("groups"),
            lambda group: access.allowed(Operation.DESCRIBE, GROUP, group["group_id"]),
        )
        asked_all = {
            group["group_id"] for group in body.get("groups", []) if group["topics"] is None
        }

        def fix_groups(response: g.OffsetFetchResponse) -> None:
            for group in response.get("groups") or []:
                group["topics"] = _visible_groups_topics(
                    access, group.get("topics") or [], leave_out=group.get("group_id") in asked_all
                )
            response.setdefault("groups", []).extend(
                failed_as(g.OffsetFetchResponseGroups, GROUP_FAILED, group_id=group["group_id"])
                for group in denied
            )

        return Decision(fixes=[fix_groups])
    if not access.allowed(Operation.DESCRIBE, GROUP, body.get("group_id", "")):
        if version < 2:
            # v0-1 have no error code on the whole response: Kafka fails each partition.
            topics = [
                g.OffsetFetchResponseTopics(
                    name=t["name"],
                    partitions=[
                        failed_as(
                            g.OffsetFetchResponseTopicsPartitions, GROUP_FAILED, partition_index=i
                        )
                        for i in t["partition_indexes"]
                    ],
                )
                for t in body.get("topics") or []
            ]
            return Decision(response=entry_as(g.OffsetFetchResponse, topics=topics))
        return Decision(response=failed_as(g.OffsetFetchResponse, GROUP_FAILED))

    every = body.get("topics") is None

    def fix(response: g.OffsetFetchResponse) -> None:
        response["topics"] = _visible_topics(access, response.get("topics") or [], leave_out=every)

    return Decision(fixes=[fix])


def _visible_topics(
    access: Access, topics: list[g.OffsetFetchResponseTopics], *, leave_out: bool
) -> list[g.OffsetFetchResponseTopics]:
    """Offsets of topics the principal may DESCRIBE; the others fail per partition.

    ``leave_out``: the request asked for every topic, and Kafka then leaves out
    the topics the principal may not DESCRIBE instead of naming them.
    """
    result = []
    for topic in topics:
        if not access.allowed(Operation.DESCRIBE, TOPIC, topic["name"]):
            if leave_out:
                continue
            topic["partitions"] = [
                failed_as(
                    g.OffsetFetchResponseTopicsPartitions,
                    TOPIC_FAILED,
                    partition_index=p["partition_index"],
                )
                for p in topic.get("partitions") or []
            ]
        result.append(topic)
    return result


def _visible_groups_topics(
    access: Access, topics: list[g.OffsetFetchResponseGroupsTopics], *, leave_out: bool
) -> list[g.OffsetFetchResponseGroupsTopics]:
    """:func:`_visible_topics` for a group of a v8+ answer (its own entry types)."""
    result = []
    for topic in topics:
        if not access.allowed(Operation.DESCRIBE, TOPIC, topic["name"]):
            if leave_out:
                continue
            topic["partitions"] = [
                failed_as(
                    g.OffsetFetchResponseGroupsTopicsPartitions,
                    TOPIC_FAILED,
                    partition_index=p["partition_index"],
                )
                for p in topic.get("partitions") or []
            ]
        result.append(topic)
    return result


def _offset_delete(
    access: Access, version: int, body: g.OffsetDeleteRequest
) -> Decision[g.OffsetDeleteResponse]:
    if not access.allowed(Operation.DELETE, GROUP, body["group_id"]):
        return Decision(response=failed_as(g.OffsetDeleteResponse, GROUP_FAILED))
    denied = remove_denied(body["topics"], lambda t: may(access, Operation.READ)(t["name"]))
    if not denied:
        return Decision()

    def fix(response: g.OffsetDeleteResponse) -> None:
        response.setdefault("topics", []).extend(
            g.OffsetDeleteResponseTopics(
                name=t["name"],
                partitions=[
                    failed_as(
                        g.OffsetDeleteResponseTopicsPartitions,
                        TOPIC_FAILED,
                        partition_index=p["partition_index"],
                    )
                    for p in t["partitions"]
                ],
            )
            for t in denied
        )

    return Decision(fixes=[fix])


# ------------------------------------------------------------------ listing and describing


def _list_groups(
    access: Access, version: int, body: g.ListGroupsRequest
) -> Decision[g.ListGroupsResponse]:
    if access.cluster(Operation.DESCRIBE):
        return Decision()

    def fix(response: g.ListGroupsResponse) -> None:
        response["groups"] = [
            group
            for group in response.get("groups") or []
            if access.allowed(Operation.DESCRIBE, GROUP, group["group_id"])
        ]

    return Decision(fixes=[fix])


def _describe_groups(
    access: Access, version: int, body: g.DescribeGroupsRequest
) -> Decision[g.DescribeGroupsResponse]:
    denied = remove_denied(body["groups"], lambda i: access.allowed(Operation.DESCRIBE, GROUP, i))
    if not denied:
        return Decision()

    def fix(response: g.DescribeGroupsResponse) -> None:
        response.setdefault("groups", []).extend(
            failed_as(g.DescribeGroupsResponseGroups, GROUP_FAILED, group_id=i) for i in denied
        )

    return Decision(fixes=[fix])


def _delete_groups(
    access: Access, version: int, body: g.DeleteGroupsRequest
) -> Decision[g.DeleteGroupsResponse]:
    denied = remove_denied(
        body["groups_names"], lambda i: access.allowed(Operation.DELETE, GROUP, i)
    )
    if not denied:
        return Decision()

    def fix(response: g.DeleteGroupsResponse) -> None:
        response.setdefault("results", []).extend(
            failed_as(g.DeleteGroupsResponseResults, GROUP_FAILED, group_id=i) for i in denied
        )

    return Decision(fixes=[fix])


_UNDESCRIBABLE_GROUP = (
    "The described group uses topics that the client is not authorized to describe."
)


def _consumer_group_describe(
    access: Access, version: int, body: g.ConsumerGroupDescribeRequest
) -> Decision[g.ConsumerGroupDescribeResponse]:
    """DESCRIBE on each group; a group whose members use a topic the principal may not
    DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED, without its members, as Kafka does."""
    denied = remove_denied(
        body["group_ids"], lambda i: access.allowed(Operation.DESCRIBE, GROUP, i)
    )

    def fix(response: g.ConsumerGroupDescribeResponse) -> None:
        groups = response.get("groups") or []
        for index, group in enumerate(groups):
            topics: set[str] = set()
            for member in group.get("members") or []:
                topics.update(member.get("subscribed_topic_names") or [])
                for which in (member.get("assignment"), member.get("target_assignment")):
                    for part in which.get("topic_partitions") or [] if which else []:
                        topics.add(part.get("topic_name") or "")
            topics.discard("")
            if any(not access.allowed(Operation.DESCRIBE, TOPIC, t) for t in topics):
                groups[index] = failed_as(
                    g.ConsumerGroupDescribeResponseGroups,
                    TOPIC_FAILED,
                    group_id=group["group_id"],
                    error_message=_UNDESCRIBABLE_GROUP,
                )
        response.setdefault("groups", []).extend(
            failed_as(g.ConsumerGroupDescribeResponseGroups, GROUP_FAILED, group_id=i)
            for i in denied
        )

    return Decision(fixes=[fix])


def _share_group_describe(
    access: Access, version: int, body: sh.ShareGroupDescribeRequest
) -> Decision[sh.ShareGroupDescribeResponse]:
    """DESCRIBE on each group; a group whose members use a topic the principal may not
    DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED, as consumer groups are."""
    denied = remove_denied(
        body["group_ids"], lambda i: access.allowed(Operation.DESCRIBE, GROUP, i)
    )

    def fix(response: sh.ShareGroupDescribeResponse) -> None:
        groups = response.get("groups") or []
        for index, group in enumerate(groups):
            topics: set[str] = set()
            for member in group.get("members") or []:
                topics.update(member.get("subscribed_topic_names") or [])
                assignment = member.get("assignment")
                for part in assignment.get("topic_partitions") or [] if assignment else []:
                    topics.add(part.get("topic_name") or "")
            topics.discard("")
            if any(not access.allowed(Operation.DESCRIBE, TOPIC, t) for t in topics):
                groups[index] = failed_as(
                    sh.ShareGroupDescribeResponseGroups,
                    TOPIC_FAILED,
                    group_id=group["group_id"],
                    error_message=_UNDESCRIBABLE_GROUP,
                )
        response.setdefault("groups", []).extend(
            failed_as(sh.ShareGroupDescribeResponseGroups, GROUP_FAILED, group_id=i) for i in denied
        )

    return Decision(fixes=[fix])


PLANS: dict[int, Plan] = {
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.JOIN_GROUP: _join_group,
    ApiKey.SYNC_GROUP: _sync_group,
    ApiKey.HEARTBEAT: _heartbeat,
    ApiKey.LEAVE_GROUP: _leave_group,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _consumer_group_heartbeat,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.OFFSET_DELETE: _offset_delete,
    ApiKey.LIST_GROUPS: _list_groups,
    ApiKey.DESCRIBE_GROUPS: _describe_groups,
    ApiKey.CONSUMER_GROUP_DESCRIBE: _consumer_group_describe,
    ApiKey.DELETE_GROUPS: _delete_groups,
    ApiKey.SHARE_GROUP_HEARTBEAT: _share_group_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: _share_group_describe,
}
"""API key → its plan, for the group APIs."""
