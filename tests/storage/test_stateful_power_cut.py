"""The partition state machine of ``test_stateful.py`` with real power cuts.

The same appends, reads, rolls, truncations, retention, compaction and
flushes, but over the faulty file system: instead of cutting the active
segment by hand, a crash is a power cut that drops every byte and directory
entry not synced (in every file: segments, indexes, snapshots, ``.swap`` and
``.deleted`` renames), optionally letting some files keep their unsynced
bytes. After each reopen the log must hold everything below its recovery
point and pass the consistency checker (the machine's invariants run after
every step).
"""

from __future__ import annotations

import random

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import rule

from seglog.storage.log import Log
from seglog.storage.verify import verify_log
from tests.storage.faulty_env import FaultyEnv
from tests.storage.test_log import read_all
from tests.storage.test_stateful import CONFIG, PartitionMachine


class PowerCutPartitionMachine(PartitionMachine):
    def __init__(self) -> None:
        super().__init__()
        # Reopen the fresh log over the faulty file system, which takes what
        # is on disk now as synced.
        self.log.close()
        self.env = FaultyEnv(self.root)
        self.log = Log.open(self.root / "t-0", CONFIG, env=self.env)

    # Truncation is not durable by itself (as in Kafka, where the replica
    # fetcher truncates again after a restart): a power cut may bring truncated
    # batches back, which this model does not allow. So the variant makes it
    # durable, as a server that truncated on purpose would.
    @rule(back=st.integers(1, 8))
    def truncate(self, back: int) -> None:
        super().truncate(back)
        self.log.active_segment.flush()
        self.env.fsync_dir(self.log.directory)

    @rule(mode=st.sampled_from(["synced", "current", "mixed"]), seed=st.integers(0, 2**16))
    def crash_and_reopen(self, mode: str, seed: int) -> None:  # type: ignore[override]
        recovery_point = self.log.recovery_point
        start = self.log.log_start_offset
        chooser = random.Random(seed)
        keep = {
            "synced": None,
            "current": lambda path: True,
            "mixed": lambda path: chooser.random() < 0.5,
        }[mode]
        self.env.power_cut(keep_unsynced=keep)
        self.log = Log.open(
            self.root / "t-0",
            CONFIG,
            recovery_point=recovery_point,
            log_start_offset=start,
            had_clean_shutdown=False,
            env=self.env,
        )
        report = verify_log(self.log)
        assert report.ok, report.problems
        assert self.log.log_end_offset >= recovery_point
        self.next_offset = self.log.log_end_offset
        # Above the recovery point a power cut may take any unsynced bytes: an
        # older segment's as well as the newest's, while a later segment's empty
        # file survives (as in Kafka, whose log end is then the newest segment's
        # base offset, past a gap). Below it nothing may be lost.
        survivors = {r.offset for r in read_all(self.log, self.log.log_start_offset)}
        lost = sorted(o for o in self.model if o < recovery_point and o not in survivors)
        assert not lost, f"records below the recovery point {recovery_point} lost: {lost}"
        self.model = {o: v for o, v in self.model.items() if o in survivors}


PowerCutPartitionMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=30, deadline=None
)
TestPowerCutPartition = PowerCutPartitionMachine.TestCase
