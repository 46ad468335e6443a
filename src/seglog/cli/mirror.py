"""``seglog mirror``: copy topics and group offsets to a Kafka cluster (see :mod:`seglog.mirror`).

This module only reads the options, shows progress (rich: a bar per
partition, and with ``--follow`` a lag table refreshed after every round,
both on stderr and only when it is a terminal) and prints the final report
on stdout, its first line the summary; the copy is
:class:`seglog.mirror.Mirror`'s. Off a terminal, the last lag table is
printed on stderr at the end.
SIGINT and SIGTERM stop the mirror between records: what was delivered is
saved in the offset map, and a rerun resumes there (a second signal stops it
at once; the rerun then finds the rest by reading the target).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

import click
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeRemainingColumn
from rich.table import Table

from seglog.cli._client import ClientSettings, admin_client, key_values, reporting
from seglog.cli._progress import progress_wanted
from seglog.mirror import (
    BrokerSource,
    LagRow,
    LogDirSource,
    Mirror,
    MirrorReport,
    Observer,
    OffsetMap,
    Source,
    Target,
)


class _Display(Observer):
    """Progress bars per partition and, when following, the lag table, on stderr."""

    def __init__(self, console: Console, follow: bool) -> None:
        self.console = console
        self.follow = follow
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:>10,.0f} / {task.total:,.0f} offsets"),
            TimeRemainingColumn(),
            console=console,
        )
        self._tasks: dict[tuple[str, int], tuple[TaskID, int]] = {}
        self._lag: Table | None = None
        self.live = Live(self, console=console, refresh_per_second=4, transient=False)

    def __rich__(self) -> RenderableType:
        parts: list[RenderableType] = [self.progress]
        if self._lag is not None:
            parts.append(self._lag)
        return Group(*parts)

    def partition_started(self, topic: str, partition: int, start: int, end: int) -> None:
        key = (topic, partition)
        if key in self._tasks:
            task, _ = self._tasks[key]
            self.progress.update(task, total=end - start, completed=0)
        else:
            task = self.progress.add_task(f"{topic}-{partition}", total=end - start)
        self._tasks[key] = (task, end - start)

    def copied(self, topic: str, partition: int, records: int, nbytes: int) -> None:
        task, _ = self._tasks[(topic, partition)]
        self.progress.advance(task, records)

    def partition_done(self, topic: str, partition: int) -> None:
        task, total = self._tasks[(topic, partition)]
        self.progress.update(task, completed=total)
        if self.follow:
            # Following: finished bars make room for the lag table.
            self.progress.remove_task(task)
            del self._tasks[(topic, partition)]

    def lag(self, rows: list[LagRow]) -> None:
        table = Table(title="mirror lag", title_justify="left")
        for column in ("topic", "partition", "source end", "target end", "behind"):
            table.add_column(column, justify="left" if column == "topic" else "right")
        for row in rows:
            table.add_row(
                row.topic,
                str(row.partition),
                str(row.source_end),
                str(row.target_end),
                str(row.behind),
            )
        self._lag = table
        if self.live.is_started:
            self.live.refresh()

    @property
    def lag_table(self) -> Table | None:
        """The last lag table (with --follow), or None."""
        return self._lag

    def note(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)


def _report_lines(report: MirrorReport, target: str, stopped_by: str | None) -> list[str]:
    mib = report.bytes / (1 << 20)
    # The first line is the summary; the others detail it.
    lines = [
        f"Mirrored to {target} in {report.seconds:.1f}s: {len(report.topics)} topic(s) "
        f"({len(report.created)} created), {report.partitions} partition(s), "
        f"{report.records} record(s), {mib:.2f} MiB, {len(report.errors)} error(s)"
        + (f"; stopped by {stopped_by}" if stopped_by else ""),
    ]
    if report.resumed:
        lines.append(f"Found {report.resumed} record(s) already in the target (resumed).")
    lines.append(f"Groups translated: {len(report.groups)}")
    for group, partitions in sorted(report.groups.items()):
        lines.append(f"  {group}: {partitions} partition(s)")
    for group, reason in sorted(report.skipped_groups.items()):
        lines.append(f"  {group}: not committed, {reason}")
    for item in report.inexact:
        lines.append(
            f"  {item.group}: {item.topic}-{item.partition} offset {item.source} was compacted "
            f"away; mapped to the next record (target offset {item.target})"
        )
    for topic in report.log_append_time:
        lines.append(f"Topic {topic} uses LogAppendTime: its timestamps are the target's.")
    for error in report.errors:
        lines.append(f"error: {error}")
    return lines


@click.command("mirror")
@click.option(
    "--to",
    "to",
    required=True,
    metavar="HOST:PORT",
    help="Bootstrap server(s) of the target cluster, comma separated.",
)
@click.option(
    "--log-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Copy from this log directory, read in place (default ./data).",
)
@click.option(
    "--from",
    "from_broker",
    metavar="HOST:PORT",
    default=None,
    help="Copy from a running broker instead of a log directory.",
)
@click.option(
    "--topics", default=".*", show_default=True, metavar="REGEX", help="Topics to mirror."
)
@click.option(
    "--groups",
    default=".*",
    show_default=True,
    metavar="REGEX",
    help="Consumer groups whose offsets are translated.",
)
@click.option(
    "--follow", is_flag=True, help="Keep mirroring new records and commits until stopped."
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.01),
    default=1.0,
    show_default=True,
    metavar="SECONDS",
    help="With --follow, the pause between rounds.",
)
@click.option(
    "--state",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("seglog-mirror.json"),
    show_default=True,
    help="The offset map (source to target offsets), kept between runs.",
)
@click.option(
    "--max-rate",
    type=click.FloatRange(min=1),
    default=None,
    metavar="RECORDS/S",
    help="Copy at most this many records a second.",
)
@click.option(
    "-X",
    "--property",
    "properties",
    callback=key_values,
    metavar="KEY=VALUE",
    multiple=True,
    help="A librdkafka property for the target clients (repeatable).",
)
@click.option(
    "--source-property",
    "source_properties",
    callback=key_values,
    metavar="KEY=VALUE",
    multiple=True,
    help="A librdkafka property for the source clients, with --from (repeatable).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.001),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="How long to wait for each request to a broker.",
)
def mirror(
    to: str,
    log_dir: Path | None,
    from_broker: str | None,
    topics: str,
    groups: str,
    follow: bool,
    interval: float,
    state: Path,
    max_rate: float | None,
    properties: tuple[tuple[str, str], ...],
    source_properties: tuple[tuple[str, str], ...],
    timeout: float,
) -> None:
    """Copy topics and consumer group offsets to a Kafka cluster at HOST:PORT.

    Missing topics are created with the same partition count and configs;
    records keep their partition, key, value, headers and timestamp, and go
    through an idempotent producer. A rerun (after a crash too) resumes from
    what the target holds. Group offsets are translated to the target's and
    committed while the target group has no members. With --follow, keep
    going until Ctrl-C, showing the lag per partition.
    """
    if log_dir is not None and from_broker is not None:
        raise click.UsageError("give --log-dir or --from, not both")
    target_settings = ClientSettings(to, timeout, dict(properties))
    source: Source
    reachable = [target_settings]
    if from_broker is not None:
        source_settings = ClientSettings(from_broker, timeout, dict(source_properties))
        reachable.append(source_settings)
        with reporting(f"cannot connect to {from_broker}"):
            source = BrokerSource(source_settings.config(), timeout)
    else:
        source = LogDirSource(log_dir or Path("./data"))
    with reporting(f"cannot connect to {to}"):
        target = Target(target_settings.config(), timeout)
    offsets = OffsetMap.load(state, source.description, to)
    for settings in reachable:
        # Say at once when a broker cannot be reached, rather than at the first request.
        admin_client(settings)

    stop = threading.Event()
    stopped_by: list[str] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt  # a second Ctrl-C: stop now, without the report
        stopped_by.append(signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    # The bars and the live lag table only on a terminal: elsewhere rich would print
    # their last state without a newline, glued to the report. force_terminal either
    # way: FORCE_COLOR alone does not make a log file a terminal.
    shown = progress_wanted()
    console = Console(file=sys.stderr, force_terminal=shown)
    display = _Display(console, follow)
    runner = Mirror(
        source,
        target,
        offsets,
        topics=topics,
        groups=groups,
        max_rate=max_rate,
        observer=display,
        stop=stop,
    )
    try:
        live = display.live if shown else contextlib.nullcontext()
        with live, reporting(f"mirror to {to} failed"):
            report = runner.run(follow=follow, interval=interval)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        with reporting("cannot close the clients"):
            target.close()
            source.close()
    if not shown and display.lag_table is not None:
        console.print(display.lag_table)  # the last lag, on lines of its own
    for line in _report_lines(report, to, stopped_by[0] if stopped_by else None):
        click.echo(line)
    if report.errors:
        raise SystemExit(1)
