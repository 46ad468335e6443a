"""Counting file descriptors and refusing partitions that would eat the reserve."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from seglog.storage import descriptors


def test_free_descriptors_follow_what_is_opened(tmp_path: Path) -> None:
    before = descriptors.free(fresh=True)
    fds = [os.open(tmp_path / f"f{i}", os.O_CREAT | os.O_RDWR) for i in range(10)]
    try:
        assert descriptors.free(fresh=True) == before - 10
    finally:
        for fd in fds:
            os.close(fd)
    assert descriptors.free(fresh=True) == before
    assert 64 <= descriptors.reserve() <= 1024


_CHILD = """
import resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_NOFILE, (200, 400))
from seglog.storage import descriptors
from seglog.storage.log_dir import LogDir
assert descriptors.raise_soft_limit() == (200, 400)
resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))
log_dir = LogDir.open(Path(sys.argv[1]))
created = 0
try:
    for i in range(400):
        log_dir.create_topic(f"t{i}", 1)
        created += 1
except descriptors.TooManyOpenFilesError as exc:
    print(created, exc)
assert not log_dir.has_topic(f"t{created}")  # nothing half-made
assert descriptors.free(fresh=True) >= descriptors.reserve()
log_dir.close()
"""


def test_partitions_are_refused_before_the_reserve(tmp_path: Path) -> None:
    # In a child process: the limit is lowered for the whole process.
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    created, message = result.stdout.split(" ", 1)
    assert 10 < int(created) < 200
    assert "file descriptors" in message and "kept in reserve" in message
