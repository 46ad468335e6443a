"""Power cuts and failing calls under a whole log directory, against a model.

Hypothesis drives a :class:`~seglog.storage.log_dir.LogDir` over the faulty
file system (``faulty_env.py``): appends, flushes, rolls, checkpoints, topic
creation and deletion, calls that fail with ENOSPC or EIO (some after writing
part of their bytes), a full disk, clean restarts, power cuts that drop every
byte and directory entry not synced, and starts that fail part-way through
recovery followed by another cut. After every reopen:

* every acknowledged batch that was synced is there, at its offsets: with
  ``flush.messages=1`` every acknowledged append, otherwise everything up to
  the last successful flush;
* nothing else is there but acknowledged batches and the batches of appends
  whose error came after their bytes were written (a failed fsync);
* offsets are dense and every partition passes the consistency checker.

A partition that met an I/O error that may leave data in doubt (a failed
fsync, an EIO) is offline until the next reopen: it refuses every append,
flush and roll, as Kafka's offline log directory does.

An append that fails raises StorageError and returns nothing: the model never
counts it as acknowledged.
"""

from __future__ import annotations

import contextlib
import errno
import random
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from seglog.config import LogConfig
from seglog.errors import StorageError
from seglog.records.record import decode_entries
from seglog.storage import io
from seglog.storage.log import Log
from seglog.storage.log_dir import LogDir, LogDirSettings
from seglog.storage.verify import verify_log
from tests.storage.conftest import BASE_TS, make_batch
from tests.storage.faulty_env import FaultyEnv, installed

OPS = (
    "pwritev",
    "write",
    "fsync",
    "fsync_dir",
    "rename",
    "open_create",
    "truncate",
    "unlink",
    "allocate",
    "pread",
)
ERRORS = (errno.ENOSPC, errno.EIO)
SETTINGS = LogDirSettings(log_cleaner_enable=False)


@dataclass
class PartitionModel:
    """What one partition must and may hold."""

    #: offset -> value of every acknowledged record.
    acked: dict[int, bytes] = field(default_factory=dict)
    #: offset -> values an append that failed after writing may have left.
    maybe: dict[int, set[bytes]] = field(default_factory=dict)
    #: Every acknowledged record below this offset must survive a power cut.
    durable_upto: int = 0


def read_log(log: Log) -> list[tuple[int, bytes]]:
    """(offset, value) of every record from the log start to the high watermark."""
    out: list[tuple[int, bytes]] = []
    offset = log.log_start_offset
    while offset < log.high_watermark:
        result = log.read(offset, 1 << 20)
        if result.data is None:
            break
        region = result.data.region
        data = io.pread(region.fd, region.length, region.position)
        records = [r for r in decode_entries(data) if r.offset >= offset]
        assert records, f"no record at {offset} in {log}"
        for record in records:
            assert record.value is not None
            out.append((record.offset, record.value))
        offset = records[-1].offset + 1
    return out


class LogDirMachine(RuleBasedStateMachine):
    """The log directory under faults; subclasses choose the flush policy."""

    flush_messages = 2**63 - 1

    def __init__(self) -> None:
        super().__init__()
        self.data = Path(tempfile.mkdtemp(prefix="seglog-power-cut-"))
        self.env = FaultyEnv(self.data)
        self.config = LogConfig(
            segment_bytes=700,
            index_interval_bytes=100,
            segment_index_bytes=96,
            flush_messages=self.flush_messages,
        )
        self.log_dir = LogDir.open(self.data, defaults=self.config, settings=SETTINGS, env=self.env)
        self.log_dir.create_topic("t", 2)
        self.models: dict[tuple[str, int], PartitionModel] = {
            ("t", 0): PartitionModel(),
            ("t", 1): PartitionModel(),
        }
        # Whether "u" exists: True, False, or None while a failed create or
        # delete leaves it undecided until the next reopen.
        self.u_exists: bool | None = False
        # The model of "u" while it is undecided: it holds no promise then.
        self.u_undecided: PartitionModel | None = None
        self.counter = 0
        self.failures_seen = 0

    def teardown(self) -> None:
        try:
            self.env.clear_faults()
            self.log_dir.close()
        except StorageError:
            pass
        finally:
            shutil.rmtree(self.data, ignore_errors=True)

    # ----------------------------------------------------------- helpers

    def _partitions(self) -> list[tuple[str, int]]:
        return sorted(self.models)

    def _expect_failure(self, exc: StorageError, log: Log | None = None) -> None:
        """A StorageError is only acceptable when a fault was injected (or ``log`` is offline)."""
        if len(self.env.failures) == self.failures_seen:
            if log is not None and log.offline_reason is not None:
                return
            raise AssertionError(f"a StorageError without an injected fault: {exc}") from exc
        self.failures_seen = len(self.env.failures)

    # ------------------------------------------------------------- rules

    @rule(
        which=st.integers(0, 2),
        count=st.integers(1, 4),
        size=st.integers(1, 90),
    )
    def append(self, which: int, count: int, size: int) -> None:
        partitions = self._partitions()
        key = partitions[which % len(partitions)]
        model = self.models[key]
        self.counter += 1
        values = [f"{self.counter}.{i}:".encode() + b"x" * size for i in range(count)]
        log = self.log_dir.log(*key)
        before = log.log_end_offset
        offline = log.offline_reason is not None
        try:
            info = self.log_dir.append(*key, make_batch(values, timestamp=BASE_TS + self.counter))
        except StorageError as exc:
            self._expect_failure(exc, log)
            # An error after the bytes went in (a failed fsync): they may stay.
            for i in range(log.log_end_offset - before):
                model.maybe.setdefault(before + i, set()).add(values[i])
            return
        assert not offline, f"{key} is offline, yet it took an append"
        assert info.first_offset == before
        for i, value in enumerate(values):
            model.acked[info.first_offset + i] = value
            model.maybe.pop(info.first_offset + i, None)
        if self.flush_messages == 1:
            model.durable_upto = info.last_offset + 1

    @rule(which=st.integers(0, 2))
    def flush(self, which: int) -> None:
        partitions = self._partitions()
        key = partitions[which % len(partitions)]
        log = self.log_dir.log(*key)
        end = log.log_end_offset
        try:
            log.flush()
        except StorageError as exc:
            self._expect_failure(exc, log)
            return
        self.models[key].durable_upto = end

    @rule(which=st.integers(0, 2))
    def roll(self, which: int) -> None:
        partitions = self._partitions()
        log = self.log_dir.log(*partitions[which % len(partitions)])
        try:
            log.roll()
        except StorageError as exc:
            self._expect_failure(exc, log)

    @rule()
    def checkpoint(self) -> None:
        try:
            self.log_dir.checkpoint()
        except StorageError as exc:
            self._expect_failure(exc)

    @precondition(lambda self: self.u_exists is False)
    @rule()
    def create_topic(self) -> None:
        try:
            self.log_dir.create_topic("u", 1)
        except StorageError as exc:
            self._expect_failure(exc)
            self.u_exists = None
            self.models.pop(("u", 0), None)
            return
        self.u_exists = True
        self.models[("u", 0)] = PartitionModel()

    @precondition(lambda self: self.u_exists is True)
    @rule()
    def delete_topic(self) -> None:
        model = self.models.pop(("u", 0))
        try:
            self.log_dir.delete_topic("u")
        except StorageError as exc:
            self._expect_failure(exc)
            self.u_exists = None
            model.durable_upto = 0
            self.u_undecided = model
            return
        self.u_exists = False

    @rule(
        op=st.sampled_from(OPS),
        nth=st.integers(1, 4),
        error=st.sampled_from(ERRORS),
        partial=st.sampled_from([0.0, 0.0, 0.5]),
    )
    def arm_fault(self, op: str, nth: int, error: int, partial: float) -> None:
        self.env.fail(op, nth, error, partial=partial)

    @rule(full=st.booleans())
    def disk_full(self, full: bool) -> None:
        self.env.disk_full = full

    @rule(mode=st.sampled_from(["synced", "current", "mixed"]), seed=st.integers(0, 2**16))
    def power_cut(self, mode: str, seed: int) -> None:
        chooser = random.Random(seed)
        keep = {
            "synced": None,
            "current": lambda path: True,
            "mixed": lambda path: chooser.random() < 0.5,
        }[mode]
        self.env.power_cut(keep_unsynced=keep)
        self._reopen(clean=False)

    @rule(
        op=st.sampled_from(OPS),
        nth=st.integers(1, 6),
        error=st.sampled_from(ERRORS),
        mode=st.sampled_from(["synced", "current"]),
    )
    def power_cut_during_recovery(self, op: str, nth: int, error: int, mode: str) -> None:
        """A power cut, a start that fails part-way through recovery, another cut, a start."""
        keep = None if mode == "synced" else (lambda path: True)
        self.env.power_cut(keep_unsynced=keep)
        self.env.fail(op, nth, error)
        try:
            self.log_dir = LogDir.open(
                self.data, defaults=self.config, settings=SETTINGS, env=self.env
            )
        except StorageError:
            self.env.power_cut(keep_unsynced=keep)
        else:
            # Recovery got through; the fault, if still armed, hits what follows.
            self.env.clear_faults()
            self.env.power_cut(keep_unsynced=keep)
        self._reopen(clean=False)

    @rule()
    def restart(self) -> None:
        """A close and open: everything acknowledged survives.

        The close is clean unless a partition is offline: that one is
        recovered by the start, as after a crash.
        """
        self.env.clear_faults()
        offline = any(log.offline_reason for log in self.log_dir.logs().values())
        self.log_dir.close()
        for model in self.models.values():
            model.durable_upto = max(model.acked, default=-1) + 1
        self._reopen(clean=not offline)

    # ------------------------------------------------------------ reopen

    def _reopen(self, *, clean: bool) -> None:
        self.log_dir = LogDir.open(self.data, defaults=self.config, settings=SETTINGS, env=self.env)
        assert self.log_dir.had_clean_shutdown is clean
        topics = self.log_dir.topics()
        assert "t" in topics
        if self.u_exists is None:
            self.u_exists = "u" in topics
            if self.u_exists:
                self.models[("u", 0)] = self.u_undecided or PartitionModel()
            self.u_undecided = None
        assert ("u" in topics) is self.u_exists, topics
        assert sorted(self.log_dir.logs()) == self._partitions()
        for key, log in self.log_dir.logs().items():
            report = verify_log(log)
            assert report.ok, (key, report.problems)
            self._check_partition(key, log)
        self.failures_seen = len(self.env.failures)

    def _check_partition(self, key: tuple[str, int], log: Log) -> None:
        model = self.models[key]
        records = read_log(log)
        offsets = [offset for offset, _ in records]
        assert offsets == list(range(log.log_start_offset, log.log_end_offset)), key
        assert log.log_end_offset >= model.durable_upto, (
            f"{key}: acknowledged and synced records up to {model.durable_upto} were "
            f"written, the log ends at {log.log_end_offset}"
        )
        for offset, value in records:
            if offset in model.acked:
                assert value == model.acked[offset], (key, offset)
            else:
                assert value in model.maybe.get(offset, set()), (
                    f"{key}: offset {offset} holds {value[:12]!r}, which no successful append wrote"
                )
        end = log.log_end_offset
        model.acked = {o: v for o, v in model.acked.items() if o < end}
        model.maybe = {o: v for o, v in model.maybe.items() if o < end}
        # What a reopen found is on disk, synced.
        model.durable_upto = end
        for offset, value in records:
            if offset not in model.acked:
                # Present after a restart: from now on it is part of the log.
                model.acked[offset] = value
                model.maybe.pop(offset, None)


class FlushEveryMessage(LogDirMachine):
    """``flush.messages=1``: an acknowledgement means the batch is on disk."""

    flush_messages = 1


class FlushOnDemand(LogDirMachine):
    """The default: only an explicit flush makes the batches before it durable."""


class FlushEveryMessageOnLinux(FlushEveryMessage):
    """``flush.messages=1`` where a failed fsync drops the failed pages for good
    (Linux, "fsyncgate"): no acknowledgement may depend on them afterwards."""

    def __init__(self) -> None:
        super().__init__()
        self.env.failed_fsync_loses_data = True  # a power cut leaves it set

    @rule()
    def a_log_fsync_fails(self) -> None:
        """The next fsync of a ``.log`` fails (more often than arm_fault draws it)."""
        self.env.fail("fsync", error=errno.EIO, named="*.log")


_SETTINGS = settings(max_examples=40, stateful_step_count=30, deadline=None)
FlushEveryMessage.TestCase.settings = _SETTINGS
FlushOnDemand.TestCase.settings = _SETTINGS
FlushEveryMessageOnLinux.TestCase.settings = _SETTINGS
TestFlushEveryMessage = FlushEveryMessage.TestCase
TestFlushOnDemand = FlushOnDemand.TestCase
TestFlushEveryMessageOnLinux = FlushEveryMessageOnLinux.TestCase


# ------------------------------------------------------------ examples


def test_a_new_partition_survives_a_power_cut(tmp_path: Path) -> None:
    """A flushed batch of a partition created just before survives: its directory is synced."""
    config = LogConfig(flush_messages=1)
    with installed(tmp_path) as env:
        log_dir = LogDir.open(tmp_path, defaults=config, settings=SETTINGS)
        log_dir.create_topic("fresh", 2)
        log_dir.append("fresh", 1, make_batch([b"acknowledged"]))
        log_dir.create_partitions("fresh", 3)
        log_dir.append("fresh", 2, make_batch([b"acknowledged too"]))
        env.power_cut()
        log_dir = LogDir.open(tmp_path, defaults=config, settings=SETTINGS)
        try:
            assert read_log(log_dir.log("fresh", 1)) == [(0, b"acknowledged")]
            assert read_log(log_dir.log("fresh", 2)) == [(0, b"acknowledged too")]
        finally:
            log_dir.close()


def test_close_after_a_crash_emptied_a_time_index(tmp_path: Path) -> None:
    """A crash may leave an inactive segment's time index empty; closing must still work."""
    log = Log.open(tmp_path / "t-0", LogConfig())
    log.append(make_batch([b"a"]))
    log.roll()
    log.append(make_batch([b"b"]))
    log.close()
    (tmp_path / "t-0" / "00000000000000000000.timeindex").write_bytes(b"")
    log = Log.open(tmp_path / "t-0", LogConfig(), recovery_point=2, had_clean_shutdown=False)
    found = log.find_offset_by_timestamp(0)  # loads the inactive segment's tail state
    assert found is not None and found.offset == 0
    log.close()
    assert verify_log(Log.open(tmp_path / "t-0", LogConfig())).ok


def test_no_acknowledgement_after_a_failed_fsync_is_lost(tmp_path: Path) -> None:
    """After a failed fsync the partition refuses appends (the kernel may have dropped
    the failed bytes for good), reads go on, and a restart recovers it."""
    config = LogConfig(flush_messages=1)
    with installed(tmp_path) as env:
        env.failed_fsync_loses_data = True
        log_dir = LogDir.open(tmp_path, defaults=config, settings=SETTINGS)
        log_dir.create_topic("t", 1)
        log_dir.append("t", 0, make_batch([b"first"]))
        env.fail("fsync", error=errno.EIO, named="*.log")
        with pytest.raises(StorageError, match="Input/output error"):
            log_dir.append("t", 0, make_batch([b"not acknowledged"]))
        acknowledged: list[bytes] = [b"first"]
        try:
            log_dir.append("t", 0, make_batch([b"acknowledged later"]))
            acknowledged.append(b"acknowledged later")
        except StorageError:
            pass  # refusing every append after the failure is what Kafka does
        env.power_cut()
        log_dir = LogDir.open(tmp_path, defaults=config, settings=SETTINGS)
        try:
            values = [value for _, value in read_log(log_dir.log("t", 0))]
            assert [v for v in values if v in acknowledged] == acknowledged
        finally:
            log_dir.close()


def test_a_failed_flush_hides_the_append_from_consumers(tmp_path: Path) -> None:
    """Log.append moves the high watermark only after its flush.messages fsync: a
    record whose append failed is never read (Kafka's order too)."""
    config = LogConfig(flush_messages=1)
    with installed(tmp_path) as env:
        log = Log.open(tmp_path / "t-0", config)
        log.append(make_batch([b"first"]))
        env.fail("fsync", error=errno.EIO, named="*.log")
        with pytest.raises(StorageError, match="Input/output error"):
            log.append(make_batch([b"not acknowledged"]))
        assert log.high_watermark == 1
        assert read_log(log) == [(0, b"first")]
        log.close()


@pytest.mark.parametrize("nth", range(1, 7))
def test_a_full_disk_during_recovery_loses_nothing(tmp_path: Path, nth: int) -> None:
    """An I/O error while recovering a segment is not corruption: its batches stay.

    Recovery resizes files (the indexes it rebuilds); whichever of those calls
    finds the disk full, the start may fail or the partition stay offline, but
    the acknowledged batch is still there once there is room again.
    """
    config = LogConfig(segment_index_bytes=96, index_interval_bytes=100, flush_messages=1)
    with installed(tmp_path) as env:
        log_dir = LogDir.open(tmp_path, defaults=config, settings=SETTINGS)
        log_dir.create_topic("t", 1)
        log_dir.append("t", 0, make_batch([b"acknowledged"]))
        env.power_cut(keep_unsynced=lambda path: True)
        env.fail("truncate", nth, errno.ENOSPC)
        # Refusing to start is fine; throwing the batch away is not.
        with contextlib.suppress(StorageError):
            LogDir.open(tmp_path, defaults=config, settings=SETTINGS)
        env.clear_faults()
        env.power_cut(keep_unsynced=lambda path: True)  # whatever that start did reached the disk
        log_dir = LogDir.open(tmp_path, defaults=config, settings=SETTINGS)
        try:
            assert read_log(log_dir.log("t", 0)) == [(0, b"acknowledged")]
        finally:
            log_dir.close()


def test_a_segment_rolled_before_a_failed_fsync_keeps_its_name_across_a_power_cut() -> None:
    """Hypothesis's example: the offline partition's close writes its bytes back and must
    sync the directory too, or the new segment's name is lost with what recovery kept."""
    machine = FlushEveryMessageOnLinux()
    try:
        machine.append(count=1, size=1, which=0)
        machine.a_log_fsync_fails()
        machine.roll(which=0)
        machine.append(count=1, size=1, which=0)  # its fsync fails: the partition goes offline
        machine.restart()  # the close writes the bytes back; the start keeps them
        machine.power_cut(mode="synced", seed=0)  # they were synced, name included
    finally:
        machine.teardown()
