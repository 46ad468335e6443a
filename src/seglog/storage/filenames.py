"""Every file and directory name of a log directory, in one place.

<topic>-<partition>/                    a partition directory
<offset:020d>.log|.index|.timeindex     a segment's files
<offset:020d>.txnindex|.snapshot        aborted transactions, producer state
<name>.deleted|.cleaned|.swap           transient suffixes while files move
<topic>-<partition>.<uuid>-delete       a deleted partition awaiting removal
"""

from __future__ import annotations

import re
from pathlib import Path

from seglog.errors import InvalidTopicError

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_SEGMENT_FILE = re.compile(r"^(\d{20})\.[a-z]+(?:\.(?:deleted|cleaned|swap))?$")


def offset_name(offset: int) -> str:
    """The 20-digit zero-padded name stem of a segment at ``offset``."""
    return f"{offset:020d}"


def log_path(directory: Path, base: int) -> Path:
    """``<dir>/<base>.log``."""
    return directory / f"{offset_name(base)}{LOG_SUFFIX}"


def index_path(directory: Path, base: int) -> Path:
    """``<dir>/<base>.index``."""
    return directory / f"{offset_name(base)}{INDEX_SUFFIX}"


def time_index_path(directory: Path, base: int) -> Path:
    """``<dir>/<base>.timeindex``."""
    return directory / f"{offset_name(base)}{TIME_INDEX_SUFFIX}"


def txn_index_path(directory: Path, base: int) -> Path:
    """``<dir>/<base>.txnindex``."""
    return directory / f"{offset_name(base)}{TXN_INDEX_SUFFIX}"


def snapshot_path(directory: Path, base: int) -> Path:
    """``<dir>/<base>.snapshot``."""
    return directory / f"{offset_name(base)}{SNAPSHOT_SUFFIX}"


def parse_base_offset(name: str) -> int | None:
    """The base offset in a segment file name (transient suffixes allowed), else None."""
    match = _SEGMENT_FILE.match(name)
    return int(match.group(1)) if match else None


def partition_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>``."""
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a partition directory name, or None for anything else."""
    if name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
        return None
    topic, sep, number = name.rpartition("-")
    if not sep or not topic or not number.isdigit():
        return None
    if not _LEGAL_TOPIC.fullmatch(topic) or topic in (".", ".."):
        return None
    return topic, int(number)


def validate_topic_name(name: str) -> None:
    """Raise InvalidTopicError unless Kafka would accept ``name`` as a topic name."""
    if not name:
        raise InvalidTopicError("topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters"
        )
    if not _LEGAL_TOPIC.fullmatch(name):
        raise InvalidTopicError(
            f'topic name "{name}" is illegal, it contains a character other than ASCII '
            f"alphanumerics, '.', '_' and '-'"
        )
