"""What the parts of a log directory share: its topics, its open partitions, and their locks.

A :class:`~seglog.storage.log_dir.LogDir` is composed of parts that each own
one duty (opening at start, topic administration, checkpoints, background
work); they all read and change the one :class:`DirState` the directory was
built with, and only under its locks:

- ``admin_lock`` serialises whatever changes the set of topics or partitions
  (administration, refresh, close); it is held across file work, which may
  take a while on a worker thread.
- ``lock`` guards the maps below and is only ever held for a moment, so that
  readers on the event loop (Metadata, Produce) never wait for a creation's
  files.

Here too is what every part needs to open a partition the same way: the
resolved config of a topic, the ownership check, and :meth:`DirState.open_log`.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seglog.config import LogConfig
from seglog.errors import StorageError
from seglog.storage import checkpoints, filenames, io
from seglog.storage.log import Log
from seglog.storage.log_dir_settings import LogDirSettings
from seglog.storage.segment import LogSegment
from seglog.storage.topic_list import TopicInfo

Key = tuple[str, int]

Ownership = Callable[[TopicInfo, int], bool]
"""``owns(info, partition)``: whether this process owns (opens and serves) a partition."""

#: ``schedule(segments, delay_ms)``: delete segments renamed ``.deleted`` after a delay.
DeleteScheduler = Callable[[Sequence[LogSegment], int], None]


def owns_every_partition(info: TopicInfo, partition: int) -> bool:
    """The ownership of a process alone in its directory: every partition."""
    return True


@dataclass(eq=False)
class DirState:
    """One log directory's topics and partitions, as every part of it sees them."""

    path: Path
    env: io.Env
    defaults: LogConfig
    settings: LogDirSettings
    clock: Any
    owns: Ownership
    #: Whether this process writes the topic list (and carries out administration).
    writes_topics: bool
    #: Where partitions hand the segments they drop (the directory's background work).
    delete_scheduler: DeleteScheduler
    admin_lock: threading.RLock = field(default_factory=threading.RLock)
    lock: threading.RLock = field(default_factory=threading.RLock)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    logs: dict[Key, Log] = field(default_factory=dict)
    #: Partitions that could not be opened at start, with the reason: they answer
    #: KAFKA_STORAGE_ERROR (Kafka's offline partitions) while the rest are served.
    offline: dict[Key, str] = field(default_factory=dict)
    #: Their checkpoint entries, kept as read so that a later start still has them.
    offline_recovery: dict[Key, int] = field(default_factory=dict)
    offline_start: dict[Key, int] = field(default_factory=dict)
    #: Topics seen deleted while open: their checkpoint lines go at the next merge.
    forgotten: set[str] = field(default_factory=set)
    had_clean_shutdown: bool = False
    closed: bool = False
    #: Told which partitions stopped being served here once their logs are
    #: closed (a deletion, a release, a refresh that dropped them), on the
    #: thread that closed them: readers waiting on them can give up.
    on_partitions_closed: Callable[[list[Key]], None] | None = None
    #: Told the ids of topics gone from the topic list (deleted here, or by another
    #: process and seen at a refresh), on the thread that saw them go.
    on_topics_deleted: Callable[[list[uuid.UUID]], None] | None = None

    def partitions_closed(self, keys: list[Key]) -> None:
        """Tell :attr:`on_partitions_closed` that the logs of ``keys`` are closed."""
        listener = self.on_partitions_closed
        if listener is not None and keys:
            listener(keys)

    def topics_deleted(self, topic_ids: list[uuid.UUID]) -> None:
        """Tell :attr:`on_topics_deleted` that the topics of ``topic_ids`` are gone."""
        listener = self.on_topics_deleted
        if listener is not None and topic_ids:
            listener(topic_ids)

    def check_open(self) -> None:
        """StorageError once the directory is closed."""
        if self.closed:
            raise StorageError(f"the log directory {self.path} is closed")

    def serves(self, info: TopicInfo, partition: int) -> bool:
        """Whether this process owns (opens and serves) ``partition`` of ``info``."""
        return self.owns(info, partition)

    def topic_config(self, topic: str) -> LogConfig:
        """The resolved config of ``topic``: its overrides over the broker defaults."""
        info = self.topics.get(topic)
        overrides = info.overrides if info is not None else {}
        return LogConfig.from_properties(overrides, self.defaults)

    def open_log(
        self,
        directory: Path,
        topic: str,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        had_clean_shutdown: bool,
    ) -> Log:
        """Open (recovering as needed) the partition in ``directory`` of ``topic``."""
        return Log.open(
            directory,
            self.topic_config(topic),
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            had_clean_shutdown=had_clean_shutdown,
            clock=self.clock,
            delete_scheduler=self.delete_scheduler,
            producer_id_expiration_ms=self.settings.producer_id_expiration_ms,
            env=self.env,
        )

    def create_log(self, info: TopicInfo, partition: int) -> Log:
        """Create partition ``partition`` of ``info``, empty, with its ``partition.metadata``."""
        directory = self.path / filenames.partition_dir_name(info.name, partition)
        log = Log.open(
            directory,
            LogConfig.from_properties(info.overrides, self.defaults),
            had_clean_shutdown=True,
            clock=self.clock,
            delete_scheduler=self.delete_scheduler,
            producer_id_expiration_ms=self.settings.producer_id_expiration_ms,
            env=self.env,
        )
        checkpoints.write_partition_metadata(directory, info.topic_id, env=self.env)
        # The new directory's name is durable only once the log directory is
        # synced, which writing the topic list (after the partitions exist, and
        # before any append) does: test_power_cut checks it.
        return log
