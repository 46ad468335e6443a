"""``_schemas`` in a log directory: created on first use, appended to and fsynced by the writer."""

from __future__ import annotations

import time
from collections.abc import Sequence

from seglog.errors import InvalidConfigError, SeglogError
from seglog.records.builder import SimpleRecord, build_batch
from seglog.schemas.log_records import SCHEMAS_TOPIC
from seglog.storage.log_dir import LogDir
from seglog.storage.topic_admin import TopicAdministration

__all__ = ["MAX_RECORD_BYTES", "MAX_REQUEST_BYTES", "SchemaLog"]

MAX_REQUEST_BYTES = 16 * 1024 * 1024
"""The largest request body the registry takes (a larger one is answered 413)."""
MAX_RECORD_BYTES = 2 * MAX_REQUEST_BYTES
"""``_schemas``' ``max.message.bytes``: room for the record of any request taken.

A schema's record is about as large as the request that registered it (its
text is escaped in both), so Kafka's default of 1 MiB would refuse schemas
the API takes; twice the request limit leaves room for the escaping of a
text that differs (control characters, written once more escaped).
"""


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
            self._topic_admin.create_topic(
                SCHEMAS_TOPIC,
                1,
                {"cleanup.policy": "compact", "max.message.bytes": str(MAX_RECORD_BYTES)},
            )
        except SeglogError as exc:
            if exc.kafka_error != "TOPIC_ALREADY_EXISTS":
                raise

    def check_topic(self) -> None:
        """Refuse (InvalidConfigError) a ``_schemas`` the registry would lose schemas from.

        As Confluent's registry checks its topic when it starts: one partition
        (the order of changes is the order of one log) and ``cleanup.policy=compact``
        (with ``delete``, retention would remove every schema after a week).
        """
        info = self.log_dir.topics().get(SCHEMAS_TOPIC)
        if info is None:
            return
        if info.partitions != 1:
            raise InvalidConfigError(
                f"the schema registry's topic {SCHEMAS_TOPIC} has {info.partitions} partitions: "
                "it must have exactly 1 (delete it, or point the registry at another broker)"
            )
        policy = self.log_dir.topic_config(SCHEMAS_TOPIC).cleanup_policy
        if policy != "compact":
            raise InvalidConfigError(
                f"the schema registry's topic {SCHEMAS_TOPIC} has cleanup.policy={policy}: it "
                "must be compact, or retention would delete the schemas (seglog configs --alter "
                f"--entity-type topics --entity-name {SCHEMAS_TOPIC} "
                "--add-config cleanup.policy=compact)"
            )

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
