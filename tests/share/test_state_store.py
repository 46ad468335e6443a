"""The share coordinator's store over real log directories: write, reopen, read back."""

from __future__ import annotations

import logging
import os
import random
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.errors import NotLeaderOrFollowerError, StorageError
from seglog.records.builder import SimpleRecord, build_batch
from seglog.share.state import (
    PersistedState,
    RecordState,
    SharePartitionKey,
    StateBatch,
    StateUpdate,
    fold,
)
from seglog.share.state_records import (
    SNAPSHOT,
    UPDATE,
    ShareSnapshot,
    ShareUpdate,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from seglog.share.state_store import (
    STATE_TOPIC,
    ShareStateStore,
    ShareStateUnavailableError,
    UninitializedShareStateError,
)
from seglog.storage import filenames
from seglog.storage.checkpoints import CLEAN_SHUTDOWN_FILE
from seglog.storage.log_dir import LogDir, LogDirSettings, TopicInfo
from tests.small_disk import fill_disk, mounted_tmpfs

SETTINGS = LogDirSettings(log_cleaner_enable=False)
TOPIC_A = uuid.UUID("11111111-2222-3333-4444-555555555555")
TOPIC_B = uuid.UUID("66666666-7777-8888-9999-aaaaaaaaaaaa")


class Clock:
    """Milliseconds that move only when told to."""

    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def _config(**overrides: object) -> dict[str, object]:
    config: dict[str, object] = {
        "share.coordinator.state.topic.num.partitions": 3,
        "share.coordinator.state.topic.segment.bytes": 4096,
    }
    config.update({f"share.coordinator.{name}": value for name, value in overrides.items()})
    return config


def _open(
    path: Path, clock: Clock, config: dict[str, object] | None = None
) -> tuple[LogDir, ShareStateStore]:
    log_dir = LogDir.open(path, settings=SETTINGS)
    store = ShareStateStore(log_dir, config or _config(), now_ms=clock)
    store.start()
    return log_dir, store


def _run(first: int, last: int, state: RecordState, count: int) -> StateBatch:
    return StateBatch(first, last, state, count)


def _updates(count: int, seed: int = 0) -> list[StateUpdate]:
    """``count`` plausible updates: the start moves up, runs change state and count."""
    rng = random.Random(seed)
    start = 0
    updates = []
    for _ in range(count):
        start += rng.randrange(0, 3)
        runs = []
        first = start + rng.randrange(0, 4)
        for _ in range(rng.randrange(0, 4)):
            last = first + rng.randrange(0, 5)
            state = rng.choice([RecordState.AVAILABLE, RecordState.ACKNOWLEDGED])
            runs.append(_run(first, last, state, rng.randrange(1, 4)))
            first = last + 1 + rng.randrange(0, 3)
        updates.append(StateUpdate(start, tuple(runs), leader_epoch=rng.randrange(0, 2)))
    return updates


def _records(log_dir: LogDir, partition: int) -> list[tuple[int, bytes | None, bytes | None]]:
    log = log_dir.log(STATE_TOPIC, partition)
    return [
        (r.offset, r.key, r.value)
        for r in log_dir.read_records(STATE_TOPIC, partition, log.log_start_offset, 1 << 40)
    ]


def _decoded(
    log_dir: LogDir, partition: int
) -> list[tuple[int, SharePartitionKey, ShareSnapshot | ShareUpdate | None]]:
    decoded = []
    for _, key, value in _records(log_dir, partition):
        assert key is not None
        record_type, share_key = decode_key(key)
        decoded.append(
            (record_type, share_key, None if value is None else decode_value(record_type, value))
        )
    return decoded


@pytest.fixture
def clock() -> Clock:
    return Clock()


# ------------------------------------------------------------------------------ basics


def test_the_topic_is_created_as_kafka_creates_it(tmp_path: Path, clock: Clock) -> None:
    log_dir, store = _open(tmp_path, clock)
    try:
        info = log_dir.topics()[STATE_TOPIC]
        assert info.partitions == 3
        assert info.overrides["cleanup.policy"] == "delete"
        assert info.overrides["retention.ms"] == "-1"
        assert info.overrides["compression.type"] == "producer"
        config = log_dir.topic_config(STATE_TOPIC)
        assert config.segment_bytes == 4096
        assert config.retention_ms == -1
        assert not config.compact
    finally:
        log_dir.close()
    # An existing topic keeps its partition count, whatever the configuration says now.
    log_dir, store = _open(tmp_path, clock, {"share.coordinator.state.topic.num.partitions": 7})
    try:
        assert store.partitions == 3
    finally:
        log_dir.close()


def _java_hash(text: str) -> int:
    value = 0
    for unit in (
        int.from_bytes(text.encode("utf-16-be")[i : i + 2], "big")
        for i in range(0, len(text.encode("utf-16-be")), 2)
    ):
        value = (31 * value + unit) % 2**32
    return value - 2**32 if value >= 2**31 else value


def test_partition_for_hashes_kafkas_coordinator_key(tmp_path: Path, clock: Clock) -> None:
    log_dir, store = _open(tmp_path, clock, _config(**{"state.topic.num.partitions": 50}))
    try:
        for group in ("g", "orders", "グループ", "x" * 40):
            for partition in range(5):
                key = SharePartitionKey(group, TOPIC_A, partition)
                text = key.coordinator_key()
                assert text.startswith(f"{group}:ERERESIiMzNERFVVVVVVVQ:")
                assert store.partition_for(key) == abs(_java_hash(text)) % 50
    finally:
        log_dir.close()


def test_write_reopen_read_back(tmp_path: Path, clock: Clock) -> None:
    keys = [
        SharePartitionKey(g, t, p) for g in ("g1", "g2") for t in (TOPIC_A, TOPIC_B) for p in (0, 1)
    ]
    expected: dict[SharePartitionKey, PersistedState] = {}
    log_dir, store = _open(tmp_path, clock)
    try:
        for i, key in enumerate(keys):
            state = store.initialize(key, 10 * i)
            assert state == PersistedState(start_offset=10 * i)
            for update in _updates(7, seed=i):
                shifted = StateUpdate(
                    update.start_offset + 10 * i,
                    tuple(
                        _run(
                            r.first_offset + 10 * i,
                            r.last_offset + 10 * i,
                            r.delivery_state,
                            r.delivery_count,
                        )
                        for r in update.batches
                    ),
                    update.leader_epoch,
                )
                state = fold(state, shifted)
                store.write(key, shifted)
                store.flush(key)
                assert store.read(key) == state
            expected[key] = state
        assert store.keys_of("g1") == sorted(
            [k for k in keys if k.group_id == "g1"], key=lambda k: (k.topic_id.bytes, k.partition)
        )
    finally:
        log_dir.close()
    log_dir, store = _open(tmp_path, clock)
    try:
        for key in keys:
            assert store.read(key) == expected[key]
        assert store.read(SharePartitionKey("g3", TOPIC_A, 0)) is None
        assert store.keys_of("g3") == []
        assert set(store.keys_of("g2")) == {k for k in keys if k.group_id == "g2"}
    finally:
        log_dir.close()


def test_many_updates_then_a_snapshot(tmp_path: Path, clock: Clock) -> None:
    key = SharePartitionKey("g", TOPIC_A, 0)
    config = _config(**{"snapshot.update.records.per.snapshot": 3})
    log_dir, store = _open(tmp_path, clock, config)
    try:
        created = clock.now
        state = store.initialize(key, 0)
        for step, update in enumerate(_updates(9, seed=5)):
            clock.now += 1000
            store.write(key, update)
            state = fold(state, update)
            assert store.read(key) == state, step
        records = _decoded(log_dir, store.partition_for(key))
    finally:
        log_dir.close()
    types = [record_type for record_type, _, _ in records]
    # The initialization, then three updates and a snapshot, twice, then one update.
    assert types == [
        SNAPSHOT,
        UPDATE,
        UPDATE,
        UPDATE,
        SNAPSHOT,
        UPDATE,
        UPDATE,
        UPDATE,
        SNAPSHOT,
        UPDATE,
    ]
    snapshots = [value for _, _, value in records if isinstance(value, ShareSnapshot)]
    assert [s.snapshot_epoch for s in snapshots] == [0, 1, 2]
    assert {s.state_epoch for s in snapshots} == {0}
    assert snapshots[0].create_timestamp == snapshots[0].write_timestamp == created
    assert snapshots[1].create_timestamp == snapshots[1].write_timestamp == created + 4000
    # Each update names the snapshot it follows.
    epochs = [v.snapshot_epoch for _, _, v in records if isinstance(v, ShareUpdate)]
    assert epochs == [0, 0, 0, 1, 1, 1, 2]
    # A snapshot holds the whole folded state at its write.
    folded = PersistedState(start_offset=0)
    for update in _updates(8, seed=5):
        folded = fold(folded, update)
    assert snapshots[2].batches == folded.batches
    assert snapshots[2].start_offset == folded.start_offset
    # The count of updates since the snapshot is rebuilt at a reopen: the next write
    # after two more updates is a snapshot.
    log_dir, store = _open(tmp_path, clock, config)
    try:
        assert store.read(key) == state
        for update in _updates(3, seed=6):
            store.write(key, update)
            state = fold(state, update)
        assert store.read(key) == state
        types = [record_type for record_type, _, _ in _decoded(log_dir, store.partition_for(key))]
        assert types[-3:] == [UPDATE, UPDATE, SNAPSHOT]
    finally:
        log_dir.close()


def test_zero_updates_per_snapshot_makes_every_write_a_snapshot(
    tmp_path: Path, clock: Clock
) -> None:
    key = SharePartitionKey("g", TOPIC_A, 0)
    log_dir, store = _open(tmp_path, clock, _config(**{"snapshot.update.records.per.snapshot": 0}))
    try:
        store.initialize(key, 0)
        for update in _updates(4, seed=1):
            store.write(key, update)
        types = [t for t, _, _ in _decoded(log_dir, store.partition_for(key))]
        assert types == [SNAPSHOT] * 5
    finally:
        log_dir.close()


def test_initializing_again_starts_afresh_under_new_epochs(tmp_path: Path, clock: Clock) -> None:
    key = SharePartitionKey("g", TOPIC_A, 0)
    log_dir, store = _open(tmp_path, clock)
    try:
        store.initialize(key, 0)
        store.write(key, StateUpdate(0, (_run(0, 9, RecordState.ACKNOWLEDGED, 1),)))
        state = store.initialize(key, 100)
        assert state == PersistedState(state_epoch=1, start_offset=100)
        records = _decoded(log_dir, store.partition_for(key))
        last = records[-1][2]
        assert isinstance(last, ShareSnapshot)
        assert (last.snapshot_epoch, last.state_epoch, last.batches) == (1, 1, ())
    finally:
        log_dir.close()
    log_dir, store = _open(tmp_path, clock)
    try:
        assert store.read(key) == PersistedState(state_epoch=1, start_offset=100)
    finally:
        log_dir.close()


def test_delete_then_reopen(tmp_path: Path, clock: Clock) -> None:
    gone = SharePartitionKey("g", TOPIC_A, 0)
    kept = SharePartitionKey("g", TOPIC_A, 1)
    log_dir, store = _open(tmp_path, clock)
    try:
        for key in (gone, kept):
            store.initialize(key, 5)
            store.write(key, StateUpdate(5, (_run(5, 7, RecordState.ACKNOWLEDGED, 1),)))
        store.delete(gone)
        store.delete(SharePartitionKey("never", TOPIC_A, 0))  # nothing to delete: no record
        assert store.read(gone) is None
        assert store.keys_of("g") == [kept]
        with pytest.raises(UninitializedShareStateError):
            store.write(gone, StateUpdate(8))
        # One tombstone, under the snapshot key type, as Kafka writes it.
        tombstones = [
            (t, k) for t, k, v in _decoded(log_dir, store.partition_for(gone)) if v is None
        ]
        assert tombstones == [(SNAPSHOT, gone)]
        total = sum(len(_records(log_dir, p)) for p in range(store.partitions))
        assert total == 5
    finally:
        log_dir.close()
    log_dir, store = _open(tmp_path, clock)
    try:
        assert store.read(gone) is None
        assert store.read(kept) == PersistedState(
            start_offset=5, batches=(_run(5, 7, RecordState.ACKNOWLEDGED, 1),)
        )
        assert store.keys_of("g") == [kept]
        # Initialized again, it starts from a new snapshot.
        assert store.initialize(gone, 9) == PersistedState(start_offset=9)
    finally:
        log_dir.close()


def test_a_tombstone_of_either_key_type_deletes(tmp_path: Path, clock: Clock) -> None:
    key = SharePartitionKey("g", TOPIC_A, 0)
    log_dir, store = _open(tmp_path, clock)
    try:
        store.initialize(key, 0)
        log = log_dir.log(STATE_TOPIC, store.partition_for(key))
        log.append(build_batch([SimpleRecord(None, encode_key(UPDATE, key), clock.now)]))
    finally:
        log_dir.close()
    log_dir, store = _open(tmp_path, clock)
    try:
        assert store.read(key) is None
    finally:
        log_dir.close()


def test_unreadable_records_are_skipped_with_a_warning(
    tmp_path: Path, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    key = SharePartitionKey("g", TOPIC_A, 0)
    update = StateUpdate(0, (_run(0, 3, RecordState.ACKNOWLEDGED, 1),))
    log_dir, store = _open(tmp_path, clock)
    try:
        store.initialize(key, 0)
        log = log_dir.log(STATE_TOPIC, store.partition_for(key))
        bad = [
            SimpleRecord(b"value", None, clock.now),  # no key
            SimpleRecord(b"\x00\x00", encode_key(UPDATE, key), clock.now),  # value cut short
            SimpleRecord(b"", b"\x00\x05\x00\x01g", clock.now),  # unknown record type
            SimpleRecord(
                encode_value(ShareUpdate(0, 0, 0)),
                encode_key(UPDATE, SharePartitionKey("h", TOPIC_B, 0)),
                clock.now,
            ),  # a key of another partition, unless it happens to hash here
        ]
        log.append(build_batch(bad))
        store.write(key, update)
    finally:
        log_dir.close()
    caplog.set_level(logging.WARNING, logger="seglog.share.state_store")
    log_dir, store = _open(tmp_path, clock)
    try:
        assert store.read(key) == fold(PersistedState(start_offset=0), update)
        warnings = [r.getMessage() for r in caplog.records if "skipping" in r.getMessage()]
        assert len(warnings) >= 3, warnings
        assert all(f"{STATE_TOPIC}-{store.partition_for(key)}" in w for w in warnings)
    finally:
        log_dir.close()


@pytest.mark.leaves_damaged_log_dir(
    "a batch of __share_group_state is made undecodable; its CRC no longer matches"
)
def test_a_partition_that_cannot_be_loaded_fails_only_its_keys(
    tmp_path: Path, clock: Clock
) -> None:
    log_dir, store = _open(tmp_path, clock)
    keys = [SharePartitionKey("g", TOPIC_A, p) for p in range(10)]
    broken = [k for k in keys if store.partition_for(k) == 0]
    fine = [k for k in keys if store.partition_for(k) != 0]
    assert broken and fine
    try:
        for key in keys:
            store.initialize(key, 1)
        # The damaged batch is in an inactive segment, which a clean start does not check.
        log_dir.log(STATE_TOPIC, 0).roll()
        for key in keys:
            store.write(key, StateUpdate(2))
    finally:
        log_dir.close()
    segment = tmp_path / filenames.partition_dir_name(STATE_TOPIC, 0) / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[22] = 0x07  # the low byte of the first batch's attributes: codec 7, which is none
    segment.write_bytes(bytes(data))
    log_dir, store = _open(tmp_path, clock)
    try:
        assert set(store.failed_partitions) == {0}
        for key in fine:
            assert store.read(key) == PersistedState(start_offset=2)
            store.write(key, StateUpdate(3))
        for key in broken:
            # Never taken for a state that does not exist, never initialized over.
            with pytest.raises(ShareStateUnavailableError, match=f"{STATE_TOPIC}-0"):
                store.read(key)
            with pytest.raises(ShareStateUnavailableError):
                store.initialize(key, 0)
            with pytest.raises(ShareStateUnavailableError):
                store.write(key, StateUpdate(3))
            with pytest.raises(ShareStateUnavailableError):
                store.delete(key)
        assert store.keys_of("g") == sorted(fine, key=lambda k: k.partition)
        start = log_dir.log(STATE_TOPIC, 0).log_start_offset
        store.prune()
        assert log_dir.log(STATE_TOPIC, 0).log_start_offset == start
    finally:
        log_dir.close()


# --------------------------------------------------------------------------- crash cuts


def _segment_and_size(log_dir: LogDir, partition: int) -> tuple[Path, int]:
    segment = log_dir.log(STATE_TOPIC, partition).active_segment
    return segment.log_path, segment.size


def test_a_cut_of_the_last_segment_keeps_every_complete_batch(tmp_path: Path, clock: Clock) -> None:
    """Every write is a batch: a cut anywhere keeps exactly the writes wholly before it."""
    key = SharePartitionKey("g", TOPIC_A, 0)
    config = _config(**{"snapshot.update.records.per.snapshot": 4})
    source = tmp_path / "source"
    log_dir, store = _open(source, clock, config)
    partition = store.partition_for(key)
    states: list[PersistedState] = []
    # (segment file, its size after the write) of each write, the initialization first.
    ends: list[tuple[Path, int]] = []
    try:
        states.append(store.initialize(key, 0))
        ends.append(_segment_and_size(log_dir, partition))
        for update in _updates(40, seed=11):
            store.write(key, update)
            states.append(fold(states[-1], update))
            ends.append(_segment_and_size(log_dir, partition))
        store.flush(key)
    finally:
        log_dir.close()
    last_segment = ends[-1][0]
    # The writes span segments, the initialization is not in the last one.
    assert ends[0][0] != last_segment
    size = last_segment.stat().st_size
    rng = random.Random(7)
    # Every batch boundary of the last segment, one byte either side, and random bytes.
    boundaries = {end for path, end in ends if path == last_segment}
    cuts = sorted(
        {0, size}
        | {c + d for c in boundaries for d in (-1, 0, 1) if 0 <= c + d <= size}
        | {rng.randrange(size + 1) for _ in range(10)}
    )
    for i, cut in enumerate(cuts):
        copy = tmp_path / f"cut-{i}"
        shutil.copytree(source, copy)
        relative = last_segment.relative_to(source)
        os.truncate(copy / relative, cut)
        (copy / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)  # a crash, not a stop
        kept = [n for n, (path, end) in enumerate(ends) if path != last_segment or end <= cut]
        log_dir, store = _open(copy, clock, config)
        try:
            assert store.read(key) == states[kept[-1]], f"cut at byte {cut}"
            # Writing goes on after the cut, and folds over what was kept.
            more = StateUpdate(
                states[kept[-1]].start_offset, (_run(1000, 1001, RecordState.ACKNOWLEDGED, 1),)
            )
            store.write(key, more)
            assert store.read(key) == fold(states[kept[-1]], more)
        finally:
            log_dir.close()
        log_dir, store = _open(copy, clock, config)
        try:
            assert store.read(key) == fold(states[kept[-1]], more)
        finally:
            log_dir.close()
        shutil.rmtree(copy)


# ----------------------------------------------------------------------------- full disk


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs, unmounted at the end."""
    with mounted_tmpfs(tmp_path / "disk", 16 << 20) as mount_point:
        yield mount_point


def test_a_full_disk_raises_a_storage_error_and_loses_nothing(
    small_disk: Path, clock: Clock
) -> None:
    key = SharePartitionKey("g", TOPIC_A, 0)
    root = small_disk / "data"
    config = _config(**{"state.topic.segment.bytes": 1 << 20})
    log_dir, store = _open(root, clock, config)
    filler = small_disk / "filler"
    try:
        state = store.initialize(key, 0)
        store.flush(key)
        fill_disk(filler, leave=64 * 1024)
        # Wide updates (many runs each) until the disk refuses one.
        refused: StorageError | None = None
        for n in range(10_000):
            runs = tuple(
                _run(10 * i, 10 * i + 4, RecordState.ACKNOWLEDGED, 1 + (n + i) % 3)
                for i in range(200)
            )
            update = StateUpdate(0, runs)
            try:
                store.write(key, update)
            except StorageError as exc:
                refused = exc
                break
            state = fold(state, update)
        assert refused is not None, "the disk never filled"
        assert refused.kafka_error == "KAFKA_STORAGE_ERROR"
        # Nothing changed in memory.
        assert store.read(key) == state
    finally:
        # Room again before the stop, which writes its checkpoints and snapshots.
        filler.unlink(missing_ok=True)
        log_dir.close()
    log_dir, store = _open(root, clock, config)
    try:
        assert store.read(key) == state
        # And writing goes on once there is room.
        store.write(key, StateUpdate(1))
        assert store.read(key) == fold(state, StateUpdate(1))
    finally:
        log_dir.close()


# ------------------------------------------------------------------------------- pruning


def test_pruning_keeps_every_keys_latest_snapshot_and_later_updates(
    tmp_path: Path, clock: Clock
) -> None:
    config = _config(
        **{
            "state.topic.num.partitions": 1,
            "state.topic.segment.bytes": 2048,
            "snapshot.update.records.per.snapshot": 5,
        }
    )
    keys = [SharePartitionKey("g", TOPIC_A, p) for p in range(4)]
    deleted = SharePartitionKey("gone", TOPIC_B, 0)
    states: dict[SharePartitionKey, PersistedState] = {}
    log_dir, store = _open(tmp_path, clock, config)
    try:
        for key in [*keys, deleted]:
            states[key] = store.initialize(key, 0)
        rng = random.Random(3)
        for update in _updates(120, seed=4):
            key = rng.choice(keys)
            store.write(key, update)
            states[key] = fold(states[key], update)
        store.delete(deleted)
        log = log_dir.log(STATE_TOPIC, 0)
        segments_before = len(log.segments)
        # The lowest offset of a live key's latest snapshot, read from the log itself.
        latest: dict[SharePartitionKey, int] = {}
        for offset, key_data, value in _records(log_dir, 0):
            assert key_data is not None
            record_type, share_key = decode_key(key_data)
            if record_type == SNAPSHOT and value is not None:
                latest[share_key] = offset
        needed = min(latest[key] for key in keys)
        assert needed > 0
        store.prune()
        assert log.log_start_offset == needed
        assert len(log.segments) < segments_before
        assert log.segments[0].base_offset <= needed
        for key in keys:
            assert store.read(key) == states[key]
        store.prune()  # again: nothing more to do
        assert log.log_start_offset == needed
    finally:
        log_dir.close()
    log_dir, store = _open(tmp_path, clock, config)
    try:
        assert log_dir.log(STATE_TOPIC, 0).log_start_offset == needed
        for key in keys:
            assert store.read(key) == states[key]
        assert store.read(deleted) is None
        # Writes after a reopen fold over the pruned log's states.
        store.write(keys[0], StateUpdate(states[keys[0]].start_offset + 1))
        states[keys[0]] = fold(states[keys[0]], StateUpdate(states[keys[0]].start_offset + 1))
    finally:
        log_dir.close()
    log_dir, store = _open(tmp_path, clock, config)
    try:
        for key in keys:
            assert store.read(key) == states[key]
    finally:
        log_dir.close()


def test_a_partition_with_no_live_key_is_pruned_to_its_end(tmp_path: Path, clock: Clock) -> None:
    config = _config(**{"state.topic.num.partitions": 1})
    key = SharePartitionKey("g", TOPIC_A, 0)
    log_dir, store = _open(tmp_path, clock, config)
    try:
        store.initialize(key, 0)
        for update in _updates(5):
            store.write(key, update)
        store.delete(key)
        log = log_dir.log(STATE_TOPIC, 0)
        store.prune()
        assert log.log_start_offset == log.log_end_offset == 7
    finally:
        log_dir.close()
    log_dir, store = _open(tmp_path, clock, config)
    try:
        assert store.read(key) is None
        assert store.initialize(key, 3) == PersistedState(start_offset=3)
    finally:
        log_dir.close()


def test_a_cold_share_partition_is_snapshotted_again_and_stops_holding_pruning_back(
    tmp_path: Path, clock: Clock
) -> None:
    interval = 60_000
    config = _config(
        **{
            "state.topic.num.partitions": 1,
            "snapshot.update.records.per.snapshot": 3,
            "cold.partition.snapshot.interval.ms": interval,
        }
    )
    idle = SharePartitionKey("g", TOPIC_A, 0)
    busy = SharePartitionKey("g", TOPIC_A, 1)
    log_dir, store = _open(tmp_path, clock, config)
    try:
        created = clock.now
        idle_state = store.initialize(idle, 4)
        busy_state = store.initialize(busy, 0)
        for update in _updates(10, seed=2):
            clock.now += 1000
            store.write(busy, update)
            busy_state = fold(busy_state, update)
        log = log_dir.log(STATE_TOPIC, 0)
        store.prune()
        assert log.log_start_offset == 0  # the idle key's only snapshot is the first record
        store.snapshot_cold()  # not due yet: nothing written
        assert log.log_end_offset == 12
        clock.now = created + interval
        store.snapshot_cold()
        last = _decoded(log_dir, 0)[-1]
        assert last[:2] == (SNAPSHOT, idle)
        assert last[2] == ShareSnapshot(
            snapshot_epoch=1,
            state_epoch=0,
            leader_epoch=0,
            start_offset=4,
            create_timestamp=created,
            write_timestamp=created + interval,
        )
        # The busy key's latest snapshot is recent: it now holds the start.
        busy_snapshots = [
            offset
            for offset, key_data, value in _records(log_dir, 0)
            if key_data is not None and decode_key(key_data) == (SNAPSHOT, busy)
        ]
        assert len(busy_snapshots) == 3
        store.prune()
        assert log.log_start_offset == busy_snapshots[-1] > 0
        # Both are due: both are snapshotted. Then every share-partition of the partition
        # was last snapshotted cold: it is quiet, and nothing more is written.
        clock.now += 10 * interval
        end = log.log_end_offset
        store.snapshot_cold()
        assert log.log_end_offset == end + 2
        clock.now += 10 * interval
        store.snapshot_cold()
        assert log.log_end_offset == end + 2
    finally:
        log_dir.close()
    log_dir, store = _open(tmp_path, clock, config)
    try:
        assert store.read(idle) == idle_state
        assert store.read(busy) == busy_state
    finally:
        log_dir.close()


# --------------------------------------------------------------------------------- nodes


def test_a_node_loads_and_writes_only_the_state_partitions_it_leads(
    tmp_path: Path, clock: Clock
) -> None:
    def even_state_partitions(info: TopicInfo, partition: int) -> bool:
        return info.name != STATE_TOPIC or partition % 2 == 0

    config = _config(**{"state.topic.num.partitions": 4})
    keys = [SharePartitionKey("g", TOPIC_A, p) for p in range(12)]
    log_dir, store = _open(tmp_path, clock, config)
    try:
        for key in keys:
            store.initialize(key, key.partition)
    finally:
        log_dir.close()
    log_dir = LogDir.open(tmp_path, settings=SETTINGS, owns=even_state_partitions)
    try:
        store = ShareStateStore(log_dir, config, now_ms=clock)
        store.start()
        led = [k for k in keys if store.partition_for(k) % 2 == 0]
        others = [k for k in keys if store.partition_for(k) % 2 == 1]
        assert led and others
        for key in led:
            assert store.serves(key)
            assert store.read(key) == PersistedState(start_offset=key.partition)
            store.write(key, StateUpdate(key.partition + 1))
        for key in others:
            assert not store.serves(key)
            assert store.read(key) is None
            with pytest.raises(NotLeaderOrFollowerError):
                store.initialize(key, 0)
        assert store.keys_of("g") == sorted(led, key=lambda k: k.partition)
        store.prune()
    finally:
        log_dir.close()


# ------------------------------------------------------------------- random operations

_KEYS = [SharePartitionKey(g, TOPIC_A, p) for g in ("g", "h") for p in range(2)]

_state_runs = st.lists(
    st.builds(
        lambda first, length, state, count: StateBatch(first, first + length, state, count),
        st.integers(0, 60),
        st.integers(0, 6),
        st.sampled_from([RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED]),
        st.integers(0, 5),
    ),
    max_size=3,
)


def _no_overlap(runs: list[StateBatch]) -> tuple[StateBatch, ...]:
    kept: list[StateBatch] = []
    for run in sorted(runs, key=lambda r: r.first_offset):
        if not kept or run.first_offset > kept[-1].last_offset:
            kept.append(run)
    return tuple(kept)


_write = st.tuples(
    st.just("write"),
    st.sampled_from(_KEYS),
    st.builds(
        lambda start, runs, epoch: StateUpdate(start, _no_overlap(runs), epoch),
        st.integers(-1, 40),
        _state_runs,
        st.integers(0, 3),
    ),
)
# Writes are the common operation, as in a broker: several between two snapshots.
_operations = st.lists(
    st.one_of(
        st.tuples(st.just("initialize"), st.sampled_from(_KEYS), st.integers(0, 40)),
        _write,
        _write,
        _write,
        _write,
        st.tuples(st.just("delete"), st.sampled_from(_KEYS)),
        st.tuples(st.sampled_from(["prune", "snapshot_cold", "reopen", "tick"])),
    ),
    max_size=60,
)


# Each example makes its own directory below tmp_path: the fixture is shared safely.
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=_operations)
def test_random_operations_match_a_model_across_reopens(
    tmp_path: Path, operations: list[tuple[object, ...]]
) -> None:
    """Whatever the operations, pruning and reopening in between: the states folded by hand."""
    clock = Clock()
    config = _config(
        **{
            "state.topic.num.partitions": 2,
            "state.topic.segment.bytes": 1024,
            "snapshot.update.records.per.snapshot": 2,
            "cold.partition.snapshot.interval.ms": 1000,
        }
    )
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    model: dict[SharePartitionKey, PersistedState] = {}
    log_dir, store = _open(root, clock, config)
    try:
        for operation in operations:
            name = operation[0]
            clock.now += 10
            if name == "initialize":
                key, start = operation[1], operation[2]
                assert isinstance(key, SharePartitionKey) and isinstance(start, int)
                epoch = model[key].state_epoch + 1 if key in model else 0
                model[key] = PersistedState(state_epoch=epoch, start_offset=start)
                assert store.initialize(key, start) == model[key]
            elif name == "write":
                key, update = operation[1], operation[2]
                assert isinstance(key, SharePartitionKey) and isinstance(update, StateUpdate)
                if key in model:
                    store.write(key, update)
                    model[key] = fold(model[key], update)
                else:
                    with pytest.raises(UninitializedShareStateError):
                        store.write(key, update)
            elif name == "delete":
                key = operation[1]
                assert isinstance(key, SharePartitionKey)
                store.delete(key)
                model.pop(key, None)
            elif name == "prune":
                store.prune()
            elif name == "snapshot_cold":
                store.snapshot_cold()
            elif name == "tick":
                clock.now += 1500
            else:
                log_dir.close()
                log_dir, store = _open(root, clock, config)
            for key in _KEYS:
                assert store.read(key) == model.get(key), (operation, key)
        log_dir.close()
        log_dir, store = _open(root, clock, config)
        for key in _KEYS:
            assert store.read(key) == model.get(key), key
        for group in ("g", "h"):
            assert store.keys_of(group) == [k for k in _KEYS if k.group_id == group and k in model]
    finally:
        log_dir.close()
