"""Kafka's small text files at the root of a log directory and in partition directories.

Grammars (``NL`` is ``"\\n"``)::

    offset-checkpoint  := version NL count NL (topic " " partition " " offset NL)*
    version            := "0"
    count              := decimal int32, the number of entry lines that follow
    partition          := decimal int32
    offset             := decimal int64

    clean-shutdown     := '{"version":0,"brokerEpoch":' int64 '}'       (no newline)

    partition-metadata := "version: 0" NL "topic_id: " topic-id          (no final newline)
    topic-id           := 22 chars of URL-safe base64 of the 16 UUID bytes, unpadded

    meta-properties    := ("#" comment NL)* (key "=" value NL)*          (Java properties)

Offset checkpoints are ``recovery-point-offset-checkpoint`` (everything below
is fsynced), ``log-start-offset-checkpoint``, ``cleaner-offset-checkpoint``
and ``replication-offset-checkpoint``, e.g. ``0\\n2\\norders 0 1200\\norders 1 980\\n``.
Like Kafka, a reader takes an empty file, or one with only a version line, as
no entries (Kafka creates its checkpoint files empty). Every write replaces
the file atomically through :func:`seglog.storage.io.atomic_write_text`.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from seglog.config import parse_properties
from seglog.errors import CorruptCheckpointError
from seglog.storage import io

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
PARTITION_METADATA_FILE = "partition.metadata"
META_PROPERTIES_FILE = "meta.properties"

_CHECKPOINT_VERSION = 0
_PARTITION_METADATA_VERSION = 0
_KRAFT_META_VERSION = 1
# As Java's Integer.parseInt / Long.parseLong accept them: no spaces, no "_".
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
# Java's \s: what separates the fields of a checkpoint line.
_JAVA_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")
_TOPIC_ID = re.compile(r"[A-Za-z0-9_-]{22}")
# A properties value written verbatim must need no escaping to read back.
_PLAIN_PROPERTY = re.compile(r"[!-\[\]-~]+")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


# --------------------------------------------------------- offset checkpoints


def _java_int(text: str, bounds: tuple[int, int]) -> int | None:
    if not _JAVA_INT.fullmatch(text):
        return None
    value = int(text)
    return value if bounds[0] <= value <= bounds[1] else None


def _read_text(path: Path, env: io.Env, encoding: str = "utf-8") -> str | None:
    """The file's text, None if it does not exist."""
    data = env.read_file(path)
    if data is None:
        return None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise CorruptCheckpointError(f"{path} is not valid {encoding}: {exc}") from None


def _lines(text: str) -> list[str]:
    # Lines as Java's BufferedReader.readLine sees them: split on \n, \r\n or
    # \r, and a final terminator does not start another (empty) line.
    lines = re.split(r"\r\n|\r|\n", text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def read_offset_checkpoint(path: Path, *, env: io.Env | None = None) -> dict[tuple[str, int], int]:
    """Read an offset checkpoint into {(topic, partition): offset}.

    A missing or empty file is empty. Raises CorruptCheckpointError, naming the
    file and the line, for an unknown version, an entry count that does not
    match the entry lines, or a line that is not ``topic partition offset``.
    """
    text = _read_text(path, io.env_or_default(env))
    if text is None:
        return {}
    lines = _lines(text)
    if not lines:
        return {}
    version = _java_int(lines[0], _INT32)
    if version is None:
        raise CorruptCheckpointError(f"{path}, line 1: malformed version {lines[0]!r}")
    if version != _CHECKPOINT_VERSION:
        raise CorruptCheckpointError(f"{path}, line 1: unrecognised version {version}")
    if len(lines) == 1:
        return {}
    expected = _java_int(lines[1], _INT32)
    if expected is None or expected < 0:
        raise CorruptCheckpointError(f"{path}, line 2: malformed entry count {lines[1]!r}")
    entries: dict[tuple[str, int], int] = {}
    for number, line in enumerate(lines[2:], start=3):
        parts = _JAVA_WHITESPACE.split(line)
        if len(parts) == 3:
            topic = parts[0]
            partition = _java_int(parts[1], _INT32)
            offset = _java_int(parts[2], _INT64)
            if topic and partition is not None and offset is not None:
                entries[(topic, partition)] = offset
                continue
        raise CorruptCheckpointError(f"{path}, line {number}: malformed entry {line!r}")
    found = len(lines) - 2
    if found != expected:
        raise CorruptCheckpointError(
            f"{path}, line 2: expected {expected} entries, but the file has {found}"
        )
    return entries


def write_offset_checkpoint(
    path: Path, entries: Mapping[tuple[str, int], int], *, env: io.Env | None = None
) -> None:
    """Replace an offset checkpoint atomically, entries sorted by (topic, partition)."""
    lines = [str(_CHECKPOINT_VERSION), str(len(entries))]
    for (topic, partition), offset in sorted(entries.items()):
        if not topic or _JAVA_WHITESPACE.search(topic):
            raise ValueError(f"topic {topic!r} cannot be written to a checkpoint")
        lines.append(f"{topic} {partition} {offset}")
    io.env_or_default(env).atomic_write_text(path, "\n".join(lines) + "\n")


# ------------------------------------------------------- clean-shutdown marker


def write_clean_shutdown(
    log_dir: Path, broker_epoch: int = 0, *, env: io.Env | None = None
) -> None:
    """Leave the marker that tells the next start-up the shutdown was clean.

    Written last, after every log is flushed and every checkpoint written.
    """
    text = json.dumps({"version": 0, "brokerEpoch": broker_epoch}, separators=(",", ":"))
    io.env_or_default(env).atomic_write_text(log_dir / CLEAN_SHUTDOWN_FILE, text)


def read_clean_shutdown_epoch(log_dir: Path, *, env: io.Env | None = None) -> int | None:
    """The broker epoch recorded in the marker, or None if it is absent or unreadable.

    Lenient, like Kafka: the epoch is informational, the marker's existence is
    what counts.
    """
    try:
        text = _read_text(log_dir / CLEAN_SHUTDOWN_FILE, io.env_or_default(env))
        content = json.loads(text) if text is not None else None
    except (CorruptCheckpointError, ValueError):
        return None
    epoch = content.get("brokerEpoch") if isinstance(content, dict) else None
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None


def consume_clean_shutdown(log_dir: Path, *, env: io.Env | None = None) -> bool:
    """True if the marker was there. Removes it, as Kafka does at start-up.

    The removal is made durable before returning: if it were lost in a crash
    while the logs are open, the next start would skip recovery of logs that
    were written to after this one.
    """
    env = io.env_or_default(env)
    removed = env.unlink(log_dir / CLEAN_SHUTDOWN_FILE)
    if removed:
        env.fsync_dir(log_dir)
    return removed


# --------------------------------------------------------- partition.metadata


def encode_uuid(value: uuid.UUID) -> str:
    """A UUID as Kafka prints one: URL-safe base64 of its 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def decode_uuid(text: str) -> uuid.UUID:
    """Inverse of :func:`encode_uuid`; ValueError unless ``text`` is 22 base64url characters."""
    if not _TOPIC_ID.fullmatch(text):
        raise ValueError(f"{text!r} is not a base64url-encoded UUID")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except binascii.Error as exc:
        raise ValueError(f"{text!r} is not a base64url-encoded UUID") from exc
    return uuid.UUID(bytes=raw)


def write_partition_metadata(
    partition_dir: Path, topic_id: uuid.UUID, *, env: io.Env | None = None
) -> None:
    """Write ``partition.metadata``, which ties the directory to its topic's id."""
    if topic_id.int == 0:
        raise ValueError("the zero UUID is not a topic id")
    io.env_or_default(env).atomic_write_text(
        partition_dir / PARTITION_METADATA_FILE,
        f"version: {_PARTITION_METADATA_VERSION}\ntopic_id: {encode_uuid(topic_id)}",
    )


def read_partition_metadata(partition_dir: Path, *, env: io.Env | None = None) -> uuid.UUID | None:
    """The topic id in ``partition.metadata``, or None if the file does not exist.

    Raises CorruptCheckpointError for anything but a version 0 file with a
    valid, non-zero topic id.
    """
    path = partition_dir / PARTITION_METADATA_FILE
    text = _read_text(path, io.env_or_default(env))
    if text is None:
        return None
    lines = _lines(text)
    fields = [re.split(r":[ \t\n\x0b\f\r]+", line) for line in lines[:2]]
    if len(fields) < 2 or any(len(f) != 2 for f in fields):
        raise CorruptCheckpointError(f"{path}: malformed partition metadata {text!r}")
    (version_key, version), (id_key, topic_id) = fields
    if version_key != "version" or id_key != "topic_id":
        raise CorruptCheckpointError(f"{path}: malformed partition metadata {text!r}")
    if version != str(_PARTITION_METADATA_VERSION):
        raise CorruptCheckpointError(f"{path}: unrecognised version {version!r}")
    try:
        value = decode_uuid(topic_id)
    except ValueError:
        raise CorruptCheckpointError(f"{path}: malformed topic id {topic_id!r}") from None
    if value.int == 0:
        raise CorruptCheckpointError(f"{path}: the zero UUID is not a valid topic id")
    return value


# ------------------------------------------------------------ meta.properties

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _java_date_comment(seconds: float) -> str:
    # Java's Properties.store heads the file with Date.toString(); spelled out
    # in English here so that the locale cannot change the file.
    t = time.gmtime(seconds)
    return (
        f"#{_DAYS[t.tm_wday]} {_MONTHS[t.tm_mon - 1]} {t.tm_mday:02d} "
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} UTC {t.tm_year}"
    )


def write_meta_properties(
    log_dir: Path,
    node_id: int,
    cluster_id: str,
    directory_id: uuid.UUID | None,
    *,
    env: io.Env | None = None,
) -> None:
    """Write ``meta.properties`` as a KRaft-mode Kafka broker does (``version=1``).

    ``directory_id`` (KIP-858) is written when given.
    """
    if not _PLAIN_PROPERTY.fullmatch(cluster_id):
        raise ValueError(f"cluster id {cluster_id!r} must be printable ASCII without spaces")
    lines = [_java_date_comment(time.time()), f"cluster.id={cluster_id}"]
    if directory_id is not None:
        lines.append(f"directory.id={encode_uuid(directory_id)}")
    lines += [f"node.id={node_id}", f"version={_KRAFT_META_VERSION}"]
    io.env_or_default(env).atomic_write_text(
        log_dir / META_PROPERTIES_FILE, "\n".join(lines) + "\n"
    )


def read_meta_properties(log_dir: Path, *, env: io.Env | None = None) -> dict[str, str]:
    """The keys of ``meta.properties``, or {} if the file does not exist."""
    # Java reads properties files as ISO-8859-1, which decodes any bytes.
    text = _read_text(log_dir / META_PROPERTIES_FILE, io.env_or_default(env), encoding="latin-1")
    return {} if text is None else parse_properties(text)
