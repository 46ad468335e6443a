"""A small tmpfs mounted for one test: a real disk that fills up.

Mounting needs root and a kernel that permits it; elsewhere the test is
skipped with the reason, never failed.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def mounted_tmpfs(mount_point: Path, size_bytes: int) -> Iterator[Path]:
    """Mount a tmpfs of ``size_bytes`` at ``mount_point`` (created), unmounted at the end."""
    mount_point.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(mount_point)],
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.decode(errors='replace')}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill_disk(path: Path, leave: int) -> None:
    """Fill the file system holding ``path`` (a new file) until about ``leave`` bytes are free."""
    stats = os.statvfs(path.parent)
    size = stats.f_bavail * stats.f_frsize - leave
    chunk = b"\0" * (1 << 20)
    with open(path, "wb") as handle:
        while size > 0:
            try:
                size -= handle.write(chunk[: min(size, len(chunk))])
                handle.flush()
            except OSError:
                break
