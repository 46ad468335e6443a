"""``seglog verify``: check every partition of a log directory without changing it."""

from __future__ import annotations

from pathlib import Path

import click

from seglog.storage import filenames
from seglog.storage.reader import partition_dirs
from seglog.storage.verify import verify_partition_dir


@click.command("verify")
@click.argument(
    "log_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default="./data"
)
def verify(log_dir: Path) -> None:
    """Check CRCs, offsets and indexes of every partition in LOG_DIR (default ./data).

    Exits with status 2 if any partition has a problem.
    """
    failed = 0
    partitions = sorted(partition_dirs(log_dir).values())
    if not partitions and filenames.parse_partition_dir(log_dir.name):
        partitions = [log_dir]
    for directory in partitions:
        report = verify_partition_dir(directory)
        status = "ok" if report.ok else f"{len(report.problems)} problem(s)"
        click.echo(f"{report.name}: {report.entries} batches, {report.bytes} bytes, {status}")
        for problem in report.problems:
            click.echo(f"  {problem}")
        failed += not report.ok
    if failed:
        raise SystemExit(2)
