from __future__ import annotations

import os
from pathlib import Path

import pytest

from seglog.config import LogConfig
from seglog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnsupportedMagicError,
)
from seglog.records import batch, log_entries
from seglog.records.builder import SimpleRecord, build_batch
from seglog.records.compression import Codec
from seglog.records.record import decode_entries
from seglog.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from tests.storage.conftest import BASE_TS, LogFactory, make_batch


def read_all(log, start: int = 0) -> list:  # type: ignore[no-untyped-def]
    """Every record from ``start`` to the high watermark, read as a consumer would."""
    out = []
    offset = start
    while offset < log.high_watermark:
        result = log.read(offset, 1 << 20)
        if result.data is None:
            break  # only compaction leaves an offset gap at the end of the log
        region = result.data.region
        data = os.pread(region.fd, region.length, region.position)
        out.extend(r for r in decode_entries(data) if r.offset >= offset)
        # Advance past whole batches: compaction may leave a batch's last offsets empty.
        entries = log_entries.scan(data).entries
        assert entries
        offset = entries[-1].next_offset
    return out


def test_append_assigns_dense_offsets(open_log: LogFactory) -> None:
    log = open_log()
    first = log.append(make_batch([b"a", b"b", b"c"]))
    second = log.append(make_batch([b"d"]))
    assert (first.first_offset, first.last_offset) == (0, 2)
    assert (second.first_offset, second.last_offset) == (3, 3)
    assert log.log_end_offset == 4
    assert [r.value for r in read_all(log)] == [b"a", b"b", b"c", b"d"]
    assert [r.offset for r in read_all(log)] == [0, 1, 2, 3]


def test_base_offset_is_patched_in_the_stored_bytes(open_log: LogFactory) -> None:
    log = open_log()
    log.append(make_batch([b"x", b"y"]))
    log.append(make_batch([b"z"]))
    segment = log.active_segment
    data = segment.read_bytes(0, segment.size)
    headers = [h for _, h in batch.iter_headers(data)]
    assert [h.base_offset for h in headers] == [0, 2]


def test_every_codec_round_trips(open_log: LogFactory) -> None:
    log = open_log()
    for codec in Codec:
        log.append(make_batch([codec.name.encode(), b"v" * 300], codec=codec))
    values = [r.value for r in read_all(log)]
    assert values[::2] == [c.name.encode() for c in Codec]


def test_read_beyond_end_is_out_of_range_and_at_end_is_empty(open_log: LogFactory) -> None:
    log = open_log()
    log.append(make_batch([b"a"]))
    assert log.read(1, 100).data is None
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 100)


def test_read_returns_first_batch_whole_even_if_larger_than_max(open_log: LogFactory) -> None:
    log = open_log()
    log.append(make_batch([b"x" * 1000]))
    log.append(make_batch([b"y" * 1000]))
    result = log.read(0, 10)
    assert result.data is not None
    first_size = batch.read_header(log.active_segment.read_bytes(0, 61 + 2000)).size
    assert result.data.region.length == first_size
    partial = log.read(0, first_size + 100)
    assert partial.data is not None and partial.data.region.length == first_size + 100
    assert log.read(0, 10, min_one_message=False).data is not None
    assert log.read(0, 10, min_one_message=False).data.region.length == 10  # type: ignore[union-attr]


def test_read_from_middle_of_batch_starts_at_the_batch(open_log: LogFactory) -> None:
    log = open_log()
    log.append(make_batch([b"a", b"b", b"c"]))
    result = log.read(1, 1000)
    assert result.data is not None
    assert result.data.first_entry_offset == 0
    assert result.data.region.position == 0


def test_rolls_when_segment_bytes_would_be_exceeded(open_log: LogFactory) -> None:
    log = open_log(LogConfig(segment_bytes=1000))
    for i in range(20):
        log.append(make_batch([bytes([i]) * 200]))
    assert len(log.segments) > 5
    assert all(s.size <= 1000 for s in log.segments)
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and bases[0] == 0
    assert [r.offset for r in read_all(log)] == list(range(20))


def test_rolls_by_segment_ms_measured_from_first_batch_timestamp(open_log: LogFactory) -> None:
    log = open_log(LogConfig(segment_ms=1000))
    log.append(make_batch([b"a"], timestamp=BASE_TS), now_ms=BASE_TS)
    log.append(make_batch([b"b"], timestamp=BASE_TS + 1000), now_ms=BASE_TS)
    assert len(log.segments) == 1
    log.append(make_batch([b"c"], timestamp=BASE_TS + 1001), now_ms=BASE_TS)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_rolls_when_the_offset_index_is_full(open_log: LogFactory) -> None:
    # 3 index entries fit; an entry is added once more than 0 bytes were written since.
    log = open_log(LogConfig(segment_index_bytes=24, index_interval_bytes=0))
    for i in range(10):
        log.append(make_batch([bytes([i])]))
    assert len(log.segments) >= 3
    assert [r.offset for r in read_all(log)] == list(range(10))


def test_roll_when_relative_offset_would_overflow(open_log: LogFactory) -> None:
    log = open_log()
    log.append(make_batch([b"a"]))
    segment = log.active_segment
    assert segment.should_roll(
        incoming_size=10,
        incoming_max_timestamp=BASE_TS,
        incoming_last_offset=2**31,
        now_ms=BASE_TS,
        segment_bytes=1 << 30,
        segment_ms=1 << 40,
    )
    assert not segment.should_roll(
        incoming_size=10,
        incoming_max_timestamp=BASE_TS,
        incoming_last_offset=2**31 - 1,
        now_ms=BASE_TS,
        segment_bytes=1 << 30,
        segment_ms=1 << 40,
    )


def test_corrupt_batch_is_refused_and_nothing_written(open_log: LogFactory) -> None:
    log = open_log()
    data = bytearray(make_batch([b"hello"]))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append(data)
    assert log.log_end_offset == 0 and log.active_segment.size == 0


def test_bad_magic_is_refused(open_log: LogFactory) -> None:
    log = open_log()
    data = bytearray(make_batch([b"hello"]))
    data[16] = 7
    with pytest.raises(UnsupportedMagicError):
        log.append(data)
    assert log.log_end_offset == 0


def test_truncated_batch_is_refused(open_log: LogFactory) -> None:
    log = open_log()
    data = make_batch([b"hello"])
    with pytest.raises(CorruptRecordError):
        log.append(data[:-3])
    assert log.active_segment.size == 0


def test_batch_larger_than_max_message_bytes_is_refused(open_log: LogFactory) -> None:
    log = open_log(LogConfig(max_message_bytes=500))
    with pytest.raises(RecordTooLargeError) as err:
        log.append(make_batch([b"x" * 1000]))
    assert err.value.kafka_error == "MESSAGE_TOO_LARGE"
    assert log.log_end_offset == 0


def test_append_larger_than_a_segment_is_refused(open_log: LogFactory) -> None:
    log = open_log(LogConfig(segment_bytes=200))
    with pytest.raises(RecordBatchTooLargeError):
        log.append(make_batch([b"x" * 300]))


def test_unkeyed_record_on_compacted_topic_is_refused(open_log: LogFactory) -> None:
    log = open_log(LogConfig(cleanup_policy="compact"))
    with pytest.raises(InvalidRecordError) as err:
        log.append(make_batch([b"v1", b"v2"], keys=[b"k", None]))
    assert err.value.kafka_error == "INVALID_RECORD"
    assert log.log_end_offset == 0
    log.append(make_batch([b"v1"], keys=[b"k"]))
    assert log.log_end_offset == 1


def test_control_batch_from_client_is_refused(open_log: LogFactory) -> None:
    log = open_log()
    data = build_batch([SimpleRecord(key=b"\x00\x00\x00\x00", value=b"")], is_control=True)
    with pytest.raises(InvalidRecordError):
        log.append(data)


def test_timestamp_too_far_in_future_is_refused(open_log: LogFactory) -> None:
    log = open_log()
    with pytest.raises(InvalidTimestampError):
        log.append(make_batch([b"a"], timestamp=BASE_TS + 3_600_001), now_ms=BASE_TS)
    log.append(make_batch([b"a"], timestamp=BASE_TS + 3_600_000), now_ms=BASE_TS)


def test_timestamp_too_old_is_refused_when_configured(open_log: LogFactory) -> None:
    log = open_log(LogConfig(message_timestamp_before_max_ms=1000))
    with pytest.raises(InvalidTimestampError):
        log.append(make_batch([b"a", b"b"], timestamp=BASE_TS - 2000, step=1500), now_ms=BASE_TS)


def test_log_append_time_rewrites_timestamps(open_log: LogFactory) -> None:
    log = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append(make_batch([b"a", b"b"], timestamp=5), now_ms=BASE_TS)
    assert info.log_append_time == BASE_TS
    records = read_all(log)
    assert [r.timestamp for r in records] == [BASE_TS, BASE_TS]
    header = batch.validate(log.active_segment.read_bytes(0, log.active_segment.size))
    assert header.timestamp_type == batch.LOG_APPEND_TIME


def test_topic_compression_type_recompresses(open_log: LogFactory) -> None:
    log = open_log(LogConfig(compression_type="zstd"))
    log.append(make_batch([b"a" * 100, b"b"], codec=Codec.GZIP))
    header = batch.validate(log.active_segment.read_bytes(0, log.active_segment.size))
    assert header.compression == Codec.ZSTD
    assert [r.value for r in read_all(log)] == [b"a" * 100, b"b"]


def test_lookup_by_timestamp(open_log: LogFactory) -> None:
    log = open_log(LogConfig(index_interval_bytes=100))
    for i in range(50):
        log.append(make_batch([b"x" * 50, b"y" * 50], timestamp=BASE_TS + i * 10, step=5))
    found = log.find_offset_by_timestamp(BASE_TS + 123)
    # batch 12 has timestamps 120 and 125: the first record at or after 123 is its second.
    assert found is not None and (found.offset, found.timestamp) == (25, BASE_TS + 125)
    first = log.find_offset_by_timestamp(0)
    assert first is not None and first.offset == 0
    assert log.find_offset_by_timestamp(BASE_TS + 10_000) is None
    assert log.find_offset_by_timestamp(EARLIEST_TIMESTAMP).offset == 0  # type: ignore[union-attr]
    assert log.find_offset_by_timestamp(LATEST_TIMESTAMP).offset == 100  # type: ignore[union-attr]
    top = log.find_offset_by_timestamp(MAX_TIMESTAMP)
    assert top is not None and (top.offset, top.timestamp) == (99, BASE_TS + 495)


def test_flush_messages_advances_recovery_point(open_log: LogFactory) -> None:
    log = open_log(LogConfig(flush_messages=2))
    log.append(make_batch([b"a"]))
    assert log.recovery_point == 0
    log.append(make_batch([b"b"]))
    assert log.recovery_point == 2
    log.append(make_batch([b"c"]))
    assert log.flush_if_due() is False
    log.flush()
    assert log.recovery_point == 3


def test_flush_ms(open_log: LogFactory) -> None:
    log = open_log(LogConfig(flush_ms=100))
    log.append(make_batch([b"a"]))
    assert log.flush_if_due(now_ms=0) is False
    assert log.flush_if_due(now_ms=2**50) is True
    assert log.recovery_point == 1


def test_truncate_to_removes_whole_batches_and_later_segments(open_log: LogFactory) -> None:
    log = open_log(LogConfig(segment_bytes=400))
    for i in range(10):
        log.append(make_batch([bytes([65 + i]) * 100, b"z"]))
    assert len(log.segments) > 2
    assert log.truncate_to(7)
    # offset 7 is the second record of the batch [6, 7]: that batch goes whole.
    assert log.log_end_offset == 6
    assert [r.offset for r in read_all(log)] == list(range(6))
    info = log.append(make_batch([b"new"]))
    assert info.first_offset == 6


def test_delete_records_moves_log_start(open_log: LogFactory) -> None:
    log = open_log()
    for _ in range(5):
        log.append(make_batch([b"a"]))
    assert log.increment_log_start_offset(3) == 3
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 100)
    assert log.find_offset_by_timestamp(EARLIEST_TIMESTAMP).offset == 3  # type: ignore[union-attr]
    with pytest.raises(OffsetOutOfRangeError):
        log.increment_log_start_offset(6)
    assert log.increment_log_start_offset(1) == 3  # never goes back


def test_readers_keep_their_snapshot_across_segment_deletion(open_log: LogFactory) -> None:
    deleted: list = []
    log = open_log(
        LogConfig(segment_bytes=300),
        delete_scheduler=lambda segments, delay: deleted.extend(segments),
    )
    for i in range(6):
        log.append(make_batch([bytes([i]) * 150]))
    result = log.read(0, 1000)
    assert result.data is not None
    log.delete_segments_prefix(2, "test")
    region = result.data.region
    data = os.pread(region.fd, region.length, region.position)
    assert next(r.offset for r in decode_entries(data)) == 0
    assert log.log_start_offset == log.segments[0].base_offset
    for segment in deleted:
        segment.delete()


def test_reopen_after_clean_close(open_log: LogFactory) -> None:
    log = open_log(LogConfig(segment_bytes=500))
    for i in range(20):
        log.append(make_batch([bytes([i]) * 60, b"b"], timestamp=BASE_TS + i))
    log.close()
    again = open_log(LogConfig(segment_bytes=500), had_clean_shutdown=True, recovery_point=40)
    assert again.log_end_offset == 40
    assert len(read_all(again)) == 40
    assert again.find_offset_by_timestamp(BASE_TS + 5).offset == 9  # type: ignore[union-attr]
    info = again.append(make_batch([b"more"]))
    assert info.first_offset == 40


def test_flush_syncs_the_directory_only_for_new_segments(open_log: LogFactory) -> None:
    from seglog.storage import io as storage_io

    synced: list[object] = []

    class Recording(storage_io.Env):
        def fsync_dir(self, path: Path | str) -> None:
            synced.append(path)
            super().fsync_dir(path)

    log = open_log(env=Recording())
    log.append(make_batch([b"a"]))
    log.flush()
    assert len(synced) == 1  # the first segment's name
    log.append(make_batch([b"b"]))
    log.flush()
    assert len(synced) == 1  # nothing new in the directory
    log.roll()
    log.append(make_batch([b"c"]))
    log.flush()
    assert len(synced) == 2


def test_an_index_flush_with_nothing_new_writes_nothing_back(open_log: LogFactory) -> None:
    log = open_log(LogConfig(index_interval_bytes=1))
    log.append(make_batch([b"a"]))
    log.append(make_batch([b"b"]))  # more than 1 byte since the last entry: indexed
    index = log.active_segment.offset_index
    assert index.entries > 0 and index._dirty
    log.flush()
    assert not index._dirty
    log.append(make_batch([b"c"]))
    assert index._dirty
