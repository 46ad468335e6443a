"""The plans of ShareFetch and ShareAcknowledge: READ on the share group.

Each topic also needs READ, as in Kafka's ``handleShareFetchRequest``; the
request names topics by id, so the handler checks them with
:func:`readable_topics` as it resolves the ids, and answers a topic it may
not read with TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from seglog.broker.security.access.base import GROUP, GROUP_FAILED, TOPIC, Access, Decision, Plan
from seglog.broker.security.authorizer import Operation
from seglog.protocol.api_keys import ApiKey
from seglog.protocol.bodies import share as s
from seglog.protocol.entries import failed_as


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


def readable_topics(session: Any) -> Callable[[str], bool] | None:
    """Whether the connection's principal may READ a topic; None when nothing is checked."""
    security = getattr(session, "security", None)
    authorizer = getattr(security, "authorizer", None)
    if authorizer is None:
        return None
    principal, host = session.principal, session.host

    def allowed(topic: str) -> bool:
        return bool(authorizer.authorize(principal, host, Operation.READ, TOPIC, topic))

    return allowed


PLANS: dict[int, Plan] = {
    ApiKey.SHARE_FETCH: _share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: _share_acknowledge,
}
