"""``__consumer_offsets`` records: Kafka's byte layouts, partitioning, load, compaction."""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pytest

from seglog.coordinator.offset_store import (
    TOPIC,
    CommittedOffset,
    GroupRecord,
    MemberRecord,
    OffsetStore,
    group_key,
    group_value,
    java_string_hash,
    offset_key,
    offset_value,
    parse_group_value,
    parse_key,
    parse_offset_value,
    partition_for,
)
from seglog.errors import CorruptRecordError, StorageError
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage import io
from seglog.storage.cleaner import LogCleaner
from seglog.storage.log_dir import LogDir, LogDirSettings

TS = 1_700_000_000_000


def test_offset_record_golden_bytes() -> None:
    # The worked example of the module documentation.
    assert offset_key("g", "t", 0) == bytes.fromhex("0001 0001 67 0001 74 00000000")
    value = offset_value(CommittedOffset(42, "", TS))
    assert value == bytes.fromhex("0003 000000000000002a ffffffff 0000 0000018bcfe56800")
    assert parse_offset_value(value) == CommittedOffset(42, "", TS)
    assert parse_key(offset_key("g", "t", 7)) == ("g", "t", 7)


def test_offset_value_with_an_expiry_is_version_1() -> None:
    committed = CommittedOffset(5, "meta", TS, -1, TS + 1000)
    value = offset_value(committed)
    assert value[:2] == b"\x00\x01"
    assert parse_offset_value(value) == committed


def test_older_offset_value_versions() -> None:
    v0 = bytes.fromhex("0000 0000000000000009 0002 6869") + (TS).to_bytes(8, "big")
    assert parse_offset_value(v0) == CommittedOffset(9, "hi", TS)
    with pytest.raises(CorruptRecordError):
        parse_offset_value(b"\x00\x04" + v0[2:])
    with pytest.raises(CorruptRecordError):
        parse_offset_value(v0[:-1])


def test_group_record_round_trip() -> None:
    record = GroupRecord(
        "consumer",
        7,
        "range",
        "m-1",
        TS,
        (
            MemberRecord("m-1", None, "c1", "/127.0.0.1", 30_000, 10_000, b"sub", b"asg"),
            MemberRecord("m-2", "static-2", "c2", "/127.0.0.2", 60_000, 45_000, b"", b""),
        ),
    )
    value = group_value(record)
    assert value[:2] == b"\x00\x03"
    assert parse_group_value(value) == record
    assert group_key("g") == bytes.fromhex("0002 0001 67")
    assert parse_key(group_key("g")) == "g"
    with pytest.raises(CorruptRecordError, match="key version 5"):
        parse_key(b"\x00\x05\x00\x01x")  # a KIP-848 record: not one seglog reads


def test_group_value_version_0() -> None:
    member = b"\x00\x02m1" + b"\x00\x02c1" + b"\x00\x01h" + (10_000).to_bytes(4, "big")
    member += b"\x00\x00\x00\x01s" + b"\x00\x00\x00\x01a"
    value = b"\x00\x00" + b"\x00\x08consumer" + (3).to_bytes(4, "big") + b"\x00\x05range"
    value += b"\x00\x02m1" + (1).to_bytes(4, "big") + member
    parsed = parse_group_value(value)
    assert parsed.generation == 3
    assert parsed.members == (MemberRecord("m1", None, "c1", "h", 10_000, 10_000, b"s", b"a"),)


def test_partitioning_follows_java_string_hash_code() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0
    # A surrogate pair counts as two UTF-16 code units: 0xD83D * 31 + 0xDE00.
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00
    assert all(0 <= partition_for(f"group-{i}", 50) < 50 for i in range(200))


def test_store_load_last_record_wins_and_tombstones(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as log_dir:
        store = OffsetStore(log_dir, partitions=4)
        assert not store.exists and store.load() == {}
        store.append("g", [(offset_key("g", "t", 0), offset_value(CommittedOffset(1, "", TS)))], TS)
        store.append("g", [(offset_key("g", "t", 0), offset_value(CommittedOffset(5, "", TS)))], TS)
        store.append("g", [(offset_key("g", "t", 1), offset_value(CommittedOffset(3, "", TS)))], TS)
        store.append("g", [(offset_key("g", "t", 1), None)], TS)
        store.append(
            "gone", [(offset_key("gone", "t", 0), offset_value(CommittedOffset(1, "", TS)))], TS
        )
        store.append("gone", [(offset_key("gone", "t", 0), None), (group_key("gone"), None)], TS)
        loaded = store.load()
        assert set(loaded) == {"g"}
        assert loaded["g"].offsets == {("t", 0): CommittedOffset(5, "", TS)}
        assert log_dir.topic_config(TOPIC).compact


_GOOD_VALUE = offset_value(CommittedOffset(3, "", TS))
# (key, value) pairs the loader cannot read, each with why.
_UNREADABLE = {
    "empty key": (b"", _GOOD_VALUE),
    "unknown key version": (b"\x00\x07" + offset_key("g", "t", 0)[2:], _GOOD_VALUE),
    "key cut short": (offset_key("g", "t", 0)[:-1], _GOOD_VALUE),
    "key not UTF-8": (b"\x00\x01\x00\x02\xff\xfe\x00\x01t\x00\x00\x00\x00", _GOOD_VALUE),
    "value cut short": (offset_key("g", "t", 0), _GOOD_VALUE[:-3]),
    "unknown value version": (offset_key("g", "t", 0), b"\x00\x09" + _GOOD_VALUE[2:]),
    "empty value": (offset_key("g", "t", 0), b""),
    "group value cut short": (group_key("g"), b"\x00\x03\x00\x08consu"),
    "group value version 4": (group_key("g"), b"\x00\x04\x00"),
}


@pytest.mark.parametrize("why", sorted(_UNREADABLE))
def test_an_unreadable_record_is_skipped_with_a_warning(
    tmp_path: Path, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    key, value = _UNREADABLE[why]
    with LogDir.open(tmp_path) as log_dir:
        store = OffsetStore(log_dir, partitions=1)
        store.append("g", [(offset_key("g", "t", 0), offset_value(CommittedOffset(1, "", TS)))], TS)
        store.append("h", [(offset_key("h", "t", 0), offset_value(CommittedOffset(2, "", TS)))], TS)
        # Written through storage, as the broker refuses client appends to the topic.
        log_dir.log(TOPIC, 0).append(build_batch([SimpleRecord(value, key, TS)]))
        store.append("h", [(offset_key("h", "t", 1), offset_value(CommittedOffset(4, "", TS)))], TS)
        with caplog.at_level(logging.WARNING, logger="seglog.coordinator.offset_store"):
            loaded = store.load()
    assert {g: found.offsets for g, found in loaded.items()} == {
        "g": {("t", 0): CommittedOffset(1, "", TS)},
        "h": {("t", 0): CommittedOffset(2, "", TS), ("t", 1): CommittedOffset(4, "", TS)},
    }
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"offset 2 of {TOPIC}-0" in message for message in warnings), warnings


def test_an_existing_topic_keeps_its_partition_count(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as log_dir:
        OffsetStore(log_dir, partitions=5).ensure_topic()
        assert OffsetStore(log_dir, partitions=50).partitions == 5


def test_compaction_keeps_the_last_commit_of_each_partition(tmp_path: Path) -> None:
    settings = LogDirSettings(log_cleaner_enable=False)
    with LogDir.open(tmp_path, settings=settings, clock=lambda: TS / 1000) as log_dir:
        store = OffsetStore(log_dir, partitions=1, segment_bytes=2048)
        for i in range(300):
            value = offset_value(CommittedOffset(i, "", TS))
            store.append("g", [(offset_key("g", "t", i % 3), value)], TS)
        log = log_dir.log(TOPIC, 0)
        before = log.size
        assert len(log.segments) > 3
        LogCleaner(log_dir, clock=lambda: TS / 1000).clean_once()
        assert log.size < before / 3
        loaded = store.load()["g"].offsets
        assert {k: c.offset for k, c in loaded.items()} == {
            ("t", 0): 297,
            ("t", 1): 298,
            ("t", 2): 299,
        }


def test_a_failed_creation_of_the_offsets_topic_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Out of disk while creating __consumer_offsets: no phantom, and the next try works."""
    calls = [0]

    with LogDir.open(tmp_path) as log_dir:
        real = log_dir.env.atomic_write_text

        def write(path: Path, text: str) -> None:
            if path.name == "partition.metadata":
                calls[0] += 1
                if calls[0] == 4:
                    raise io.storage_error("write", path, OSError(errno.ENOSPC, "No space left"))
            real(path, text)

        store = OffsetStore(log_dir, partitions=10)
        monkeypatch.setattr(log_dir.env, "atomic_write_text", write)
        with pytest.raises(StorageError, match="the disk is full"):
            store.ensure_topic()
        monkeypatch.undo()
        assert not store.exists
        assert not any(p.name.startswith(TOPIC) for p in tmp_path.iterdir())
        store.ensure_topic()
        assert log_dir.topics()[TOPIC].partitions == 10
    with LogDir.open(tmp_path) as log_dir:
        assert log_dir.topics()[TOPIC].partitions == 10 and not log_dir.offline()


def test_offsets_an_old_kafka_wrote_as_legacy_messages_load(tmp_path: Path) -> None:
    """__consumer_offsets of an old Kafka: magic 1 messages before v2 batches."""
    from tests.records.legacy_encoder import message

    key = offset_key("g", "t", 0)
    old = message(0, key, offset_value(CommittedOffset(5, "", 1_700_000_000_000)), magic=1)
    new = build_batch(
        [SimpleRecord(offset_value(CommittedOffset(9, "", 1_700_000_000_001)), key)],
        base_offset=1,
    )
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("__consumer_offsets", 1, {"cleanup.policy": "compact"})
    part = tmp_path / "__consumer_offsets-0"
    (part / "00000000000000000000.log").write_bytes(bytes(old) + new)
    for suffix in (".index", ".timeindex"):
        (part / f"00000000000000000000{suffix}").write_bytes(b"")
    with LogDir.open(tmp_path) as logs:
        loaded = OffsetStore(logs, partitions=1).load()
    assert loaded["g"].offsets[("t", 0)].offset == 9
