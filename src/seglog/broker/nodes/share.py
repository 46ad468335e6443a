"""Share groups across the nodes of ``seglog serve --nodes N``.

Kafka splits a share group over three roles, each on a broker of its own:
the group coordinator (membership: the node leading the group's
``__consumer_offsets`` partition), the share-partition leader (the node
leading the data partition: it acquires records and keeps the in-flight
state in memory) and the share coordinator (the node leading the key's
``__share_group_state`` partition: it persists that state). Kafka's brokers
send one another Read/Write/Initialize/DeleteShareGroupState; here the same
calls travel the control channel as one op, ``share``, with a ``method``:

    persister   read / initialize / write / delete / keys_of, served by the
                receiving node's own store (:class:`~seglog.broker.share.persister.LocalPersister`)
    assigned    partitions entered a group's assignment: initialize their state
    reset       AlterShareGroupOffsets of one partition this node leads
    drop_group  / drop_topic   forget share-partitions held in memory
                (DeleteGroups, DeleteShareGroupOffsets; the state itself is
                deleted through the persister)
    dead_letter append a batch of dead letters to a partition this node leads

The channel is served by threads; what touches share state runs on the
node's event loop, where its share-partitions live, and the thread waits for it.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from seglog import errors
from seglog.broker.nodes.channel import ControllerUnavailableError
from seglog.broker.nodes.cluster import Cluster
from seglog.broker.nodes.control import NodeControl
from seglog.broker.share.partitions import Key
from seglog.broker.share.persister import LocalPersister
from seglog.broker.state import BrokerState
from seglog.errors import SeglogError
from seglog.share.state import (
    PersistedState,
    RecordState,
    SharePartitionKey,
    StateBatch,
    StateUpdate,
)
from seglog.share.state_store import STATE_TOPIC
from seglog.storage.log_dir import LogDir

logger = logging.getLogger(__name__)

OP = "share"
TIMEOUT = 30.0
"""How long a call to another node waits for its answer (seconds)."""
STARTING_WAIT = 10.0
"""How long a call waits for a node that is down or starting to open its control channel
(seconds): a node the supervisor restarts after a first crash is back well within that."""


class ShareNodeUnavailableError(SeglogError):
    """The node holding a share-partition's state or data did not answer."""

    kafka_error = "COORDINATOR_NOT_AVAILABLE"


class RemoteShareError(SeglogError):
    """An error another node's share coordinator raised, under its Kafka name."""

    def __init__(self, message: str, kafka_error: str) -> None:
        super().__init__(message)
        self.kafka_error = kafka_error


# ------------------------------------------------------------------ encoding


def _key(key: SharePartitionKey) -> list[Any]:
    return [key.group_id, str(key.topic_id), key.partition]


def _key_of(value: list[Any]) -> SharePartitionKey:
    return SharePartitionKey(str(value[0]), uuid.UUID(str(value[1])), int(value[2]))


def _batches(batches: Iterable[StateBatch]) -> list[list[int]]:
    return [
        [b.first_offset, b.last_offset, int(b.delivery_state), b.delivery_count] for b in batches
    ]


def _batches_of(value: list[list[int]]) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(int(a), int(b), RecordState(int(s)), int(c)) for a, b, s, c in value)


def _state(state: PersistedState | None) -> dict[str, Any] | None:
    if state is None:
        return None
    return {
        "state_epoch": state.state_epoch,
        "leader_epoch": state.leader_epoch,
        "start_offset": state.start_offset,
        "batches": _batches(state.batches),
    }


def _state_of(value: dict[str, Any] | None) -> PersistedState | None:
    if value is None:
        return None
    return PersistedState(
        state_epoch=int(value["state_epoch"]),
        leader_epoch=int(value["leader_epoch"]),
        start_offset=int(value["start_offset"]),
        batches=_batches_of(value["batches"]),
    )


def _update(update: StateUpdate) -> dict[str, Any]:
    return {
        "start_offset": update.start_offset,
        "batches": _batches(update.batches),
        "leader_epoch": update.leader_epoch,
    }


def _update_of(value: dict[str, Any]) -> StateUpdate:
    return StateUpdate(
        start_offset=int(value["start_offset"]),
        batches=_batches_of(value["batches"]),
        leader_epoch=int(value["leader_epoch"]),
    )


# ------------------------------------------------------------------ calling


async def _call(cluster: Cluster, node_id: int, request: dict[str, Any]) -> dict[str, Any]:
    """Send ``request`` to node ``node_id`` (off the loop); its answer, or its error raised."""
    message = {"op": OP, **request}
    deadline = time.monotonic() + STARTING_WAIT
    pause = 0.05
    while True:
        try:
            answer = await asyncio.to_thread(cluster.control, node_id, message, TIMEOUT)
            break
        except ControllerUnavailableError as exc:
            # Down, or its lock held but its channel not open yet: it is starting
            # (restarted after a crash, say). Nothing was carried out, so asking again
            # is safe; as Kafka's persister retries an unavailable share coordinator.
            if exc.unreachable and time.monotonic() < deadline:
                await asyncio.sleep(pause)
                pause = min(pause * 2, 0.5)
                continue
            raise ShareNodeUnavailableError(f"node {node_id}: {exc}") from exc
        except SeglogError as exc:
            # The channel raised the error again by class; keep its Kafka name.
            raise RemoteShareError(str(exc), exc.kafka_error) from exc
    failed = answer.get("share_error")
    if failed is not None:
        cls = getattr(errors, str(failed["class"]), None)
        if isinstance(cls, type) and issubclass(cls, SeglogError):
            raise cls(str(failed["message"]))
        raise RemoteShareError(str(failed["message"]), str(failed["kafka_error"]))
    return answer


class NodePersister:
    """The persister of a node: each call goes to the node leading the key's state partition.

    Locally when that is this node, else over the control channel to that
    node's :class:`LocalPersister`. ``keys_of`` asks every node, since a
    group's keys are spread over the state partitions.
    """

    def __init__(
        self,
        cluster: Cluster,
        log_dir: LogDir,
        local: LocalPersister,
        started: Callable[[], Awaitable[None]],
    ) -> None:
        self._cluster = cluster
        self._log_dir = log_dir
        self.local = local
        #: The store is created (its topic too) before a key's leader is looked up.
        self._started = started

    async def _leader(self, key: SharePartitionKey) -> int:
        await self._started()
        store = self.local.store
        if store.serves(key):
            return self._cluster.node_id
        info = self._log_dir.topic(STATE_TOPIC)
        if info is None:
            return self._cluster.node_id
        return self._cluster.leader(info, store.partition_for(key))

    async def _remote(self, node_id: int, method: str, **args: Any) -> dict[str, Any]:
        return await _call(self._cluster, node_id, {"method": "persister", "call": method, **args})

    async def read(self, key: SharePartitionKey) -> PersistedState | None:
        """The state last written for ``key``, if any (from its share coordinator)."""
        node = await self._leader(key)
        if node == self._cluster.node_id:
            return await self.local.read(key)
        return _state_of((await self._remote(node, "read", key=_key(key)))["state"])

    async def initialize(self, key: SharePartitionKey, start_offset: int) -> PersistedState:
        """Give ``key`` a first state at its share coordinator."""
        node = await self._leader(key)
        if node == self._cluster.node_id:
            return await self.local.initialize(key, start_offset)
        answer = await self._remote(node, "initialize", key=_key(key), start_offset=start_offset)
        state = _state_of(answer["state"])
        assert state is not None
        return state

    async def write(self, key: SharePartitionKey, update: StateUpdate) -> None:
        """Persist ``update`` at ``key``'s share coordinator (written there before this returns)."""
        node = await self._leader(key)
        if node == self._cluster.node_id:
            await self.local.write(key, update)
        else:
            await self._remote(node, "write", key=_key(key), update=_update(update))

    async def delete(self, key: SharePartitionKey) -> None:
        """Forget ``key``'s state at its share coordinator."""
        node = await self._leader(key)
        if node == self._cluster.node_id:
            await self.local.delete(key)
        else:
            await self._remote(node, "delete", key=_key(key))

    async def keys_of(self, group_id: str) -> list[SharePartitionKey]:
        """Every share-partition of ``group_id`` with state, on every live node."""
        await self._started()
        keys = await self.local.keys_of(group_id)
        for node in self._cluster.node_ids():
            if node == self._cluster.node_id or not self._cluster.alive(node):
                continue
            answer = await self._remote(node, "keys_of", group_id=group_id)
            keys.extend(_key_of(k) for k in answer["keys"])
        return keys


class NodeSharePeers:
    """What a node asks of the others about share-partitions they lead or hold."""

    def __init__(self, cluster: Cluster, log_dir: LogDir) -> None:
        self._cluster = cluster
        self._log_dir = log_dir

    def leader(self, topic: str, partition: int) -> int | None:
        """The node leading ``topic``-``partition`` (None: no such topic)."""
        info = self._log_dir.topic(topic)
        return None if info is None else self._cluster.leader(info, partition)

    def is_local(self, topic: str, partition: int) -> bool:
        """Whether this node leads ``topic``-``partition``."""
        return self.leader(topic, partition) in (None, self._cluster.node_id)

    async def assigned(self, group_id: str, partitions: list[Key]) -> None:
        """Have each partition's leader initialize ``group_id``'s state there."""
        by_node: dict[int, list[Key]] = {}
        for topic, partition in partitions:
            node = self.leader(topic, partition)
            if node is not None and node != self._cluster.node_id:
                by_node.setdefault(node, []).append((topic, partition))
        for node, keys in by_node.items():
            try:
                await _call(
                    self._cluster,
                    node,
                    {"method": "assigned", "group_id": group_id, "partitions": keys},
                )
            except SeglogError as exc:
                # Its members' first fetch initializes it instead.
                logger.warning("node %d did not initialize share group %s: %s", node, group_id, exc)

    async def reset(self, group_id: str, topic: str, partition: int, start_offset: int) -> None:
        """Start ``group_id`` over at ``start_offset`` on the partition's leader."""
        node = self.leader(topic, partition)
        assert node is not None
        request = {
            "method": "reset",
            "group_id": group_id,
            "topic": topic,
            "partition": partition,
            "start_offset": start_offset,
        }
        await _call(self._cluster, node, request)

    async def drop(self, group_id: str, topic: str | None) -> None:
        """Every other live node forgets ``group_id``'s share-partitions (of ``topic``)."""
        for node in self._cluster.node_ids():
            if node == self._cluster.node_id or not self._cluster.alive(node):
                continue
            try:
                await _call(
                    self._cluster,
                    node,
                    {"method": "drop", "group_id": group_id, "topic": topic},
                )
            except ShareNodeUnavailableError as exc:
                # Down: a node that starts again has nothing in memory.
                logger.warning("node %d did not drop share group %s: %s", node, group_id, exc)

    def dead_letter(self, topic: str, partition: int, batch: bytes) -> None:
        """Append ``batch`` to ``topic``-``partition`` on its leader, in the background."""
        node = self.leader(topic, partition)
        if node is None:
            return
        request = {
            "op": OP,
            "method": "dead_letter",
            "topic": topic,
            "partition": partition,
            "batch": base64.b64encode(batch).decode("ascii"),
        }

        def send() -> None:
            try:
                self._cluster.control(node, request, TIMEOUT)
            except SeglogError as exc:
                logger.warning("cannot write dead letters to %s-%d: %s", topic, partition, exc)

        asyncio.get_running_loop().run_in_executor(None, send)


# ------------------------------------------------------------------ serving


def install(state: BrokerState, node: NodeControl, loop: asyncio.AbstractEventLoop) -> None:
    """Wire a node's share groups to the other nodes, both ways (nothing for a cluster of one)."""
    shares = state.shares
    if shares is None or not node.cluster.shares_log_dir:
        return
    cluster, log_dir, env = node.cluster, node.log_dir, node.log_dir.env
    local = LocalPersister(shares.store, env)

    async def started() -> None:
        await shares.start(env)

    shares.partitions.persister = NodePersister(cluster, log_dir, local, started)
    shares.peers = peers = NodeSharePeers(cluster, log_dir)
    shares.dead_letters.forward = peers.dead_letter

    async def serve(request: dict[str, Any]) -> dict[str, Any]:
        await shares.start(env)
        method = request["method"]
        if method == "persister":
            return await _persister(local, request)
        if method == "assigned":
            keys = [(str(t), int(p)) for t, p in request["partitions"]]
            await shares.partitions.initialize(str(request["group_id"]), keys)
        elif method == "reset":
            await shares.partitions.reset(
                str(request["group_id"]),
                str(request["topic"]),
                int(request["partition"]),
                int(request["start_offset"]),
            )
        elif method == "drop":
            topic = request["topic"]
            shares.partitions.drop(str(request["group_id"]), None if topic is None else str(topic))
        else:
            raise ControllerUnavailableError(f"unknown share request {method!r}")
        return {"ok": True}

    def handle(request: dict[str, Any]) -> dict[str, Any]:
        if request.get("method") == "dead_letter":
            # No share state involved: appended on this (the channel's) thread.
            topic, partition = str(request["topic"]), int(request["partition"])
            log_dir.log(topic, partition).append(
                base64.b64decode(request["batch"]), from_client=False
            )
            state.fetch_purgatory.wake_threadsafe([(topic, partition)])
            return {"ok": True}
        future = asyncio.run_coroutine_threadsafe(serve(request), loop)
        try:
            return future.result(TIMEOUT)
        except SeglogError as exc:
            return {
                "ok": True,
                "share_error": {
                    "class": type(exc).__name__,
                    "kafka_error": exc.kafka_error,
                    "message": str(exc),
                },
            }

    node.handlers[OP] = handle
    if shares.store.exists:
        # Load the state partitions this node leads now, not when first asked: their
        # keys' leaders are waiting for it, and its pruning starts with it.
        shares.start_in_background(env)


async def _persister(local: LocalPersister, request: dict[str, Any]) -> dict[str, Any]:
    call = request["call"]
    if call == "read":
        return {"ok": True, "state": _state(await local.read(_key_of(request["key"])))}
    if call == "initialize":
        key = _key_of(request["key"])
        return {
            "ok": True,
            "state": _state(await local.initialize(key, int(request["start_offset"]))),
        }
    if call == "write":
        await local.write(_key_of(request["key"]), _update_of(request["update"]))
        return {"ok": True}
    if call == "delete":
        await local.delete(_key_of(request["key"]))
        return {"ok": True}
    if call == "keys_of":
        return {
            "ok": True,
            "keys": [_key(k) for k in await local.keys_of(str(request["group_id"]))],
        }
    raise ControllerUnavailableError(f"unknown persister call {call!r}")
