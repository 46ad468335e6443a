"""Imports go downward only (see DESIGN.md), and the codec layers do no I/O."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "src" / "seglog"

# What each layer may not import: other seglog layers above it, and for the
# sans-I/O layers, the standard modules that reach files, sockets or clocks.
FORBIDDEN = {
    "records": {
        "seglog.storage",
        "seglog.protocol",
        "seglog.broker",
        "seglog.coordinator",
        "seglog.spark",
        "seglog.mirror",
        "seglog.topic_source",
        "seglog.cli",
        "os",
        "io",
        "socket",
        "asyncio",
        "mmap",
        "time",
        "threading",
        "selectors",
    },
    "protocol": {
        "seglog.storage",
        "seglog.broker",
        "seglog.coordinator",
        "seglog.spark",
        "seglog.mirror",
        "seglog.topic_source",
        "seglog.cli",
        "os",
        "io",
        "socket",
        "asyncio",
        "mmap",
        "time",
        "threading",
        "selectors",
    },
    # The coordinator runs on the broker's loop but takes its clock and timers injected.
    "coordinator": {
        "seglog.broker",
        "seglog.spark",
        "seglog.mirror",
        "seglog.topic_source",
        "seglog.cli",
        "socket",
        "asyncio",
        "selectors",
        "time",
        "threading",
    },
    "storage": {
        "seglog.protocol",
        "seglog.broker",
        "seglog.coordinator",
        "seglog.spark",
        "seglog.mirror",
        "seglog.topic_source",
        "seglog.cli",
        "socket",
        "asyncio",
        "selectors",
    },
    # The Spark data source talks to brokers through a Kafka client, never to seglog's.
    "spark": {
        "seglog.broker",
        "seglog.coordinator",
        "seglog.protocol",
        "seglog.mirror",
        "seglog.cli",
    },
    # Below spark and mirror: a topic read from files (through storage) or from a
    # broker through a Kafka client. It may read the record layout of
    # __consumer_offsets from the coordinator, to replay a log directory's commits.
    "topic_source": {
        "seglog.broker",
        "seglog.spark",
        "seglog.mirror",
        "seglog.cli",
        "socket",
        "asyncio",
        "selectors",
    },
    # The schema registry's records, state and schema formats: beside the coordinator, below
    # the broker that serves them and the Spark source and CLI that use them; no sockets.
    "schemas": {
        "seglog.broker",
        "seglog.coordinator",
        "seglog.spark",
        "seglog.mirror",
        "seglog.cli",
        "socket",
        "asyncio",
        "selectors",
    },
    # Share groups' partitions and their durable state: beside the coordinator (which may
    # use them to delete a group's state), below the broker; clock and timers injected.
    "share": {
        "seglog.broker",
        "seglog.spark",
        "seglog.mirror",
        "seglog.topic_source",
        "seglog.cli",
        "seglog.schemas",
        "socket",
        "asyncio",
        "selectors",
        "time",
        "threading",
    },
    # The mirror sits beside spark, with the same rules: Kafka protocol only through
    # a Kafka client, files only through storage. It may read the record layout of
    # __consumer_offsets from the coordinator (to translate the groups of a log
    # directory), which spark has no use for.
    "mirror": {
        "seglog.broker",
        "seglog.protocol",
        "seglog.spark",
        "seglog.cli",
    },
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports(layer: str) -> None:
    bad = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        for name in _imports(path):
            for forbidden in FORBIDDEN[layer]:
                if name == forbidden or name.startswith(forbidden + "."):
                    bad.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not bad, "\n".join(bad)
