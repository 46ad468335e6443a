"""Kafka's small text files at the root of a log directory and in partition directories.

Offset checkpoints (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``cleaner-offset-checkpoint``,
``replication-offset-checkpoint``)::

    checkpoint => version "\\n" count "\\n" (topic " " partition " " offset "\\n")*
    version    => "0"

e.g. ``0\\n2\\norders 0 1200\\norders 1 980\\n``. The clean-shutdown marker
``.kafka_cleanshutdown`` is JSON ``{"version":0,"brokerEpoch":N}``;
``partition.metadata`` is ``version: 0\\ntopic_id: <22-char URL-safe base64>``;
``meta.properties`` is a Java properties file. Every write goes through
:func:`seglog.storage.io.atomic_write_text`.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from seglog.config import parse_properties
from seglog.errors import CorruptCheckpointError, StorageError
from seglog.storage import io

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
PARTITION_METADATA_FILE = "partition.metadata"
META_PROPERTIES_FILE = "meta.properties"
_VERSION = 0


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Read an offset checkpoint; a missing file is empty."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror}") from exc
    lines = text.splitlines()
    if len(lines) < 2:
        raise CorruptCheckpointError(f"{path}: missing the version or count line")
    if lines[0].strip() != str(_VERSION):
        raise CorruptCheckpointError(f"{path}: unrecognised version {lines[0].strip()!r}")
    try:
        expected = int(lines[1])
    except ValueError:
        raise CorruptCheckpointError(f"{path}: bad entry count {lines[1]!r}") from None
    entries: dict[tuple[str, int], int] = {}
    for number, line in enumerate(lines[2:], start=3):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 3:
            raise CorruptCheckpointError(f"{path}, line {number}: malformed entry {line!r}")
        try:
            entries[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError:
            raise CorruptCheckpointError(
                f"{path}, line {number}: malformed entry {line!r}"
            ) from None
    if len(entries) != expected:
        raise CorruptCheckpointError(f"{path}: expected {expected} entries, found {len(entries)}")
    return entries


def write_offset_checkpoint(path: Path, entries: Mapping[tuple[str, int], int]) -> None:
    """Write an offset checkpoint atomically, sorted by topic and partition."""
    lines = [str(_VERSION), str(len(entries))]
    lines += [
        f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(entries.items())
    ]
    io.atomic_write_text(path, "\n".join(lines) + "\n")


def write_clean_shutdown(log_dir: Path, broker_epoch: int = 0) -> None:
    """Leave the marker that tells the next start the shutdown was clean."""
    io.atomic_write_text(
        log_dir / CLEAN_SHUTDOWN_FILE,
        json.dumps({"version": 0, "brokerEpoch": broker_epoch}, separators=(",", ":")),
    )


def consume_clean_shutdown(log_dir: Path) -> bool:
    """True if the marker was there; removes it, as Kafka does at start-up."""
    removed = io.unlink_if_exists(log_dir / CLEAN_SHUTDOWN_FILE)
    if removed:
        io.fsync_dir(log_dir)
    return removed


def _encode_uuid(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def write_partition_metadata(partition_dir: Path, topic_id: uuid.UUID) -> None:
    """Write ``partition.metadata`` with the topic id."""
    io.atomic_write_text(
        partition_dir / PARTITION_METADATA_FILE,
        f"version: 0\ntopic_id: {_encode_uuid(topic_id)}",
    )


def read_partition_metadata(partition_dir: Path) -> uuid.UUID | None:
    """The topic id in ``partition.metadata``, or None if the file is absent."""
    path = partition_dir / PARTITION_METADATA_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    fields = dict(
        (k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in text.splitlines())
    )
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise CorruptCheckpointError(f"{path}: not a version 0 partition metadata file")
    try:
        raw = base64.urlsafe_b64decode(fields["topic_id"] + "==")
        topic_id = uuid.UUID(bytes=raw)
    except ValueError:
        raise CorruptCheckpointError(f"{path}: bad topic id {fields['topic_id']!r}") from None
    if topic_id.int == 0:
        raise CorruptCheckpointError(f"{path}: the zero topic id is not valid")
    return topic_id


def write_meta_properties(
    log_dir: Path, node_id: int, cluster_id: str, directory_id: uuid.UUID | None
) -> None:
    """Write ``meta.properties`` as a KRaft-mode Kafka broker does (version 1)."""
    lines = [f"#{time.strftime('%a %b %d %H:%M:%S %Z %Y')}", f"cluster.id={cluster_id}"]
    if directory_id is not None:
        lines.append(f"directory.id={_encode_uuid(directory_id)}")
    lines += [f"node.id={node_id}", "version=1"]
    io.atomic_write_text(log_dir / META_PROPERTIES_FILE, "\n".join(lines) + "\n")


def read_meta_properties(log_dir: Path) -> dict[str, str]:
    """The keys of ``meta.properties``, or {} when it is absent."""
    try:
        return parse_properties((log_dir / META_PROPERTIES_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
