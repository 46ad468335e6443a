"""``seglog dump-log``: list what segment files hold, like Kafka's DumpLogSegments tool.

Reads only; never changes a file. Works on files written by seglog or by Kafka.
The listing goes to stdout in Kafka's tool's words; on a terminal, stderr shows
a bar over the bytes of the ``.log`` files, and one summary line ends on stderr.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click

from seglog.cli._progress import BYTES, Activity, Interrupted, Signals, plural, size_text
from seglog.errors import SeglogError
from seglog.records import batch, control, log_entries
from seglog.records import record as record_codec
from seglog.records.compression import Codec
from seglog.storage import filenames, producer_state, txn_index
from seglog.storage.reader import OffsetIndexView, SegmentReader, TimeIndexView


def _printable(data: bytes | None) -> str:
    if data is None:
        return "null"
    return data.decode("utf-8", errors="backslashreplace")


def _timestamp_label(timestamp_type: int) -> str:
    return "LogAppendTime" if timestamp_type == batch.LOG_APPEND_TIME else "CreateTime"


@dataclass
class _Tally:
    """What was read, for the summary line."""

    files: int = 0
    batches: int = 0
    bytes: int = 0
    problems: int = 0


def _log_bytes(path: Path, max_bytes: int | None) -> int:
    """How much of a ``.log`` file dump-log reads: the progress bar's share of it."""
    size = path.stat().st_size
    return size if max_bytes is None else min(size, max_bytes)


def _dump_log(
    path: Path, print_data: bool, max_bytes: int | None, activity: Activity, tally: _Tally
) -> int:
    """Print every entry of a ``.log`` file; returns the number of problems found."""
    base = filenames.parse_base_offset(path.name)
    click.echo(f"Dumping {path}")
    if base is not None:
        click.echo(f"Log starting offset: {base}")
    problems = 0
    with SegmentReader(path, base if base is not None else 0) as segment:
        end = segment.size if max_bytes is None else min(segment.size, max_bytes)
        # Entries are described without their CRCs first, so that a batch that
        # fails its CRC is listed (as invalid) and the walk goes on after it.
        scanned = segment.scan(check_crc=False)
        for info in scanned.entries:
            if info.position >= end:
                break
            chunk = segment.read(info.position, info.size)
            problems += _dump_entry(info, chunk, print_data)
            tally.batches += 1
            tally.bytes += info.size
            activity.advance(info.size)
        if scanned.error is not None and scanned.valid_end < end:
            click.echo(
                f"Found {segment.size - scanned.valid_end} invalid bytes at position "
                f"{scanned.valid_end}: {scanned.error}"
            )
            problems += 1
    return problems


def _dump_entry(info: log_entries.EntryInfo, chunk: bytes, print_data: bool) -> int:
    """Print one entry (and its records with ``print_data``); returns the problems found."""
    problems = 0
    try:
        log_entries.read_entry(chunk, 0, check_crc=True)
        valid = True
    except Exception:
        valid = False
        problems += 1
    if info.magic == batch.CURRENT_MAGIC:
        h = batch.read_header(chunk)
        horizon = (
            f"OptionalLong[{h.base_timestamp}]" if h.has_delete_horizon else "OptionalLong.empty"
        )
        click.echo(
            f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} "
            f"count: {h.record_count} baseSequence: {h.base_sequence} "
            f"lastSequence: {h.last_sequence} producerId: {h.producer_id} "
            f"producerEpoch: {h.producer_epoch} "
            f"partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {str(h.is_transactional).lower()} "
            f"isControl: {str(h.is_control).lower()} deleteHorizonMs: {horizon} "
            f"position: {info.position} {_timestamp_label(h.timestamp_type)}: "
            f"{h.max_timestamp} size: {info.size} magic: {h.magic} "
            f"compresscodec: {Codec(h.compression).name.lower()} crc: {h.crc} "
            f"isvalid: {str(valid).lower()}"
        )
    else:
        click.echo(
            f"offset: {info.last_offset} position: {info.position} "
            f"timestamp: {info.max_timestamp} size: {info.size} magic: {info.magic} "
            f"count: {info.record_count} isvalid: {str(valid).lower()}"
        )
    if print_data:
        try:
            records = record_codec.decode_entry(chunk)
        except Exception as exc:
            click.echo(f"| cannot decode records: {exc}")
            problems += 1
            records = []
        is_control = info.magic == batch.CURRENT_MAGIC and batch.read_header(chunk).is_control
        for rec in records:
            if is_control:
                click.echo(f"| offset: {rec.offset} timestamp: {rec.timestamp} {_marker(rec)}")
                continue
            headers = ", ".join(h.key for h in rec.headers)
            click.echo(
                f"| offset: {rec.offset} timestamp: {rec.timestamp} "
                f"keySize: {-1 if rec.key is None else len(rec.key)} "
                f"valueSize: {-1 if rec.value is None else len(rec.value)} "
                f"headerKeys: [{headers}] key: {_printable(rec.key)} "
                f"payload: {_printable(rec.value)}"
            )
    return problems


def _marker(rec: record_codec.Record) -> str:
    """A control record as Kafka's tool prints it (``endTxnMarker: COMMIT ...``)."""
    try:
        kind = control.decode_key(rec.key)
        if kind not in (control.ControlType.ABORT, control.ControlType.COMMIT):
            return f"controlType: UNKNOWN({kind})"
        epoch = control.decode_value(rec.value)
    except SeglogError as exc:
        return f"unreadable control record: {exc}"
    return f"endTxnMarker: {control.ControlType(kind).name} coordinatorEpoch: {epoch}"


def _dump_txn_index(path: Path) -> int:
    click.echo(f"Dumping {path}")
    try:
        entries = txn_index.read(path)
    except SeglogError as exc:
        click.echo(f"  Found invalid transaction index: {exc}")
        return 1
    for entry in entries:
        click.echo(
            f"version: {txn_index.VERSION} producerId: {entry.producer_id} "
            f"firstOffset: {entry.first_offset} lastOffset: {entry.last_offset} "
            f"lastStableOffset: {entry.last_stable_offset}"
        )
    return 0


def _log_entries_by_position(log_path: Path) -> dict[int, log_entries.EntryInfo]:
    base = filenames.parse_base_offset(log_path.name)
    try:
        segment = SegmentReader(log_path, base if base is not None else 0)
    except FileNotFoundError:
        return {}
    with segment:
        return {entry.position: entry for entry in segment.scan(check_crc=False).entries}


def _dump_index(path: Path, verify_only: bool) -> int:
    base = filenames.parse_base_offset(path.name)
    if base is None:
        raise click.ClickException(f"{path} is not named <20-digit offset>.index")
    log_path = path.with_name(f"{filenames.offset_name(base)}{filenames.LOG_SUFFIX}")
    entries = _log_entries_by_position(log_path)
    index = OffsetIndexView.load(path, base)
    problems = 0
    click.echo(f"Dumping {path}")
    for n, (offset, position) in enumerate(index):
        if n > 0 and offset == base and position == 0:
            break  # an entry never written: nothing after it is one either
        if not verify_only:
            click.echo(f"offset: {offset} position: {position}")
        entry = entries.get(position)
        if entry is None:
            click.echo(f"  no entry of {log_path.name} starts at position {position}")
            problems += 1
        elif not entry.base_offset <= offset <= entry.last_offset and entry.last_offset != offset:
            click.echo(
                f"  Index offset {offset}, log offset {entry.last_offset} mismatch "
                f"at position {position}"
            )
            problems += 1
    return problems


def _dump_time_index(path: Path, verify_only: bool) -> int:
    base = filenames.parse_base_offset(path.name)
    if base is None:
        raise click.ClickException(f"{path} is not named <20-digit offset>.timeindex")
    log_path = path.with_name(f"{filenames.offset_name(base)}{filenames.LOG_SUFFIX}")
    by_last_offset = {e.last_offset: e for e in _log_entries_by_position(log_path).values()}
    running_max: dict[int, int] = {}
    top = -1
    for offset in sorted(by_last_offset):
        top = max(top, by_last_offset[offset].max_timestamp)
        running_max[offset] = top
    index = TimeIndexView.load(path, base)
    problems = 0
    previous = -1
    click.echo(f"Dumping {path}")
    for n, (timestamp, offset) in enumerate(index):
        if n > 0 and timestamp == 0 and offset == base:
            break  # an entry never written: nothing after it is one either
        if not verify_only:
            click.echo(f"timestamp: {timestamp} offset: {offset}")
        if timestamp < previous:
            click.echo(f"  timestamp {timestamp} is below the previous entry's {previous}")
            problems += 1
        previous = timestamp
        if by_last_offset and running_max.get(offset) != timestamp:
            click.echo(
                f"  Found timestamp mismatch in {path.name}: index timestamp {timestamp} "
                f"for offset {offset}, log max timestamp {running_max.get(offset)}"
            )
            problems += 1
    return problems


def _dump_key_index(path: Path, verify_only: bool) -> int:
    from seglog.storage import key_index

    stem = path.name[:20]
    if not (stem.isdigit() and path.name[20:] == filenames.KEY_INDEX_SUFFIX):
        raise click.ClickException(f"{path} is not named <20-digit offset>.keyindex")
    base = int(stem)
    log_path = path.with_name(f"{filenames.offset_name(base)}{filenames.LOG_SUFFIX}")
    click.echo(f"Dumping {path}")
    try:
        index = key_index.KeyIndexFile.load(path, base, None)
    except SeglogError as exc:
        click.echo(f"  Found invalid key index: {exc}")
        return 1
    try:
        click.echo(
            f"baseOffset: {base} indexedBytes: {index.indexed_bytes} "
            f"lastOffset: {index.last_offset} maxTimestamp: {index.max_timestamp} "
            f"slots: {index.slot_count} entries: {index.entry_count}"
        )
        if not verify_only:
            for n, (key_hash, offset, previous) in enumerate(index.entries(), start=1):
                click.echo(
                    f"entry: {n} offset: {offset} keyHash: {key_hash:08x} "
                    f"slot: {key_hash & (index.slot_count - 1)} previous: {previous}"
                )
        data = log_path.read_bytes() if log_path.exists() else None
        if data is None:
            click.echo(f"  {log_path.name} is missing: the entries cannot be checked")
            return 1
        if len(data) != index.indexed_bytes:
            click.echo(
                f"  Found stale key index: it covers {index.indexed_bytes} bytes of "
                f"{log_path.name}, which holds {len(data)} (seglog rebuilds it)"
            )
            return 1
        built = key_index.build(base, lambda p, n: data[p : p + n], len(data))
        if built.to_bytes() != path.read_bytes():
            click.echo(
                f"  Found key index mismatch: {path.name} is not the index of {log_path.name}"
            )
            return 1
        return 0
    finally:
        index.close()


def _dump_snapshot(path: Path) -> int:
    click.echo(f"Dumping {path}")
    try:
        entries = producer_state.read_snapshot(path)
    except SeglogError as exc:
        click.echo(f"  Found invalid producer snapshot: {exc}")
        return 1
    for entry in entries:
        last = entry.batches[-1]
        txn = entry.current_txn_first_offset
        click.echo(
            f"producerId: {entry.producer_id} producerEpoch: {entry.epoch} "
            f"coordinatorEpoch: {entry.coordinator_epoch} "
            f"currentTxnFirstOffset: {txn if txn >= 0 else 'None'} "
            f"lastTimestamp: {last.timestamp} firstSequence: {last.first_sequence} "
            f"lastSequence: {last.last_sequence} lastOffset: {last.last_offset} "
            f"offsetDelta: {last.offset_delta} timestamp: {last.timestamp}"
        )
    return 0


@click.command("dump-log")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--print-data", is_flag=True, help="Also print each record's key, value and headers.")
@click.option(
    "--verify-index-only",
    is_flag=True,
    help="For index files, print only the problems found, not every entry.",
)
@click.option(
    "--max-bytes",
    type=int,
    default=None,
    help="Read at most this many bytes of each .log file.",
)
def dump_log(
    files: tuple[Path, ...], print_data: bool, verify_index_only: bool, max_bytes: int | None
) -> None:
    """Print the batches of .log files and the entries of index, snapshot and txnindex files.

    Index files are checked against the .log beside them. A summary line
    (files, batches, bytes, problems) ends on stderr. Exits with status 2
    when any problem is found.
    """
    tally = _Tally()
    total = sum(_log_bytes(path, max_bytes) for path in files if _is_log(path.name))
    # Nothing is written: a signal may stop the listing anywhere.
    with Signals(raising=True) as signals:
        activity = Activity("dump-log", "dump-log", total=total, unit=BYTES)
        try:
            with activity:
                for path in files:
                    activity.update(description=path.name)
                    tally.problems += _dump_file(
                        path, print_data, verify_index_only, max_bytes, activity, tally
                    )
                    tally.files += 1
        except Interrupted:
            pass
    summary = (
        f"{plural(tally.files, 'file')}"
        + (f" of {len(files)}" if tally.files < len(files) else "")
        + f", {plural(tally.batches, 'batch')}, {size_text(tally.bytes)}, "
        + f"{plural(tally.problems, 'problem')} in {activity.elapsed:.1f}s"
    )
    if signals.stopped():
        activity.summary(f"interrupted by {signals.name}: {summary}")
        raise SystemExit(signals.exit_code)
    activity.summary(summary)
    if tally.problems:
        raise SystemExit(2)


def _is_log(name: str) -> bool:
    return name.endswith(filenames.LOG_SUFFIX) or name.endswith(
        filenames.LOG_SUFFIX + filenames.DELETED_SUFFIX
    )


def _dump_file(
    path: Path,
    print_data: bool,
    verify_index_only: bool,
    max_bytes: int | None,
    activity: Activity,
    tally: _Tally,
) -> int:
    """Print one file of any kind; returns the number of problems found."""
    name = path.name
    if _is_log(name):
        return _dump_log(path, print_data, max_bytes, activity, tally)
    if name.endswith(filenames.INDEX_SUFFIX):
        return _dump_index(path, verify_index_only)
    if name.endswith(filenames.TIME_INDEX_SUFFIX):
        return _dump_time_index(path, verify_index_only)
    if name.endswith(filenames.SNAPSHOT_SUFFIX):
        return _dump_snapshot(path)
    if name.endswith(filenames.TXN_INDEX_SUFFIX):
        return _dump_txn_index(path)
    if name.endswith(filenames.KEY_INDEX_SUFFIX):
        return _dump_key_index(path, verify_index_only)
    raise click.ClickException(
        f"{path}: not a .log, .index, .timeindex, .txnindex, .keyindex or .snapshot file"
    )


__all__ = ["dump_log"]
