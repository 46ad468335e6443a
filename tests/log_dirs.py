"""Every log directory a test leaves behind is checked with ``seglog verify``.

The fixtures that write log directories (storage and coordinator tests through
``tmp_path``, the broker and node subprocesses of ``tests/broker``) call
:func:`check_log_dirs` at teardown, once the logs or brokers are closed, and
fail the test when ``seglog verify`` finds a problem: what a test leaves on disk
is what the next start of the broker would read.

A test that deliberately leaves damaged files behind (it corrupts, truncates or
cuts files and does not reopen the directory to recover it) says so, and why,
with ``@pytest.mark.leaves_damaged_log_dir("why")``; its directories are then
not checked. A test that recovers the directory is checked after recovery, as
any other: that the recovered directory is valid is what it must show.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from seglog.cli.verify import verify
from seglog.storage import filenames
from seglog.storage.verify import verify_partition_dir

MARKER = "leaves_damaged_log_dir"


def damaged_reason(node: pytest.Item) -> str | None:
    """Why the test leaves damaged log directories behind, when it is marked so."""
    marker = node.get_closest_marker(MARKER)
    if marker is None:
        return None
    reason = marker.args[0] if marker.args else marker.kwargs.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise pytest.UsageError(f"{node.nodeid}: @pytest.mark.{MARKER} needs a reason")
    return reason


def _holds_segments(names: Iterable[str]) -> bool:
    return any(
        name.endswith(filenames.LOG_SUFFIX) and filenames.parse_base_offset(name) is not None
        for name in names
    )


def _segment_dirs(root: Path) -> list[Path]:
    """The directories below ``root`` (itself included) that hold ``.log`` segments."""
    found = []
    for directory, _, names in os.walk(root):
        if _holds_segments(names):
            found.append(Path(directory))
    return sorted(found)


def verify_log_dir(log_dir: Path) -> list[str]:
    """Run ``seglog verify`` on ``log_dir``; its report when it finds problems, else []."""
    result = CliRunner().invoke(verify, [str(log_dir)])
    if result.exit_code == 0:
        return []
    # One line a partition, then its problems indented: keep the partitions with problems.
    problems = [
        line
        for line in result.output.splitlines()
        if line.startswith("  ") or line.endswith("problem(s)")
    ]
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        problems.append(f"seglog verify failed: {result.exception!r}")
    return problems or [result.output]


def check_log_dirs(root: Path) -> None:
    """Fail when a log directory below ``root`` is not valid, as ``seglog verify`` sees it.

    Each directory holding partition directories is given to ``seglog verify``;
    a directory of segments not named as a partition (a log opened on a bare
    temporary directory) is checked with the checker ``seglog verify`` uses.
    """
    if not root.is_dir():
        return
    failures: list[str] = []
    log_dirs: set[Path] = set()
    for directory in _segment_dirs(root):
        if filenames.parse_partition_dir(directory.name) is not None:
            log_dirs.add(directory.parent)
            continue
        report = verify_partition_dir(directory)
        where = directory.relative_to(root.parent)
        failures += [f"{where}: {problem}" for problem in report.problems]
    for log_dir in sorted(log_dirs):
        where = log_dir.relative_to(root.parent)
        failures += [f"{where}: {problem}" for problem in verify_log_dir(log_dir)]
    if failures:
        pytest.fail(
            "seglog verify found problems in the log directories the test left:\n"
            + "\n".join(failures),
            pytrace=False,
        )


def check_unless_damaged(request: pytest.FixtureRequest, root: Path) -> None:
    """:func:`check_log_dirs`, unless the test is marked as leaving damaged directories."""
    if damaged_reason(request.node) is None:
        check_log_dirs(root)


@pytest.fixture(autouse=True)
def verify_tmp_path_at_teardown(request: pytest.FixtureRequest) -> Iterator[None]:
    """Check the log directories a test leaves in its ``tmp_path``, after its fixtures close.

    Autouse (in the conftest of the packages whose tests open logs in ``tmp_path``):
    set up before the test's other fixtures, so torn down after them, once the
    logs and log directories they opened are closed.
    """
    if "tmp_path" not in request.fixturenames:
        yield
        return
    root: Path = request.getfixturevalue("tmp_path")
    yield
    check_unless_damaged(request, root)
