"""FileRegion: a span of a segment file, handed out instead of a copy of its bytes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class FileRegion:
    """``length`` bytes of the open file ``fd`` starting at ``position``.

    A fetch answers with regions so that the broker can ``sendfile`` them
    straight from the page cache. The descriptor stays valid while the segment
    is open, including after the file is renamed to ``.deleted``: the segment
    is closed only after ``file.delete.delay.ms``.
    """

    fd: int
    position: int
    length: int
    path: Path

    def __len__(self) -> int:
        return self.length
