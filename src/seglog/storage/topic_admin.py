"""Topic administration: creating, growing, altering and deleting topics, and the topic list.

:class:`TopicAdministration` is the interface the broker creates, grows,
alters and deletes topics through. A log directory carries it out on disk
(:class:`DiskTopicAdmin`, the part of :class:`~seglog.storage.log_dir.LogDir`
that owns it); a process sharing the directory with others may carry it out
elsewhere (where the topic list is written) behind the same interface, and
callers cannot tell the difference.

On disk, a topic is its partition directories and its line in the topic
list (:mod:`.topic_list`). Every change is on record in the list before the
first file is touched, so that one a crash cuts short is taken back (a
creation) or finished (a deletion) by :func:`finish_unfinished` at the next
start; a creation is all or nothing, and a failure removes what it made.
Only a directory opened to write the topic list carries out administration;
the others re-read the list (:meth:`LogDir.refresh
<seglog.storage.log_dir.LogDir.refresh>`) and close the partitions of a topic
being deleted when told (:meth:`DiskTopicAdmin.release_topic`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from seglog.config import LogConfig
from seglog.errors import (
    InvalidPartitionsError,
    InvalidTopicError,
    StorageError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from seglog.storage import descriptors, filenames, io, reader, topic_list
from seglog.storage._dir_state import DirState
from seglog.storage.log import Log
from seglog.storage.topic_list import TOPICS_FILE, TopicInfo

logger = logging.getLogger(__name__)

#: ``replicas(first, count)``: the replica assignment of partitions ``first`` to
#: ``first + count - 1`` of a topic being created or grown.
Replicas = Callable[[int, int], list[list[int]]]


class TopicAdministration(Protocol):
    """Create, grow, alter and delete topics (Kafka's CreateTopics, CreatePartitions, ...)."""

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        configs: Mapping[str, object] | None = None,
        *,
        replicas: Replicas | None = None,
    ) -> TopicInfo:
        """Create a topic; TopicExistsError, InvalidTopicError, InvalidPartitionsError, ..."""
        ...

    def create_partitions(self, name: str, total: int, *, replicas: Replicas | None = None) -> None:
        """Grow ``name`` to ``total`` partitions."""
        ...

    def alter_topic_config(
        self, name: str, set_configs: Mapping[str, object], delete_configs: Sequence[str] = ()
    ) -> LogConfig:
        """Set and remove topic-level overrides; the resolved config."""
        ...

    def delete_topic(self, name: str) -> None:
        """Delete a topic and its files."""
        ...


# ------------------------------------------------------------------ the topic list


def read_topics(path: Path, env: io.Env) -> dict[str, TopicInfo]:
    """Every topic the topic list of the directory ``path`` records, unfinished changes included."""
    file = path / TOPICS_FILE
    data = env.read_file(file)
    return {} if data is None else topic_list.decode(data, file)


def write_topics(path: Path, topics: Mapping[str, TopicInfo], env: io.Env) -> None:
    """Replace the topic list of the directory ``path`` (atomically)."""
    env.atomic_write_text(path / TOPICS_FILE, topic_list.encode(topics))


def finish_unfinished(path: Path, recorded: dict[str, TopicInfo], env: io.Env) -> None:
    """Take back the creations and finish the deletions a crash cut short."""
    changed = False
    for name, info in sorted(recorded.items()):
        if not info.unfinished:
            continue
        changed = True
        before = None if info.deleting else info.before_creation()
        first = 0 if before is None else before.partitions
        for partition in range(first, info.partitions):
            directory = path / filenames.partition_dir_name(name, partition)
            if directory.exists():
                env.rmtree(directory, ignore_errors=False)
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
        env.fsync_dir(path)


def read_topic_list(path: Path, *, env: io.Env | None = None) -> dict[str, TopicInfo]:
    """The topic list of the log directory at ``path``, with the partition directories
    that no topic declares adopted (as :meth:`LogDir.open` adopts them); no partition
    is opened. For whoever prepares a directory before the processes sharing it start:
    a creation or deletion that a crash cut short is taken back or finished first."""
    env = io.env_or_default(env)
    topics = read_topics(path, env)
    if any(info.unfinished for info in topics.values()):
        finish_unfinished(path, topics, env)
        write_topics(path, topics, env)
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
    write_topics(path, dict(topics), io.env_or_default(env))


# ------------------------------------------------------------------ administration


class DiskTopicAdmin:
    """Topic administration carried out in one log directory (see the module docstring).

    ``checkpoint`` writes the directory's checkpoints (after a deletion).
    """

    def __init__(self, state: DirState, checkpoint: Callable[[], None]) -> None:
        self._state = state
        self._checkpoint = checkpoint

    def read(self) -> dict[str, TopicInfo]:
        """Every topic the topic list records, unfinished creations and deletions included."""
        return read_topics(self._state.path, self._state.env)

    def write(self, change: TopicInfo | None = None) -> None:
        """Write the topic list: the topics as they are, with ``change`` (under way) over them."""
        state = self._state
        with state.lock:
            topics = dict(state.topics)
        if change is not None:
            topics[change.name] = change
        write_topics(state.path, topics, state.env)

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
        partitions this process serves are created here (the others by
        theirs, at :meth:`refresh`).

        Raises TopicExistsError, InvalidTopicError, InvalidPartitionsError or
        InvalidConfigError; nothing is created then.
        """
        state = self._state
        filenames.validate_topic_name(name)
        count = state.settings.num_partitions if partitions is None else partitions
        if count <= 0:
            raise InvalidPartitionsError(f"number of partitions must be positive, got {count}")
        overrides = {k: str(v) for k, v in (configs or {}).items()}
        LogConfig.from_properties(overrides, state.defaults)  # validate before creating
        with state.admin_lock:
            state.check_open()
            self._check_writes_topics()
            if name in state.topics:
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
            with state.lock:
                # Partitions first: whoever sees the topic finds every partition.
                state.logs.update(((name, log.partition), log) for log in logs)
                state.topics[name] = info
                state.forgotten.discard(name)
            try:
                self.write()
            except BaseException:
                with state.lock:
                    del state.topics[name]
                    for p in range(count):
                        state.logs.pop((name, p), None)
                self._discard_logs(logs)
                raise
            logger.info("created topic %s with %d partition(s)", name, count)
            return info

    def _make_partitions(self, change: TopicInfo, partitions: range) -> list[Log]:
        """Record ``change`` (a creation under way), then create its served ``partitions``.

        On failure nothing of it is left: the partitions made are removed and the
        record is taken back (or, if even that write fails, the next start does it).
        """
        self.write(change)
        try:
            return self._create_logs(change, partitions)
        except BaseException:
            try:
                self.write()
            except StorageError as exc:
                logger.error("cannot take back the record of %s: %s", change.name, exc)
            raise

    def _check_collision(self, name: str) -> None:
        """Kafka refuses a name equal to an existing one once ``.`` and ``_`` are alike."""
        if not filenames.has_collision_chars(name):
            return
        unified = filenames.unify_collision_chars(name)
        for existing in self._state.topics:
            if filenames.unify_collision_chars(existing) == unified:
                raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {existing}")

    def _create_logs(self, info: TopicInfo, partitions: range) -> list[Log]:
        """Create the served partitions ``partitions`` of ``info``; on failure, none of them."""
        state = self._state
        logs: list[Log] = []
        partition = partitions.start
        try:
            for partition in partitions:
                if not state.serves(info, partition):
                    continue
                directory = state.path / filenames.partition_dir_name(info.name, partition)
                if directory.exists():
                    # Left by a creation that a crash interrupted (never recorded): start afresh.
                    state.env.rmtree(directory, ignore_errors=False)
                logs.append(state.create_log(info, partition))
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
            failed = state.path / filenames.partition_dir_name(info.name, partition)
            state.env.rmtree(failed)
            raise
        return logs

    def _discard_logs(self, logs: Sequence[Log]) -> None:
        """Close and remove partitions that were never recorded."""
        for log in logs:
            try:
                log.close()
            except Exception:
                logger.exception("cannot close %s", log.directory)
            self._state.env.rmtree(log.directory)

    def create_partitions(
        self,
        name: str,
        total: int,
        *,
        replicas: Replicas | None = None,
    ) -> None:
        """Grow ``name`` to ``total`` partitions (Kafka never shrinks a topic).

        ``replicas`` as for :meth:`create_topic`, for the new partitions.
        """
        state = self._state
        with state.admin_lock:
            state.check_open()
            self._check_writes_topics()
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
            with state.lock:
                state.logs.update(((name, log.partition), log) for log in logs)
                info.partitions = total
                info.replicas = change.replicas
            try:
                self.write()
            except BaseException:
                with state.lock:
                    info.partitions = previous
                    info.replicas = previous_replicas
                    for log in logs:
                        state.logs.pop((name, log.partition), None)
                self._discard_logs(logs)
                raise

    def alter_topic_config(
        self, name: str, set_configs: Mapping[str, object], delete_configs: Sequence[str] = ()
    ) -> LogConfig:
        """Set and remove topic-level overrides; applies to the live partitions at once."""
        state = self._state
        with state.admin_lock:
            state.check_open()
            self._check_writes_topics()
            info = self._require_topic(name)
            overrides = dict(info.overrides)
            for key in delete_configs:
                overrides.pop(key, None)
            overrides.update({k: str(v) for k, v in set_configs.items()})
            config = LogConfig.from_properties(overrides, state.defaults)
            info.overrides = overrides
            self.write()
            for partition in range(info.partitions):
                log = state.logs.get((name, partition))
                if log is not None:  # an offline partition takes it at its next open
                    log.update_config(config)
            return config

    def delete_topic(self, name: str) -> None:
        """Remove a topic: its directories are renamed ``*-delete`` and removed.

        The deletion is on record before the first file goes, so that one cut
        short by a crash is finished at the next start. A partition whose
        directory cannot be renamed stays (offline) and the topic with it, and a
        StorageError is raised; deleting again retries.
        """
        state = self._state
        with state.admin_lock:
            state.check_open()
            self._check_writes_topics()
            info = self._require_topic(name)
            if not info.deleting:
                info.deleting = True
                try:
                    self.write()
                except BaseException:
                    info.deleting = False
                    raise
            failures: list[tuple[int, StorageError]] = []
            with state.lock:
                # Gone for readers at once; the files go below.
                logs = {p: state.logs.pop((name, p), None) for p in range(info.partitions)}
            # Every log closed before any file moves, and its readers told.
            for log in logs.values():
                if log is not None:
                    log.close()
            state.partitions_closed([(name, p) for p, log in logs.items() if log is not None])
            for partition in range(info.partitions):
                key = (name, partition)
                directory = state.path / filenames.partition_dir_name(name, partition)
                if directory.exists():
                    target = state.path / filenames.delete_dir_name(name, partition)
                    try:
                        state.env.rename(directory, target)
                    except StorageError as exc:
                        logger.error(
                            "cannot delete partition %d of topic %s: %s",
                            partition,
                            name,
                            exc,
                            exc_info=exc,
                        )
                        failures.append((partition, exc))
                        state.offline[key] = f"its deletion failed: {exc}"
                        continue
                    state.env.rmtree(target)
                state.offline.pop(key, None)
                state.offline_recovery.pop(key, None)
                state.offline_start.pop(key, None)
            if not failures:
                with state.lock:
                    del state.topics[name]
                    state.forgotten.add(name)
                self.write()
                state.topics_deleted([info.topic_id])
            state.env.fsync_dir(state.path)
            self._checkpoint()
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
        state = self._state
        with state.admin_lock:
            with state.lock:
                released = [key for key in state.logs if key[0] == name]
                logs = [state.logs.pop(key) for key in released]
                state.forgotten.add(name)
            for log in logs:
                try:
                    log.close()
                except StorageError as exc:
                    logger.error("cannot close %s: %s", log.directory, exc)
            state.partitions_closed(released)

    def _check_writes_topics(self) -> None:
        if not self._state.writes_topics:
            # Another process writes the topic list: its administration goes there.
            raise StorageError(
                f"the topic list of {self._state.path} is written by another process"
            )

    def _require_topic(self, name: str) -> TopicInfo:
        info = self._state.topics.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
        return info
