"""A fake clock with timers, and a coordinator over a real log directory driven by it."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog.coordinator.group_coordinator import (
    CoordinatorConfig,
    GroupCoordinator,
    JoinRequest,
    JoinResult,
    SyncResult,
)
from seglog.coordinator.offset_store import OffsetStore
from seglog.storage.log_dir import LogDir, LogDirSettings
from tests.log_dirs import verify_tmp_path_at_teardown

# Every log directory a test leaves in its tmp_path is checked with `seglog verify`.
__all__ = ["verify_tmp_path_at_teardown"]

START = 1_700_000_000.0
PROTOCOL = [("range", b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x00")]  # subscribes to "t"


class FakeClock:
    """Wall time that moves only when told to; timers fire as it passes them."""

    def __init__(self, start: float = START) -> None:
        self.now = start
        self._timers: list[tuple[float, int, _Timer]] = []
        self._sequence = itertools.count()

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> _Timer:
        timer = _Timer(callback)
        heapq.heappush(self._timers, (self.now + delay, next(self._sequence), timer))
        return timer

    def advance(self, ms: float) -> None:
        """Move time forward by ``ms``, running every timer due on the way, in order."""
        target = self.now + ms / 1000
        while self._timers and self._timers[0][0] <= target:
            due, _, timer = heapq.heappop(self._timers)
            self.now = max(self.now, due)
            if not timer.cancelled:
                timer.callback()
        self.now = target


class _Timer:
    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Harness:
    """A coordinator, its clock and its log directory, with helpers for requests."""

    def __init__(self, path: Path, **config: Any) -> None:
        self.path = path
        self.clock = FakeClock()
        self.config = CoordinatorConfig(
            **{"initial_rebalance_delay_ms": 0, "offsets_topic_num_partitions": 3, **config}
        )
        self.log_dir: LogDir | None = None
        self.coordinator = self.open()

    def open(self, *, load: bool = True) -> GroupCoordinator:
        self.log_dir = LogDir.open(
            self.path, settings=LogDirSettings(log_cleaner_enable=False), clock=self.clock.time
        )
        store = OffsetStore(self.log_dir, partitions=self.config.offsets_topic_num_partitions)
        coordinator = GroupCoordinator(
            self.config, store, clock=self.clock.time, call_later=self.clock.call_later
        )
        if load:
            coordinator.finish_loading(coordinator.load())
        return coordinator

    def restart(self) -> GroupCoordinator:
        """Stop the coordinator, close the directory, open both again (loading)."""
        self.coordinator.shutdown()
        assert self.log_dir is not None
        self.log_dir.close()
        self.coordinator = self.open()
        return self.coordinator

    def close(self) -> None:
        self.coordinator.shutdown()
        if self.log_dir is not None:
            self.log_dir.close()

    def join(
        self,
        group: str,
        member_id: str = "",
        *,
        instance: str | None = None,
        protocols: list[tuple[str, bytes]] | None = None,
        session_ms: int = 10_000,
        rebalance_ms: int = 30_000,
        client_id: str = "client",
        require_known: bool = True,
    ) -> list[JoinResult]:
        """Send a JoinGroup; the list fills in when the coordinator answers."""
        answers: list[JoinResult] = []
        request = JoinRequest(
            group_id=group,
            member_id=member_id,
            group_instance_id=instance,
            client_id=client_id,
            client_host="/127.0.0.1",
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            protocol_type="consumer",
            protocols=protocols if protocols is not None else PROTOCOL,
            require_known_member_id=require_known,
        )
        self.coordinator.join_group(request, answers.append)
        return answers

    def join_new(self, group: str, **kwargs: Any) -> tuple[str, list[JoinResult]]:
        """The MEMBER_ID_REQUIRED round trip, then the real join: (member id, answers)."""
        first = self.join(group, **kwargs)
        assert [a.error for a in first] == ["MEMBER_ID_REQUIRED"]
        member_id = first[0].member_id
        return member_id, self.join(group, member_id, **kwargs)

    def sync(
        self,
        group: str,
        generation: int,
        member_id: str,
        assignments: dict[str, bytes] | None = None,
        instance: str | None = None,
    ) -> list[SyncResult]:
        answers: list[SyncResult] = []
        self.coordinator.sync_group(
            group, generation, member_id, instance, assignments or {}, answers.append
        )
        return answers


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path / "data")
    yield h
    h.close()


@pytest.fixture
def make_harness(tmp_path: Path) -> Iterator[Callable[..., Harness]]:
    made: list[Harness] = []

    def factory(**config: Any) -> Harness:
        h = Harness(tmp_path / f"data{len(made)}", **config)
        made.append(h)
        return h

    yield factory
    for h in made:
        h.close()
