"""What a /metrics scrape costs the broker, by partitions and committed offsets.

    .venv/bin/python bench/metrics_bench.py
    .venv/bin/python bench/metrics_bench.py --partitions 100 1000 4000 --groups 20

Each row opens a log directory with that many partitions (in topics of 500) and
one group per --groups committing an offset of every partition of the first
topic, then times, in this process, the collectors alone (reading the state)
and a whole page (collectors and prometheus_client's text format), best of
--repeat. The scrape runs in the metrics server's thread, but it holds the GIL
while it runs: its CPU time is time the event loop waits in slices of the
switch interval. The limit beside it: formatting the same number of lines
with a bare f-string, the floor for any Python exposition.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from prometheus_client import generate_latest

from seglog.broker.metrics import registry_for
from seglog.broker.settings import BrokerSettings
from seglog.broker.state import BrokerState
from seglog.coordinator.group import Group
from seglog.coordinator.offset_store import CommittedOffset
from seglog.storage.log_dir import LogDir


def best(repeat: int, run: object) -> float:
    assert callable(run)
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        times.append(time.perf_counter() - began)
    return min(times)


def row(partitions: int, groups: int, repeat: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="metrics-bench-"))
    try:
        settings = BrokerSettings.from_properties({"log.dirs": str(root / "data")})
        log_dir = LogDir.open(
            settings.log_dir, defaults=settings.log_defaults, settings=settings.log_dir_settings
        )
        try:
            topics = 0
            while topics * 500 < partitions:
                log_dir.create_topic(f"t{topics}", min(500, partitions - topics * 500))
                topics += 1
            state = BrokerState(settings, log_dir)
            first = log_dir.topics()["t0"].partitions
            for g in range(groups):
                group = Group(f"g{g}")
                group.offsets = {("t0", p): CommittedOffset(0, "", 0) for p in range(first)}
                state.coordinator.groups[group.group_id] = group
            registry = registry_for(state)
            collect = best(repeat, lambda: list(registry.collect()))
            page = generate_latest(registry)
            whole = best(repeat, lambda: generate_latest(registry))
            lines = page.count(b"\n")
            values = [(f"name{i}", str(i % 500), i) for i in range(lines)]
            floor = best(
                repeat,
                lambda: "".join(f'm{{topic="{t}",partition="{p}"}} {v}\n' for t, p, v in values),
            )
            print(
                f"{partitions:>7} partitions {groups:>3} groups: {lines:>7} lines "
                f"{len(page) / 1e6:6.2f} MB | collect {collect * 1e3:7.1f} ms, "
                f"page {whole * 1e3:7.1f} ms ({whole / partitions * 1e6:5.1f} µs/partition) | "
                f"f-string floor {floor * 1e3:6.1f} ms"
            )
        finally:
            log_dir.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, nargs="+", default=[100, 1000, 2000])
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]}")
    for partitions in args.partitions:
        row(partitions, args.groups, args.repeat)


if __name__ == "__main__":
    main()
