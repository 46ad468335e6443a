"""Topic administration on one node of several: carried out by the controller.

The controller (:class:`ControllerTopics`) creates, deletes, grows or alters
the topic in the log directory (choosing leaders for new partitions and
recording them), then has every live node re-read the topic list before it
answers, so that a topic it reports created is open on every node. Any other
node (:class:`ForwardedTopics`) forwards the request to the controller over
the control channel and returns once it has answered (retrying for a moment a
controller that is not listening; the request handlers wait for a restarting
controller first, up to the request's timeout:
:meth:`~seglog.broker.nodes.cluster.Cluster.await_controller`).

Both are :class:`~seglog.storage.topic_admin.TopicAdministration`, as the log
directory of a broker alone is: every caller (the admin handlers,
auto-creation, the coordinators creating their internal topics) calls the one
the broker was built with, the same way in both modes.

Deleting a topic first has each node close its partitions of it (``release``),
then the controller removes the files of all of them, including those of nodes
that are down (which would otherwise adopt them again at their restart).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from seglog.broker.nodes import assignment
from seglog.broker.nodes.channel import ControllerUnavailableError, call
from seglog.broker.nodes.cluster import Cluster
from seglog.config import LogConfig
from seglog.errors import SeglogError, UnknownTopicOrPartitionError
from seglog.storage.log_dir import LogDir, TopicInfo
from seglog.storage.topic_admin import Replicas, TopicAdministration

FORWARD_TIMEOUT = 60.0
"""How long a node waits for the controller to carry out a forwarded request."""
FORWARD_RETRY = 3.0
"""How long a forwarding node retries a controller it cannot reach (restarting, say).

Short: the caller's thread waits meanwhile. The request handlers wait for the
controller on the event loop first, up to the request's timeout
(:meth:`Cluster.await_controller`); this covers a controller that died since,
and callers without such a wait (the coordinators creating their topics).
"""


class ControllerTopics:
    """Topic administration on the controller: on the log directory, then every node refreshes."""

    def __init__(self, log_dir: LogDir, cluster: Cluster) -> None:
        self.log_dir = log_dir
        self.cluster = cluster

    def _assign(self) -> Replicas:
        return assignment.assigner(self.cluster.node_ids(), self.log_dir.topics)

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        configs: Mapping[str, object] | None = None,
        *,
        replicas: Replicas | None = None,
    ) -> TopicInfo:
        """Create a topic, its leaders chosen here unless ``replicas`` names them."""
        created = self.log_dir.create_topic(
            name, partitions, configs, replicas=replicas or self._assign()
        )
        self.cluster.broadcast({"op": "refresh"})
        return created

    def create_partitions(self, name: str, total: int, *, replicas: Replicas | None = None) -> None:
        """Grow a topic, the new partitions' leaders chosen here unless ``replicas`` names them."""
        self.log_dir.create_partitions(name, total, replicas=replicas or self._assign())
        self.cluster.broadcast({"op": "refresh"})

    def alter_topic_config(
        self, name: str, set_configs: Mapping[str, object], delete_configs: Sequence[str] = ()
    ) -> LogConfig:
        """Change a topic's overrides."""
        config = self.log_dir.alter_topic_config(name, set_configs, delete_configs)
        self.cluster.broadcast({"op": "refresh"})
        return config

    def delete_topic(self, name: str) -> None:
        """Delete a topic: every node closes its partitions of it, then the files go."""
        if self.log_dir.topic(name) is None:
            self.log_dir.delete_topic(name)  # raises what one node raises
        # Nothing may write a partition's files while they are removed.
        self.cluster.broadcast({"op": "release", "topic": name})
        try:
            self.log_dir.delete_topic(name)
        finally:
            self.cluster.broadcast({"op": "refresh"})


class ForwardedTopics:
    """Topic administration on a node that is not the controller: forwarded to it."""

    def __init__(self, log_dir: LogDir, cluster: Cluster) -> None:
        self.log_dir = log_dir
        self.cluster = cluster

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        configs: Mapping[str, object] | None = None,
        *,
        replicas: Replicas | None = None,
    ) -> TopicInfo:
        """Have the controller create a topic; its definition once this node has it."""
        self._forward(
            "create_topic",
            name,
            partitions,
            {k: str(v) for k, v in (configs or {}).items()},
            assignment=None if replicas is None else replicas(0, partitions or 0),
        )
        info = self.log_dir.topic(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"topic '{name}' was deleted as it was created")
        return info

    def create_partitions(self, name: str, total: int, *, replicas: Replicas | None = None) -> None:
        """Have the controller grow a topic."""
        info = self.log_dir.topic(name)
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
        """Have the controller change a topic's overrides; the config as this node then has it."""
        self._forward(
            "alter_topic_config",
            name,
            {k: str(v) for k, v in set_configs.items()},
            list(delete_configs),
        )
        return self.log_dir.topic_config(name)

    def delete_topic(self, name: str) -> None:
        """Have the controller delete a topic."""
        self._forward("delete_topic", name)

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
            self.log_dir.refresh()
            raise
        # The controller had this node refresh already, unless the call raced
        # this node's start: once more costs little.
        self.log_dir.refresh()


def node_topic_admin(log_dir: LogDir, cluster: Cluster) -> TopicAdministration:
    """The topic administration of node ``cluster.node_id``: its own on the controller."""
    if cluster.is_controller:
        return ControllerTopics(log_dir, cluster)
    return ForwardedTopics(log_dir, cluster)
