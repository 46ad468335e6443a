"""A node's share of the log directory: topic administration goes through the controller.

The controller runs :meth:`create_topic`, :meth:`delete_topic`,
:meth:`create_partitions` and :meth:`alter_topic_config` on its log directory
(choosing leaders for new partitions and recording them), then has every live
node re-read the topic list before it answers, so that a topic it reports
created is open on every node. On any other node the same methods forward to
the controller and return once it has answered (retrying for a moment a
controller that is not listening; the request handlers wait for a restarting
controller first, up to the request's timeout:
:meth:`~seglog.broker.nodes.cluster.Cluster.await_controller`). Every caller
(the admin handlers, auto-creation, the coordinators creating their internal
topics) keeps calling the log directory as with one node.

Deleting a topic first has each node close its partitions of it (``release``),
then the controller removes the files of all of them, including those of nodes
that are down (which would otherwise adopt them again at their restart).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from seglog.broker.nodes import assignment
from seglog.broker.nodes.channel import (
    ChannelServer,
    ControllerUnavailableError,
    call,
)
from seglog.broker.nodes.cluster import Cluster
from seglog.config import LogConfig
from seglog.coordinator import txn_log
from seglog.coordinator.offset_store import partition_for
from seglog.errors import SeglogError, UnknownTopicOrPartitionError
from seglog.storage.log_dir import LogDir, LogDirSettings, TopicInfo

logger = logging.getLogger(__name__)

FORWARD_TIMEOUT = 60.0
"""How long a node waits for the controller to carry out a forwarded request."""
FORWARD_RETRY = 3.0
"""How long a forwarding node retries a controller it cannot reach (restarting, say).

Short: the caller's thread waits meanwhile. The request handlers wait for the
controller on the event loop first, up to the request's timeout
(:meth:`Cluster.await_controller`); this covers a controller that died since,
and callers without such a wait (the coordinators creating their topics).
"""
REFRESH_TIMEOUT = 15.0
"""How long the controller waits for one node to open a new topic's partitions."""

_ADMIN_METHODS = frozenset(
    {"create_topic", "delete_topic", "create_partitions", "alter_topic_config"}
)


class NodeLogDir(LogDir):
    """The log directory as one node of several sees it; open with :func:`open_node_log_dir`."""

    cluster: Cluster
    _channel: ChannelServer | None = None
    #: Control requests served beyond topic administration, by op (set by the broker).
    handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]]

    # ------------------------------------------------------ administration

    def _assign(self) -> Callable[[int, int], list[list[int]]]:
        return assignment.assigner(self.cluster.node_ids(), self.topics)

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        configs: Mapping[str, object] | None = None,
        *,
        replicas: Callable[[int, int], list[list[int]]] | None = None,
    ) -> TopicInfo:
        """Create a topic (on the controller; forwarded there from other nodes)."""
        if self.cluster.is_controller:
            created = super().create_topic(
                name, partitions, configs, replicas=replicas or self._assign()
            )
            self.broadcast({"op": "refresh"})
            return created
        self._forward(
            "create_topic",
            name,
            partitions,
            {k: str(v) for k, v in (configs or {}).items()},
            assignment=None if replicas is None else replicas(0, partitions or 0),
        )
        info = self.topic(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"topic '{name}' was deleted as it was created")
        return info

    def create_partitions(
        self,
        name: str,
        total: int,
        *,
        replicas: Callable[[int, int], list[list[int]]] | None = None,
    ) -> None:
        """Grow a topic (on the controller; forwarded there from other nodes)."""
        if self.cluster.is_controller:
            super().create_partitions(name, total, replicas=replicas or self._assign())
            self.broadcast({"op": "refresh"})
        else:
            info = self.topic(name)
            first = info.partitions if info is not None else 0
            self._forward(
                "create_partitions",
                name,
                total,
                assignment=None if replicas is None else replicas(first, total - first),
            )

    def alter_topic_config(
        self, name: str, set_configs: Mapping[str, object], delete_configs: Sequence[str] = ()
    ) -> LogConfig:
        """Change a topic's overrides (on the controller; forwarded there from other nodes)."""
        if self.cluster.is_controller:
            config = super().alter_topic_config(name, set_configs, delete_configs)
            self.broadcast({"op": "refresh"})
            return config
        self._forward(
            "alter_topic_config",
            name,
            {k: str(v) for k, v in set_configs.items()},
            list(delete_configs),
        )
        return self.topic_config(name)

    def delete_topic(self, name: str) -> None:
        """Delete a topic (on the controller; forwarded there from other nodes)."""
        if not self.cluster.is_controller:
            self._forward("delete_topic", name)
            return
        if self.topic(name) is None:
            super().delete_topic(name)  # raises what one node raises
        # Nothing may write a partition's files while they are removed.
        self.broadcast({"op": "release", "topic": name})
        try:
            super().delete_topic(name)
        finally:
            self.broadcast({"op": "refresh"})

    def _forward(self, method: str, *args: Any, assignment: list[list[int]] | None = None) -> None:
        address = self.cluster.channel_address(self.cluster.controller_id)
        request = {"op": "admin", "method": method, "args": list(args), "assignment": assignment}
        deadline = time.monotonic() + FORWARD_RETRY
        pause = 0.05
        try:
            while True:
                try:
                    call(address, request, FORWARD_TIMEOUT)
                    break
                except ControllerUnavailableError as exc:
                    self.cluster.forget_liveness()
                    if not exc.unreachable or time.monotonic() + pause > deadline:
                        raise
                    # Never connected, so never carried out: safe to send again.
                    time.sleep(pause)
                    pause = min(pause * 2, 0.5)
        except ControllerUnavailableError:
            raise
        except SeglogError:
            # TOPIC_ALREADY_EXISTS, say: what the controller has is what the caller sees next.
            self.refresh()
            raise
        # The controller had this node refresh already, unless the call raced
        # this node's start: once more costs little.
        self.refresh()

    def broadcast(self, request: dict[str, Any]) -> None:
        """Send ``request`` to every other live node, all at once, and wait for each (bounded)."""
        others = [
            n
            for n in self.cluster.node_ids()
            if n != self.cluster.node_id and self.cluster.alive(n)
        ]

        def send(node_id: int) -> None:
            try:
                call(self.cluster.channel_address(node_id), request, REFRESH_TIMEOUT)
            except Exception as exc:
                # It re-reads the topic list when it starts again, or at the next change.
                logger.warning("node %d did not take %s: %s", node_id, request["op"], exc)

        if len(others) <= 1:
            for node_id in others:
                send(node_id)
            return
        with ThreadPoolExecutor(max_workers=min(len(others), 32)) as pool:
            list(pool.map(send, others))

    # ------------------------------------------------------- control channel

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """Carry out one control request (see :mod:`seglog.broker.nodes.channel`)."""
        op = request.get("op")
        if op == "refresh":
            self.refresh()
        elif op == "release":
            self.release_topic(str(request["topic"]))
        elif op == "admin":
            method = str(request.get("method"))
            if not self.cluster.is_controller or method not in _ADMIN_METHODS:
                raise ControllerUnavailableError(
                    f"node {self.cluster.node_id} is not the controller"
                    if method in _ADMIN_METHODS
                    else f"unknown administration method {method!r}"
                )
            assignment = request.get("assignment")
            if assignment is None:
                getattr(self, method)(*request.get("args", []))
            else:
                # The replicas the client named, the same whichever node it asked.
                chosen = [[int(n) for n in r] for r in assignment]
                getattr(self, method)(
                    *request.get("args", []), replicas=lambda first, count: chosen[:count]
                )
        elif op in self.handlers:
            return self.handlers[str(op)](request)
        else:
            raise ControllerUnavailableError(f"unknown control request {op!r}")
        return {"ok": True}

    def call_node(self, node_id: int, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send ``request`` to node ``node_id`` (ControllerUnavailableError if it is down)."""
        if not self.cluster.alive(node_id):
            raise ControllerUnavailableError(f"node {node_id} is down")
        try:
            return call(self.cluster.channel_address(node_id), request, timeout)
        except ControllerUnavailableError:
            self.cluster.forget_liveness()
            raise

    def coordinator_of(self, transactional_id: str) -> int | None:
        """The node coordinating ``transactional_id``, or None before its topic exists."""
        info = self.topic(txn_log.TOPIC)
        if info is None:
            return None
        return self.cluster.leader(info, partition_for(transactional_id, info.partitions))

    def start_channel(self) -> None:
        """Listen on this node's control channel, then catch up with the topic list.

        In that order: a change written before the channel listened is read by
        the refresh, any later one is announced on the channel.
        """
        self._channel = ChannelServer(
            self.cluster.channel_address(self.cluster.node_id), self.handle
        )
        self._channel.start()
        self.refresh()

    def stop_channel(self) -> None:
        """Stop listening on the control channel."""
        if self._channel is not None:
            self._channel.stop()
            self._channel = None


def open_node_log_dir(
    cluster: Cluster,
    defaults: LogConfig,
    settings: LogDirSettings,
    *,
    clean_shutdown: bool,
) -> NodeLogDir:
    """Open node ``cluster.index``'s share of the log directory (its partitions only)."""
    log_dir = NodeLogDir.open(
        cluster.log_dir,
        defaults=defaults,
        settings=settings,
        serves=cluster.serves,
        lock_file=cluster.lock_file,
        clean_shutdown=clean_shutdown,
        writes_topics=cluster.is_controller,
    )
    log_dir.cluster = cluster
    log_dir.handlers = {}
    return log_dir
