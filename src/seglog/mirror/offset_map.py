"""Which target offset holds which source record: the map group offsets are translated by.

A copied record keeps its partition but not always its offset: the target
numbers what it receives from its own log end, and a source whose compaction
removed records (or whose transactions left markers) has gaps the target does
not. Within a stretch of source offsets with no gap, source and target
offsets differ by a constant, so the map is kept as *runs*::

    run := (source_start, target_start, length)
    source_start + i  ->  target_start + i        for 0 <= i < length

Each partition also keeps ``position``, the source offset the copy has
reached (every record below it is in the target, or was never there), and
``target_next``, the target offset the next copied record will get.

Translating a committed source offset C (the next record the group would read):

- C inside a run: the target offset of that same record (exact);
- C in a gap below a run (the record at C was compacted away, or is a
  marker): the target offset of the next copied record, reported as inexact;
- C past every copied record but not past ``position``: ``target_next``
  (a caught-up group stays caught up; exact when C is the offset after the
  last copied record, or ``position`` itself);
- C past ``position``: not yet translatable (the copy is behind).

The map of every partition is one JSON file, replaced atomically (write,
fsync, rename) so that a kill at any instant leaves the previous map whole.
It may lag behind the target by what was delivered after the last save; the
mirror finds that part again by reading the target's tail (see
:mod:`seglog.mirror.copier`).
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from pathlib import Path

from seglog.errors import SeglogError
from seglog.storage import io

__all__ = ["OffsetMap", "PartitionMap", "Translation"]

_VERSION = 1


@dataclass(frozen=True)
class Translation:
    """A committed source offset and where the same record sits in the target."""

    source: int
    target: int
    exact: bool


@dataclass
class PartitionMap:
    """The runs of one partition, its copy position and the target's next offset."""

    runs: list[list[int]] = field(default_factory=list)
    position: int = 0
    target_next: int | None = None

    def add(self, source: int, target: int) -> None:
        """Record that the source record at ``source`` is the target's ``target``."""
        if self.runs:
            last = self.runs[-1]
            if last[0] + last[2] == source and last[1] + last[2] == target:
                last[2] += 1
                self._advance(source, target)
                return
        self.runs.append([source, target, 1])
        self._advance(source, target)

    def _advance(self, source: int, target: int) -> None:
        self.position = max(self.position, source + 1)
        self.target_next = target + 1

    @property
    def last_source(self) -> int | None:
        """The source offset of the last copied record, None when none was copied."""
        if not self.runs:
            return None
        last = self.runs[-1]
        return last[0] + last[2] - 1

    @property
    def copied(self) -> int:
        """How many records the map holds."""
        return sum(run[2] for run in self.runs)

    def translate(self, committed: int) -> Translation | None:
        """The target offset of ``committed`` (see the module docstring); None if not yet."""
        if committed > self.position:
            return None
        ends = [run[0] + run[2] for run in self.runs]
        slot = bisect.bisect_right(ends, committed)
        if slot < len(self.runs):
            start, target, _ = self.runs[slot]
            if committed >= start:
                return Translation(committed, target + committed - start, True)
            return Translation(committed, target, False)
        target_next = self.target_next if self.target_next is not None else 0
        last = self.last_source
        exact = committed == self.position or (last is not None and committed == last + 1)
        return Translation(committed, target_next, exact)


class OffsetMap:
    """The maps of every mirrored partition, saved to one file."""

    def __init__(self, path: Path, source: str, target: str) -> None:
        self.path = Path(path)
        self.source = source
        self.target = target
        self.partitions: dict[tuple[str, int], PartitionMap] = {}

    @classmethod
    def load(cls, path: str | Path, source: str, target: str) -> OffsetMap:
        """The map saved at ``path``, or an empty one when there is none.

        A map made for another target is refused: its offsets mean nothing there.
        """
        out = cls(Path(path), source, target)
        try:
            raw = json.loads(out.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return out
        except (OSError, ValueError) as exc:
            raise SeglogError(f"{out.path} is not a mirror offset map: {exc}") from None
        try:
            if raw["version"] != _VERSION:
                raise SeglogError(f"{out.path}: unknown offset map version {raw['version']}")
            if raw["target"] != target:
                raise SeglogError(
                    f"{out.path} maps offsets into {raw['target']}, not {target}: "
                    "give another --state file"
                )
            for name, spec in raw["partitions"].items():
                topic, _, partition = name.rpartition("/")
                out.partitions[(topic, int(partition))] = PartitionMap(
                    [[int(a), int(b), int(c)] for a, b, c in spec["runs"]],
                    int(spec["position"]),
                    None if spec["target_next"] is None else int(spec["target_next"]),
                )
        except (KeyError, TypeError, ValueError) as exc:
            raise SeglogError(f"{out.path} is not a mirror offset map: {exc!r}") from None
        return out

    def partition(self, topic: str, partition: int) -> PartitionMap:
        """The map of a partition, made empty on first use."""
        return self.partitions.setdefault((topic, partition), PartitionMap())

    def save(self) -> None:
        """Replace the file atomically with the current maps."""
        payload = {
            "version": _VERSION,
            "source": self.source,
            "target": self.target,
            "partitions": {
                f"{topic}/{partition}": {
                    "runs": pm.runs,
                    "position": pm.position,
                    "target_next": pm.target_next,
                }
                for (topic, partition), pm in sorted(self.partitions.items())
            },
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        io.atomic_write_text(self.path, json.dumps(payload, separators=(",", ":")) + "\n")
