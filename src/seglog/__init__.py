"""seglog: a durable, partitioned, append-only message log in Kafka's format.

The public API, re-exported here (and pinned by ``tests/test_public_api.py``):

* :class:`LogDir` opens a log directory: topics, partitions, checkpoints,
  background retention and compaction; :class:`Log` is one partition.
* :func:`build_batch` and :class:`SimpleRecord` make record batches;
  :func:`decode_records` / :func:`decode_entries` read them back.
* :class:`LogConfig` holds topic configs under Kafka's names and defaults.
"""

from seglog.config import LogConfig
from seglog.errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidRecordError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    SeglogError,
    StorageError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from seglog.records.builder import SimpleRecord, build_batch
from seglog.records.compression import Codec
from seglog.records.record import Header, Record, decode_entries, decode_records
from seglog.storage.log import AppendInfo, Log, LogReadResult
from seglog.storage.log_dir import LogDir, LogDirSettings, TopicInfo
from seglog.storage.segment import TimestampAndOffset

__version__ = "0.1.0"

__all__ = [
    "AppendInfo",
    "Codec",
    "CorruptRecordError",
    "Header",
    "InvalidConfigError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "Log",
    "LogConfig",
    "LogDir",
    "LogDirSettings",
    "LogReadResult",
    "OffsetOutOfRangeError",
    "Record",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "SeglogError",
    "SimpleRecord",
    "StorageError",
    "TimestampAndOffset",
    "TopicExistsError",
    "TopicInfo",
    "UnknownTopicOrPartitionError",
    "__version__",
    "build_batch",
    "decode_entries",
    "decode_records",
]
