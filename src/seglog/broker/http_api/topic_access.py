"""What the topic and partition routes share: the cluster id, a topic the caller may see,
and the storage errors of a partition question as the API's errors."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from aiohttp import web

from seglog.broker.http_api.auth import authenticate, require
from seglog.broker.http_api.errors import ApiError, unknown_topic
from seglog.broker.http_api.routes import SECURITY, STATE
from seglog.broker.nodes.channel import ControllerUnavailableError
from seglog.broker.security.authorizer import Operation
from seglog.broker.state import BrokerState
from seglog.errors import NotLeaderOrFollowerError, StorageError, UnknownTopicOrPartitionError
from seglog.storage.topic_list import TopicInfo


@dataclass(frozen=True)
class Caller:
    """Who asks, from where."""

    principal: str
    host: str


def check_cluster(request: web.Request) -> None:
    """404 unless the path's ``{cluster_id}`` is this cluster's."""
    given = request.match_info.get("cluster_id")
    if given is not None and given != request.app[STATE].cluster_id:
        raise ApiError(404, "INVALID_REQUEST", f"cluster '{given}' not found")


async def caller(request: web.Request) -> Caller:
    """The authenticated caller of ``request``."""
    principal = await authenticate(request, request.app[SECURITY])
    return Caller(principal, request.remote or "")


def visible(info: TopicInfo | None) -> bool:
    """Whether a topic exists for clients (created, not being deleted)."""
    return info is not None and not info.deleting and info.creating_from != 0


def as_clients_see(info: TopicInfo | None) -> TopicInfo | None:
    """The topic as clients see it: None while created or deleted; while partitions are
    added, without them (their logs may not be open yet)."""
    if info is None or info.deleting:
        return None
    return info.before_creation()


def topic_for(request: web.Request, who: Caller, topic: str, *operations: Operation) -> TopicInfo:
    """The topic, checking DESCRIBE first (without it the topic's existence is not told),
    then 404 if unknown, then each of ``operations``."""
    security = request.app[SECURITY]
    require(security, who.principal, who.host, Operation.DESCRIBE, topic)
    info = as_clients_see(request.app[STATE].log_dir.topic(topic))
    if info is None:
        raise unknown_topic(topic)
    for operation in operations:
        require(security, who.principal, who.host, operation, topic)
    return info


def partition_of(info: TopicInfo, partition: int) -> int:
    """``partition`` if the topic has it, else 404."""
    if not 0 <= partition < info.partitions:
        raise unknown_topic(info.name, partition)
    return partition


def path_int(request: web.Request, name: str) -> int:
    """An integer path parameter (400 if it is not one)."""
    text = request.match_info[name]
    try:
        value = int(text, 10)
    except ValueError:
        raise ApiError(
            400, "INVALID_REQUEST", f"{name}: expected an integer, got {text!r}"
        ) from None
    if value < 0:
        raise ApiError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"no partition {value}")
    return value


@contextlib.contextmanager
def storage_errors() -> Iterator[None]:
    """A partition question's errors as the API's (404, 503)."""
    try:
        yield
    except UnknownTopicOrPartitionError as exc:
        raise ApiError(404, "UNKNOWN_TOPIC_OR_PARTITION", str(exc)) from exc
    except (ControllerUnavailableError, NotLeaderOrFollowerError) as exc:
        # The leader is restarting (its supervisor brings it back): try again shortly.
        raise ApiError(503, "LEADER_NOT_AVAILABLE", str(exc)) from exc
    except StorageError as exc:
        raise ApiError(503, "KAFKA_STORAGE_ERROR", str(exc)) from exc


def state_of(request: web.Request) -> BrokerState:
    """The application's broker state."""
    return request.app[STATE]
