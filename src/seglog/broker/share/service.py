"""The broker's share groups in one place: the share coordinator, share-partitions, sessions.

:class:`ShareService` is what the handlers reach share groups through. The
share coordinator's topic, ``__share_group_state``, is created and loaded on
first use (a broker whose clients never use share groups never has it), as
``__consumer_offsets`` is on a group's first request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Protocol

from seglog.broker.blocking import run_blocking
from seglog.broker.group_config import GroupConfigs, resolved
from seglog.broker.share.dead_letters import DeadLetters
from seglog.broker.share.partitions import GroupShareSettings, Key, SharePartitions
from seglog.broker.share.persister import LocalPersister
from seglog.broker.share.sessions import ShareSession, ShareSessions
from seglog.config import BrokerConfig
from seglog.coordinator.requests import Cancellable
from seglog.share.state_store import STATE_TOPIC, ShareStateStore
from seglog.storage import io
from seglog.storage.log_dir import LogDir
from seglog.storage.topic_admin import TopicAdministration

logger = logging.getLogger(__name__)


class SharePeers(Protocol):
    """The other nodes of ``seglog serve --nodes N``, as share groups use them."""

    def is_local(self, topic: str, partition: int) -> bool:
        """Whether this node leads ``topic``-``partition``."""
        ...

    async def assigned(self, group_id: str, partitions: list[Key]) -> None:
        """Have the leaders of ``partitions`` (other nodes) initialize ``group_id`` there."""
        ...

    async def reset(self, group_id: str, topic: str, partition: int, start_offset: int) -> None:
        """Start ``group_id`` over at ``start_offset`` on the partition's leader."""
        ...

    async def drop(self, group_id: str, topic: str | None) -> None:
        """The other nodes forget ``group_id``'s share-partitions (of ``topic``) in memory."""
        ...


class ShareService:
    """Share groups on this broker: state store, share-partitions and share sessions."""

    def __init__(
        self,
        log_dir: LogDir,
        *,
        broker_props: Callable[[], Mapping[str, str]],
        group_configs: GroupConfigs,
        topic_admin: TopicAdministration,
        wake: Callable[[list[Key]], None],
    ) -> None:
        self._broker_props = broker_props
        self._group_configs = group_configs
        self._cache: dict[str, GroupShareSettings] = {}
        group_configs.on_change(self._cache.clear)
        self.store = ShareStateStore(
            log_dir,
            BrokerConfig(broker_props()),
            now_ms=lambda: int(time.time() * 1000),
            topic_admin=topic_admin,
        )
        self._started = False
        self.dead_letters = DeadLetters(
            log_dir,
            topic_admin,
            broker_config=lambda: BrokerConfig(broker_props()),
            notify=wake,
        )
        self._lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        with contextlib.suppress(RuntimeError):  # made outside a loop: set by start()
            self._loop = asyncio.get_running_loop()
        self._maintenance: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.partitions = SharePartitions(
            log_dir,
            LocalPersister(self.store, log_dir.env),
            settings=self.settings,
            now_ms=lambda: int(time.time() * 1000),
            call_later=_call_later,
            wake=wake,
            dead_letter=self.dead_letters,
        )
        self.sessions = ShareSessions(self._max_sessions, self._session_closed)
        #: The other nodes (None: a broker alone, which leads every partition).
        self.peers: SharePeers | None = None

    def ensure_started(self) -> None:
        """Create and load ``__share_group_state`` on first use (blocking: it reads the log)."""
        if not self._started:
            self.store.start()
            self._started = True

    async def start(self, env: io.Env) -> None:
        """:meth:`ensure_started` off the event loop, once, whoever asks first."""
        if self._started:
            return
        self._loop = asyncio.get_running_loop()
        async with self._lock:
            if not self._started:
                await run_blocking(env, self.store.start)
                self._started = True
                self._maintenance = asyncio.get_running_loop().create_task(self._maintain())

    async def _maintain(self) -> None:
        """Kafka's share coordinator timers: snapshot cold share-partitions, prune the log."""
        config = BrokerConfig(self._broker_props())
        prune_every = int(config["share.coordinator.state.topic.prune.interval.ms"]) / 1000
        cold_every = int(config["share.coordinator.cold.partition.snapshot.interval.ms"]) / 1000
        next_prune = next_cold = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= next_cold:
                next_cold = now + cold_every
                self._quietly(self.store.snapshot_cold, "snapshot cold share-partitions")
            if now >= next_prune:
                next_prune = now + prune_every
                self._quietly(self.store.prune, "prune __share_group_state")
            await asyncio.sleep(max(min(next_prune, next_cold) - time.monotonic(), 0.0))

    def start_in_background(self, env: io.Env) -> None:
        """:meth:`start` from a task of its own (a node whose state partitions exist)."""
        self._background(self.start(env), "cannot load __share_group_state")

    @staticmethod
    def _quietly(action: Callable[[], None], what: str) -> None:
        try:
            action()
        except Exception:
            logger.exception("cannot %s", what)

    def on_assigned(self, env: io.Env, group_id: str, partitions: list[Key]) -> None:
        """Partitions entered ``group_id``'s assignment: give it a start there (in the
        background; a member's first fetch waits for the same start if it comes first)."""
        self._background(self._initialize(env, group_id, partitions))

    async def _initialize(self, env: io.Env, group_id: str, partitions: list[Key]) -> None:
        await self.start(env)
        peers = self.peers
        if peers is not None:
            # Each partition's state is started by its leader, where its members fetch.
            await peers.assigned(group_id, partitions)
            partitions = [(t, p) for t, p in partitions if peers.is_local(t, p)]
        await self.partitions.initialize(group_id, partitions)

    def partitions_closed_threadsafe(self, keys: list[tuple[str, int]]) -> None:
        """Partitions no longer served here (any thread): their share-partitions go."""
        self._soon(lambda: self.partitions.forget_partitions(keys))

    def topics_deleted_threadsafe(self, env: io.Env, topic_ids: list[uuid.UUID]) -> None:
        """Topics went (any thread): their state goes too."""
        self._soon(
            lambda: self._background(
                self._forget_topics(env, set(topic_ids)),
                "cannot delete the share state of deleted topics",
            )
        )

    def _soon(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` on the event loop that serves the share groups, from any thread."""
        loop = self._loop
        if loop is None:
            return  # never on a loop: no share-partition or state of it to change
        with contextlib.suppress(RuntimeError):  # the loop has closed: nothing to do
            loop.call_soon_threadsafe(callback)

    async def _forget_topics(self, env: io.Env, topic_ids: set[uuid.UUID]) -> None:
        """Tombstone the state this process keeps for ``topic_ids`` (Kafka's share
        coordinator does it when a topic goes: ``maybeCleanupShareState``)."""
        if not self._started:
            if not self.store.log_dir.has_topic(STATE_TOPIC):
                return  # no share group ever kept state here
            await self.start(env)
        for key in self.store.keys_of_topics(topic_ids):
            self.store.delete(key)

    def on_deleted(self, env: io.Env, group_id: str) -> None:
        """DeleteGroups removed the share group ``group_id``: forget its state (background)."""
        self._background(self._forget(env, group_id))

    async def _forget(self, env: io.Env, group_id: str) -> None:
        await self.start(env)
        # The other nodes first: a share-partition left in memory could write its state again.
        if self.peers is not None:
            await self.peers.drop(group_id, None)
        await self.partitions.forget_group(group_id)

    async def reset(self, group_id: str, topic: str, partition: int, start_offset: int) -> None:
        """Start ``group_id`` over at ``start_offset`` in a partition (on its leader)."""
        if self.peers is not None and not self.peers.is_local(topic, partition):
            await self.peers.reset(group_id, topic, partition, start_offset)
        else:
            await self.partitions.reset(group_id, topic, partition, start_offset)

    async def forget_topic_of_group(self, group_id: str, topic: str) -> None:
        """Delete ``group_id``'s state in ``topic``; every node forgets it in memory."""
        if self.peers is not None:
            await self.peers.drop(group_id, topic)
        await self.partitions.forget_topic_of_group(group_id, topic)

    def _background(
        self,
        work: Coroutine[Any, Any, None],
        failure: str = "a share group's state could not be changed",
    ) -> None:
        async def run() -> None:
            try:
                await work
            except Exception:
                logger.exception(failure)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def settings(self, group_id: str) -> GroupShareSettings:
        """``group_id``'s share settings: its group configs over the broker's."""
        found = self._cache.get(group_id)
        if found is None:
            values = resolved(self._broker_props(), self._group_configs.of(group_id))
            found = self._cache[group_id] = GroupShareSettings(
                record_lock_duration_ms=int(values["share.record.lock.duration.ms"]),
                delivery_count_limit=int(values["share.delivery.count.limit"]),
                max_record_locks=int(values["share.partition.max.record.locks"]),
                auto_offset_reset=str(values["share.auto.offset.reset"]),
                read_committed=values["share.isolation.level"] == "read_committed",
                dead_letter_topic=str(values["errors.deadletterqueue.topic.name"]),
                dead_letter_copy_record=bool(values["errors.deadletterqueue.copy.record.enable"]),
            )
        return found

    def broker_changed(self) -> None:
        """The broker's configs changed: group settings are worked out again."""
        self._cache.clear()

    def _max_sessions(self) -> int:
        return int(BrokerConfig(self._broker_props())["group.share.max.share.sessions"])

    def _session_closed(self, session: ShareSession) -> None:
        topics = self.partitions.log_dir.topics()
        names = {info.topic_id: name for name, info in topics.items()}
        keys = [
            (names[topic_id], index) for topic_id, index in session.partitions if topic_id in names
        ]
        self.partitions.release_member(session.group_id, session.member_id, keys)

    def close(self) -> None:
        """Cancel every lock timer and the share coordinator's timers (shutdown)."""
        if self._maintenance is not None:
            self._maintenance.cancel()
        self.partitions.close()


def _call_later(delay: float, callback: Callable[[], None]) -> Cancellable:
    return asyncio.get_running_loop().call_later(delay, callback)
