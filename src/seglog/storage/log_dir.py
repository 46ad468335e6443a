"""A log directory: every partition of every topic on this machine, and their checkpoints.

Layout (Kafka's, plus one file of seglog's own for topic definitions)::

    <log dir>/
      .lock                               held while open (flock)
      meta.properties                     node.id, cluster.id, directory.id
      .kafka_cleanshutdown                present only after a clean close
      recovery-point-offset-checkpoint    "topic partition offset" lines
      log-start-offset-checkpoint
      cleaner-offset-checkpoint
      seglog-topics.json                  topic id, partition count, config overrides,
                                          replica assignment (when recorded), and the
                                          creation or deletion under way (topic_list.py)
      <topic>-<partition>/                one Log each (see log.py)
        partition.metadata

Kafka keeps topic definitions in its metadata log; a single machine needs only
a small JSON file, written atomically (:mod:`.topic_list`); a creation or a
deletion is on record there before any directory is made or removed, so that
one cut short by a crash is taken back or finished at the next start.
Everything else is byte-for-byte what Kafka writes, so Kafka's tools can read
the partitions.

On open, the clean-shutdown marker is read and removed, as Kafka does (by a
process alone in the directory; see below); if it was absent every partition
is recovered from its recovery point. Directories left by a deleted topic
(``*-delete``) are removed.

Whoever opens a directory says which partitions this process owns
(``owns``: every one, for a process alone in it) and how it writes the
checkpoint files and reads the clean-shutdown state (``checkpoint_policy``,
:mod:`.dir_checkpoints`: whole files alone, merged under a file lock when
several processes share the directory). Only owned partitions are opened;
the others answer NotLeaderOrFollowerError. Only a directory opened with
``writes_topics`` writes the topic list (and carries out topic
administration); the others re-read it on :meth:`LogDir.refresh`.

Background work (retention, delayed file deletion, flush.ms, checkpoints and
the compaction cleaner) is driven by :meth:`LogDir.run_maintenance`, which a
caller may run on its own schedule, or by :meth:`LogDir.start_background`,
which runs it on a thread.

:class:`LogDir` is the directory's public face and owns its lifetime (the
lock, open, close) and the access to its partitions; it is composed of one
part per duty, each in its own module, sharing one
:class:`~seglog.storage._dir_state.DirState`:

    _dir_loader.DirLoader           opening at start, refresh from the topic list
    topic_admin.DiskTopicAdmin      topic administration and the topic list on disk
    dir_checkpoints.DirCheckpoints  the offset checkpoints, through the policy
    _maintenance.Maintenance        retention, flush.ms, delayed deletion, on a thread
    log_dir_settings                the settings, and what a log directory looks like
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from seglog.config import LogConfig
from seglog.errors import (
    LogDirLockedError,
    NotLeaderOrFollowerError,
    StorageError,
    UnknownTopicOrPartitionError,
)
from seglog.storage import io
from seglog.storage._dir_loader import DirLoader
from seglog.storage._dir_state import DirState, Ownership, owns_every_partition
from seglog.storage._maintenance import KeyIndexProgress, Maintenance, PendingDeletions
from seglog.storage.dir_checkpoints import (
    WHOLE_FILE_CHECKPOINTS,
    CheckpointPolicy,
    DirCheckpoints,
)
from seglog.storage.key_search import FoundRecord
from seglog.storage.log import AppendInfo, Isolation, Log, LogReadResult
from seglog.storage.log_dir_settings import LOCK_FILE as LOCK_FILE
from seglog.storage.log_dir_settings import LogDirSettings as LogDirSettings
from seglog.storage.log_dir_settings import looks_like_log_dir as looks_like_log_dir
from seglog.storage.log_dir_settings import node_id as node_id
from seglog.storage.segment import TimestampAndOffset
from seglog.storage.topic_admin import DiskTopicAdmin, Replicas
from seglog.storage.topic_admin import read_topic_list as read_topic_list
from seglog.storage.topic_admin import write_topic_list as write_topic_list
from seglog.storage.topic_list import TOPICS_FILE as TOPICS_FILE
from seglog.storage.topic_list import TopicInfo as TopicInfo

__all__ = [
    "LOCK_FILE",
    "TOPICS_FILE",
    "LogDir",
    "LogDirSettings",
    "Ownership",
    "TopicInfo",
    "looks_like_log_dir",
    "node_id",
    "owns_every_partition",
    "read_topic_list",
    "write_topic_list",
]

LOCK_PROBE_WAIT = 0.5
"""How long opening waits for a lock another node may be probing (seconds)."""


class LogDir:
    """Every partition in one directory. Open with :meth:`open`; close with :meth:`close`.

    Thread-safe: topic administration takes a lock; appends and reads go to
    the partition's :class:`Log`, which has its own.
    """

    def __init__(
        self,
        path: Path,
        defaults: LogConfig,
        settings: LogDirSettings,
        *,
        clock: Any = time.time,
        env: io.Env | None = None,
        owns: Ownership = owns_every_partition,
        checkpoint_policy: CheckpointPolicy = WHOLE_FILE_CHECKPOINTS,
        lock_file: str = LOCK_FILE,
        writes_topics: bool = True,
    ) -> None:
        self.path = path
        self._lock_file = lock_file
        self._lock_fd: int | None = None
        self._deletions = PendingDeletions(clock)
        # Every file operation of the directory, its partitions and the cleaner
        # goes through this one environment.
        self._state = DirState(
            path,
            io.env_or_default(env),
            defaults,
            settings,
            clock,
            owns,
            writes_topics,
            self._deletions.schedule,
        )
        self._checkpoints = DirCheckpoints(self._state, checkpoint_policy)
        self._topics = DiskTopicAdmin(self._state, self._checkpoints.checkpoint)
        self._loader = DirLoader(
            self._state, self._topics, checkpoint_policy, self._checkpoints.checkpoint
        )
        self._maintenance = Maintenance(self._state, self._deletions, self._checkpoints.checkpoint)
        self.cleaner: Any = None
        self.meta_properties: dict[str, str] = {}

    # ------------------------------------------------------------------ open

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        defaults: LogConfig | None = None,
        settings: LogDirSettings | None = None,
        clock: Any = time.time,
        env: io.Env | None = None,
        owns: Ownership = owns_every_partition,
        checkpoint_policy: CheckpointPolicy = WHOLE_FILE_CHECKPOINTS,
        lock_file: str = LOCK_FILE,
        writes_topics: bool = True,
    ) -> Self:
        """Open (creating if needed) the log directory at ``path`` and load every partition.

        ``env`` is the file system every partition, checkpoint and the cleaner
        use (the process's default environment when None): two directories in
        one process may run over different ones.

        ``owns`` picks the partitions this process opens (every one by
        default), ``checkpoint_policy`` how it writes the checkpoints and reads
        the clean-shutdown state (:class:`~.dir_checkpoints.WholeFileCheckpoints`
        by default: alone in the directory), ``lock_file`` is the lock it holds
        while open, and only a directory opened with ``writes_topics`` writes
        the topic list. A process sharing the directory passes all four.
        """
        env = io.env_or_default(env)
        directory = Path(path)
        env.mkdir(directory)
        log_dir = cls(
            directory,
            defaults if defaults is not None else LogConfig(),
            settings if settings is not None else LogDirSettings(),
            clock=clock,
            env=env,
            owns=owns,
            checkpoint_policy=checkpoint_policy,
            lock_file=lock_file,
            writes_topics=writes_topics,
        )
        log_dir._acquire_lock()
        try:
            log_dir.meta_properties = log_dir._loader.load()
        except BaseException:
            log_dir._release_lock()
            raise
        return log_dir

    def _acquire_lock(self) -> None:
        env = self.env
        fd = env.open(self.path / self._lock_file, os.O_RDWR | os.O_CREAT)
        try:
            locked = env.lock(fd)
            # Another node checking whether this one runs takes the lock for an instant
            # (``lock_held``); only a lock held longer than that is another process's.
            deadline = time.monotonic() + LOCK_PROBE_WAIT
            while not locked and time.monotonic() < deadline:
                time.sleep(0.01)
                locked = env.lock(fd)
        except BaseException:
            env.close(fd)
            raise
        if not locked:
            env.close(fd)
            raise LogDirLockedError(
                f"{self.path} is in use by another process (its {self._lock_file} is locked)"
            ) from None
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            self.env.unlock(self._lock_fd)
            self.env.close(self._lock_fd)
            self._lock_fd = None

    def refresh(self) -> list[tuple[str, int]]:
        """Re-read the topic list another process wrote; open and close partitions to match.

        New topics and partitions this process owns are opened (created empty
        if their directory does not exist yet), deleted topics' partitions are
        closed (their files are the writer's to remove), changed configs apply
        at once. Returns the partitions opened.
        """
        return self._loader.refresh()

    @property
    def on_partitions_closed(self) -> Callable[[list[tuple[str, int]]], None] | None:
        """Told which partitions stopped being served here, once their logs are closed.

        Called on the thread that closed them, after a deletion, a release or
        a refresh that dropped them: readers waiting on them can give up.
        """
        return self._state.on_partitions_closed

    @on_partitions_closed.setter
    def on_partitions_closed(
        self, listener: Callable[[list[tuple[str, int]]], None] | None
    ) -> None:
        self._state.on_partitions_closed = listener

    @property
    def on_topics_deleted(self) -> Callable[[list[uuid.UUID]], None] | None:
        """Told the ids of topics gone from the topic list, once their partitions are closed.

        Called on the thread that saw them go: the one that deleted a topic, or a
        refresh that found it gone (another process deleted it, or made it again
        under a new id). What is kept elsewhere by topic id can then go too.
        """
        return self._state.on_topics_deleted

    @on_topics_deleted.setter
    def on_topics_deleted(self, listener: Callable[[list[uuid.UUID]], None] | None) -> None:
        self._state.on_topics_deleted = listener

    # ---------------------------------------------------------------- topics

    @property
    def defaults(self) -> LogConfig:
        """The broker-level topic defaults in force."""
        return self._state.defaults

    @property
    def settings(self) -> LogDirSettings:
        """The engine settings in force."""
        return self._state.settings

    def serves(self, info: TopicInfo, partition: int) -> bool:
        """Whether this process owns (opens and serves) ``partition`` of ``info``."""
        return self._state.serves(info, partition)

    def serves_partition(self, topic: str, partition: int) -> bool:
        """Whether this process serves ``partition`` of ``topic`` (True for unknown topics)."""
        info = self._state.topics.get(topic)
        return info is None or self._state.serves(info, partition)

    def topic_config(self, topic: str) -> LogConfig:
        """The resolved config of ``topic``: its overrides over the broker defaults."""
        return self._state.topic_config(topic)

    def topics(self) -> dict[str, TopicInfo]:
        """A copy of every topic's definition, by name."""
        with self._state.lock:
            return {name: i.copy() for name, i in self._state.topics.items()}

    def topic(self, name: str) -> TopicInfo | None:
        """A copy of one topic's definition, or None: without copying :meth:`topics`."""
        with self._state.lock:
            i = self._state.topics.get(name)
            return None if i is None else i.copy()

    def has_topic(self, name: str) -> bool:
        """Whether ``name`` exists: the produce path's check, without copying :meth:`topics`."""
        return name in self._state.topics

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        configs: Mapping[str, object] | None = None,
        *,
        replicas: Replicas | None = None,
    ) -> TopicInfo:
        """Create a topic with ``partitions`` partitions and topic-level ``configs``.

        ``replicas(first, count)``, when given, is the replica assignment to
        record for partitions ``first`` to ``first + count - 1``; only the
        partitions this process owns are created here (the others by
        theirs, at :meth:`refresh`).

        Raises TopicExistsError, InvalidTopicError, InvalidPartitionsError or
        InvalidConfigError; nothing is created then.
        """
        return self._topics.create_topic(name, partitions, configs, replicas=replicas)

    def create_partitions(self, name: str, total: int, *, replicas: Replicas | None = None) -> None:
        """Grow ``name`` to ``total`` partitions (Kafka never shrinks a topic).

        ``replicas`` as for :meth:`create_topic`, for the new partitions.
        """
        self._topics.create_partitions(name, total, replicas=replicas)

    def alter_topic_config(
        self, name: str, set_configs: Mapping[str, object], delete_configs: Sequence[str] = ()
    ) -> LogConfig:
        """Set and remove topic-level overrides; applies to the live partitions at once."""
        result = self._topics.alter_topic_config(name, set_configs, delete_configs)
        # A key index just turned on is built by the indexer's next pass: now.
        self._maintenance.key_indexer.wake()
        return result

    def delete_topic(self, name: str) -> None:
        """Remove a topic: its directories are renamed ``*-delete`` and removed.

        The deletion is on record before the first file goes, so that one cut
        short by a crash is finished at the next start. A partition whose
        directory cannot be renamed stays (offline) and the topic with it, and a
        StorageError is raised; deleting again retries.
        """
        self._topics.delete_topic(name)

    def release_topic(self, name: str) -> None:
        """Close this process's partitions of ``name``, which another process is deleting.

        They are no longer served here; :meth:`refresh` forgets the topic once
        it is gone from the topic list.
        """
        self._topics.release_topic(name)

    def reconfigure(self, defaults: LogConfig, settings: LogDirSettings) -> None:
        """Take new broker-level topic defaults and engine settings, at once.

        Every live partition of a topic gets its overrides over the new
        defaults, so that a topic without an override of a setting follows
        the new default from its next append, roll or retention pass (Kafka's
        DynamicLogConfig). The cleaner takes its new settings at its next pass.
        """
        state = self._state
        with state.admin_lock:
            state.check_open()
            old = state.defaults
            state.defaults = defaults
            state.settings = settings
            if self.cleaner is not None:
                self.cleaner.reconfigure(settings)
            if old == defaults:
                return
            with state.lock:
                logs = list(state.logs.items())
                topics = dict(state.topics)
            configs: dict[str, LogConfig] = {}
            for (topic, _), log in logs:
                info = topics.get(topic)
                if info is None:
                    continue
                if topic not in configs:
                    configs[topic] = LogConfig.from_properties(info.overrides, defaults)
                log.update_config(configs[topic])
            self._maintenance.key_indexer.wake()

    # ------------------------------------------------------------ partitions

    def log(self, topic: str, partition: int) -> Log:
        """The partition's :class:`Log`; UnknownTopicOrPartitionError if there is none."""
        log = self._state.logs.get((topic, partition))
        if log is None:
            reason = self._state.offline.get((topic, partition))
            if reason is not None:
                raise StorageError(f"partition {partition} of topic '{topic}' is offline: {reason}")
            info = self._state.topics.get(topic)
            if info is not None and 0 <= partition < info.partitions:
                served = self.serves(info, partition)
            else:
                served = True
            if not served:
                raise NotLeaderOrFollowerError(
                    f"partition {partition} of topic '{topic}' is served by another process"
                )
            raise UnknownTopicOrPartitionError(
                f"this log directory has no partition {partition} of topic '{topic}'"
            )
        return log

    def offline(self) -> dict[tuple[str, int], str]:
        """Partitions that could not be opened at start, with the reason."""
        return dict(self._state.offline)

    def logs(self) -> dict[tuple[str, int], Log]:
        """A snapshot of every partition's log by (topic, partition)."""
        return dict(self._state.logs)

    def append(
        self, topic: str, partition: int, records: bytes | bytearray | memoryview
    ) -> AppendInfo:
        """Append record batches to one partition (see :meth:`Log.append`)."""
        return self.log(topic, partition).append(records)

    def read(
        self, topic: str, partition: int, offset: int, max_bytes: int = 1_048_576
    ) -> LogReadResult:
        """Read a file region of one partition (see :meth:`Log.read`)."""
        return self.log(topic, partition).read(offset, max_bytes)

    def read_records(
        self, topic: str, partition: int, offset: int = 0, max_bytes: int = 1_048_576
    ) -> Iterator[Any]:
        """Decoded records from ``offset`` on, up to about ``max_bytes`` of batches.

        For library users and tools; the broker sends regions instead.
        """
        from seglog.records import record as record_codec

        log = self.log(topic, partition)
        position = offset
        remaining = max_bytes
        while remaining > 0:
            result = log.read(position, remaining)
            if result.data is None:
                return
            region = result.data.region
            data = self._state.env.pread(
                region.fd, region.length, region.position, name=region.path
            )
            emitted = False
            for rec in record_codec.decode_entries(data):
                if rec.offset >= position:
                    yield rec
                    emitted = True
                    position = rec.offset + 1
            remaining -= region.length
            if not emitted:
                return

    def find(
        self,
        topic: str,
        key: bytes,
        *,
        partition: int | None = None,
        limit: int | None = None,
        start_offset: int | None = None,
        end_offset: int | None = None,
        from_ms: int | None = None,
        to_ms: int | None = None,
        isolation: Isolation = "read_uncommitted",
    ) -> list[FoundRecord]:
        """The records of ``topic`` with ``key``, newest first, at most ``limit`` (None: all).

        One partition, or every partition of the topic this directory serves,
        merged newest first by timestamp, then offset. Bounds and isolation as
        :meth:`Log.find`; KeyIndexDisabledError when the topic keeps no key index.
        """
        if partition is not None:
            return self.log(topic, partition).find(
                key,
                limit=limit,
                start_offset=start_offset,
                end_offset=end_offset,
                from_ms=from_ms,
                to_ms=to_ms,
                isolation=isolation,
            )
        info = self._state.topics.get(topic)
        if info is None:
            raise UnknownTopicOrPartitionError(f"this log directory has no topic '{topic}'")
        found: list[FoundRecord] = []
        for number in range(info.partitions):
            log = self._state.logs.get((topic, number))
            if log is None:
                if self._state.offline.get((topic, number)) is not None:
                    self.log(topic, number)  # raises: an offline partition's answer is unknown
                continue  # served by another process
            found.extend(
                log.find(
                    key,
                    limit=limit,
                    start_offset=start_offset,
                    end_offset=end_offset,
                    from_ms=from_ms,
                    to_ms=to_ms,
                    isolation=isolation,
                )
            )
        found.sort(key=lambda r: (r.timestamp, r.offset), reverse=True)
        return found if limit is None else found[:limit]

    def key_index_progress(self) -> dict[tuple[str, int], KeyIndexProgress]:
        """Per indexed partition: segments and bytes its key indexes cover, of all."""
        return self._maintenance.key_indexer.progress()

    def key_index_remaining_bytes(self) -> int:
        """Log bytes of key-indexed topics no key index covers yet (the background's work)."""
        return self._maintenance.key_indexer.remaining_bytes()

    def run_key_indexer(self) -> int:
        """One pass of the key indexer, here and now; returns the segments it indexed or wrote."""
        return self._maintenance.key_indexer.run()

    def offset_for_time(
        self, topic: str, partition: int, timestamp: int
    ) -> TimestampAndOffset | None:
        """ListOffsets: first record at or after ``timestamp`` (-1 latest, -2 earliest)."""
        return self.log(topic, partition).find_offset_by_timestamp(timestamp)

    # ------------------------------------------------------- background work

    def run_pending_deletions(self, now_ms: int | None = None) -> int:
        """Unlink ``.deleted`` segments whose delay has passed; returns how many."""
        return self._deletions.run(now_ms)

    def run_retention(self, now_ms: int | None = None) -> int:
        """Apply every partition's retention rules; returns segments removed."""
        return self._maintenance.run_retention(now_ms)

    def checkpoint(self) -> None:
        """Write the recovery-point and log-start-offset checkpoint files.

        A failed write leaves the old ones; any I/O error but a lack of space
        takes every partition offline (see :meth:`.DirCheckpoints.checkpoint`).
        """
        self._checkpoints.checkpoint()

    def merge_checkpoint(self, name: str, entries: Mapping[tuple[str, int], int]) -> None:
        """Replace this process's lines of the offset checkpoint ``name`` with ``entries``.

        The checkpoint policy decides what becomes of the other lines
        (:mod:`.dir_checkpoints`): none alone, other owners' kept when shared.
        """
        self._checkpoints.merge(name, entries)

    def run_maintenance(self, now_ms: int | None = None) -> None:
        """One pass of every background duty whose interval has passed."""
        self._maintenance.run(now_ms)

    def start_background(self, tick_seconds: float = 1.0) -> None:
        """Run maintenance (and the cleaner, if enabled) on background threads."""
        if self._maintenance.started:
            return
        if self.settings.log_cleaner_enable:
            from seglog.storage.cleaner import LogCleaner

            self.cleaner = LogCleaner(self, clock=self._state.clock)
        self._maintenance.start(tick_seconds, self.cleaner)

    # ------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Flush and close every partition, write checkpoints and the clean-shutdown marker."""
        state = self._state
        with state.admin_lock:
            if state.closed:
                return
            self._maintenance.stop()
            failure: StorageError | None = None
            for log in state.logs.values():
                try:
                    log.close()
                except StorageError as exc:
                    failure = failure or exc
            self._deletions.run(now_ms=2**62)
            try:
                self._checkpoints.checkpoint()
                # A partition taken offline by an I/O error is recovered by the
                # next start, as after a crash: no clean-shutdown marker then.
                offline = [log for log in state.logs.values() if log.offline_reason is not None]
                if failure is None and not offline:
                    self._checkpoints.policy.closed_cleanly(self.path, state.env)
            finally:
                state.closed = True
                self._release_lock()
            if failure is not None:
                raise failure

    @property
    def env(self) -> io.Env:
        """The environment every file operation of this directory goes through."""
        return self._state.env

    @property
    def had_clean_shutdown(self) -> bool:
        """Whether the previous close of this directory was clean."""
        return self._state.had_clean_shutdown

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
