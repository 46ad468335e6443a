"""The plans of ShareFetch and ShareAcknowledge: READ on the share group.

Each topic also needs READ, as in Kafka's ``handleShareFetchRequest``; the
request names topics by id, so the handler checks them with
:func:`readable_topics` as it resolves the ids, and answers a topic it may
not read with TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from seglog.broker.security.access.base import (
    GROUP,
    GROUP_FAILED,
    TOPIC,
    TOPIC_FAILED,
    Access,
    Decision,
    Plan,
)
from seglog.broker.security.access.groups import topics_allowed
from seglog.broker.security.authorizer import Operation
from seglog.protocol.api_keys import ApiKey
from seglog.protocol.bodies import share as s
from seglog.protocol.entries import failed_as

R = TypeVar("R", bound=Mapping[str, Any])


def _share_fetch(
    access: Access, version: int, body: s.ShareFetchRequest
) -> Decision[s.ShareFetchResponse]:
    if access.allowed(Operation.READ, GROUP, body["group_id"] or ""):
        return Decision()
    return Decision(response=failed_as(s.ShareFetchResponse, GROUP_FAILED))


def _share_acknowledge(
    access: Access, version: int, body: s.ShareAcknowledgeRequest
) -> Decision[s.ShareAcknowledgeResponse]:
    if access.allowed(Operation.READ, GROUP, body["group_id"] or ""):
        return Decision()
    return Decision(response=failed_as(s.ShareAcknowledgeResponse, GROUP_FAILED))


def _describe_offsets(
    access: Access, version: int, body: s.DescribeShareGroupOffsetsRequest
) -> Decision[s.DescribeShareGroupOffsetsResponse]:
    """DESCRIBE on each group (a group refused is answered GROUP_AUTHORIZATION_FAILED)."""
    refused = [
        g["group_id"]
        for g in body["groups"]
        if not access.allowed(Operation.DESCRIBE, GROUP, g["group_id"])
    ]
    if not refused:
        return Decision()
    body["groups"] = [g for g in body["groups"] if g["group_id"] not in refused]

    def fix(response: s.DescribeShareGroupOffsetsResponse) -> None:
        for group_id in refused:
            response["groups"].append(
                {
                    "group_id": group_id,
                    "topics": [],
                    "error_code": GROUP_FAILED,
                    "error_message": None,
                }
            )

    return Decision(fixes=[fix])


def _alter_offsets(
    access: Access, version: int, body: s.AlterShareGroupOffsetsRequest
) -> Decision[s.AlterShareGroupOffsetsResponse]:
    return _on_group_and_topics(access, Operation.READ, body, s.AlterShareGroupOffsetsResponse)


def _delete_offsets(
    access: Access, version: int, body: s.DeleteShareGroupOffsetsRequest
) -> Decision[s.DeleteShareGroupOffsetsResponse]:
    return _on_group_and_topics(access, Operation.DELETE, body, s.DeleteShareGroupOffsetsResponse)


def _on_group_and_topics(
    access: Access, operation: Operation, body: Any, kind: type[R]
) -> Decision[R]:
    """``operation`` on the group, READ on every topic named, else the whole request refused."""
    if not access.allowed(operation, GROUP, body["group_id"]):
        return Decision(response=failed_as(kind, GROUP_FAILED))
    if all(access.allowed(Operation.READ, TOPIC, t["topic_name"]) for t in body["topics"]):
        return Decision()
    return Decision(response=failed_as(kind, TOPIC_FAILED))


def readable_topics(session: Any) -> Callable[[str], bool] | None:
    """Whether the connection's principal may READ a topic; None when nothing is checked."""
    return topics_allowed(session, Operation.READ)


PLANS: dict[int, Plan] = {
    ApiKey.SHARE_FETCH: _share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: _share_acknowledge,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: _describe_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: _alter_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: _delete_offsets,
}
