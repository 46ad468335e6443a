"""``seglog verify``: check every partition of a log directory without changing it.

stdout gets one line a partition (and its problems); on a terminal, stderr shows
a bar over the bytes of all segments; one summary line ends on stderr. Reading
changes nothing, so SIGINT or SIGTERM stop at once, after the summary of what
was checked (exit status 130 or 143).
"""

from __future__ import annotations

from pathlib import Path

import click

from seglog.cli._progress import BYTES, Activity, Interrupted, Signals, plural, size_text
from seglog.storage import filenames
from seglog.storage.reader import partition_dirs, segment_bases
from seglog.storage.verify import verify_partition_dir


def _segment_bytes(directory: Path) -> int:
    """The size of a partition's ``.log`` files: what verify reads."""
    total = 0
    for base in segment_bases(directory):
        path = directory / f"{filenames.offset_name(base)}{filenames.LOG_SUFFIX}"
        total += path.stat().st_size
    return total


@click.command("verify")
@click.argument(
    "log_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default="./data"
)
def verify(log_dir: Path) -> None:
    """Check CRCs, offsets and indexes of every partition in LOG_DIR (default ./data).

    One line a partition on stdout; progress on stderr when it is a terminal,
    and a summary line (partitions, batches, bytes, problems, time) at the end.
    Exits with status 2 if any partition has a problem.
    """
    partitions = sorted(partition_dirs(log_dir).values())
    if not partitions and filenames.parse_partition_dir(log_dir.name):
        partitions = [log_dir]
    failed = problems = batches = nbytes = done = 0
    # Nothing is written: a signal may stop the walk anywhere.
    with Signals(raising=True) as signals:
        activity = Activity("verify", f"verify {log_dir.name}", unit=BYTES, total=0)
        try:
            with activity:
                if activity.shown:
                    activity.update(total=sum(_segment_bytes(d) for d in partitions))
                for directory in partitions:
                    activity.update(description=directory.name)
                    report = verify_partition_dir(directory, activity.advance)
                    status = "ok" if report.ok else f"{len(report.problems)} problem(s)"
                    click.echo(
                        f"{report.name}: {report.entries} batches, {report.bytes} bytes, {status}"
                    )
                    for problem in report.problems:
                        click.echo(f"  {problem}")
                    done += 1
                    failed += not report.ok
                    problems += len(report.problems)
                    batches += report.entries
                    nbytes += report.bytes
        except Interrupted:
            pass
    summary = (
        f"{plural(done, 'partition')}"
        + (f" of {len(partitions)}" if done < len(partitions) else "")
        + f", {plural(batches, 'batch')}, {size_text(nbytes)}, "
        + f"{plural(problems, 'problem')}"
        + (f" in {plural(failed, 'partition')}" if failed else "")
        + f" in {activity.elapsed:.1f}s"
    )
    if signals.stopped():
        activity.summary(f"interrupted by {signals.name}: {summary}")
        raise SystemExit(signals.exit_code)
    activity.summary(summary)
    if failed:
        raise SystemExit(2)
