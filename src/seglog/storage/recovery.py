"""Loading a partition directory at start-up, repairing what a crash left behind.

The steps are Kafka's LogLoader, in order:

1. ``*.deleted`` files are removed. ``*.cleaned`` files (a compaction that had
   not reached its swap) are removed, and so is any ``*.swap`` at or above the
   smallest ``.cleaned`` base (an interrupted split).
2. The remaining ``*.swap`` files are a replacement that had begun: the
   segments they cover are removed and the swap files take their final names.
3. Index files without a ``.log`` are removed. Every segment's ``.log`` is
   opened; its indexes are not (they are mapped at first use, as Kafka's
   LazyIndex), only their sizes are checked. A segment with an index missing
   or not whole entries is recovered (its indexes rebuilt from the log), and
   so is the active segment if its indexes fail their sanity check or, after
   a clean shutdown, if its tail does not match them (a file cut short).
4. After an unclean shutdown, every segment from the recovery point on is
   recovered: batches are re-read and CRC-checked and the log is cut at the
   first bad byte. If a segment lost bytes, every later segment is removed: the
   log ends at the first corruption.
5. If what is left ends below the log start offset, everything is removed
   and the log starts empty there. An empty directory gets one segment.
6. The recovery point becomes the log end after a clean shutdown, otherwise
   the smaller of the checkpoint and the log end. The active segment's indexes
   are made writable again.
7. Once the log holds its segments (:func:`rebuild_producer_state`), the
   producer state is loaded from the newest snapshot and the batch headers
   after it are replayed, re-indexing the aborted transactions of their
   markers. A truncation replays the same way.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import NamedTuple

from seglog.config import LogConfig
from seglog.errors import CorruptIndexError, CorruptRecordError, StorageError
from seglog.records import batch, control
from seglog.storage import filenames, io, reader
from seglog.storage.local_log import LocalLog
from seglog.storage.offset_index import ENTRY_SIZE as OFFSET_ENTRY_SIZE
from seglog.storage.producer_state import ProducerBatch, ProducerStateManager
from seglog.storage.segment import LogSegment
from seglog.storage.time_index import ENTRY_SIZE as TIME_ENTRY_SIZE

logger = logging.getLogger(__name__)

_INDEX_SUFFIXES = (
    filenames.INDEX_SUFFIX,
    filenames.TIME_INDEX_SUFFIX,
    filenames.TXN_INDEX_SUFFIX,
    filenames.KEY_INDEX_SUFFIX,
)
#: A key index being written when the process stopped (see KeyIndexBuilder.write).
_KEY_INDEX_TMP = filenames.KEY_INDEX_SUFFIX + ".tmp"


def _remove_leftovers(directory: Path, env: io.Env) -> None:
    cleaned: list[Path] = []
    swaps: list[Path] = []
    for name in env.listdir(directory):
        path = directory / name
        if name.endswith(filenames.DELETED_SUFFIX) or name.endswith(_KEY_INDEX_TMP):
            env.unlink(path)
        elif name.endswith(filenames.CLEANED_SUFFIX):
            cleaned.append(path)
        elif name.endswith(filenames.SWAP_SUFFIX):
            swaps.append(path)
    min_cleaned = min(
        (b for b in (filenames.parse_base_offset(p.name) for p in cleaned) if b is not None),
        default=None,
    )
    for path in swaps:
        base = filenames.parse_base_offset(path.name)
        if min_cleaned is not None and base is not None and base >= min_cleaned:
            logger.info("removing %s: left by an interrupted segment split", path)
            env.unlink(path)
    for path in cleaned:
        env.unlink(path)


def _complete_swaps(directory: Path, config: LogConfig, env: io.Env) -> None:
    swap_logs = sorted(
        directory / name
        for name in env.listdir(directory)
        if name.endswith(filenames.LOG_SUFFIX + filenames.SWAP_SUFFIX)
    )
    if not swap_logs:
        return
    ranges: list[tuple[int, int]] = []
    for path in swap_logs:
        base = filenames.parse_base_offset(path.name)
        if base is None:
            continue
        segment = LogSegment.open(
            directory,
            base,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            suffix=filenames.SWAP_SUFFIX,
            writable=True,
            env=env,
        )
        try:
            segment.recover()
            ranges.append((base, segment.read_next_offset()))
        finally:
            segment.close()
    low = min(r[0] for r in ranges)
    high = max(r[1] for r in ranges)
    for base in reader.segment_bases(directory, env.listdir(directory)):
        if low <= base < high:
            logger.info(
                "removing %s: replaced by a swap that a crash interrupted",
                filenames.log_path(directory, base),
            )
            for kind in (filenames.LOG_SUFFIX, *_INDEX_SUFFIXES):
                env.unlink(directory / f"{filenames.offset_name(base)}{kind}")
    for name in env.listdir(directory):
        if name.endswith(filenames.SWAP_SUFFIX):
            env.rename(directory / name, directory / name[: -len(filenames.SWAP_SUFFIX)])
    env.fsync_dir(directory)


def _index_problem(directory: Path, base: int, env: io.Env) -> str | None:
    """Why the indexes of segment ``base`` cannot be trusted, from their sizes alone.

    Neither index is opened: a stat of each is enough to see a missing file or
    one that is not whole entries, which is all Kafka checks before an index is
    used (the entries of the active segment are checked too; see
    :func:`_open_segment`).
    """
    for path, entry_size in (
        (filenames.index_path(directory, base), OFFSET_ENTRY_SIZE),
        (filenames.time_index_path(directory, base), TIME_ENTRY_SIZE),
    ):
        try:
            length = env.file_size(path)
        except FileNotFoundError:
            return f"{path.name} is missing"
        if length % entry_size != 0:
            return f"{path.name} is {length} bytes long, not a multiple of {entry_size}"
    return None


def _tail_problem(segment: LogSegment) -> str | None:
    """Why the end of ``segment`` does not match its indexes, or None when it does.

    After a clean shutdown Kafka trusts the active segment's indexes and finds
    the log end by scanning from the last offset-index entry; a file cut short
    meanwhile (a copy, a repair) would then leave the indexes pointing past
    the end, and the next append behind a partial batch. So the same scan
    checks, with CRCs, that whole valid batches run from the last indexed
    one to the end of the file and that both indexes stay below their end.
    Its cost is bounded by ``index.interval.bytes`` plus a batch.
    """
    indexed: int | None = None
    start = 0
    size = segment.size
    entries = segment.offset_index.entries
    if entries:
        indexed, start = segment.offset_index.entry(entries - 1)
    if start > size:
        return (
            f"its offset index points at position {start}, past the end of the log ({size} bytes)"
        )
    valid_end, next_offset = segment.valid_end(start)
    if valid_end != size:
        return f"{size - valid_end} bytes at position {valid_end} are not a whole batch"
    if indexed is not None and (next_offset is None or next_offset <= indexed):
        return f"its offset index names offset {indexed}, which the log does not hold"
    if segment.time_index.entries:
        _, time_offset = segment.time_index.last_entry
        end = segment.base_offset if next_offset is None else next_offset
        if time_offset >= end:
            return f"its time index names offset {time_offset}, which the log does not hold"
    return None


def _open_segment(
    directory: Path, base: int, config: LogConfig, env: io.Env, *, active: bool, clean: bool
) -> LogSegment:
    """Open one segment, rebuilding its indexes if they cannot be trusted.

    An inactive segment's indexes stay unopened (they are mapped at first use);
    the active segment's are opened and sanity-checked at once, since appends
    and most reads need them.
    """
    problem = _index_problem(directory, base, env)
    segment = LogSegment.open(
        directory,
        base,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes,
        writable=True,
        env=env,
    )
    try:
        if problem is None and active:
            try:
                segment.sanity_check()
            except CorruptIndexError as exc:
                problem = str(exc)
            if problem is None and clean:
                # After an unclean shutdown the active segment is recovered
                # anyway; after a clean one its tail must still match.
                problem = _tail_problem(segment)
        if problem is not None:
            logger.warning("rebuilding the indexes of %s: %s", segment.log_path, problem)
            truncated = segment.recover()
            if truncated:
                logger.warning("cut %d invalid bytes from %s", truncated, segment.log_path)
    except BaseException:
        segment.close()
        raise
    return segment


class LoadedPartition(NamedTuple):
    """A partition directory loaded by :func:`load_partition`."""

    topic: str
    partition: int
    #: Every segment, oldest first; never empty.
    segments: list[LogSegment]
    recovery_point: int


def load_partition(
    directory: Path,
    config: LogConfig,
    *,
    recovery_point: int,
    log_start_offset: int,
    had_clean_shutdown: bool,
    env: io.Env,
) -> LoadedPartition:
    """Load (or create) the partition directory ``directory``: its name, then its
    segments (:func:`load_segments`)."""
    parsed = filenames.parse_partition_dir(directory.name)
    if parsed is None:
        raise StorageError(f"{directory} is not named <topic>-<partition>")
    env.mkdir(directory)
    segments, clean_recovery_point = load_segments(
        directory,
        config,
        recovery_point=recovery_point,
        log_start_offset=log_start_offset,
        had_clean_shutdown=had_clean_shutdown,
        env=env,
    )
    return LoadedPartition(*parsed, segments, clean_recovery_point)


def load_segments(
    directory: Path,
    config: LogConfig,
    *,
    recovery_point: int,
    log_start_offset: int,
    had_clean_shutdown: bool,
    env: io.Env | None = None,
) -> tuple[list[LogSegment], int]:
    """Open every segment of ``directory``, repairing it; returns (segments, recovery point).

    Every file operation goes through ``env``.
    """
    env = io.env_or_default(env)
    _remove_leftovers(directory, env)
    _complete_swaps(directory, config, env)

    names = env.listdir(directory)
    # The segments are what Kafka's reader of these files says they are.
    bases = reader.segment_bases(directory, names)
    live = set(bases)
    for name in names:
        base = filenames.parse_base_offset(name)
        if base is not None and base not in live and name.endswith(_INDEX_SUFFIXES):
            env.unlink(directory / name)  # an index whose .log is gone

    segments: list[LogSegment] = []
    try:
        for i, base in enumerate(bases):
            active = i == len(bases) - 1
            segments.append(
                _open_segment(directory, base, config, env, active=active, clean=had_clean_shutdown)
            )
        if not had_clean_shutdown:
            segments = _recover_unflushed(segments, recovery_point, config)
    except BaseException:
        for segment in segments:
            segment.close()
        raise

    log_end = segments[-1].read_next_offset() if segments else 0
    if segments and log_end < log_start_offset:
        logger.warning(
            "%s ends at %d, below its log start offset %d: starting empty there",
            directory.name,
            log_end,
            log_start_offset,
        )
        for segment in segments:
            segment.delete()
        segments = []
    if not segments:
        segments = [
            LogSegment.create(
                directory,
                log_start_offset,
                index_interval_bytes=config.index_interval_bytes,
                max_index_size=config.segment_index_bytes,
                env=env,
            )
        ]
    log_end = segments[-1].read_next_offset()
    new_recovery_point = log_end if had_clean_shutdown else min(recovery_point, log_end)
    # Inactive segments keep their indexes as found (trimmed, and unopened
    # until used); only the active one is grown, sparsely, to take appends.
    segments[-1].resize_indexes(config.segment_index_bytes)
    return segments, new_recovery_point


def _recover_unflushed(
    segments: list[LogSegment], recovery_point: int, config: LogConfig
) -> list[LogSegment]:
    """Recover segments holding offsets at or after the recovery point."""
    for i, segment in enumerate(segments):
        upper = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if upper is not None and upper <= recovery_point:
            continue
        try:
            truncated = segment.recover()
        except (CorruptRecordError, CorruptIndexError) as exc:
            # Only what the bytes say counts against them: an I/O error (a full
            # disk) passes up, and the partition stays as it is, offline.
            logger.warning("truncating %s to its base after: %s", segment.log_path, exc)
            segment.truncate_to(segment.base_offset)
            truncated = 1
        if truncated > 0:
            logger.warning(
                "recovery cut %d bytes from %s; removing %d later segment(s)",
                truncated,
                segment.log_path,
                len(segments) - i - 1,
            )
            for later in segments[i + 1 :]:
                later.delete()
            return segments[: i + 1]
    return segments


def rebuild_producer_state(
    state: ProducerStateManager, local: LocalLog, log_start_offset: int, now_ms: int
) -> None:
    """Load the newest producer snapshot and replay the batch headers after it."""
    end = local.log_end_offset
    start = state.load_latest_snapshot(log_start_offset, end, now_ms)
    if start < end:
        for segment in local.segments_overlapping(start, end):
            # The aborted transactions of the replayed part are indexed
            # again as their markers are replayed (Kafka's recovery
            # rebuilds the .txnindex the same way).
            local.truncate_txn_index(segment, start)
            for header in segment.batch_headers(start):
                if header.producer_id < 0 or header.last_offset < start:
                    continue
                if header.is_control:
                    _replay_marker(state, local, segment, header)
                else:
                    state.update(
                        [
                            ProducerBatch.from_header(
                                header,
                                header.base_offset,
                                header.last_offset,
                                header.max_timestamp,
                            )
                        ]
                    )


def _replay_marker(
    state: ProducerStateManager, local: LocalLog, segment: LogSegment, header: batch.BatchHeader
) -> None:
    """Apply a control batch met while rebuilding the producer state."""
    found = segment.translate_offset(header.base_offset)
    if found is None:
        return
    data = segment.read_bytes(found.position, header.batch_length + batch.LOG_OVERHEAD)
    try:
        marker = control.read_marker(data)
    except CorruptRecordError as exc:  # skipped, as Kafka skips unknown control records
        logger.warning("skipping an unreadable control batch in %s: %s", segment, exc)
        return
    if marker is None:
        return
    completed = state.complete_txn(
        header.producer_id,
        header.producer_epoch,
        header.base_offset,
        header.max_timestamp,
        commit=marker.is_commit,
        coordinator_epoch=marker.coordinator_epoch,
    )
    if completed is not None and completed.is_aborted:
        local.index_aborted(segment, completed, state.last_stable_offset_after(completed))
