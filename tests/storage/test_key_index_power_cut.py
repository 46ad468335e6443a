"""Power cuts and failing calls under a key-indexed topic: lookups stay exact.

Hypothesis drives a :class:`~seglog.storage.log_dir.LogDir` over the faulty
file system (``faulty_env.py``, as the other power-cut tests do): keyed
appends, flushes, rolls, passes of the key indexer (which writes ``.keyindex``
files by rename), calls that fail with ENOSPC or EIO, power cuts that drop
every byte and name not synced (or keep some files' unsynced bytes), and clean
restarts. After every reopen every lookup by key equals a scan of what the
log holds: an index the cut left stale, torn or missing is never believed.
"""

from __future__ import annotations

import contextlib
import errno
import random
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from seglog.config import LogConfig
from seglog.errors import StorageError
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage.log_dir import LogDir, LogDirSettings
from tests.storage.conftest import BASE_TS
from tests.storage.faulty_env import FaultyEnv
from tests.storage.test_key_index_log import scan

OPS = ("pwritev", "write", "fsync", "fsync_dir", "rename", "open_create", "unlink", "pread")
ERRORS = (errno.ENOSPC, errno.EIO)
SETTINGS = LogDirSettings(log_cleaner_enable=False)
KEYS = [b"a", b"b", b"c", None]


class KeyIndexPowerCut(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.data = Path(tempfile.mkdtemp(prefix="seglog-key-power-cut-"))
        self.env = FaultyEnv(self.data)
        self.config = LogConfig(segment_bytes=600, index_interval_bytes=100)
        self.log_dir = LogDir.open(self.data, defaults=self.config, settings=SETTINGS, env=self.env)
        self.log_dir.create_topic("t", 2, {"key.index.enable": "true"})
        self.counter = 0

    def teardown(self) -> None:
        try:
            self.env.clear_faults()
            self.log_dir.close()
        except StorageError:
            pass
        finally:
            shutil.rmtree(self.data, ignore_errors=True)

    @rule(
        partition=st.integers(0, 1),
        keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=4),
        size=st.integers(1, 80),
    )
    def append(self, partition: int, keys: list[bytes | None], size: int) -> None:
        self.counter += 1
        records = [
            SimpleRecord(b"%d.%d:" % (self.counter, i) + b"x" * size, key, BASE_TS + self.counter)
            for i, key in enumerate(keys)
        ]
        # An injected fault, or a partition one took offline, refuses the append.
        with contextlib.suppress(StorageError):
            self.log_dir.append("t", partition, build_batch(records))

    @rule(partition=st.integers(0, 1))
    def flush(self, partition: int) -> None:
        with contextlib.suppress(StorageError):
            self.log_dir.log("t", partition).flush()

    @rule(partition=st.integers(0, 1))
    def roll(self, partition: int) -> None:
        with contextlib.suppress(StorageError):
            self.log_dir.log("t", partition).roll()

    @rule()
    def index_keys(self) -> None:
        # The indexer logs and skips a segment it cannot index; it never raises for one.
        self.log_dir.run_key_indexer()

    @rule(partition=st.integers(0, 1), key=st.sampled_from(KEYS[:3]))
    def look_up(self, partition: int, key: bytes) -> None:
        # Under an injected read fault the answer is an error, never a wrong one.
        with contextlib.suppress(StorageError):
            log = self.log_dir.log("t", partition)
            offsets = [r.offset for r in self.log_dir.find("t", key, partition=partition)]
            assert offsets == scan(log, key)

    @rule(op=st.sampled_from(OPS), nth=st.integers(1, 4), error=st.sampled_from(ERRORS))
    def arm_fault(self, op: str, nth: int, error: int) -> None:
        self.env.fail(op, nth, error)

    @rule(mode=st.sampled_from(["synced", "current", "mixed"]), seed=st.integers(0, 2**16))
    def power_cut(self, mode: str, seed: int) -> None:
        chooser = random.Random(seed)
        keep = {
            "synced": None,
            "current": lambda path: True,
            "mixed": lambda path: chooser.random() < 0.5,
        }[mode]
        self.env.power_cut(keep_unsynced=keep)
        self._reopen()

    @rule()
    def restart(self) -> None:
        self.env.clear_faults()
        try:
            self.log_dir.close()
        except StorageError:
            self.env.power_cut()
        self._reopen()

    def _reopen(self) -> None:
        self.env.clear_faults()
        self.log_dir = LogDir.open(self.data, defaults=self.config, settings=SETTINGS, env=self.env)
        for partition in (0, 1):
            log = self.log_dir.log("t", partition)
            for key in (b"a", b"b", b"c", b"never"):
                assert [r.offset for r in log.find(key)] == scan(log, key), (partition, key)
        # And once the indexer has been through (sealing, rebuilding what the cut broke).
        self.log_dir.run_key_indexer()
        for partition in (0, 1):
            log = self.log_dir.log("t", partition)
            for key in (b"a", b"b", b"c"):
                assert [r.offset for r in log.find(key)] == scan(log, key), (partition, key)


KeyIndexPowerCut.TestCase.settings = settings(
    max_examples=30, stateful_step_count=30, deadline=None
)
TestKeyIndexPowerCut = KeyIndexPowerCut.TestCase
