"""Every file and directory name of a log directory, in one place, as Kafka spells them.

Grammar::

    partition-dir  := topic "-" partition                  e.g. "orders-3"
    deleted-dir    := topic-prefix "-" partition "." uuid "-delete"   (also "-stray")
    future-dir     := topic "-" partition "." uuid "-future"
    topic-prefix   := the topic, cut so that the whole name fits 255 bytes
    segment-file   := offset kind [transient]              e.g. "00000000000000001200.log"
    offset         := 20 decimal digits, zero-padded       (a base offset, 0 .. 2**63-1)
    kind           := ".log" | ".index" | ".timeindex" | ".txnindex" | ".snapshot"
    transient      := ".deleted" | ".cleaned" | ".swap"
    topic          := 1*249 of [a-zA-Z0-9._-], not "." or ".."
    partition      := decimal int32 without leading zeros
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from seglog.errors import InvalidTopicError

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
KEY_INDEX_SUFFIX = ".keyindex"  # seglog's own: a key index (storage/key_index.py); Kafka ignores it
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

MAX_TOPIC_NAME_LENGTH = 249
MAX_FILE_NAME_BYTES = 255
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
"""Kafka's internal topics: written by the broker's coordinators only."""
_MAX_OFFSET = 2**63 - 1
_MAX_PARTITION = 2**31 - 1

# Explicit ASCII classes: in a str pattern \d and \w also match other scripts' digits.
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_SEGMENT_FILE = re.compile(
    r"([0-9]{20})(?:\.log|\.index|\.timeindex|\.txnindex|\.snapshot)"
    r"(?:\.deleted|\.cleaned|\.swap)?"
)
_PARTITION_NUMBER = re.compile(r"0|[1-9][0-9]*")


def offset_name(offset: int) -> str:
    """The 20-digit zero-padded stem of the files of the segment at ``offset``."""
    return f"{offset:020d}"


def log_path(dir: Path, base: int) -> Path:
    """``<dir>/<base:020d>.log``: the segment's record batches."""
    return dir / (offset_name(base) + LOG_SUFFIX)


def index_path(dir: Path, base: int) -> Path:
    """``<dir>/<base:020d>.index``: the segment's offset index."""
    return dir / (offset_name(base) + INDEX_SUFFIX)


def time_index_path(dir: Path, base: int) -> Path:
    """``<dir>/<base:020d>.timeindex``: the segment's time index."""
    return dir / (offset_name(base) + TIME_INDEX_SUFFIX)


def txn_index_path(dir: Path, base: int) -> Path:
    """``<dir>/<base:020d>.txnindex``: the segment's aborted-transaction index."""
    return dir / (offset_name(base) + TXN_INDEX_SUFFIX)


def key_index_path(dir: Path, base: int) -> Path:
    """The key index of the segment at ``base`` (seglog's own file kind)."""
    return dir / (offset_name(base) + KEY_INDEX_SUFFIX)


def snapshot_path(dir: Path, base: int) -> Path:
    """``<dir>/<base:020d>.snapshot``: producer state as of offset ``base``."""
    return dir / (offset_name(base) + SNAPSHOT_SUFFIX)


def parse_base_offset(name: str) -> int | None:
    """The offset in a segment or snapshot file name, else None.

    Accepts the five kinds of file, each optionally with a transient suffix
    (``00000000000000000042.log.swap`` gives 42). Anything else in a partition
    directory (``partition.metadata``, ``leader-epoch-checkpoint``, ``x.tmp``)
    gives None.
    """
    match = _SEGMENT_FILE.fullmatch(name)
    if match is None:
        return None
    offset = int(match.group(1))
    return offset if offset <= _MAX_OFFSET else None


def partition_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>``, the directory of one partition."""
    return f"{topic}-{partition}"


def delete_dir_name(topic: str, partition: int, unique: uuid.UUID | None = None) -> str:
    """The name a partition directory is renamed to when its topic is deleted.

    ``<topic>-<partition>.<uuid>-delete``, with the topic cut short (as Kafka's
    ``logDeleteDirName`` does) so that the whole name fits a file name's 255
    bytes: a topic of 249 characters would otherwise give 291.
    """
    suffix = f"-{partition}.{(unique or uuid.uuid4()).hex}{DELETE_DIR_SUFFIX}"
    return topic[: max(0, MAX_FILE_NAME_BYTES - len(suffix))] + suffix


def is_internal(topic: str) -> bool:
    """Whether ``topic`` is one of Kafka's internal topics (``__consumer_offsets`` ...)."""
    return topic in INTERNAL_TOPICS


def unify_collision_chars(topic: str) -> str:
    """The topic with ``.`` as ``_``: two names equal so would clash in metric names."""
    return topic.replace(".", "_")


def has_collision_chars(topic: str) -> bool:
    """Whether the topic holds a ``.`` or a ``_``."""
    return "." in topic or "_" in topic


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a live partition directory's name, else None.

    The topic is everything before the last ``-`` (topics may contain ``-``).
    Directories being deleted, moved or abandoned (``-delete``, ``-future``,
    ``-stray``, all of which carry a ``.<uuid>`` after the partition) are not
    live partitions and give None, as does anything whose topic is not a legal
    name or whose partition is not written as :func:`partition_dir_name` would
    write it (so two directories can never claim the same partition).
    """
    if name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
        return None
    topic, sep, number = name.rpartition("-")
    if not sep or not _PARTITION_NUMBER.fullmatch(number):
        return None
    partition = int(number)
    if partition > _MAX_PARTITION or not _is_legal_topic(topic):
        return None
    return topic, partition


def _is_legal_topic(name: str) -> bool:
    return (
        0 < len(name) <= MAX_TOPIC_NAME_LENGTH
        and name not in (".", "..")
        and _LEGAL_TOPIC.fullmatch(name) is not None
    )


def validate_topic_name(name: str) -> None:
    """Raise InvalidTopicError unless Kafka would accept ``name`` as a topic name.

    The rules: not empty, not ``.`` or ``..`` (they would name the log directory
    or its parent), at most 249 characters (room for ``-<partition>`` and a
    ``.<uuid>-delete`` suffix within a 255-byte file name), and only ASCII
    letters, digits, ``.``, ``_`` and ``-``.
    """
    if not name:
        raise InvalidTopicError("topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} "
            f"characters, topic name: {name}"
        )
    if _LEGAL_TOPIC.fullmatch(name) is None:
        raise InvalidTopicError(
            f'topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )
