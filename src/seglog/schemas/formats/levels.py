"""The registry's seven compatibility levels, applied to a checker of one reader/writer pair.

BACKWARD: the new schema reads data written with the previous one (new is the reader).
FORWARD: the previous schema reads data written with the new one (previous is the reader).
FULL: both. A level without ``_TRANSITIVE`` compares with the last previous version only; a
transitive level with every previous version, oldest first. NONE checks nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)

S = TypeVar("S")

# (reader, writer, reader label, writer label) -> one message per problem.
PairCheck = Callable[[S, S, str, str], list[str]]


def apply_level(level: str, new: S, previous: Sequence[S], check: PairCheck[S]) -> list[str]:
    """Every problem ``level`` finds between ``new`` and ``previous`` (oldest first)."""
    if level not in LEVELS:
        raise ValueError(f"unknown compatibility level {level!r}; one of {', '.join(LEVELS)}")
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    backward = level.startswith(("BACKWARD", "FULL"))
    forward = level.startswith(("FORWARD", "FULL"))
    problems: list[str] = []
    # Newest first, as the registry reports: the nearest version's problems lead.
    for old in reversed(against):
        if backward:
            problems.extend(p for p in check(new, old, "new", "old") if p not in problems)
        if forward:
            problems.extend(p for p in check(old, new, "old", "new") if p not in problems)
    return problems
