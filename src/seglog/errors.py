"""The exceptions every layer of seglog raises.

Each error names the Kafka error it corresponds to (``kafka_error``, e.g.
``"CORRUPT_MESSAGE"``) so that the protocol layer can answer a client with
Kafka's own code. The numeric codes live in :mod:`seglog.protocol`; this module
only knows the names, so storage and records stay free of wire details.
"""

from __future__ import annotations


class SeglogError(Exception):
    """Base class of every error seglog raises on purpose."""

    kafka_error: str = "UNKNOWN_SERVER_ERROR"


class CorruptRecordError(SeglogError):
    """Bytes that do not parse as a record batch: bad CRC, bad length, truncated."""

    kafka_error = "CORRUPT_MESSAGE"


class UnsupportedMagicError(CorruptRecordError):
    """A batch whose magic byte is none of 0, 1 or 2."""


class InvalidRecordError(SeglogError):
    """A well-formed batch that breaks a rule of the log it is appended to.

    ``record_errors`` names the records that broke a per-record rule (a key on
    a compacted topic, a timestamp bound) as (index in the batch, message), as
    Kafka's Produce v8+ answers them (KIP-467); empty for a rule of the batch.
    """

    kafka_error = "INVALID_RECORD"

    def __init__(self, message: str = "", record_errors: tuple[tuple[int, str], ...] = ()) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class InvalidTimestampError(InvalidRecordError):
    """A record timestamp outside message.timestamp.{before,after}.max.ms."""

    kafka_error = "INVALID_TIMESTAMP"


class RecordTooLargeError(SeglogError):
    """A batch larger than max.message.bytes."""

    kafka_error = "MESSAGE_TOO_LARGE"


class RecordBatchTooLargeError(SeglogError):
    """An append larger than a whole segment (segment.bytes)."""

    kafka_error = "RECORD_LIST_TOO_LARGE"


class OutOfOrderSequenceError(SeglogError):
    """An idempotent producer's batch whose sequence number does not follow the last one."""

    kafka_error = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpochError(SeglogError):
    """A batch from an idempotent producer with an epoch below the partition's known epoch."""

    kafka_error = "INVALID_PRODUCER_EPOCH"


class TransactionCoordinatorFencedError(SeglogError):
    """A transaction marker from a coordinator epoch older than the one the partition knows."""

    kafka_error = "TRANSACTION_COORDINATOR_FENCED"


class OffsetOutOfRangeError(SeglogError):
    """A read from an offset below the log start or above the log end."""

    kafka_error = "OFFSET_OUT_OF_RANGE"


class UnknownTopicOrPartitionError(SeglogError):
    """A topic or partition that does not exist in this log directory."""

    kafka_error = "UNKNOWN_TOPIC_OR_PARTITION"


class NotLeaderOrFollowerError(SeglogError):
    """The partition exists but this process does not serve it (another node leads it)."""

    kafka_error = "NOT_LEADER_OR_FOLLOWER"


class TopicExistsError(SeglogError):
    """create_topic for a topic that already exists."""

    kafka_error = "TOPIC_ALREADY_EXISTS"


class InvalidTopicError(SeglogError):
    """A topic name Kafka would not accept."""

    kafka_error = "INVALID_TOPIC_EXCEPTION"


class InvalidPartitionsError(SeglogError):
    """A partition count that is not positive, or that would shrink a topic."""

    kafka_error = "INVALID_PARTITIONS"


class InvalidConfigError(SeglogError):
    """An unknown config name or a value out of its range."""

    kafka_error = "INVALID_CONFIG"


class InvalidOffsetError(SeglogError):
    """An index append whose offset is not above the previous one, or out of range."""

    kafka_error = "UNKNOWN_SERVER_ERROR"


class IndexFullError(SeglogError):
    """An append to an index that has no free slot left."""


class KeyIndexDisabledError(SeglogError):
    """A lookup by key in a topic that keeps no key index (``key.index.enable=false``)."""

    kafka_error = "INVALID_REQUEST"


class StorageError(SeglogError):
    """An I/O failure of the log directory (disk full, permission, vanished file)."""

    kafka_error = "KAFKA_STORAGE_ERROR"


class LogDirLockedError(StorageError):
    """Another process holds the log directory's .lock."""


class CorruptIndexError(StorageError):
    """An index file that fails its sanity check; the caller rebuilds it from the log."""


class CorruptCheckpointError(StorageError):
    """A checkpoint file whose version, count or lines do not parse."""
