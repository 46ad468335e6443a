"""The plans of the group APIs: membership, offsets, listing and describing groups.

The group APIs need READ on the group (OffsetCommit also READ on each topic,
OffsetFetch DESCRIBE on each topic it answers), DescribeGroups DESCRIBE,
DeleteGroups DELETE, OffsetDelete DELETE, ListGroups DESCRIBE on the cluster
or else only the groups it may DESCRIBE; FindCoordinator DESCRIBE on the group
or transactional id it looks up; ConsumerGroupHeartbeat DESCRIBE on each topic
subscribed to by name (by pattern: :func:`describable_topics`, for the
coordinator).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from seglog.broker.security.access import shapes
from seglog.broker.security.access.base import (
    CLUSTER_FAILED,
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
from seglog.broker.security.authorizer import Operation
from seglog.protocol import entries
from seglog.protocol.api_keys import ApiKey
from seglog.protocol.entries import failed


def _offset_commit(access: Access, version: int, body: dict[str, Any]) -> Decision:
    if not access.allowed(Operation.READ, GROUP, body["group_id"]):
        return Decision(
            response=shapes.failed_topics(ApiKey.OFFSET_COMMIT, shapes.COMMON, body, GROUP_FAILED)
        )
    return shapes.partitioned(ApiKey.OFFSET_COMMIT, shapes.COMMON, Operation.READ)(
        access, version, body
    )


def _offset_fetch(access: Access, version: int, body: dict[str, Any]) -> Decision:
    if version >= 8:
        denied = [
            g["group_id"]
            for g in body.get("groups") or []
            if not access.allowed(Operation.DESCRIBE, GROUP, g["group_id"])
        ]
        body["groups"] = [g for g in body.get("groups") or [] if g["group_id"] not in denied]

        asked_all = {g["group_id"] for g in body["groups"] if g.get("topics") is None}

        def fix_groups(response: dict[str, Any]) -> None:
            for group in response.get("groups") or []:
                group["topics"] = _visible(
                    access,
                    group.get("topics") or [],
                    "groups.topics",
                    leave_out=group.get("group_id") in asked_all,
                )
            response.setdefault("groups", []).extend(
                failed(ApiKey.OFFSET_FETCH, "groups", GROUP_FAILED, group_id=g) for g in denied
            )

        return Decision(fixes=[fix_groups])
    if not access.allowed(Operation.DESCRIBE, GROUP, body["group_id"]):
        if version < 2:
            # v0-1 have no error code on the whole response: Kafka fails each partition.
            key = ApiKey.OFFSET_FETCH
            return Decision(
                response=entries.entry(
                    key,
                    "",
                    topics=[
                        shapes.failed_partitions(
                            key,
                            "topics",
                            "partitions",
                            GROUP_FAILED,
                            t.get("partition_indexes") or [],
                            name=t["name"],
                        )
                        for t in body.get("topics") or []
                    ],
                )
            )
        return Decision(response=failed(ApiKey.OFFSET_FETCH, "", GROUP_FAILED))

    every = body.get("topics") is None

    def fix(response: dict[str, Any]) -> None:
        response["topics"] = _visible(
            access, response.get("topics") or [], "topics", leave_out=every
        )

    return Decision(fixes=[fix])


def _visible(
    access: Access, topics: list[dict[str, Any]], path: str, *, leave_out: bool = False
) -> list[Any]:
    """Offsets of topics the principal may DESCRIBE; the others fail per partition.

    ``leave_out``: the request asked for every topic, and Kafka then leaves out
    the topics the principal may not DESCRIBE instead of naming them.
    """
    result = []
    partitions = f"{path}.partitions"
    for topic in topics:
        if not access.allowed(Operation.DESCRIBE, TOPIC, topic["name"]):
            if leave_out:
                continue
            topic["partitions"] = [
                failed(
                    ApiKey.OFFSET_FETCH,
                    partitions,
                    TOPIC_FAILED,
                    partition_index=p["partition_index"],
                )
                for p in topic.get("partitions") or []
            ]
        result.append(topic)
    return result


def _consumer_group_heartbeat(access: Access, version: int, body: dict[str, Any]) -> Decision:
    """READ on the group; each topic subscribed to by name needs DESCRIBE, as in Kafka.

    Topics matched by a regular expression are filtered by the coordinator
    with :func:`describable_topics`, as they appear.
    """
    key = ApiKey.CONSUMER_GROUP_HEARTBEAT
    if not access.allowed(Operation.READ, GROUP, body["group_id"]):
        return Decision(response=failed(key, "", GROUP_FAILED))
    names = body.get("subscribed_topic_names") or []
    denied = sorted({n for n in names if not access.allowed(Operation.DESCRIBE, TOPIC, n)})
    if denied:
        message = "The following topics are unauthorized: " + ", ".join(denied)
        return Decision(response=failed(key, "", TOPIC_FAILED, error_message=message))
    return Decision()


_UNDESCRIBABLE_GROUP = (
    "The described group uses topics that the client is not authorized to describe."
)


def _consumer_group_describe(access: Access, version: int, body: dict[str, Any]) -> Decision:
    """DESCRIBE on each group; a group whose members use a topic the principal may not
    DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED, without its members, as Kafka does."""
    decision = shapes.named(
        "group_ids",
        str,
        lambda a, g: a.allowed(Operation.DESCRIBE, GROUP, g),
        "groups",
        lambda g: failed(ApiKey.CONSUMER_GROUP_DESCRIBE, "groups", GROUP_FAILED, group_id=g),
    )(access, version, body)

    def hide(response: dict[str, Any]) -> None:
        for index, group in enumerate(response.get("groups") or []):
            topics: set[str] = set()
            for member in group.get("members") or []:
                topics.update(member.get("subscribed_topic_names") or [])
                for which in ("assignment", "target_assignment"):
                    for part in (member.get(which) or {}).get("topic_partitions") or []:
                        topics.add(part.get("topic_name") or "")
            topics.discard("")
            if any(not access.allowed(Operation.DESCRIBE, TOPIC, t) for t in topics):
                response["groups"][index] = failed(
                    ApiKey.CONSUMER_GROUP_DESCRIBE,
                    "groups",
                    TOPIC_FAILED,
                    group_id=group["group_id"],
                    error_message=_UNDESCRIBABLE_GROUP,
                )

    decision.fixes.append(hide)
    return decision


def describable_topics(session: Any) -> Callable[[str], bool] | None:
    """Whether the connection's principal may DESCRIBE a topic; None when nothing is checked.

    For the coordinator, which matches regular expressions against topics as
    they appear: a member sees only the topics its principal may DESCRIBE.
    """
    security = getattr(session, "security", None)
    authorizer = getattr(security, "authorizer", None)
    if authorizer is None:
        return None
    principal, host = session.principal, session.host

    def allowed(topic: str) -> bool:
        return bool(authorizer.authorize(principal, host, Operation.DESCRIBE, TOPIC, topic))

    return allowed


def _find_coordinator(access: Access, version: int, body: dict[str, Any]) -> Decision:
    kind = body.get("key_type", 0)
    resource, code = (TXN, TXN_FAILED) if kind == 1 else (GROUP, GROUP_FAILED)
    if version >= 4:
        keys = body.get("coordinator_keys") or []
        denied = [k for k in keys if not access.allowed(Operation.DESCRIBE, resource, k)]
        if not denied:
            return Decision()
        body["coordinator_keys"] = [k for k in keys if k not in denied]

        def fix(response: dict[str, Any]) -> None:
            response.setdefault("coordinators", []).extend(
                failed(ApiKey.FIND_COORDINATOR, "coordinators", code, key=k, node_id=-1, port=-1)
                for k in denied
            )

        return Decision(fixes=[fix])
    if access.allowed(Operation.DESCRIBE, resource, body.get("key", "")):
        return Decision()
    return Decision(response=failed(ApiKey.FIND_COORDINATOR, "", code, node_id=-1, port=-1))


def _list_groups(access: Access, version: int, body: dict[str, Any]) -> Decision:
    if access.cluster(Operation.DESCRIBE):
        return Decision()

    def fix(response: dict[str, Any]) -> None:
        response["groups"] = [
            g
            for g in response.get("groups") or []
            if access.allowed(Operation.DESCRIBE, GROUP, g["group_id"])
        ]

    return Decision(fixes=[fix])


def _init_producer_id(access: Access, version: int, body: dict[str, Any]) -> Decision:
    txn = body.get("transactional_id")
    if txn is not None:
        if access.allowed(Operation.WRITE, TXN, txn):
            return Decision()
        return Decision(
            response=failed(
                ApiKey.INIT_PRODUCER_ID, "", TXN_FAILED, producer_id=-1, producer_epoch=-1
            )
        )
    if access.cluster(Operation.IDEMPOTENT_WRITE) or access.authorizer.authorize_any(
        access.principal, access.host, Operation.WRITE, TOPIC
    ):
        return Decision()
    return Decision(
        response=failed(
            ApiKey.INIT_PRODUCER_ID, "", CLUSTER_FAILED, producer_id=-1, producer_epoch=-1
        )
    )


def _offset_delete(access: Access, version: int, body: dict[str, Any]) -> Decision:
    if not access.allowed(Operation.DELETE, GROUP, body["group_id"]):
        return Decision(response=failed(ApiKey.OFFSET_DELETE, "", GROUP_FAILED))
    return shapes.partitioned(ApiKey.OFFSET_DELETE, shapes.COMMON, Operation.READ)(
        access, version, body
    )


PLANS: dict[int, Plan] = {
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.JOIN_GROUP: shapes.group(ApiKey.JOIN_GROUP, Operation.READ),
    ApiKey.SYNC_GROUP: shapes.group(ApiKey.SYNC_GROUP, Operation.READ),
    ApiKey.HEARTBEAT: shapes.group(ApiKey.HEARTBEAT, Operation.READ),
    ApiKey.LEAVE_GROUP: shapes.group(ApiKey.LEAVE_GROUP, Operation.READ),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _consumer_group_heartbeat,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.OFFSET_DELETE: _offset_delete,
    ApiKey.LIST_GROUPS: _list_groups,
    ApiKey.DESCRIBE_GROUPS: shapes.named(
        "groups",
        str,
        lambda a, g: a.allowed(Operation.DESCRIBE, GROUP, g),
        "groups",
        lambda g: failed(ApiKey.DESCRIBE_GROUPS, "groups", GROUP_FAILED, group_id=g),
    ),
    ApiKey.CONSUMER_GROUP_DESCRIBE: _consumer_group_describe,
    ApiKey.DELETE_GROUPS: shapes.named(
        "groups_names",
        str,
        lambda a, g: a.allowed(Operation.DELETE, GROUP, g),
        "results",
        lambda g: failed(ApiKey.DELETE_GROUPS, "results", GROUP_FAILED, group_id=g),
    ),
}
"""API key → its plan, for the group APIs."""
