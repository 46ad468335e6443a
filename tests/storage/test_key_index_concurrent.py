"""Key lookups on a live log while it appends, rolls, seals indexes in the
background and drops segments (DeleteRecords, retention): every answer holds
exactly the key's records that were acknowledged before it, none of another key."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage import retention
from seglog.storage.log_dir import LogDir
from seglog.storage.log_dir_settings import LogDirSettings

KEYS = (b"k0", b"k1", b"k2", b"k3")
#: Records the writer appends; enough for dozens of rolls and deletions.
RECORDS = 1500


def test_lookups_stay_exact_while_appending_rolling_and_deleting(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic(
            "live",
            1,
            {
                "internal.segment.bytes": "800",
                "key.index.enable": "true",
                "file.delete.delay.ms": "0",
            },
        )
        log = logs.log("live", 0)
        logs.start_background(tick_seconds=0.01)
        # The offsets of each key's acknowledged records; read together with the
        # high watermark under the lock so the two agree.
        written: dict[bytes, list[int]] = {k: [] for k in KEYS}
        lock = threading.Lock()
        failures: list[BaseException] = []
        done = threading.Event()

        def write() -> None:
            try:
                for i in range(RECORDS):
                    key = KEYS[i % 3] if i % 7 else KEYS[3]
                    data = build_batch([SimpleRecord(b"value-%d" % i + b"." * 30, key, i)])
                    with lock:
                        offset = log.append(data).first_offset
                        written[key].append(offset)
                    if i % 97 == 96:
                        # DeleteRecords up to a third of what is there, then retention
                        # drops the segments wholly below the new start.
                        start = log.log_start_offset
                        log.increment_log_start_offset(start + (log.high_watermark - start) // 3)
                        retention.delete_old_segments(log, int(time.time() * 1000))
            except BaseException as exc:  # handed to the test thread
                failures.append(exc)
            finally:
                done.set()

        writer = threading.Thread(target=write, name="key-index-writer")
        writer.start()
        lookups = 0
        try:
            while not done.is_set() or lookups < 20:
                key = KEYS[lookups % len(KEYS)]
                with lock:
                    high_watermark = log.high_watermark
                    acknowledged = list(written[key])
                answer = [r.offset for r in log.find(key)]
                start = log.log_start_offset  # after: DeleteRecords may have moved it
                assert answer == sorted(set(answer), reverse=True), answer
                assert all(r.key == key for r in log.find(key, limit=3))
                expected = [o for o in acknowledged if start <= o < high_watermark]
                # Everything acknowledged before the lookup and still above the log
                # start offset is found; what is found is the key's, and nothing else.
                got = [o for o in answer if start <= o < high_watermark]
                assert got == sorted(expected, reverse=True), (key, got, expected)
                with lock:
                    assert set(answer) <= set(written[key])
                lookups += 1
        finally:
            writer.join(timeout=300)
        assert not failures, failures
        assert not writer.is_alive()
        # The run did what it is about: many rolls, segments dropped under the lookups.
        assert log.log_start_offset > RECORDS // 2 and log.segments[0].base_offset > 0
        assert len(log.segments) > 3
        # Settled: every key's answer is exactly what was written and kept.
        for key in KEYS:
            start = log.log_start_offset
            assert [r.offset for r in log.find(key)] == sorted(
                (o for o in written[key] if o >= start), reverse=True
            )


def test_lookups_find_each_keys_newest_record_while_compacting(tmp_path: Path) -> None:
    # The cleaner looks for work often, so that it swaps segments under the lookups.
    settings = LogDirSettings(log_cleaner_backoff_ms=10, log_cleaner_dedupe_buffer_size=1 << 20)
    with LogDir.open(tmp_path, settings=settings) as logs:
        logs.create_topic(
            "compacted",
            1,
            {
                "internal.segment.bytes": "800",
                "key.index.enable": "true",
                "cleanup.policy": "compact",
                "min.cleanable.dirty.ratio": "0.01",
                "file.delete.delay.ms": "0",
            },
        )
        log = logs.log("compacted", 0)
        logs.start_background(tick_seconds=0.01)
        written: dict[bytes, list[int]] = {k: [] for k in KEYS}
        lock = threading.Lock()
        failures: list[BaseException] = []
        done = threading.Event()

        # The log directory's own cleaner compacts while this writes and looks up.
        def write() -> None:
            try:
                for i in range(RECORDS):
                    key = KEYS[i % len(KEYS)]
                    data = build_batch([SimpleRecord(b"value-%d" % i + b"." * 30, key)])
                    with lock:
                        written[key].append(log.append(data).first_offset)
            except BaseException as exc:  # handed to the test thread
                failures.append(exc)
            finally:
                done.set()

        writer = threading.Thread(target=write, name="key-index-compacting-writer")
        writer.start()
        lookups = 0
        try:
            while not done.is_set() or lookups < 20:
                key = KEYS[lookups % len(KEYS)]
                with lock:
                    newest = written[key][-1] if written[key] else None
                answer = [r.offset for r in log.find(key)]
                assert answer == sorted(set(answer), reverse=True), answer
                with lock:
                    assert set(answer) <= set(written[key])
                if newest is not None:
                    # Compaction keeps each key's newest record: the lookup finds it,
                    # or one appended since (which may have let the cleaner drop it).
                    assert answer and answer[0] >= newest, (key, newest, answer)
                    first = log.find(key, limit=1)
                    assert first and first[0].offset >= newest, (key, newest, first)
                lookups += 1
        finally:
            writer.join(timeout=300)
        assert not failures, failures
        for key in KEYS:
            answer = [r.offset for r in log.find(key)]
            assert answer[0] == written[key][-1] and set(answer) <= set(written[key])
        # The cleaner removed records (segments were swapped under the lookups).
        deadline = time.monotonic() + 300
        while sum(len(log.find(key)) for key in KEYS) >= RECORDS:
            assert time.monotonic() < deadline, "the log directory's cleaner never ran"
            time.sleep(0.05)
