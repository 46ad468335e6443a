"""A log directory's settings, and how to recognise a log directory.

:class:`LogDirSettings` are the broker-level settings of the storage engine
(retention checks, checkpoint and flush intervals, the cleaner, producer-id
expiration) under Kafka's names; :func:`looks_like_log_dir` tells a directory
a broker wrote (seglog's or Kafka's) from any other, before a tool writes to
or removes it. Both are re-exported by :mod:`seglog.storage.log_dir`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seglog.config import DOUBLE_MAX, BrokerConfig
from seglog.storage import checkpoints, reader
from seglog.storage.topic_list import TOPICS_FILE

LOCK_FILE = ".lock"
"""Held (flock) by the process that has the directory open (its default lock file)."""


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
