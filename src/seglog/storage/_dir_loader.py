"""Opening a log directory's partitions: at start, and whenever the topic list changes.

At start (:meth:`DirLoader.load`, Kafka's ``LogManager.loadLogs``):
``meta.properties`` is written if missing; the clean-shutdown state is read
through the checkpoint policy; a topic change a crash cut short is finished
or taken back (by the writer of the topic list only); directories left by a
deleted topic (``*-delete``) are removed; every partition directory this
process owns is opened from its checkpointed recovery point and log start
offset (recovered from the recovery point when the last close was not
clean); a directory no topic declares (written by Kafka, or copied in) is
adopted; and the partitions a topic declares but whose directory is gone are
created empty. A partition that cannot be opened is *offline* (it answers
KAFKA_STORAGE_ERROR) instead of refusing the start.

While open (:meth:`DirLoader.refresh`), a process that does not write the
topic list re-reads it, opens what it now owns and closes what was deleted.
"""

from __future__ import annotations

import base64
import functools
import logging
import uuid
from collections.abc import Callable

from seglog.errors import StorageError
from seglog.storage import checkpoints, filenames, reader, topic_list
from seglog.storage._dir_state import DirState, Key
from seglog.storage.dir_checkpoints import CheckpointPolicy
from seglog.storage.log import Log
from seglog.storage.topic_admin import DiskTopicAdmin, finish_unfinished
from seglog.storage.topic_list import TopicInfo

logger = logging.getLogger(__name__)


class DirLoader:
    """Opens the partitions of one log directory (see the module docstring)."""

    def __init__(
        self,
        state: DirState,
        topics: DiskTopicAdmin,
        policy: CheckpointPolicy,
        checkpoint: Callable[[], None],
    ) -> None:
        self._state = state
        self._topics = topics
        self._policy = policy
        self._checkpoint = checkpoint

    def load(self) -> dict[str, str]:
        """Open the directory's partitions at start; its ``meta.properties``."""
        state = self._state
        path, env = state.path, state.env
        meta = checkpoints.read_meta_properties(path, env=env)
        if not meta:
            checkpoints.write_meta_properties(
                path,
                node_id=state.settings.node_id,
                cluster_id=_base64_uuid(uuid.uuid4()),
                directory_id=uuid.uuid4(),
                env=env,
            )
        meta = checkpoints.read_meta_properties(path, env=env)
        state.had_clean_shutdown = self._policy.previous_close_clean(path, env)
        recorded = self._topics.read()
        unfinished = {name for name, info in recorded.items() if info.unfinished}
        if state.writes_topics:
            finish_unfinished(path, recorded, env)
        state.topics = topic_list.committed(recorded)
        recovery_points = checkpoints.read_offset_checkpoint(
            path / checkpoints.RECOVERY_POINT_CHECKPOINT, env=env
        )
        start_offsets = checkpoints.read_offset_checkpoint(
            path / checkpoints.LOG_START_OFFSET_CHECKPOINT, env=env
        )
        # The partitions are what Kafka's reader of these files says they are.
        partitions = reader.partition_dirs(path)
        if not state.had_clean_shutdown and partitions:
            logger.warning("%s was not shut down cleanly: recovering its partitions", path)
        for name in sorted(env.listdir(path)):
            if name.endswith(filenames.DELETE_DIR_SUFFIX) and state.writes_topics:
                # A deletion that a crash interrupted: finish it.
                env.rmtree(path / name)
        for (topic, partition), entry in sorted(partitions.items(), key=lambda item: item[1]):
            info = state.topics.get(topic)
            if topic in unfinished and (info is None or partition >= info.partitions):
                continue  # the writer of the topic list finishes its change
            if info is None:
                # A partition directory written by Kafka or copied in: adopt it.
                info = TopicInfo(topic, uuid.uuid4(), 0)
                state.topics[topic] = info
            info.partitions = max(info.partitions, partition + 1)
            key = (topic, partition)
            if not state.serves(info, partition):
                continue
            opener = functools.partial(
                state.open_log,
                entry,
                topic,
                recovery_point=recovery_points.get(key, 0),
                log_start_offset=start_offsets.get(key, 0),
                had_clean_shutdown=state.had_clean_shutdown,
            )
            self._open_at_start(key, opener)
        # Partitions a topic declares but whose directory is gone are created empty.
        self.open_declared()
        for key in state.offline:
            if key in recovery_points:
                state.offline_recovery[key] = recovery_points[key]
            if key in start_offsets:
                state.offline_start[key] = start_offsets[key]
        if state.writes_topics:
            self._topics.write()
        self._checkpoint()
        return meta

    def open_declared(self) -> list[Key]:
        """Open (creating empty) the owned partitions the topics declare and lack; their keys."""
        state = self._state
        opened = []
        for info in list(state.topics.values()):
            for partition in range(info.partitions):
                key = (info.name, partition)
                if key in state.logs or key in state.offline or not state.serves(info, partition):
                    continue
                directory = state.path / filenames.partition_dir_name(info.name, partition)
                opener: Callable[[], Log]
                if directory.exists():
                    recovery = checkpoints.read_offset_checkpoint(
                        state.path / checkpoints.RECOVERY_POINT_CHECKPOINT, env=state.env
                    )
                    opener = functools.partial(
                        state.open_log,
                        directory,
                        info.name,
                        recovery_point=recovery.get(key, 0),
                        had_clean_shutdown=False,
                    )
                else:
                    opener = functools.partial(state.create_log, info, partition)
                self._open_at_start(key, opener)
                opened.append(key)
        return opened

    def refresh(self) -> list[Key]:
        """Re-read the topic list another process wrote; open and close partitions to match.

        New topics and partitions this process owns are opened (created empty
        if their directory does not exist yet), deleted topics' partitions are
        closed (their files are the writer's to remove), changed configs apply
        at once. Returns the partitions opened.
        """
        state = self._state
        with state.admin_lock:
            state.check_open()
            fresh = topic_list.committed(self._topics.read())
            with state.lock:
                known = state.topics
                gone = [name for name in known if name not in fresh]
                closing = [(key, log) for key, log in state.logs.items() if key[0] in gone] + [
                    (key, log)
                    for key, log in state.logs.items()
                    if key[0] in fresh and fresh[key[0]].topic_id != known[key[0]].topic_id
                ]
                for key, _log in closing:
                    del state.logs[key]
                for name in gone:
                    state.forgotten.add(name)
                    for key in [k for k in state.offline if k[0] == name]:
                        del state.offline[key]
                changed = [
                    name
                    for name, info in fresh.items()
                    if name in known and info.overrides != known[name].overrides
                ]
                deleted = [
                    info.topic_id
                    for name, info in known.items()
                    if name not in fresh or fresh[name].topic_id != info.topic_id
                ]
                state.topics = fresh
                for name in fresh:
                    state.forgotten.discard(name)
            for _key, closed in closing:
                try:
                    closed.close()
                except StorageError as exc:
                    logger.error("cannot close %s: %s", closed.directory, exc)
            state.partitions_closed([key for key, _log in closing])
            state.topics_deleted(deleted)
            for name in changed:
                config = state.topic_config(name)
                for partition in range(fresh[name].partitions):
                    log = state.logs.get((name, partition))
                    if log is not None:
                        log.update_config(config)
            opened = self.open_declared()
            if opened or closing:
                self._checkpoint()
            return opened

    def _open_at_start(self, key: Key, opener: Callable[[], Log]) -> None:
        """Open one partition; a failure marks it offline instead of refusing the start."""
        try:
            self._state.logs[key] = opener()
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
            reason = f"it could not be opened at start: {type(exc).__name__}: {exc}"
            self._state.offline[key] = reason


def _base64_uuid(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")
