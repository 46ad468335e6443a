"""Storage fixtures: real directories, batches built with seglog's builder, and a
consistency check of every log a test leaves behind."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from seglog.config import LogConfig
from seglog.records.builder import SimpleRecord, build_batch
from seglog.records.compression import Codec
from seglog.storage.log import Log
from seglog.storage.verify import verify_log
from tests.log_dirs import verify_tmp_path_at_teardown

# Every log directory a test leaves in its tmp_path is checked with `seglog verify`.
__all__ = ["verify_tmp_path_at_teardown"]

BASE_TS = 1_700_000_000_000


def make_batch(
    values: Sequence[bytes | None],
    *,
    keys: Sequence[bytes | None] | None = None,
    timestamp: int = BASE_TS,
    step: int = 1,
    codec: Codec = Codec.NONE,
) -> bytes:
    """A v2 batch of ``values`` with timestamps ``timestamp + i*step``."""
    records = [
        SimpleRecord(
            key=None if keys is None else keys[i],
            value=value,
            timestamp=timestamp + i * step,
        )
        for i, value in enumerate(values)
    ]
    return build_batch(records, codec=codec)


class LogFactory:
    """Opens logs in a temp dir and checks them with verify at teardown."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.opened: list[Log] = []

    def __call__(self, config: LogConfig | None = None, name: str = "t-0", **kwargs: object) -> Log:
        log = Log.open(self.root / name, config or LogConfig(), **kwargs)  # type: ignore[arg-type]
        self.opened.append(log)
        return log

    def check(self) -> None:
        for log in self.opened:
            if not log.closed:
                report = verify_log(log)
                assert report.ok, report.problems
                log.close()


@pytest.fixture
def open_log(tmp_path: Path) -> Iterator[LogFactory]:
    factory = LogFactory(tmp_path)
    yield factory
    factory.check()
