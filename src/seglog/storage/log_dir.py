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

On open, the clean-shutdown marker is read and removed, as Kafka does; if it
was absent every partition is recovered from its recovery point. Directories
left by a deleted topic (``*-delete``) are removed.

Several processes may share one directory, each serving some of its
partitions (one broker node per core): each is opened with a predicate naming
the partitions it serves (``serves``), its own lock file, and the clean-shutdown
state decided by whoever supervises them. Such a process opens only its
partitions, answers NotLeaderOrFollowerError for the others, merges its lines
into the shared checkpoint files under a file lock (never dropping another
process's lines), and re-reads the topic list on :meth:`LogDir.refresh`. Only
the one opened with ``writes_topics`` writes the topic list.

Background work (retention, delayed file deletion, flush.ms, checkpoints and
the compaction cleaner) is driven by :meth:`LogDir.run_maintenance`, which a
caller may run on its own schedule, or by :meth:`LogDir.start_background`,
which runs it on a thread.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import heapq
import itertools
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from seglog.config import DOUBLE_MAX, BrokerConfig, LogConfig
from seglog.errors import (
    InvalidPartitionsError,
    InvalidTopicError,
    LogDirLockedError,
    NotLeaderOrFollowerError,
    StorageError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from seglog.storage import checkpoints, descriptors, filenames, io, reader, topic_list
from seglog.storage.log import AppendInfo, Log, LogReadResult
from seglog.storage.segment import LogSegment, TimestampAndOffset
from seglog.storage.topic_list import TOPICS_FILE as TOPICS_FILE
from seglog.storage.topic_list import TopicInfo as TopicInfo

logger = logging.getLogger(__name__)

_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
LOCK_FILE = ".lock"
CHECKPOINT_LOCK_FILE = ".checkpoint.lock"
"""Held (flock) while a process sharing the directory merges its lines into a checkpoint."""


@dataclass(frozen=True, slots=True)
class LogDirSettings:
    """Broker-level settings of the storage engine, under Kafka's names."""

    log_retention_check_interval_ms: int = 300_000
    log_flush_offset_checkpoint_interval_ms: int = 60_000
    log_flush_start_offset_checkpoint_interval_ms: int = 60_000
    log_flush_scheduler_interval_ms: int = 1_000
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15_000
    log_cleaner_dedupe_buffer_size: int = 134_217_728
    log_cleaner_io_max_bytes_per_second: float = DOUBLE_MAX
    num_partitions: int = 1
    node_id: int = 1
    producer_id_expiration_ms: int = 86_400_000
    producer_id_expiration_check_interval_ms: int = 600_000

    @classmethod
    def from_properties(cls, properties: Mapping[str, object]) -> LogDirSettings:
        """Read the settings from ``server.properties``-style keys; others are ignored.

        Each field is the Kafka name with dots as underscores; values are parsed
        and validated by the configuration table (InvalidConfigError if bad).
        """
        config = properties if isinstance(properties, BrokerConfig) else BrokerConfig(properties)
        values: dict[str, Any] = {
            name: config[name.replace("_", ".")]
            for name in cls.__dataclass_fields__
            if name != "node_id"
        }
        values["node_id"] = node_id(config)
        return cls(**values)


_LOG_DIR_MARKERS = (
    checkpoints.META_PROPERTIES_FILE,
    checkpoints.RECOVERY_POINT_CHECKPOINT,
    checkpoints.LOG_START_OFFSET_CHECKPOINT,
    checkpoints.CLEANER_OFFSET_CHECKPOINT,
    checkpoints.REPLICATION_OFFSET_CHECKPOINT,
    checkpoints.CLEAN_SHUTDOWN_FILE,
    TOPICS_FILE,
    LOCK_FILE,
)


def looks_like_log_dir(path: Path, extra_markers: Sequence[str] = ()) -> bool:
    """Whether ``path`` holds what a seglog or Kafka broker writes in a log directory.

    That is its ``meta.properties``, a checkpoint, seglog's topic list or lock,
    one of ``extra_markers`` (files of the layers above), or a partition folder
    with a segment or Kafka's ``partition.metadata`` in it (a folder name alone
    proves little: ``/etc/dbus-1`` has the shape of one).
    """
    if not path.is_dir():
        return False
    if any((path / name).exists() for name in (*_LOG_DIR_MARKERS, *extra_markers)):
        return True
    for partition in reader.partition_dirs(path).values():
        if (partition / checkpoints.PARTITION_METADATA_FILE).exists():
            return True
        with contextlib.suppress(OSError):
            if reader.segment_bases(partition):
                return True
    return False


def node_id(config: BrokerConfig) -> int:
    """``node.id``, else the older ``broker.id``, else 1."""
    if config.is_set("node.id") or not config.is_set("broker.id"):
        return int(config["node.id"])
    return int(config["broker.id"])


Serves = Callable[[TopicInfo, int], bool]
"""Whether this process serves partition ``partition`` of a topic."""


@dataclass(order=True)
class _PendingDeletion:
    due_ms: int
    sequence: int
    segments: Sequence[LogSegment] = field(compare=False)


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
        serves: Serves | None = None,
        lock_file: str = LOCK_FILE,
        clean_shutdown: bool | None = None,
        writes_topics: bool = True,
    ) -> None:
        # Every file operation of the directory, its partitions and the cleaner
        # goes through this one environment.
        self._env = io.env_or_default(env)
        self.path = path
        self.defaults = defaults
        self.settings = settings
        self._clock = clock
        # Two locks: _admin_lock serialises topic administration, which does file
        # work and may run on a worker thread for a while; _lock guards the maps of
        # topics and partitions and is only ever held for a moment, so that readers
        # on the event loop (Metadata, Produce) never wait for a creation's files.
        self._admin_lock = threading.RLock()
        self._lock = threading.RLock()
        self._checkpoint_lock = threading.Lock()
        self._topics: dict[str, TopicInfo] = {}
        self._logs: dict[tuple[str, int], Log] = {}
        # Partitions that could not be opened at start, with the reason: they answer
        # KAFKA_STORAGE_ERROR (Kafka's offline partitions) while the rest are served.
        self._offline: dict[tuple[str, int], str] = {}
        # Their checkpoint entries, kept as read so that a later start still has them.
        self._offline_recovery: dict[tuple[str, int], int] = {}
        self._offline_start: dict[tuple[str, int], int] = {}
        self._pending: list[_PendingDeletion] = []
        self._pending_lock = threading.Lock()
        self._sequence = itertools.count()
        self._lock_fd: int | None = None
        self._closed = False
        self._had_clean_shutdown = False
        self._last_run: dict[str, int] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.cleaner: Any = None
        self.meta_properties: dict[str, str] = {}
        # Sharing the directory with other processes (see the module docstring).
        self._serves = serves
        self._lock_file = lock_file
        self._given_clean_shutdown = clean_shutdown
        self._writes_topics = writes_topics
        # Topics seen deleted while open: their checkpoint lines go at the next merge.
        self._forgotten: set[str] = set()
        #: Told which partitions stopped being served here once their logs are
        #: closed (a deletion, a release, a refresh that dropped them), on the
        #: thread that closed them: readers waiting on them can give up.
        self.on_partitions_closed: Callable[[list[tuple[str, int]]], None] | None = None

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
        serves: Serves | None = None,
        lock_file: str = LOCK_FILE,
        clean_shutdown: bool | None = None,
        writes_topics: bool = True,
    ) -> Self:
        """Open (creating if needed) the log directory at ``path`` and load every partition.

        ``env`` is the file system every partition, checkpoint and the cleaner
        use (the process's default environment when None): two directories in
        one process may run over different ones.

        For a process sharing the directory with others: ``serves`` picks the
        partitions it opens (all when None), ``lock_file`` is its own lock,
        ``clean_shutdown`` says whether its partitions were closed cleanly
        (None: the clean-shutdown marker says, and is consumed and written
        here; otherwise the marker is left alone), and only the process opened
        with ``writes_topics`` writes the topic list.
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
            serves=serves,
            lock_file=lock_file,
            clean_shutdown=clean_shutdown,
            writes_topics=writes_topics,
        )
        log_dir._acquire_lock()
        try:
            log_dir._load()
        except BaseException:
            log_dir._release_lock()
            raise
        return log_dir

    def _acquire_lock(self) -> None:
        fd = self._env.open(self.path / self._lock_file, os.O_RDWR | os.O_CREAT)
        try:
            locked = self._env.lock(fd)
        except BaseException:
            self._env.close(fd)
            raise
        if not locked:
            self._env.close(fd)
            raise LogDirLockedError(
                f"{self.path} is in use by another process (its {self._lock_file} is locked)"
            ) from None
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            self._env.unlock(self._lock_fd)
            self._env.close(self._lock_fd)
            self._lock_fd = None

    def _load(self) -> None:
        meta = checkpoints.read_meta_properties(self.path, env=self._env)
        if not meta:
            checkpoints.write_meta_properties(
                self.path,
                node_id=self.settings.node_id,
                cluster_id=_base64_uuid(uuid.uuid4()),
                directory_id=uuid.uuid4(),
                env=self._env,
            )
        self.meta_properties = checkpoints.read_meta_properties(self.path, env=self._env)
        if self._given_clean_shutdown is None:
            self._had_clean_shutdown = checkpoints.consume_clean_shutdown(self.path, env=self._env)
        else:
            self._had_clean_shutdown = self._given_clean_shutdown
        recorded = self._read_topics()
        unfinished = {name for name, info in recorded.items() if info.unfinished}
        if self._writes_topics:
            self._finish_unfinished(recorded)
        self._topics = topic_list.committed(recorded)
        recovery_points = checkpoints.read_offset_checkpoint(
            self.path / checkpoints.RECOVERY_POINT_CHECKPOINT, env=self._env
        )
        start_offsets = checkpoints.read_offset_checkpoint(
            self.path / checkpoints.LOG_START_OFFSET_CHECKPOINT, env=self._env
        )
        # The partitions are what Kafka's reader of these files says they are.
        partitions = reader.partition_dirs(self.path)
        if not self._had_clean_shutdown and partitions:
            logger.warning("%s was not shut down cleanly: recovering its partitions", self.path)
        for name in sorted(self._env.listdir(self.path)):
            if name.endswith(filenames.DELETE_DIR_SUFFIX) and self._writes_topics:
                # A deletion that a crash interrupted: finish it.
                self._env.rmtree(self.path / name)
        for (topic, partition), entry in sorted(partitions.items(), key=lambda item: item[1]):
            info = self._topics.get(topic)
            if topic in unfinished and (info is None or partition >= info.partitions):
                continue  # the writer of the topic list finishes its change
            if info is None:
                # A partition directory written by Kafka or copied in: adopt it.
                info = TopicInfo(topic, uuid.uuid4(), 0)
                self._topics[topic] = info
            info.partitions = max(info.partitions, partition + 1)
            key = (topic, partition)
            if not self.serves(info, partition):
                continue
            recovery_point = recovery_points.get(key, 0)
            start_offset = start_offsets.get(key, 0)

            def open_existing(
                entry: Path = entry,
                key: tuple[str, int] = key,
                rp: int = recovery_point,
                so: int = start_offset,
            ) -> Log:
                return Log.open(
                    entry,
                    self.topic_config(key[0]),
                    recovery_point=rp,
                    log_start_offset=so,
                    had_clean_shutdown=self._had_clean_shutdown,
                    clock=self._clock,
                    delete_scheduler=self._schedule_deletion,
                    producer_id_expiration_ms=self.settings.producer_id_expiration_ms,
                    env=self._env,
                )

            self._open_at_start(key, open_existing)
        # Partitions a topic declares but whose directory is gone are created empty.
        self._open_declared()
        for key in self._offline:
            if key in recovery_points:
                self._offline_recovery[key] = recovery_points[key]
            if key in start_offsets:
                self._offline_start[key] = start_offsets[key]
        if self._writes_topics:
            self._write_topics()
        self.checkpoint()

    def serves(self, info: TopicInfo, partition: int) -> bool:
        """Whether this process serves ``partition`` of ``info`` (all, unless shared)."""
        return self._serves is None or self._serves(info, partition)

    def serves_partition(self, topic: str, partition: int) -> bool:
        """Whether this process serves ``partition`` of ``topic`` (True for unknown topics)."""
        info = self._topics.get(topic)
        return info is None or self.serves(info, partition)

    def _open_declared(self) -> list[tuple[str, int]]:
        """Open (creating empty) the served partitions the topics declare and lack; their keys."""
        opened = []
        for info in list(self._topics.values()):
            for partition in range(info.partitions):
                key = (info.name, partition)
                if key in self._logs or key in self._offline or not self.serves(info, partition):
                    continue
                directory = self.path / filenames.partition_dir_name(info.name, partition)
                if directory.exists():
                    recovery = checkpoints.read_offset_checkpoint(
                        self.path / checkpoints.RECOVERY_POINT_CHECKPOINT, env=self._env
                    )

                    def open_existing(
                        directory: Path = directory, key: tuple[str, int] = key, rp: int = 0
                    ) -> Log:
                        return Log.open(
                            directory,
                            self.topic_config(key[0]),
                            recovery_point=rp,
                            had_clean_shutdown=False,
                            clock=self._clock,
                            delete_scheduler=self._schedule_deletion,
                            producer_id_expiration_ms=self.settings.producer_id_expiration_ms,
                            env=self._env,
                        )

                    opener: Callable[[], Log] = functools.partial(
                        open_existing, rp=recovery.get(key, 0)
                    )
                else:
                    opener = functools.partial(self._create_log, info, partition)
                self._open_at_start(key, opener)
                opened.append(key)
        return opened

    def refresh(self) -> list[tuple[str, int]]:
        """Re-read the topic list another process wrote; open and close partitions to match.

        New topics and partitions this process serves are opened (created
        empty if their directory does not exist yet), deleted topics' partitions
        are closed (their files are the writer's to remove), changed configs
        apply at once. Returns the partitions opened.
        """
        with self._admin_lock:
            self._check_open()
            fresh = topic_list.committed(self._read_topics())
            with self._lock:
                gone = [name for name in self._topics if name not in fresh]
                closing = [(key, log) for key, log in self._logs.items() if key[0] in gone] + [
                    (key, log)
                    for key, log in self._logs.items()
                    if key[0] in fresh and fresh[key[0]].topic_id != self._topics[key[0]].topic_id
                ]
                for key, _log in closing:
                    del self._logs[key]
                for name in gone:
                    self._forgotten.add(name)
                    for key in [k for k in self._offline if k[0] == name]:
                        del self._offline[key]
                changed = [
                    name
                    for name, info in fresh.items()
                    if name in self._topics and info.overrides != self._topics[name].overrides
                ]
                self._topics = fresh
                for name in fresh:
                    self._forgotten.discard(name)
            for _key, closed in closing:
                try:
                    closed.close()
                except StorageError as exc:
                    logger.error("cannot close %s: %s", closed.directory, exc)
            if closing:
                self._closed_partitions([key for key, _log in closing])
            for name in changed:
                config = self.topic_config(name)
                for partition in range(fresh[name].partitions):
                    log = self._logs.get((name, partition))
                    if log is not None:
                        log.update_config(config)
            opened = self._open_declared()
            if opened or closing:
                self.checkpoint()
            return opened

    def _open_at_start(self, key: tuple[str, int], opener: Callable[[], Log]) -> None:
        """Open one partition; a failure marks it offline instead of refusing the start."""
        try:
            self._logs[key] = opener()
        except Exception as exc:
            # Kafka takes a failed log directory offline and serves the rest; one
            # directory holds every partition here, so the unit is the partition.
            topic, partition = key
            logger.error(
                "partition %d of topic %s cannot be opened; it is offline until the broker "
                "is restarted with the problem fixed: %s",
                partition,
                topic,
                exc,
                exc_info=exc,
            )
            self._offline[key] = f"it could not be opened at start: {type(exc).__name__}: {exc}"

    # ---------------------------------------------------------------- topics

    def _read_topics(self) -> dict[str, TopicInfo]:
        """Every topic the topic list records, unfinished creations and deletions included."""
        path = self.path / TOPICS_FILE
        data = self._env.read_file(path)
        return {} if data is None else topic_list.decode(data, path)

    def _write_topics(self, change: TopicInfo | None = None) -> None:
        """Write the topic list: the topics as they are, with ``change`` (under way) over them."""
        with self._lock:
            topics = dict(self._topics)
        if change is not None:
            topics[change.name] = change
        self._env.atomic_write_text(self.path / TOPICS_FILE, topic_list.encode(topics))

    def _finish_unfinished(self, recorded: dict[str, TopicInfo]) -> None:
        """Take back the creations and finish the deletions a crash cut short."""
        changed = False
        for name, info in sorted(recorded.items()):
            if not info.unfinished:
                continue
            changed = True
            before = None if info.deleting else info.before_creation()
            first = 0 if before is None else before.partitions
            for partition in range(first, info.partitions):
                directory = self.path / filenames.partition_dir_name(name, partition)
                if directory.exists():
                    self._env.rmtree(directory, ignore_errors=False)
            if info.deleting:
                logger.warning("finishing the deletion of topic %s, cut short", name)
            else:
                logger.warning(
                    "taking back the creation of %s, cut short: partitions %d to %d removed",
                    f"topic {name}" if before is None else f"partitions of topic {name}",
                    first,
                    info.partitions - 1,
                )
            if before is None:
                del recorded[name]
            else:
                recorded[name] = before
        if changed:
            self._env.fsync_dir(self.path)

    def topic_config(self, topic: str) -> LogConfig:
        """The resolved config of ``topic``: its overrides over the broker defaults."""
        info = self._topics.get(topic)
        overrides = info.overrides if info is not None else {}
        return LogConfig.from_properties(overrides, self.defaults)

    def topics(self) -> dict[str, TopicInfo]:
        """A copy of every topic's definition, by name."""
        with self._lock:
            return {name: i.copy() for name, i in self._topics.items()}

    def topic(self, name: str) -> TopicInfo | None:
        """A copy of one topic's definition, or None: without copying :meth:`topics`."""
        with self._lock:
            i = self._topics.get(name)
            return None if i is None else i.copy()

    def has_topic(self, name: str) -> bool:
        """Whether ``name`` exists: the produce path's check, without copying :meth:`topics`."""
        return name in self._topics

    def _create_log(self, info: TopicInfo, partition: int) -> Log:
        directory = self.path / filenames.partition_dir_name(info.name, partition)
        log = Log.open(
            directory,
            LogConfig.from_properties(info.overrides, self.defaults),
            had_clean_shutdown=True,
            clock=self._clock,
            delete_scheduler=self._schedule_deletion,
            producer_id_expiration_ms=self.settings.producer_id_expiration_ms,
            env=self._env,
        )
        checkpoints.write_partition_metadata(directory, info.topic_id, env=self._env)
        # The new directory's name is durable only once the log directory is
        # synced, which writing the topic list (after the partitions exist, and
        # before any append) does: test_power_cut checks it.
        return log

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        configs: Mapping[str, object] | None = None,
        *,
        replicas: Callable[[int, int], list[list[int]]] | None = None,
    ) -> TopicInfo:
        """Create a topic with ``partitions`` partitions and topic-level ``configs``.

        ``replicas(first, count)``, when given, is the replica assignment to
        record for partitions ``first`` to ``first + count - 1``; only the
        partitions this process serves are created here (the others by
        theirs, at :meth:`refresh`).

        Raises TopicExistsError, InvalidTopicError, InvalidPartitionsError or
        InvalidConfigError; nothing is created then.
        """
        filenames.validate_topic_name(name)
        count = self.settings.num_partitions if partitions is None else partitions
        if count <= 0:
            raise InvalidPartitionsError(f"number of partitions must be positive, got {count}")
        overrides = {k: str(v) for k, v in (configs or {}).items()}
        LogConfig.from_properties(overrides, self.defaults)  # validate before creating
        with self._admin_lock:
            self._check_open()
            if name in self._topics:
                raise TopicExistsError(f"topic '{name}' already exists")
            self._check_collision(name)
            descriptors.check_room_for_partitions(count, f"topic '{name}'")
            info = TopicInfo(
                name, uuid.uuid4(), count, overrides, replicas(0, count) if replicas else None
            )
            # All or nothing: the creation is on record before any partition exists
            # (a crash is taken back at the next start), and the topic is complete
            # (in memory and in the topics file) once every partition exists; a
            # failure removes what was made.
            info.creating_from = 0
            logs = self._make_partitions(info, range(count))
            info.creating_from = None
            with self._lock:
                # Partitions first: whoever sees the topic finds every partition.
                self._logs.update(((name, log.partition), log) for log in logs)
                self._topics[name] = info
                self._forgotten.discard(name)
            try:
                self._write_topics()
            except BaseException:
                with self._lock:
                    del self._topics[name]
                    for p in range(count):
                        self._logs.pop((name, p), None)
                self._discard_logs(logs)
                raise
            logger.info("created topic %s with %d partition(s)", name, count)
            return info

    def _make_partitions(self, change: TopicInfo, partitions: range) -> list[Log]:
        """Record ``change`` (a creation under way), then create its served ``partitions``.

        On failure nothing of it is left: the partitions made are removed and the
        record is taken back (or, if even that write fails, the next start does it).
        """
        self._write_topics(change)
        try:
            return self._create_logs(change, partitions)
        except BaseException:
            try:
                self._write_topics()
            except StorageError as exc:
                logger.error("cannot take back the record of %s: %s", change.name, exc)
            raise

    def _check_collision(self, name: str) -> None:
        """Kafka refuses a name equal to an existing one once ``.`` and ``_`` are alike."""
        if not filenames.has_collision_chars(name):
            return
        unified = filenames.unify_collision_chars(name)
        for existing in self._topics:
            if filenames.unify_collision_chars(existing) == unified:
                raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {existing}")

    def _create_logs(self, info: TopicInfo, partitions: range) -> list[Log]:
        """Create the served partitions ``partitions`` of ``info``; on failure, none of them."""
        logs: list[Log] = []
        partition = partitions.start
        try:
            for partition in partitions:
                if not self.serves(info, partition):
                    continue
                directory = self.path / filenames.partition_dir_name(info.name, partition)
                if directory.exists():
                    # Left by a creation that a crash interrupted (never recorded): start afresh.
                    self._env.rmtree(directory, ignore_errors=False)
                logs.append(self._create_log(info, partition))
        except BaseException as exc:
            logger.error(
                "cannot create partition %d of topic %s; removing the %d created: %s",
                partition,
                info.name,
                len(logs),
                exc,
                exc_info=exc,
            )
            self._discard_logs(logs)
            # The partition whose creation failed may have left its directory.
            failed = self.path / filenames.partition_dir_name(info.name, partition)
            self._env.rmtree(failed)
            raise
        return logs

    def _discard_logs(self, logs: Sequence[Log]) -> None:
        """Close and remove partitions that were never recorded."""
        for log in logs:
            try:
                log.close()
            except Exception:
                logger.exception("cannot close %s", log.directory)
            self._env.rmtree(log.directory)

    def create_partitions(
        self,
        name: str,
        total: int,
        *,
        replicas: Callable[[int, int], list[list[int]]] | None = None,
    ) -> None:
        """Grow ``name`` to ``total`` partitions (Kafka never shrinks a topic).

        ``replicas`` as for :meth:`create_topic`, for the new partitions.
        """
        with self._admin_lock:
            self._check_open()
            info = self._require_topic(name)
            if total <= info.partitions:
                raise InvalidPartitionsError(
                    f"topic '{name}' has {info.partitions} partitions; the new count must be "
                    f"larger, got {total}"
                )
            descriptors.check_room_for_partitions(
                total - info.partitions, f"partitions of topic '{name}'"
            )
            previous = info.partitions
            previous_replicas = info.replicas
            change = info.copy()
            change.partitions, change.creating_from = total, previous
            if replicas is not None:
                # Partitions recorded without an assignment keep none (empty lists).
                known = list(info.replicas or [[] for _ in range(previous)])
                change.replicas = known + replicas(previous, total - previous)
            logs = self._make_partitions(change, range(previous, total))
            with self._lock:
                self._logs.update(((name, log.partition), log) for log in logs)
                info.partitions = total
                info.replicas = change.replicas
            try:
                self._write_topics()
            except BaseException:
                with self._lock:
                    info.partitions = previous
                    info.replicas = previous_replicas
                    for log in logs:
                        self._logs.pop((name, log.partition), None)
                self._discard_logs(logs)
                raise

    def alter_topic_config(
        self, name: str, set_configs: Mapping[str, object], delete_configs: Sequence[str] = ()
    ) -> LogConfig:
        """Set and remove topic-level overrides; applies to the live partitions at once."""
        with self._admin_lock:
            self._check_open()
            info = self._require_topic(name)
            overrides = dict(info.overrides)
            for key in delete_configs:
                overrides.pop(key, None)
            overrides.update({k: str(v) for k, v in set_configs.items()})
            config = LogConfig.from_properties(overrides, self.defaults)
            info.overrides = overrides
            self._write_topics()
            for partition in range(info.partitions):
                log = self._logs.get((name, partition))
                if log is not None:  # an offline partition takes it at its next open
                    log.update_config(config)
            return config

    def reconfigure(self, defaults: LogConfig, settings: LogDirSettings) -> None:
        """Take new broker-level topic defaults and engine settings, at once.

        Every live partition of a topic gets its overrides over the new
        defaults, so that a topic without an override of a setting follows
        the new default from its next append, roll or retention pass (Kafka's
        DynamicLogConfig). The cleaner takes its new settings at its next pass.
        """
        with self._admin_lock:
            self._check_open()
            old = self.defaults
            self.defaults = defaults
            self.settings = settings
            if self.cleaner is not None:
                self.cleaner.reconfigure(settings)
            if old == defaults:
                return
            with self._lock:
                logs = list(self._logs.items())
                topics = dict(self._topics)
            configs: dict[str, LogConfig] = {}
            for (topic, _), log in logs:
                info = topics.get(topic)
                if info is None:
                    continue
                if topic not in configs:
                    configs[topic] = LogConfig.from_properties(info.overrides, defaults)
                log.update_config(configs[topic])

    def delete_topic(self, name: str) -> None:
        """Remove a topic: its directories are renamed ``*-delete`` and removed.

        The deletion is on record before the first file goes, so that one cut
        short by a crash is finished at the next start. A partition whose
        directory cannot be renamed stays (offline) and the topic with it, and a
        StorageError is raised; deleting again retries.
        """
        with self._admin_lock:
            self._check_open()
            info = self._require_topic(name)
            if not info.deleting:
                info.deleting = True
                try:
                    self._write_topics()
                except BaseException:
                    info.deleting = False
                    raise
            failures: list[tuple[int, StorageError]] = []
            with self._lock:
                # Gone for readers at once; the files go below.
                logs = {p: self._logs.pop((name, p), None) for p in range(info.partitions)}
            for log in logs.values():
                if log is not None:
                    log.close()
            self._closed_partitions([(name, p) for p, log in logs.items() if log is not None])
            for partition in range(info.partitions):
                key = (name, partition)
                directory = self.path / filenames.partition_dir_name(name, partition)
                if directory.exists():
                    target = self.path / filenames.delete_dir_name(name, partition)
                    try:
                        self._env.rename(directory, target)
                    except StorageError as exc:
                        logger.error(
                            "cannot delete partition %d of topic %s: %s",
                            partition,
                            name,
                            exc,
                            exc_info=exc,
                        )
                        failures.append((partition, exc))
                        self._offline[key] = f"its deletion failed: {exc}"
                        continue
                    self._env.rmtree(target)
                self._offline.pop(key, None)
                self._offline_recovery.pop(key, None)
                self._offline_start.pop(key, None)
            if not failures:
                with self._lock:
                    del self._topics[name]
                    self._forgotten.add(name)
                self._write_topics()
            self._env.fsync_dir(self.path)
            self.checkpoint()
            if failures:
                first_partition, first_error = failures[0]
                raise StorageError(
                    f"cannot delete topic '{name}': {len(failures)} partition(s) could not be "
                    f"removed; partition {first_partition}: {first_error}"
                ) from first_error

    def release_topic(self, name: str) -> None:
        """Close this process's partitions of ``name``, which another process is deleting.

        They are no longer served here; :meth:`refresh` forgets the topic once
        it is gone from the topic list.
        """
        with self._admin_lock:
            with self._lock:
                released = [key for key in self._logs if key[0] == name]
                logs = [self._logs.pop(key) for key in released]
                self._forgotten.add(name)
            for log in logs:
                try:
                    log.close()
                except StorageError as exc:
                    logger.error("cannot close %s: %s", log.directory, exc)
            if released:
                self._closed_partitions(released)

    def _closed_partitions(self, keys: list[tuple[str, int]]) -> None:
        listener = self.on_partitions_closed
        if listener is not None and keys:
            listener(keys)

    def _require_topic(self, name: str) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
        return info

    # ------------------------------------------------------------ partitions

    def log(self, topic: str, partition: int) -> Log:
        """The partition's :class:`Log`; UnknownTopicOrPartitionError if there is none."""
        log = self._logs.get((topic, partition))
        if log is None:
            reason = self._offline.get((topic, partition))
            if reason is not None:
                raise StorageError(f"partition {partition} of topic '{topic}' is offline: {reason}")
            info = self._topics.get(topic)
            if info is not None and 0 <= partition < info.partitions:
                served = self.serves(info, partition)
            else:
                served = True
            if not served:
                raise NotLeaderOrFollowerError(
                    f"partition {partition} of topic '{topic}' is served by another node"
                )
            raise UnknownTopicOrPartitionError(
                f"this log directory has no partition {partition} of topic '{topic}'"
            )
        return log

    def offline(self) -> dict[tuple[str, int], str]:
        """Partitions that could not be opened at start, with the reason."""
        return dict(self._offline)

    def logs(self) -> dict[tuple[str, int], Log]:
        """A snapshot of every partition's log by (topic, partition)."""
        return dict(self._logs)

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
            data = self._env.pread(region.fd, region.length, region.position, name=region.path)
            emitted = False
            for rec in record_codec.decode_entries(data):
                if rec.offset >= position:
                    yield rec
                    emitted = True
                    position = rec.offset + 1
            remaining -= region.length
            if not emitted:
                return

    def offset_for_time(
        self, topic: str, partition: int, timestamp: int
    ) -> TimestampAndOffset | None:
        """ListOffsets: first record at or after ``timestamp`` (-1 latest, -2 earliest)."""
        return self.log(topic, partition).find_offset_by_timestamp(timestamp)

    # ------------------------------------------------------- background work

    def _schedule_deletion(self, segments: Sequence[LogSegment], delay_ms: int) -> None:
        due = int(self._clock() * 1000) + delay_ms
        with self._pending_lock:
            heapq.heappush(self._pending, _PendingDeletion(due, next(self._sequence), segments))
        if delay_ms <= 0:
            self.run_pending_deletions()

    def run_pending_deletions(self, now_ms: int | None = None) -> int:
        """Unlink ``.deleted`` segments whose delay has passed; returns how many."""
        now = int(self._clock() * 1000) if now_ms is None else now_ms
        due: list[_PendingDeletion] = []
        with self._pending_lock:
            while self._pending and self._pending[0].due_ms <= now:
                due.append(heapq.heappop(self._pending))
        count = 0
        for item in due:
            for segment in item.segments:
                try:
                    segment.delete()
                    count += 1
                except StorageError as exc:
                    logger.error("cannot delete %s: %s", segment.log_path, exc)
        return count

    def run_retention(self, now_ms: int | None = None) -> int:
        """Apply every partition's retention rules; returns segments removed."""
        from seglog.storage import retention

        now = int(self._clock() * 1000) if now_ms is None else now_ms
        removed = 0
        for log in list(self._logs.values()):
            if not log.closed and log.offline_reason is None:
                removed += retention.delete_old_segments(log, now)
        return removed

    def checkpoint(self) -> None:
        """Write the recovery-point and log-start-offset checkpoint files.

        A checkpoint is replaced atomically, so a failed write leaves the old
        one, which is safe (older recovery points only mean more recovery).
        A lack of space is retried at the next interval; any other I/O error
        means the directory itself is failing, and, as Kafka takes the log
        directory offline, every partition refuses writes until a restart.
        """
        with self._checkpoint_lock:  # the maintenance thread and administration both write
            try:
                self._write_checkpoints()
            except StorageError as exc:
                cause = exc.__cause__
                if isinstance(cause, OSError) and cause.errno not in _NO_SPACE:
                    for log in list(self._logs.values()):
                        log.take_offline(f"cannot write the checkpoints of {self.path}: {exc}")
                raise

    def _write_checkpoints(self) -> None:
        logs = dict(self._logs)
        # Offline partitions keep the entries they had, for the start that opens them.
        self.merge_checkpoint(
            checkpoints.RECOVERY_POINT_CHECKPOINT,
            {**self._offline_recovery, **{k: log.recovery_point for k, log in logs.items()}},
        )
        # Kafka lists only partitions whose start has moved past their first segment.
        self.merge_checkpoint(
            checkpoints.LOG_START_OFFSET_CHECKPOINT,
            {
                **self._offline_start,
                **{
                    k: log.log_start_offset
                    for k, log in logs.items()
                    if log.log_start_offset > log.segments[0].base_offset
                },
            },
        )

    def _foreign(self, key: tuple[str, int]) -> bool:
        """Whether a checkpoint line is another process's to keep or drop."""
        if self._serves is None or key[0] in self._forgotten:
            return False
        info = self._topics.get(key[0])
        return info is None or key[1] >= info.partitions or not self._serves(info, key[1])

    def merge_checkpoint(self, name: str, entries: Mapping[tuple[str, int], int]) -> None:
        """Replace this process's lines of the offset checkpoint ``name`` with ``entries``.

        Alone in the directory, ``entries`` is the whole file. Sharing it, the
        lines of partitions other processes serve are kept, read under a file
        lock that every process takes for its read-merge-write.
        """
        path = self.path / name
        if self._serves is None:
            checkpoints.write_offset_checkpoint(path, entries, env=self._env)
            return
        fd = self._env.open(self.path / CHECKPOINT_LOCK_FILE, os.O_RDWR | os.O_CREAT)
        try:
            # Held for one small read and write: wait for it.
            while not self._env.lock(fd):
                time.sleep(0.001)
            try:
                try:
                    current = checkpoints.read_offset_checkpoint(path, env=self._env)
                except StorageError:
                    current = {}  # rewritten whole below; the owners' next merge restores theirs
                merged = {k: v for k, v in current.items() if self._foreign(k)}
                merged.update(entries)
                checkpoints.write_offset_checkpoint(path, merged, env=self._env)
            finally:
                self._env.unlock(fd)
        finally:
            self._env.close(fd)

    def run_maintenance(self, now_ms: int | None = None) -> None:
        """One pass of every background duty whose interval has passed."""
        now = int(self._clock() * 1000) if now_ms is None else now_ms
        settings = self.settings
        if self._due("retention", now, settings.log_retention_check_interval_ms):
            self.run_retention(now)
        for log in list(self._logs.values()):
            if not log.closed and log.offline_reason is None:
                log.flush_if_due(now)
        self.run_pending_deletions(now)
        if self._due("producer-expiration", now, settings.producer_id_expiration_check_interval_ms):
            for log in list(self._logs.values()):
                if not log.closed:
                    log.remove_expired_producers(now)
        if self._due("checkpoint", now, settings.log_flush_offset_checkpoint_interval_ms):
            self.checkpoint()

    def _due(self, task: str, now: int, interval: int) -> bool:
        last = self._last_run.get(task)
        if last is None:
            self._last_run[task] = now
            return False
        if now - last >= interval:
            self._last_run[task] = now
            return True
        return False

    def start_background(self, tick_seconds: float = 1.0) -> None:
        """Run maintenance (and the cleaner, if enabled) on background threads."""
        if self._threads:
            return

        def loop() -> None:
            while not self._stop.wait(tick_seconds):
                try:
                    self.run_maintenance()
                except Exception:
                    logger.exception("log maintenance failed")

        thread = threading.Thread(target=loop, name="seglog-maintenance", daemon=True)
        thread.start()
        self._threads.append(thread)
        if self.settings.log_cleaner_enable:
            from seglog.storage.cleaner import LogCleaner

            self.cleaner = LogCleaner(self, clock=self._clock)
            self._threads.append(self.cleaner.start(self._stop))

    # ------------------------------------------------------------- lifecycle

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"the log directory {self.path} is closed")

    def close(self) -> None:
        """Flush and close every partition, write checkpoints and the clean-shutdown marker."""
        with self._admin_lock:
            if self._closed:
                return
            self._stop.set()
            for thread in self._threads:
                thread.join(timeout=30)
            failure: StorageError | None = None
            for log in self._logs.values():
                try:
                    log.close()
                except StorageError as exc:
                    failure = failure or exc
            self.run_pending_deletions(now_ms=2**62)
            try:
                self.checkpoint()
                # A partition taken offline by an I/O error is recovered by the
                # next start, as after a crash: no clean-shutdown marker then.
                offline = [log for log in self._logs.values() if log.offline_reason is not None]
                if failure is None and not offline and self._given_clean_shutdown is None:
                    checkpoints.write_clean_shutdown(self.path, env=self._env)
            finally:
                self._closed = True
                self._release_lock()
            if failure is not None:
                raise failure

    @property
    def env(self) -> io.Env:
        """The environment every file operation of this directory goes through."""
        return self._env

    @property
    def had_clean_shutdown(self) -> bool:
        """Whether the previous close of this directory was clean."""
        return self._had_clean_shutdown

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def read_topic_list(path: Path, *, env: io.Env | None = None) -> dict[str, TopicInfo]:
    """The topic list of the log directory at ``path``, with the partition directories
    that no topic declares adopted (as :meth:`LogDir.open` adopts them); no partition
    is opened. For whoever prepares a directory before the processes sharing it start:
    a creation or deletion that a crash cut short is taken back or finished first."""
    log_dir = LogDir(path, LogConfig(), LogDirSettings(), env=env)
    topics = log_dir._read_topics()
    if any(info.unfinished for info in topics.values()):
        log_dir._finish_unfinished(topics)
        log_dir._topics = topics
        log_dir._write_topics()
    for topic, partition in reader.partition_dirs(path):
        info = topics.get(topic)
        if info is None:
            info = topics[topic] = TopicInfo(topic, uuid.uuid4(), 0)
        info.partitions = max(info.partitions, partition + 1)
    return topics


def write_topic_list(
    path: Path, topics: Mapping[str, TopicInfo], *, env: io.Env | None = None
) -> None:
    """Replace the topic list of the log directory at ``path`` (atomically)."""
    log_dir = LogDir(path, LogConfig(), LogDirSettings(), env=env)
    log_dir._topics = dict(topics)
    log_dir._write_topics()


def _base64_uuid(value: uuid.UUID) -> str:
    import base64

    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")
