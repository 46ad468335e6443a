"""``_schemas`` in a log directory: created on first use, appended to and fsynced by the writer."""

from __future__ import annotations

import time
from collections.abc import Sequence

from seglog.errors import SeglogError
from seglog.records.builder import SimpleRecord, build_batch
from seglog.schemas.log_records import SCHEMAS_TOPIC
from seglog.storage.log_dir import LogDir
from seglog.storage.topic_admin import TopicAdministration

__all__ = ["SchemaLog"]


class SchemaLog:
    """The registry's topic: one compacted partition, as Confluent's registry creates it."""

    def __init__(self, log_dir: LogDir, topic_admin: TopicAdministration) -> None:
        self.log_dir = log_dir
        self._topic_admin = topic_admin

    @property
    def exists(self) -> bool:
        """Whether the topic has been created."""
        return SCHEMAS_TOPIC in self.log_dir.topics()

    def ensure_topic(self) -> None:
        """Create the topic (compacted, one partition) if it does not exist yet (blocking)."""
        if self.exists:
            return
        try:
            self._topic_admin.create_topic(SCHEMAS_TOPIC, 1, {"cleanup.policy": "compact"})
        except SeglogError as exc:
            if exc.kafka_error != "TOPIC_ALREADY_EXISTS":
                raise

    def append(self, records: Sequence[tuple[bytes, bytes | None]]) -> int:
        """Append ``records`` as one batch and fsync it; the offset after them (blocking).

        Only the partition's leader appends (:meth:`LogDir.serves_partition`).
        An answer is given only once this returns, so an acknowledged change
        survives a crash of the machine.
        """
        self.ensure_topic()
        now = int(time.time() * 1000)
        log = self.log_dir.log(SCHEMAS_TOPIC, 0)
        info = log.append(build_batch([SimpleRecord(value, key, now) for key, value in records]))
        log.flush(info.last_offset + 1)
        return info.last_offset + 1
