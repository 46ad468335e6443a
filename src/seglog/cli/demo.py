"""``seglog demo``: write, read back and look up records through the library API."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage.log_dir import LogDir
from seglog.storage.verify import verify_log


@click.command("demo")
@click.option(
    "--data",
    "data_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default="./data",
    show_default=True,
    help="The log directory.",
)
@click.option("--topic", default="demo", show_default=True, help="Topic to write to.")
@click.option("--records", "count", type=int, default=100_000, show_default=True)
@click.option("--batch-size", type=int, default=500, show_default=True, help="Records a batch.")
def demo(data_dir: Path, topic: str, count: int, batch_size: int) -> None:
    """Append records to a topic in DATA, read them back, look one up by time, verify."""
    console = Console()
    with LogDir.open(data_dir) as logs:
        if topic not in logs.topics():
            logs.create_topic(topic, 1, {"segment.bytes": str(16 * 1024 * 1024)})
        log = logs.log(topic, 0)
        start_offset = log.log_end_offset
        first_ts = int(time.time() * 1000)
        began = time.perf_counter()
        written = 0
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task(f"appending to {topic}-0", total=count)
            while written < count:
                n = min(batch_size, count - written)
                records = [
                    SimpleRecord(
                        key=b"key-%d" % ((written + i) % 1000),
                        value=b"value %d" % (written + i),
                        timestamp=first_ts + written + i,
                    )
                    for i in range(n)
                ]
                log.append(build_batch(records))
                written += n
                progress.update(task, advance=n)
        elapsed = time.perf_counter() - began
        log.flush()
        middle_ts = first_ts + count // 2
        found = logs.offset_for_time(topic, 0, middle_ts)
        sample = list(logs.read_records(topic, 0, start_offset, max_bytes=4096))[:3]
        report = verify_log(log)

        table = Table(title=f"seglog demo: {data_dir}/{topic}-0")
        table.add_column("what")
        table.add_column("value", justify="right")
        table.add_row("records appended", f"{count:,}")
        table.add_row("append rate", f"{count / elapsed:,.0f} records/s")
        table.add_row("log start / end offset", f"{log.log_start_offset} / {log.log_end_offset}")
        table.add_row("segments", str(len(log.segments)))
        table.add_row("bytes on disk", f"{log.size:,}")
        table.add_row(
            f"offset at timestamp {middle_ts}", "none" if found is None else str(found.offset)
        )
        table.add_row("consistency check", "ok" if report.ok else "; ".join(report.problems))
        console.print(table)
        for rec in sample:
            key = rec.key.decode() if rec.key else None
            value = rec.value.decode() if rec.value else None
            console.print(f"offset {rec.offset}: key={key} value={value}")
