"""Who the nodes of one ``seglog serve --nodes N`` are, and which of them are alive.

The broker always has a cluster: a broker started alone is a cluster of one
node, which is its own controller, leads every partition and coordinates every
key, so the handlers run the same code for one node and for many.
Node ``i`` (0-based) has ``node.id = base + i`` and listens on every configured
listener's port plus ``i``; the controller is node 0, the lowest id (Kafka's
``controller_id``). Each node holds the lock file ``.lock-node-<id>`` in the
log directory while it runs, so a node is alive exactly when that file is
locked: a crashed process releases its lock at once, with nothing to clean up.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import os
import platform
import tempfile
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seglog.broker.nodes import peers
from seglog.broker.nodes.channel import (
    ControllerTimeoutError,
    ControllerUnavailableError,
    call,
    reachable,
)
from seglog.broker.settings import MAX_NODES, BrokerSettings, Listener
from seglog.errors import InvalidConfigError
from seglog.storage import io
from seglog.storage.log_dir import TopicInfo

logger = logging.getLogger(__name__)

_ALIVE_CACHE_SECONDS = 0.2
REFRESH_TIMEOUT = 15.0
"""How long :meth:`Cluster.broadcast` waits for one node (to open a new topic's partitions, say)."""


def _shifted(listener: Listener, offset: int) -> Listener:
    return dataclasses.replace(listener, port=listener.port + offset)


@dataclass
class Cluster:
    """The nodes sharing one log directory, seen from node ``index``."""

    base_id: int
    count: int
    index: int
    log_dir: Path
    _alive: dict[int, tuple[float, bool]] = field(default_factory=dict, repr=False)
    _alive_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def for_node(cls, settings: BrokerSettings, count: int, index: int) -> Cluster:
        """Node ``index`` of the ``count`` nodes that ``settings`` configure."""
        if not 0 <= index < count:
            raise InvalidConfigError(f"node index {index} is not below the node count {count}")
        return cls(settings.node_id, count, index, settings.log_dir)

    @classmethod
    def alone(cls, settings: BrokerSettings) -> Cluster:
        """The cluster of one node that a broker started without ``--nodes`` is."""
        return cls(settings.node_id, 1, 0, settings.log_dir)

    @property
    def shares_log_dir(self) -> bool:
        """Whether other nodes serve partitions of the same log directory."""
        return self.count > 1

    @staticmethod
    def check(settings: BrokerSettings, count: int) -> None:
        """Refuse settings that cannot give ``count`` nodes their own ports."""
        for listener in settings.listeners:
            if listener.port == 0:
                raise InvalidConfigError(
                    f"listener {listener} has port 0: with {count} nodes each listener needs a "
                    "fixed port (node i listens on that port + i)"
                )
            if listener.port + count - 1 > 65535:
                raise InvalidConfigError(
                    f"listener {listener}: ports {listener.port} to {listener.port + count - 1} "
                    "do not all exist"
                )
        metrics = settings.metrics_port
        if metrics and metrics + count - 1 > 65535:
            raise InvalidConfigError(
                f"metrics.port={metrics}: ports {metrics} to {metrics + count - 1} "
                "(node i serves /metrics on metrics.port + i) do not all exist"
            )
        console = settings.console_port
        if console and console + count - 1 > 65535:
            raise InvalidConfigError(
                f"console.port={console}: ports {console} to {console + count - 1} "
                "(node i serves the HTTP API on console.port + i) do not all exist"
            )
        registry = settings.schema_registry_port
        if registry and registry + count - 1 > 65535:
            raise InvalidConfigError(
                f"schema.registry.port={registry}: ports {registry} to {registry + count - 1} "
                "(node i serves the schema registry on schema.registry.port + i) do not all exist"
            )

    # ------------------------------------------------------------ identity

    @property
    def node_id(self) -> int:
        """This node's id."""
        return self.base_id + self.index

    @property
    def controller_id(self) -> int:
        """The controller's id: the lowest."""
        return self.base_id

    @property
    def is_controller(self) -> bool:
        """Whether this node is the controller."""
        return self.index == 0

    def node_ids(self) -> list[int]:
        """Every node's id, lowest first."""
        return [self.base_id + i for i in range(self.count)]

    def node_settings(self, settings: BrokerSettings) -> BrokerSettings:
        """This node's settings: its id, and every port shifted by its index."""
        offset = self.index
        return dataclasses.replace(
            settings,
            node_id=self.node_id,
            listeners=tuple(_shifted(x, offset) for x in settings.listeners),
            advertised_listeners=None
            if settings.advertised_listeners is None
            else tuple(_shifted(x, offset) for x in settings.advertised_listeners),
            # Port 0 stays 0: each node's page on a port of its own choosing.
            metrics_port=settings.metrics_port + offset
            if settings.metrics_port
            else settings.metrics_port,
            console_port=settings.console_port + offset
            if settings.console_port
            else settings.console_port,
            schema_registry_port=settings.schema_registry_port + offset
            if settings.schema_registry_port
            else settings.schema_registry_port,
        )

    def advertised(self, mine: Listener, node_id: int) -> Listener:
        """Node ``node_id``'s address on the listener this node advertises as ``mine``."""
        return _shifted(mine, node_id - self.node_id)

    # ----------------------------------------------------------- placement

    def leader(self, info: TopicInfo, partition: int) -> int:
        """The node leading ``partition`` of ``info``: its recorded replica, else a default.

        The default (used only until the assignment is recorded) spreads
        partitions round-robin, so every node computes the same answer.
        """
        replicas = info.replicas_of(partition)
        if replicas and self.base_id <= replicas[0] < self.base_id + self.count:
            return replicas[0]
        return self.base_id + partition % self.count

    def serves(self, info: TopicInfo, partition: int) -> bool:
        """Whether this node leads ``partition`` of ``info`` (the log directory's predicate)."""
        return self.leader(info, partition) == self.node_id

    def producer_id(self, sequence: int) -> int:
        """A producer id no other node hands out: the node's index in the low bits."""
        return sequence * MAX_NODES + self.index

    # ------------------------------------------------------------- liveness

    @staticmethod
    def lock_file_of(node_id: int) -> str:
        """The lock file node ``node_id`` holds while it runs."""
        return f".lock-node-{node_id}"

    @property
    def lock_file(self) -> str:
        """This node's lock file."""
        return self.lock_file_of(self.node_id)

    def alive(self, node_id: int) -> bool:
        """Whether node ``node_id`` is running (its lock is held), cached for a moment."""
        if node_id == self.node_id:
            return True
        now = time.monotonic()
        with self._alive_lock:
            cached = self._alive.get(node_id)
            if cached is not None and now - cached[0] < _ALIVE_CACHE_SECONDS:
                return cached[1]
        alive = lock_held(self.log_dir / self.lock_file_of(node_id))
        with self._alive_lock:
            self._alive[node_id] = (now, alive)
        return alive

    def forget_liveness(self) -> None:
        """Drop the cached liveness (after a call to a node failed, say)."""
        with self._alive_lock:
            self._alive.clear()

    async def await_controller(self, seconds: float) -> None:
        """Return once the controller listens on its channel (at once on the controller).

        Kafka's brokers forward administration to the controller and wait for
        it up to the request's timeout; a node restarted by the supervisor is
        back within seconds. ControllerTimeoutError if ``seconds`` pass first.
        Waits on the event loop: no thread is held meanwhile.
        """
        if self.is_controller:
            return
        # Its Kafka listener for the nodes: the last thing a starting node opens.
        address = self.peer_address(self.controller_id)
        deadline = time.monotonic() + max(0.0, seconds)
        pause = 0.05
        while not await reachable(address):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ControllerTimeoutError(
                    f"the controller (node {self.controller_id}) did not come back within "
                    f"{seconds:g} s"
                )
            await asyncio.sleep(min(pause, remaining))
            pause = min(pause * 2, 0.5)
        self.forget_liveness()

    # -------------------------------------------------------------- channel

    def peer_address(self, node_id: int) -> str:
        """The address of node ``node_id``'s Kafka listener for the other nodes."""
        return self.channel_address(node_id) + "-kafka"

    async def call(
        self,
        node_id: int,
        api_key: int,
        api_version: int,
        body: Mapping[str, Any],
        timeout: float,
    ) -> dict[str, Any]:
        """Send node ``node_id`` one Kafka request and await its answer's body.

        ControllerUnavailableError if the node cannot be reached or does not
        answer in time (see :func:`seglog.broker.nodes.peers.call`).
        """
        try:
            return await peers.call(self.peer_address(node_id), api_key, api_version, body, timeout)
        except ControllerUnavailableError:
            self.forget_liveness()
            raise

    def channel_address(self, node_id: int) -> str:
        """The control channel's address of node ``node_id``: a Unix socket.

        Named after the log directory, so two clusters on one machine never meet.
        On Linux it is abstract, so that no file is left behind; elsewhere it is
        a file in the temporary directory (a short path: Unix socket paths are
        limited to about 100 bytes, which a log directory's path may exceed).
        """
        digest = hashlib.sha256(str(self.log_dir.resolve()).encode()).hexdigest()[:24]
        name = f"seglog-{digest}-node-{node_id}"
        if platform.system() == "Linux":
            return "\0" + name
        return os.path.join(tempfile.gettempdir(), name + ".sock")

    def control(self, node_id: int, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send a control-channel ``request`` to node ``node_id`` (ControllerUnavailableError if
        it is down)."""
        if not self.alive(node_id):
            down = ControllerUnavailableError(f"node {node_id} is down")
            # Nothing was sent: asking again once it is back (a restart) is safe.
            down.unreachable = True
            raise down
        try:
            return call(self.channel_address(node_id), request, timeout)
        except ControllerUnavailableError:
            self.forget_liveness()
            raise

    def broadcast(self, request: dict[str, Any]) -> None:
        """Send ``request`` to every other live node, all at once, and wait for each (bounded)."""
        others = [n for n in self.node_ids() if n != self.node_id and self.alive(n)]

        def send(node_id: int) -> None:
            try:
                call(self.channel_address(node_id), request, REFRESH_TIMEOUT)
            except Exception as exc:
                # It re-reads the topic list when it starts again, or at the next change.
                logger.warning("node %d did not take %s: %s", node_id, request["op"], exc)

        if len(others) <= 1:
            for node_id in others:
                send(node_id)
            return
        with ThreadPoolExecutor(max_workers=min(len(others), 32)) as pool:
            list(pool.map(send, others))


def lock_held(path: Path) -> bool:
    """Whether some process holds the ``flock`` of ``path`` (False if it does not exist)."""
    env = io.env_or_default(None)
    try:
        fd = env.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        if env.lock(fd):
            env.unlock(fd)
            return False
        return True
    finally:
        env.close(fd)
