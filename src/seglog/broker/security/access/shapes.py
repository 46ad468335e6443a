"""The steps that plans of several APIs share, typed by the bodies they work on.

:func:`remove_denied` takes out of a request's list the items the principal may
not touch (in place: the handler answers the rest) and hands them back, for the
plan to answer each with an entry built by :func:`seglog.protocol.entries.failed_as`
(every field at its value in a failed entry). :func:`on_group` and
:func:`on_cluster` are the plans of a whole request about one group or about
the cluster: allowed, or answered at once with the API's refusal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from seglog.broker.security.access.base import (
    CLUSTER_FAILED,
    GROUP,
    GROUP_FAILED,
    TOPIC,
    Access,
    Decision,
    R,
)
from seglog.broker.security.authorizer import Operation
from seglog.protocol.entries import failed_as

T = TypeVar("T")
"""An item of a request's list (a topic, a group id, a resource)."""


def remove_denied(items: list[T] | None, allowed: Callable[[T], bool]) -> list[T]:
    """Take the items not ``allowed`` out of ``items`` (in place); return them, in order."""
    if not items:
        return []
    verdicts = [allowed(item) for item in items]
    if all(verdicts):
        return []
    denied = [item for item, ok in zip(items, verdicts, strict=True) if not ok]
    items[:] = [item for item, ok in zip(items, verdicts, strict=True) if ok]
    return denied


def may(access: Access, operation: Operation) -> Callable[[str | None], bool]:
    """Whether the principal may do ``operation`` on a topic by name (one by id: checked later)."""
    return lambda name: name is None or access.allowed(operation, TOPIC, name)


def on_group(access: Access, operation: Operation, group_id: str, kind: type[R]) -> Decision[R]:
    """A whole request about one group: GROUP_AUTHORIZATION_FAILED without ``operation``."""
    if access.allowed(operation, GROUP, group_id):
        return Decision()
    return Decision(response=failed_as(kind, GROUP_FAILED))


def on_cluster(access: Access, operation: Operation, refusal: Callable[[], R]) -> Decision[R]:
    """A whole request on the cluster: without ``operation``, ``refusal()`` is the answer."""
    if access.cluster(operation):
        return Decision()
    return Decision(response=refusal())


def cluster_failed(kind: type[R]) -> Callable[[], R]:
    """A refusal of the whole request: CLUSTER_AUTHORIZATION_FAILED, nothing listed."""
    return lambda: failed_as(kind, CLUSTER_FAILED)


__all__ = ["T", "cluster_failed", "may", "on_cluster", "on_group", "remove_denied"]
