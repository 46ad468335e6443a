"""The log-directory tests again, over the faulty file system, checking every reopen.

Every test of ``test_log_dir.py`` runs here with a :class:`FaultyEnv` over its
temporary directory given to every :meth:`LogDir.open` as its environment (so
that every file operation of the directory, its partitions and checkpoints goes
through the recording layer), every :meth:`LogDir.open` runs the
consistency checker over each partition it loaded, and at the end a power cut
drops what the test left unsynced and the directory must open and check again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog.storage.log_dir import LogDir
from seglog.storage.verify import verify_log
from tests.storage import test_log_dir
from tests.storage.faulty_env import FaultyEnv

# The same tests, collected again under this module.
globals().update(
    {name: value for name, value in vars(test_log_dir).items() if name.startswith("test_")}
)


@pytest.fixture(autouse=True)
def faulty_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real_open = LogDir.open.__func__  # type: ignore[attr-defined]
    env = FaultyEnv(tmp_path)

    def checked_open(cls: type[LogDir], *args: Any, **kwargs: Any) -> LogDir:
        kwargs.setdefault("env", env)
        log_dir: LogDir = real_open(cls, *args, **kwargs)
        for key, log in log_dir.logs().items():
            report = verify_log(log)
            assert report.ok, (key, report.problems)
        return log_dir

    monkeypatch.setattr(LogDir, "open", classmethod(checked_open))
    yield
    # And whatever the test left, a power cut now leaves a directory that
    # opens and passes the checker.
    env.power_cut()
    LogDir.open(tmp_path).close()
