"""ApiVersions, Metadata and DescribeCluster."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

from seglog.broker.blocking import run_blocking
from seglog.broker.handlers.share_groups import share_groups_enabled
from seglog.broker.security.access.operations import NOT_REQUESTED
from seglog.broker.security.session import Session
from seglog.broker.state import BrokerState
from seglog.errors import SeglogError, StorageError
from seglog.protocol import error_codes
from seglog.protocol.api_keys import SHARE_APIS, SUPPORTED
from seglog.protocol.headers import RequestHeader
from seglog.storage import filenames
from seglog.storage.log_dir import TopicInfo

logger = logging.getLogger(__name__)


def api_versions_body(error_code: int = 0, *, share_groups: bool = True) -> dict[str, Any]:
    """The ApiVersions answer: every API and the range seglog serves.

    Without ``share_groups`` (``group.share.enable=false``) the share group
    APIs are left out, as Kafka leaves them out when share groups are disabled.
    The feature Kafka 4.2 enables share groups with, ``share.version``, is
    listed as supported (levels 0-1) and, with share groups on, finalized at 1
    (v3+; older versions drop these tagged fields).
    """
    return {
        "error_code": error_code,
        "api_keys": [
            {"api_key": key, "min_version": low, "max_version": high}
            for key, (low, high) in sorted(SUPPORTED.items())
            if share_groups or key not in SHARE_APIS
        ],
        "throttle_time_ms": 0,
        "supported_features": [{"name": SHARE_VERSION, "min_version": 0, "max_version": 1}],
        "finalized_features_epoch": 0,
        "finalized_features": (
            [{"name": SHARE_VERSION, "max_version_level": 1, "min_version_level": 1}]
            if share_groups
            else []
        ),
    }


SHARE_VERSION = "share.version"
"""Kafka's feature flag of share groups (KIP-932), at level 1 when they are enabled."""


async def api_versions(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """ApiVersions: the supported ranges."""
    return api_versions_body(share_groups=share_groups_enabled(state))


def _broker(state: BrokerState, session: Session, node_id: int | None = None) -> dict[str, Any]:
    listener = state.settings.advertised_for(session.listener.name)
    if node_id is not None:
        listener = state.cluster.advertised(listener, node_id)
    return {
        "node_id": state.settings.node_id if node_id is None else node_id,
        "host": listener.host,
        "port": listener.port,
        "rack": None,
    }


def brokers(state: BrokerState, session: Session) -> list[dict[str, Any]]:
    """The live nodes, as Metadata lists them."""
    cluster = state.cluster
    return [_broker(state, session, node) for node in cluster.node_ids() if cluster.alive(node)]


def controller_id(state: BrokerState) -> int:
    """The controller's id: the lowest node id, or this node while the controller is down.

    Any node takes topic administration (it forwards it to the controller),
    so naming a live node keeps admin clients working meanwhile.
    """
    cluster = state.cluster
    return cluster.controller_id if cluster.alive(cluster.controller_id) else cluster.node_id


def partition_leader(state: BrokerState, info: TopicInfo, partition: int) -> int:
    """The node leading ``partition`` of ``info``."""
    return state.cluster.leader(info, partition)


def _partition_metadata(partition: int, node: int, *, offline: bool) -> dict[str, Any]:
    if offline:
        # As Kafka shows a partition whose only replica's log directory is offline:
        # no leader, the replica listed as offline.
        return {
            "error_code": error_codes.code_for("LEADER_NOT_AVAILABLE"),
            "partition_index": partition,
            "leader_id": -1,
            "leader_epoch": 0,
            "replica_nodes": [node],
            "isr_nodes": [],
            "offline_replicas": [node],
        }
    return {
        "error_code": 0,
        "partition_index": partition,
        "leader_id": node,
        "leader_epoch": 0,
        "replica_nodes": [node],
        "isr_nodes": [node],
        "offline_replicas": [],
    }


def _topic_metadata(
    state: BrokerState, name: str, error: int = 0, info: TopicInfo | None = None
) -> dict[str, Any]:
    if info is None:
        info = state.log_dir.topic(name)
    partitions = []
    if info is not None:
        offline = state.log_dir.offline()
        cluster = state.cluster
        for p in range(info.partitions):
            node = partition_leader(state, info, p)
            if node != cluster.node_id:
                # Another node's partition: offline while that node is down.
                partitions.append(_partition_metadata(p, node, offline=not cluster.alive(node)))
            else:
                partitions.append(_partition_metadata(p, node, offline=(name, p) in offline))
    return {
        "error_code": error,
        "name": name,
        "topic_id": info.topic_id if info is not None else uuid.UUID(int=0),
        "is_internal": filenames.is_internal(name),
        "partitions": partitions,
        "topic_authorized_operations": NOT_REQUESTED,
    }


def maybe_auto_create(state: BrokerState, name: str) -> int:
    """Create ``name`` if auto-creation is on; returns the error code for it.

    Blocking (it creates files): call it from a worker thread, as
    :func:`auto_create` does.
    """
    if state.log_dir.has_topic(name):
        return 0
    if not state.settings.auto_create_topics_enable or filenames.is_internal(name):
        # Internal topics are created by their coordinator only, with its settings.
        return error_codes.code_for("UNKNOWN_TOPIC_OR_PARTITION")
    try:
        state.topic_admin.create_topic(name, state.settings.num_partitions)
    except SeglogError as exc:
        if exc.kafka_error == "TOPIC_ALREADY_EXISTS":
            return 0
        if isinstance(exc, StorageError):
            logger.error("cannot create topic %s: %s", name, exc, exc_info=exc)
        return error_codes.code_for_exception(exc)
    # A new topic is reported as LEADER_NOT_AVAILABLE once, as Kafka does.
    return error_codes.code_for("LEADER_NOT_AVAILABLE")


def _create_each(state: BrokerState, names: list[str]) -> dict[str, int]:
    return {name: maybe_auto_create(state, name) for name in names}


AUTO_CREATE_WAIT = 5.0
"""How long auto-creation on a node waits for a restarting controller."""


async def auto_create(state: BrokerState, *names: str) -> dict[str, int]:
    """Auto-create ``names`` on a worker thread; the error code for each.

    Creating a topic makes directories, files and fsyncs: never on the event loop.
    With several nodes the controller creates it: while the controller is
    restarting, wait for it a short while (on the event loop, sending again
    if it went away during the request), then answer LEADER_NOT_AVAILABLE,
    which clients retry.
    """
    cluster = state.cluster
    deadline = time.monotonic() + AUTO_CREATE_WAIT
    away = {error_codes.code_for("NOT_CONTROLLER"), error_codes.code_for("REQUEST_TIMED_OUT")}
    codes: dict[str, int] = {}
    pending = list(names)
    while True:
        creatable = [n for n in pending if not filenames.is_internal(n)]
        if state.settings.auto_create_topics_enable and creatable:
            try:
                await cluster.await_controller(deadline - time.monotonic())
            except SeglogError:
                break
        codes.update(await run_blocking(state.log_dir.env, _create_each, state, pending))
        pending = [n for n in pending if codes[n] in away]
        if not pending or time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.05)
    waiting = error_codes.code_for("LEADER_NOT_AVAILABLE")
    unknown = error_codes.code_for("UNKNOWN_TOPIC_OR_PARTITION")
    for name in pending:
        codes[name] = unknown if filenames.is_internal(name) else waiting
    return codes


async def metadata(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """Metadata: every live node, and each partition's leader."""
    requested = body.get("topics")
    version = header.api_version
    topics: list[dict[str, Any]] = []
    if requested is None or (version == 0 and not requested):
        every = state.log_dir.topics()
        topics = [_topic_metadata(state, name, info=every[name]) for name in sorted(every)]
    else:
        allow = body.get("allow_auto_topic_creation", True)
        by_id: dict[uuid.UUID, str] | None = None
        names: list[str | None] = []
        for item in requested:
            name = item.get("name")
            if name is None:
                if by_id is None:
                    by_id = {i.topic_id: n for n, i in state.log_dir.topics().items()}
                name = by_id.get(item.get("topic_id"))
                if name is None:
                    topics.append(
                        {
                            **_topic_metadata(state, ""),
                            "name": None,
                            "topic_id": item.get("topic_id"),
                            "error_code": error_codes.code_for("UNKNOWN_TOPIC_ID"),
                        }
                    )
                    names.append(None)
                    continue
            names.append(name)
        missing = [n for n in names if n is not None and not state.log_dir.has_topic(n)]
        created = await auto_create(state, *dict.fromkeys(missing)) if allow and missing else {}
        unknown = error_codes.code_for("UNKNOWN_TOPIC_OR_PARTITION")
        answers = iter(topics)
        topics = []
        for name in names:
            if name is None:
                topics.append(next(answers))
            elif name in created:
                topics.append(_topic_metadata(state, name, created[name]))
            elif state.log_dir.has_topic(name):
                topics.append(_topic_metadata(state, name))
            else:
                topics.append(_topic_metadata(state, name, unknown))
    return {
        "throttle_time_ms": 0,
        "brokers": brokers(state, session),
        "cluster_id": state.cluster_id,
        "controller_id": controller_id(state),
        "topics": topics,
        "cluster_authorized_operations": NOT_REQUESTED,
    }


async def describe_cluster(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """DescribeCluster: the live nodes and the controller."""
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": 1,
        "cluster_id": state.cluster_id,
        "controller_id": controller_id(state),
        "brokers": [
            {"broker_id": broker["node_id"], "host": broker["host"], "port": broker["port"]}
            for broker in brokers(state, session)
        ],
        "cluster_authorized_operations": NOT_REQUESTED,
    }
