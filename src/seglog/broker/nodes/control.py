"""A node of several: its share of the log directory, its topic administration, its control channel.

:func:`open_node` composes what a node is built from: the log directory
opened for this node's partitions only (the cluster's ownership check, its
own lock file, checkpoints merged with the other nodes'), the node's topic
administration (:mod:`.topic_admin`: its own on the controller, forwarded to
the controller elsewhere), and :class:`NodeControl`, which serves the
requests other nodes send it (:mod:`.channel`):

    refresh     re-read the topic list (new topics opened, deleted ones closed)
    release     close this node's partitions of a topic being deleted
    admin       (controller only) carry out a forwarded topic administration
    <other>     what the broker adds to :attr:`NodeControl.handlers`
                (transaction markers, settings reloads, high watermarks)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from seglog.broker.nodes.channel import ChannelServer, ControllerUnavailableError
from seglog.broker.nodes.cluster import Cluster
from seglog.broker.nodes.peers import FrameHandler, PeerServer
from seglog.broker.nodes.topic_admin import node_topic_admin
from seglog.config import LogConfig
from seglog.storage.dir_checkpoints import MergedCheckpoints
from seglog.storage.log_dir import LogDir, LogDirSettings
from seglog.storage.topic_admin import TopicAdministration

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class NodeControl:
    """One node's log directory, topic administration and end of the control channel."""

    def __init__(self, cluster: Cluster, log_dir: LogDir, topics: TopicAdministration) -> None:
        self.cluster = cluster
        self.log_dir = log_dir
        #: Topic administration as this node carries it out (see :mod:`.topic_admin`).
        self.topics = topics
        #: Control requests served beyond the log directory's, by op (set by the broker).
        self.handlers: dict[str, Handler] = {}
        self._channel: ChannelServer | None = None
        self._peers: PeerServer | None = None

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """Carry out one control request (see the module docstring)."""
        op = request.get("op")
        if op == "refresh":
            self.log_dir.refresh()
        elif op == "release":
            self.log_dir.release_topic(str(request["topic"]))
        elif op == "admin":
            self._administer(request)
        elif op in self.handlers:
            return self.handlers[str(op)](request)
        else:
            raise ControllerUnavailableError(f"unknown control request {op!r}")
        return {"ok": True}

    def _administer(self, request: dict[str, Any]) -> None:
        """Carry out a topic administration another node forwarded (on the controller)."""
        topics = self.topics
        if not self.cluster.is_controller:
            raise ControllerUnavailableError(f"node {self.cluster.node_id} is not the controller")
        methods: dict[str, Callable[..., Any]] = {
            "create_topic": topics.create_topic,
            "delete_topic": topics.delete_topic,
            "create_partitions": topics.create_partitions,
            "alter_topic_config": topics.alter_topic_config,
        }
        method = methods.get(str(request.get("method")))
        if method is None:
            raise ControllerUnavailableError(
                f"unknown administration method {request.get('method')!r}"
            )
        args = request.get("args", [])
        assignment = request.get("assignment")
        if assignment is None:
            method(*args)
        else:
            # The replicas the client named, the same whichever node it asked.
            chosen = [[int(n) for n in r] for r in assignment]
            method(*args, replicas=lambda first, count: chosen[:count])

    def start(self) -> None:
        """Listen on this node's control channel, then catch up with the topic list.

        In that order: a change written before the channel listened is read by
        the refresh, any later one is announced on the channel. A cluster of
        one has nobody to hear from.
        """
        if not self.cluster.shares_log_dir:
            return
        self._channel = ChannelServer(
            self.cluster.channel_address(self.cluster.node_id), self.handle
        )
        self._channel.start()
        self.log_dir.refresh()

    async def listen(self, handle: FrameHandler) -> None:
        """Serve the other nodes' Kafka requests with ``handle`` (none in a cluster of one)."""
        if not self.cluster.shares_log_dir:
            return
        self._peers = PeerServer(self.cluster.peer_address(self.cluster.node_id), handle)
        await self._peers.start()

    async def stop(self) -> None:
        """Stop listening to the other nodes."""
        if self._peers is not None:
            await self._peers.stop()
            self._peers = None
        if self._channel is not None:
            self._channel.stop()
            self._channel = None


def open_member(
    cluster: Cluster,
    defaults: LogConfig,
    settings: LogDirSettings,
    *,
    clean_shutdown: bool,
) -> NodeControl:
    """This node's share of the log directory: the whole of it in a cluster of one.

    A broker alone opens the directory as its own (its lock, its checkpoints,
    the clean-shutdown marker) and administers topics there itself.
    """
    if cluster.shares_log_dir:
        return open_node(cluster, defaults, settings, clean_shutdown=clean_shutdown)
    log_dir = LogDir.open(cluster.log_dir, defaults=defaults, settings=settings)
    return NodeControl(cluster, log_dir, log_dir)


def open_node(
    cluster: Cluster,
    defaults: LogConfig,
    settings: LogDirSettings,
    *,
    clean_shutdown: bool,
) -> NodeControl:
    """Open node ``cluster.node_id``'s share of the log directory (its partitions only).

    ``clean_shutdown`` is whether its partitions were closed cleanly, as the
    supervisor read it from the directory's marker for every node.
    """
    log_dir = LogDir.open(
        cluster.log_dir,
        defaults=defaults,
        settings=settings,
        owns=cluster.serves,
        checkpoint_policy=MergedCheckpoints(clean_shutdown),
        lock_file=cluster.lock_file,
        writes_topics=cluster.is_controller,
    )
    return NodeControl(cluster, log_dir, node_topic_admin(log_dir, cluster))
