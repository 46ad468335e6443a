"""How a log directory writes the files it may share: offset checkpoints, clean-shutdown marker.

A process alone in its directory owns every line of the offset checkpoints
(``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``cleaner-offset-checkpoint``) and the clean-shutdown marker: it writes each
checkpoint whole (:class:`WholeFileCheckpoints`), reads and removes the marker
at open and writes it at a clean close, as Kafka does.

Several processes may share one directory, each owning some partitions. Each
then replaces only its own lines of a checkpoint, keeping every other
owner's: it reads the file, merges and writes it back while holding
``.checkpoint.lock`` (``flock``), which every owner takes for its
read-merge-write (:class:`MergedCheckpoints`). The marker belongs to whoever
prepared the directory for them all: such a process is told whether its
partitions were closed cleanly and leaves the marker alone.

Whoever opens the directory picks the policy; :class:`DirCheckpoints`, the
log directory's part that writes the recovery points and log start offsets
of its partitions, calls it the same way in both cases. Kafka keeps the same
files behind ``OffsetCheckpointFile`` and ``CleanShutdownFileHandler``, and
writes them from its ``LogManager``'s scheduled tasks, as
:mod:`seglog.storage._maintenance` does.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from seglog.errors import StorageError
from seglog.storage import checkpoints, io
from seglog.storage._dir_state import DirState

CHECKPOINT_LOCK_FILE = ".checkpoint.lock"
"""Held (flock) while a process sharing the directory merges its lines into a checkpoint."""

_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})

Key = tuple[str, int]
#: ``keep(key)``: whether a line found in a checkpoint is another owner's, to keep.
Keep = Callable[[Key], bool]


class CheckpointPolicy(Protocol):
    """How one process writes a log directory's checkpoints and reads its clean-shutdown state."""

    def previous_close_clean(self, directory: Path, env: io.Env) -> bool:
        """At open: whether this process's partitions were closed cleanly last time."""
        ...

    def write(self, path: Path, entries: Mapping[Key, int], keep: Keep, env: io.Env) -> None:
        """Replace this process's lines of the offset checkpoint at ``path`` with ``entries``.

        ``keep`` names the lines of other owners (called only when others may have any).
        """
        ...

    def closed_cleanly(self, directory: Path, env: io.Env) -> None:
        """At a clean close, after the last checkpoint: record that it was clean."""
        ...


class WholeFileCheckpoints:
    """Alone in the directory: each checkpoint is written whole; the marker is this process's."""

    def previous_close_clean(self, directory: Path, env: io.Env) -> bool:
        """Read and remove the clean-shutdown marker (Kafka's rule: it counts once)."""
        return checkpoints.consume_clean_shutdown(directory, env=env)

    def write(self, path: Path, entries: Mapping[Key, int], keep: Keep, env: io.Env) -> None:
        """Write ``entries`` as the whole file: nobody else has lines in it."""
        checkpoints.write_offset_checkpoint(path, entries, env=env)

    def closed_cleanly(self, directory: Path, env: io.Env) -> None:
        """Write the clean-shutdown marker."""
        checkpoints.write_clean_shutdown(directory, env=env)


class MergedCheckpoints:
    """Sharing the directory: merge into each checkpoint under its lock; the marker is not ours.

    ``clean_shutdown`` is whether this process's partitions were closed
    cleanly, as decided by whoever prepared the directory (it reads the marker
    once for every process sharing it).
    """

    def __init__(self, clean_shutdown: bool, lock_file: str = CHECKPOINT_LOCK_FILE) -> None:
        self.clean_shutdown = clean_shutdown
        self.lock_file = lock_file

    def previous_close_clean(self, directory: Path, env: io.Env) -> bool:
        """What this process was told; the marker is left to whoever read it."""
        return self.clean_shutdown

    def write(self, path: Path, entries: Mapping[Key, int], keep: Keep, env: io.Env) -> None:
        """Read the file under the lock, keep the other owners' lines, add ``entries``."""
        fd = env.open(path.parent / self.lock_file, os.O_RDWR | os.O_CREAT)
        try:
            # Held for one small read and write by whoever has it: wait for it.
            while not env.lock(fd):
                time.sleep(0.001)
            try:
                try:
                    current = checkpoints.read_offset_checkpoint(path, env=env)
                except StorageError:
                    current = {}  # rewritten whole below; the owners' next merge restores theirs
                merged = {k: v for k, v in current.items() if keep(k)}
                merged.update(entries)
                checkpoints.write_offset_checkpoint(path, merged, env=env)
            finally:
                env.unlock(fd)
        finally:
            env.close(fd)

    def closed_cleanly(self, directory: Path, env: io.Env) -> None:
        """Nothing: the marker is written by whoever prepared the directory, for all."""


WHOLE_FILE_CHECKPOINTS = WholeFileCheckpoints()
"""The policy of a process alone in its directory (it keeps no state)."""


class DirCheckpoints:
    """Writes the checkpoints of a log directory's partitions through its policy."""

    def __init__(self, state: DirState, policy: CheckpointPolicy) -> None:
        self._state = state
        self.policy = policy
        # The maintenance thread and administration both write.
        self._lock = threading.Lock()

    def checkpoint(self) -> None:
        """Write the recovery-point and log-start-offset checkpoint files.

        A checkpoint is replaced atomically, so a failed write leaves the old
        one, which is safe (older recovery points only mean more recovery).
        A lack of space is retried at the next interval; any other I/O error
        means the directory itself is failing, and, as Kafka takes the log
        directory offline, every partition refuses writes until a restart.
        """
        with self._lock:
            try:
                self._write()
            except StorageError as exc:
                cause = exc.__cause__
                if isinstance(cause, OSError) and cause.errno not in _NO_SPACE:
                    path = self._state.path
                    for log in list(self._state.logs.values()):
                        log.take_offline(f"cannot write the checkpoints of {path}: {exc}")
                raise

    def _write(self) -> None:
        state = self._state
        logs = dict(state.logs)
        # Offline partitions keep the entries they had, for the start that opens them.
        self.merge(
            checkpoints.RECOVERY_POINT_CHECKPOINT,
            {**state.offline_recovery, **{k: log.recovery_point for k, log in logs.items()}},
        )
        # Kafka lists only partitions whose start has moved past their first segment.
        self.merge(
            checkpoints.LOG_START_OFFSET_CHECKPOINT,
            {
                **state.offline_start,
                **{
                    k: log.log_start_offset
                    for k, log in logs.items()
                    if log.log_start_offset > log.segments[0].base_offset
                },
            },
        )

    def _foreign(self, key: Key) -> bool:
        """Whether a checkpoint line is another owner's, to keep (a deleted topic's go)."""
        state = self._state
        if key[0] in state.forgotten:
            return False
        info = state.topics.get(key[0])
        return info is None or key[1] >= info.partitions or not state.owns(info, key[1])

    def merge(self, name: str, entries: Mapping[Key, int]) -> None:
        """Replace this process's lines of the offset checkpoint ``name`` with ``entries``.

        The policy decides what becomes of the other lines: none alone, other
        owners' kept when shared.
        """
        state = self._state
        self.policy.write(state.path / name, entries, self._foreign, state.env)
