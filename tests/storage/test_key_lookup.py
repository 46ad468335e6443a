"""Lookups by key over a log directory's files, read in place while the engine holds it open:
they answer what the engine's own lookup answers."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage import filenames
from seglog.storage.key_lookup import (
    UnknownTopicError,
    find_in_log_dir,
    topic_keeps_key_index,
)
from seglog.storage.log_dir import LogDir

NOW = int(time.time() * 1000)
PID = 9100


def fill(logs: LogDir, topic: str, count: int, partitions: int = 2, first: int = 0) -> None:
    """``count`` records over ``partitions`` partitions, keys k0..k4, a millisecond apart."""
    for i in range(first, first + count):
        logs.log(topic, i % partitions).append(
            build_batch([SimpleRecord(b"v%d" % i + b"." * 40, b"k%d" % (i % 5), NOW + i)])
        )


def key_files(directory: Path) -> set[str]:
    """The sealed key index files of a partition directory."""
    return {n for n in os.listdir(directory) if n.endswith(filenames.KEY_INDEX_SUFFIX)}


def test_equals_the_engines_lookup_sealed_unsealed_and_active(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("t", 2, {"internal.segment.bytes": "700", "key.index.enable": "true"})
        fill(logs, "t", 60)
        logs.run_key_indexer()  # seals the rolled segments so far
        fill(logs, "t", 40, first=60)  # more rolled segments, not sealed yet, and the active one
        directory = logs.log("t", 0).directory
        assert key_files(directory), "some segments are sealed"
        assert len(key_files(directory)) < len(logs.log("t", 0).segments) - 1, "some are not"
        assert topic_keeps_key_index(tmp_path, "t")
        for key in (b"k0", b"k3", b"never"):
            expected = logs.find("t", key)
            got = find_in_log_dir(tmp_path, "t", key)
            assert got == expected
            assert find_in_log_dir(tmp_path, "t", key, limit=3) == logs.find("t", key, limit=3)
            assert find_in_log_dir(tmp_path, "t", key, partition=1) == logs.find(
                "t", key, partition=1
            )
        assert find_in_log_dir(tmp_path, "t", b"never") == []
        newest = find_in_log_dir(tmp_path, "t", b"k2", limit=1)[0]
        assert (newest.topic, newest.partition, newest.key) == ("t", 1, b"k2")
        assert newest.value is not None and newest.value.startswith(b"v97.")
        window = find_in_log_dir(tmp_path, "t", b"k1", from_ms=NOW + 20, to_ms=NOW + 60)
        assert window == logs.find("t", b"k1", from_ms=NOW + 20, to_ms=NOW + 60)
        assert [r.timestamp - NOW for r in window] == [56, 51, 46, 41, 36, 31, 26, 21]
        offsets = find_in_log_dir(tmp_path, "t", b"k1", partition=0, start_offset=5, end_offset=20)
        assert offsets == logs.find("t", b"k1", partition=0, start_offset=5, end_offset=20)
        assert offsets and all(5 <= r.offset < 20 for r in offsets)
        # Nothing was written: no key index file appeared for the unsealed segments.
        before = key_files(directory)
        find_in_log_dir(tmp_path, "t", b"k0")
        assert key_files(directory) == before


def test_a_stale_key_index_is_not_trusted(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("t", 1, {"internal.segment.bytes": "700", "key.index.enable": "true"})
        fill(logs, "t", 40, partitions=1)
        logs.run_key_indexer()
        log = logs.log("t", 0)
        sealed = log.segments[0].key_index_path
        assert sealed.exists()
        expected = logs.find("t", b"k0")
    # A file that covers another size than its log's (left by an older layout, say).
    other = log.segments[1].key_index_path
    sealed.write_bytes(other.read_bytes())
    assert find_in_log_dir(tmp_path, "t", b"k0") == expected


def test_unindexed_topics_are_scanned(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("plain", 2, {"internal.segment.bytes": "700"})
        fill(logs, "plain", 50)
        assert not topic_keeps_key_index(tmp_path, "plain")
        got = find_in_log_dir(tmp_path, "plain", b"k4")
        assert [r.offset for r in got if r.partition == 0] == sorted(
            (o for o in range(25) if (2 * o) % 5 == 4), reverse=True
        )
        assert len(got) == 10
        assert [r.timestamp for r in got] == sorted((r.timestamp for r in got), reverse=True)
        assert key_files(logs.log("plain", 0).directory) == set()


def test_read_committed_and_the_log_start_offset(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("tx", 1, {"internal.segment.bytes": "700", "key.index.enable": "true"})
        log = logs.log("tx", 0)

        def txn(value: bytes, pid: int, seq: int) -> int:
            data = build_batch(
                [SimpleRecord(value, b"k", NOW)],
                producer_id=pid,
                producer_epoch=0,
                base_sequence=seq,
                is_transactional=True,
            )
            return log.append(data).first_offset

        early = log.append(build_batch([SimpleRecord(b"early", b"k", NOW)])).first_offset
        committed = txn(b"committed", PID, 0)
        log.append_marker(PID, 0, commit=True)
        aborted = txn(b"aborted", PID + 1, 0)
        log.append_marker(PID + 1, 0, commit=False)
        plain = log.append(build_batch([SimpleRecord(b"plain", b"k", NOW)])).first_offset
        open_txn = txn(b"open", PID, 1)
        log.flush()
        every = [r.offset for r in find_in_log_dir(tmp_path, "tx", b"k")]
        assert every == [open_txn, plain, aborted, committed, early]
        stable = find_in_log_dir(tmp_path, "tx", b"k", read_committed=True)
        assert [r.value for r in stable] == [b"plain", b"committed", b"early"]
        assert stable == logs.find("tx", b"k", isolation="read_committed")
        log.increment_log_start_offset(committed)
        logs.checkpoint()
        assert [r.offset for r in find_in_log_dir(tmp_path, "tx", b"k")] == every[:-1]


def test_unknown_topics_and_partitions(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("t", 2, {})
    with pytest.raises(UnknownTopicError):
        find_in_log_dir(tmp_path, "nope", b"k")
    with pytest.raises(UnknownTopicError):
        find_in_log_dir(tmp_path, "t", b"k", partition=7)
    with pytest.raises(UnknownTopicError):
        find_in_log_dir(tmp_path / "missing", "t", b"k")
    assert find_in_log_dir(tmp_path, "t", b"k") == []


def test_a_segment_swapped_away_while_listed_is_looked_up_in_its_replacement(
    tmp_path: Path,
) -> None:
    from seglog.storage.key_lookup import find_in_partition
    from seglog.storage.reader import PartitionReader

    with LogDir.open(tmp_path) as logs:
        logs.create_topic("t", 1, {"key.index.enable": "true"})
        for n in range(30):
            logs.append("t", 0, build_batch([(b"k%d" % n, b"v%d" % n, 1000 + n)]))
            if n % 10 == 9:
                logs.log("t", 0).roll()
    directory = tmp_path / "t-0"
    part = PartitionReader(directory)  # lists segments 0, 10, 20 (and the empty 30)
    assert part.bases[:3] == [0, 10, 20]
    # What a cleaner's swap does: segments 0 and 10 become one segment at 0.
    merged = (directory / "00000000000000000000.log").read_bytes() + (
        directory / "00000000000000000010.log"
    ).read_bytes()
    for name in os.listdir(directory):
        if name.startswith(("00000000000000000000.", "00000000000000000010.")):
            os.unlink(directory / name)
    (directory / "00000000000000000000.log").write_bytes(merged)
    found = find_in_partition(part, b"k15", limit=None)
    assert [(r.offset, r.value) for r in found] == [(15, b"v15")]
