"""Consumer-group benchmarks: rebalance times and OffsetCommit rates of seglog's broker.

    .venv/bin/python bench/group_bench.py              # ~2 min
    .venv/bin/python bench/group_bench.py --quick      # smoke run (~40 s)

The broker is ``python -m seglog serve`` started as a subprocess on a free
port with ``group.initial.rebalance.delay.ms=0``; every client is
confluent-kafka (librdkafka) with its default assignor,
``partition.assignment.strategy=range,roundrobin``: both eager, so every
rebalance revokes every partition of every member and hands them out again
(the cooperative-sticky assignor would move only the partitions that change
owner). Limits are measured in the same run.

Rows:
  rebalances   10 members, each a process of its own (so that librdkafka's
               callbacks are not serialized by one GIL), polling every 50 ms,
               subscribed to a 10-partition topic. Times come from
               CLOCK_MONOTONIC, which all processes share, taken in the
               members' on_assign / on_revoke callbacks.
               initial join: all 10 sent subscribe() at once, until each has
               one partition and together they hold all 10.
               one member leaves: from its close() call until the 9 others have
               all received their new assignment (which together covers the 10
               partitions); median and max of --repeat. Split in two: until the
               last of the 9 noticed the rebalance (its on_revoke: the broker
               tells a member in its next Heartbeat answer, so this part is
               governed by ``heartbeat.interval.ms``), and from there to the
               last on_assign (JoinGroup, the leader's assignment, SyncGroup).
               Each time the group is checked with DescribeGroups (Stable, 9
               members), then a fresh member joins to bring it back to 10;
               that join is timed too.
               Everything is run twice: with librdkafka's default
               ``heartbeat.interval.ms`` (3000) and with 300.
  commits      one member of a group holding the 10 partitions commits in a
               loop for --seconds: synchronously, one partition per commit
               (``commit(offsets=[...], asynchronous=False)``), each call timed
               for p50/p99; then asynchronously, all 10 partitions per commit,
               at most 64 commits outstanding, counted in on_commit.
               The broker answers an OffsetCommit only after fsyncing it, so
               the limit is the machine's fsync rate, measured just before in
               the same temporary directory: 100 B write() + fsync() in a loop,
               and the same plus an fsync of the directory (what a flush of a
               seglog log does: the segment file, then its directory).

``--member`` is the entry point of the member processes (internal).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka import libversion as librdkafka_version
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from broker_bench import SeglogBroker  # bench/ is on sys.path: this script's dir

PARTITIONS = 10
MEMBERS = 10
HEARTBEATS = (3000, 300)  # librdkafka's default heartbeat.interval.ms, then a short one
ASYNC_WINDOW = 64
MEMBER_CONFIG: dict[str, Any] = {
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
}

err = Console(stderr=True)


# ---------------------------------------------------------------- broker


class GroupBroker(SeglogBroker):
    """bench/broker_bench.py's broker, with no initial rebalance delay."""

    def command(self) -> list[str]:
        return [*super().command(), "--override", "group.initial.rebalance.delay.ms=0"]

    def handled(self, api: str) -> tuple[float, float]:
        """(requests, seconds of handling) of ``api`` so far, from the /metrics page."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        count = seconds = 0.0
        for line in text.splitlines():
            if line.startswith(
                f'kafka_network_requestmetrics_totaltimems_count{{request="{api}"}} '
            ):
                count = float(line.split()[-1])
            elif line.startswith(
                f'kafka_network_requestmetrics_totaltimems_sum{{request="{api}"}} '
            ):
                seconds = float(line.split()[-1]) / 1000  # the page's times are in ms
        return count, seconds


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)


# ---------------------------------------------------------------- member processes


def member_main(spec: str) -> None:
    """One group member: JSON lines out (events), commands in ("subscribe", "close")."""
    options = json.loads(spec)
    out_lock = threading.Lock()

    def emit(kind: str, partitions: Iterable[TopicPartition] = ()) -> None:
        line = json.dumps(
            {"kind": kind, "t": time.monotonic(), "partitions": [p.partition for p in partitions]}
        )
        with out_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    commands: queue.Queue[str] = queue.Queue()

    def read_commands() -> None:
        for line in sys.stdin:
            commands.put(line.strip())
        commands.put("close")

    consumer = Consumer(options["config"])
    threading.Thread(target=read_commands, daemon=True).start()
    emit("ready")
    while True:
        with contextlib.suppress(queue.Empty):
            command = commands.get_nowait()
            if command == "subscribe":
                emit("subscribing")
                consumer.subscribe(
                    [options["topic"]],
                    on_assign=lambda _c, parts: emit("assign", parts),
                    on_revoke=lambda _c, parts: emit("revoke", parts),
                )
            elif command == "close":
                emit("closing")
                consumer.close()
                emit("closed")
                return
        consumer.poll(0.05)


@dataclass
class Event:
    member: int
    kind: str
    t: float
    partitions: list[int]


class Member:
    """A member process; its events go to a shared queue."""

    def __init__(
        self,
        index: int,
        config: dict[str, Any],
        topic: str,
        events: queue.Queue[Event],
        log: TextIO,
    ) -> None:
        self.index = index
        spec = json.dumps({"config": config, "topic": topic})
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--member", spec],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            bufsize=1,
        )
        self.thread = threading.Thread(target=self._read, args=(events,), daemon=True)
        self.thread.start()

    def _read(self, events: queue.Queue[Event]) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            data = json.loads(line)
            events.put(Event(self.index, data["kind"], data["t"], data["partitions"]))

    def send(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def wait(self) -> None:
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Group:
    """The members of one group and what their callbacks reported."""

    def __init__(self, bootstrap: str, topic: str, group: str, heartbeat_ms: int, log: TextIO):
        self.config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "heartbeat.interval.ms": heartbeat_ms,
            **MEMBER_CONFIG,
        }
        self.topic, self.group, self.log = topic, group, log
        self.events: queue.Queue[Event] = queue.Queue()
        self.history: list[Event] = []
        self.members: dict[int, Member] = {}
        self.assigned: dict[int, list[int]] = {}
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    def spawn(self, count: int) -> list[Member]:
        """``count`` new member processes, waited for until their Consumer exists."""
        start = len(self.members) and max(self.members) + 1
        new = [
            Member(i, self.config, self.topic, self.events, self.log)
            for i in range(start, start + count)
        ]
        self.members.update((m.index, m) for m in new)
        indexes = {m.index for m in new}
        self.wait(lambda: indexes <= {e.member for e in self.history if e.kind == "ready"}, 60)
        return new

    def pump(self, timeout: float) -> None:
        try:
            event = self.events.get(timeout=timeout)
        except queue.Empty:
            return
        self.history.append(event)
        if event.kind == "assign":
            self.assigned[event.member] = sorted(event.partitions)
        elif event.kind in ("revoke", "closed"):
            self.assigned.pop(event.member, None)

    def wait(self, done: Callable[[], bool], timeout: float, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what or 'members'}: not done in {timeout:.0f} s")
            self.pump(0.1)

    def covered(self, members: set[int], since: float) -> bool:
        """Every one of ``members`` got an assignment after ``since``; together: all partitions."""
        if any(m not in self.assigned for m in members):
            return False
        last = {e.member: e.t for e in self.history if e.kind == "assign"}
        if any(last[m] <= since for m in members):
            return False
        held = sorted(p for m in members for p in self.assigned[m])
        return held == list(range(PARTITIONS))

    def last(self, kind: str, members: set[int], since: float) -> float:
        """The latest among ``members`` of their first ``kind`` event after ``since``."""
        firsts: dict[int, float] = {}
        for e in self.history:
            if e.kind == kind and e.member in members and e.t > since and e.member not in firsts:
                firsts[e.member] = e.t
        return max(firsts.values())

    def describe(self, members: int, timeout: float = 15) -> None:
        """DescribeGroups shows the group Stable with ``members`` members."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.admin.describe_consumer_groups([self.group])[self.group].result(10)
            state = found.state.name
            if state == "STABLE" and len(found.members) == members:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"group {self.group}: {state} with {len(found.members)} members")
            time.sleep(0.1)

    def active(self) -> set[int]:
        """Members that have subscribed and not begun to close."""
        subscribed = {e.member for e in self.history if e.kind == "subscribing"}
        closing = {e.member for e in self.history if e.kind == "closing"}
        return subscribed - closing

    def close_all(self) -> None:
        for member in self.members.values():
            if member.process.poll() is None:
                with contextlib.suppress(OSError):
                    member.send("close")
        for member in self.members.values():
            member.wait()


@dataclass
class Rebalances:
    heartbeat_ms: int
    initial_join: float = 0.0
    leave: list[float] = field(default_factory=list)
    noticed: list[float] = field(default_factory=list)  # close() → last on_revoke
    close_call: list[float] = field(default_factory=list)
    join: list[float] = field(default_factory=list)


def rebalance_run(bootstrap: str, root: Path, heartbeat_ms: int, repeat: int) -> Rebalances:
    topic = f"rebalance-{heartbeat_ms}"
    create_topic(bootstrap, topic, PARTITIONS)
    result = Rebalances(heartbeat_ms)
    with open(root / f"members-{heartbeat_ms}.log", "w") as log:
        group = Group(bootstrap, topic, f"bench-{heartbeat_ms}", heartbeat_ms, log)
        try:
            first = group.spawn(MEMBERS)
            spares = group.spawn(repeat)  # idle until subscribed: no cost during a timing
            everyone = {m.index for m in first}
            began = time.monotonic()
            for member in first:
                member.send("subscribe")
            group.wait(lambda: group.covered(everyone, began), 120, "initial join")
            result.initial_join = group.last("assign", everyone, began) - began
            group.describe(MEMBERS)
            err.print(
                f"[dim]heartbeat {heartbeat_ms} ms: initial join {result.initial_join:.2f} s[/]"
            )
            for spare in spares:
                leaving = group.members[min(group.active())]
                leaving.send("close")
                group.wait(
                    lambda m=leaving.index: any(
                        e.kind == "closing" and e.member == m for e in group.history
                    ),
                    30,
                )
                closing = next(
                    e for e in group.history if e.kind == "closing" and e.member == leaving.index
                )
                rest = group.active()
                group.wait(lambda r=rest, t=closing.t: group.covered(r, t), 120, "rebalance")
                done = group.last("assign", rest, closing.t)
                result.leave.append(done - closing.t)
                result.noticed.append(group.last("revoke", rest, closing.t) - closing.t)
                group.wait(
                    lambda m=leaving.index: any(
                        e.kind == "closed" and e.member == m for e in group.history
                    ),
                    30,
                )
                closed = next(
                    e for e in group.history if e.kind == "closed" and e.member == leaving.index
                )
                result.close_call.append(closed.t - closing.t)
                leaving.wait()
                group.describe(MEMBERS - 1)
                # Back to 10: a fresh member joins (timed from its subscribe() call).
                spare.send("subscribe")
                group.wait(
                    lambda m=spare.index: any(
                        e.kind == "subscribing" and e.member == m for e in group.history
                    ),
                    30,
                )
                joined = next(
                    e for e in group.history if e.kind == "subscribing" and e.member == spare.index
                )
                full = group.active()
                group.wait(lambda f=full, t=joined.t: group.covered(f, t), 120, "join")
                result.join.append(group.last("assign", full, joined.t) - joined.t)
                group.describe(MEMBERS)
                err.print(
                    f"[dim]  leave {result.leave[-1]:.2f} s (noticed after "
                    f"{result.noticed[-1]:.2f} s), join {result.join[-1]:.2f} s[/]"
                )
        finally:
            group.close_all()
    return result


# ---------------------------------------------------------------- commits


@dataclass
class Rate:
    count: int
    seconds: float
    latencies: list[float] = field(default_factory=list)
    broker: float = 0.0  # mean handling time of an OffsetCommit in the broker

    @property
    def per_second(self) -> float:
        return self.count / self.seconds

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def latency_text(self) -> str:
        return f"p50 {self.quantile(0.5) * 1e3:.2f} ms, p99 {self.quantile(0.99) * 1e3:.2f} ms"


def fsync_rate(directory: Path, seconds: float, with_dir: bool) -> Rate:
    """100 B write() + fsync() (and an fsync of the directory) in a loop."""
    path = directory / f"fsync-{os.getpid()}-{with_dir}.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    data = b"x" * 100
    latencies = []
    try:
        began = time.perf_counter()
        end = began + seconds
        now = began
        while now < end:
            os.write(fd, data)
            os.fsync(fd)
            if with_dir:
                os.fsync(dir_fd)
            after = time.perf_counter()
            latencies.append(after - now)
            now = after
        return Rate(len(latencies), now - began, latencies)
    finally:
        os.close(fd)
        os.close(dir_fd)
        path.unlink()


def committing_member(bootstrap: str, topic: str, group: str, on_commit: Any = None) -> Consumer:
    """A member that holds every partition of ``topic`` (the only member of ``group``)."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, **MEMBER_CONFIG}
    if on_commit is not None:
        config["on_commit"] = on_commit
    assigned = threading.Event()
    consumer = Consumer(config)
    consumer.subscribe([topic], on_assign=lambda _c, _p: assigned.set())
    deadline = time.monotonic() + 60
    while not assigned.is_set():
        if time.monotonic() > deadline:
            raise TimeoutError("the committing member got no assignment")
        consumer.poll(0.05)
    consumer.pause(consumer.assignment())  # no fetching beside the commits
    return consumer


def sync_commits(bootstrap: str, topic: str, seconds: float) -> Rate:
    consumer = committing_member(bootstrap, topic, "bench-commit-sync")
    latencies = []
    try:
        offset = 0
        began = time.perf_counter()
        end = began + seconds
        now = began
        while now < end:
            offset += 1
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
            after = time.perf_counter()
            latencies.append(after - now)
            now = after
        return Rate(len(latencies), now - began, latencies)
    finally:
        consumer.close()


def async_commits(bootstrap: str, topic: str, seconds: float) -> Rate:
    state = {"done": 0, "failed": 0}

    def on_commit(error: Any, _partitions: list[TopicPartition]) -> None:
        state["done"] += 1
        if error is not None:
            state["failed"] += 1

    consumer = committing_member(bootstrap, topic, "bench-commit-async", on_commit)
    try:
        sent = 0
        began = time.perf_counter()
        end = began + seconds
        while time.perf_counter() < end:
            if sent - state["done"] < ASYNC_WINDOW:
                sent += 1
                offsets = [TopicPartition(topic, p, sent) for p in range(PARTITIONS)]
                consumer.commit(offsets=offsets, asynchronous=True)
            else:
                consumer.poll(0.001)
        while state["done"] < sent:
            consumer.poll(0.01)
        elapsed = time.perf_counter() - began
        if state["failed"]:
            raise KafkaException(f"{state['failed']} of {sent} async commits failed")
        return Rate(sent, elapsed)
    finally:
        consumer.close()


def measured(broker: SeglogBroker, load: Callable[[], Rate]) -> Rate:
    """``load``, with the broker's mean OffsetCommit handling time over it."""
    count, seconds = broker.handled("OffsetCommit")
    rate = load()
    count_after, seconds_after = broker.handled("OffsetCommit")
    if count_after > count:
        rate.broker = (seconds_after - seconds) / (count_after - count)
    return rate


# ---------------------------------------------------------------- report


def duration(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1e3:,.0f} ms"


def seconds_text(values: list[float]) -> str:
    if not values:
        return ""
    if len(values) == 1:
        return duration(values[0])
    return f"{duration(statistics.median(values))} / {duration(max(values))}"


def print_report(
    info: str,
    rebalances: list[Rebalances],
    repeat: int,
    sync: Rate,
    async_: Rate,
    limit: Rate,
    limit_dir: Rate,
    quick: bool,
) -> None:
    out = Console(width=200)
    out.print(info)
    groups = Table(
        title=f"rebalances: {MEMBERS} members (one process each), {PARTITIONS} partitions, "
        f"eager range assignor ({'quick' if quick else 'full'} run)"
    )
    groups.add_column("measurement (median / max of the repeats)")
    for r in rebalances:
        label = " (default)" if r.heartbeat_ms == 3000 else ""
        groups.add_column(f"heartbeat.interval.ms={r.heartbeat_ms}{label}", justify="right")
    lines: list[tuple[str, Callable[[Rebalances], str]]] = [
        ("initial join: 10 × subscribe() → all assigned", lambda r: duration(r.initial_join)),
        (f"one member leaves: close() → 9 reassigned, {repeat}×", lambda r: seconds_text(r.leave)),
        (
            "   of which until the last of the 9 noticed (on_revoke)",
            lambda r: seconds_text(r.noticed),
        ),
        (
            "   of which rejoin + sync after that",
            lambda r: seconds_text([a - b for a, b in zip(r.leave, r.noticed, strict=True)]),
        ),
        ("   the leaving member's close() call", lambda r: seconds_text(r.close_call)),
        (
            f"one member joins 9: subscribe() → 10 assigned, {repeat}×",
            lambda r: seconds_text(r.join),
        ),
    ]
    for name, cell in lines:
        groups.add_row(name, *(cell(r) for r in rebalances))
    out.print(groups)

    commits = Table(title="OffsetCommit (each fsynced before its answer), one member")
    commits.add_column("benchmark")
    commits.add_column("seglog", justify="right")
    commits.add_column("limit (same run)", justify="right")
    commits.add_column("ratio", justify="right")
    commits.add_column("broker handling / commit¹", justify="right")
    commits.add_row(
        "synchronous commit, 1 partition",
        f"{sync.per_second:,.0f} commits/s, {sync.latency_text()}",
        f"{limit.per_second:,.0f} fsync/s, {limit.latency_text()}",
        f"{sync.per_second / limit.per_second:.0%}",
        f"{sync.broker * 1e3:.2f} ms",
    )
    commits.add_row(
        f"asynchronous commits, {PARTITIONS} partitions each, ≤ {ASYNC_WINDOW} outstanding",
        f"{async_.per_second:,.0f} commits/s ({async_.per_second * PARTITIONS:,.0f} offsets/s)",
        f"{limit.per_second:,.0f} fsync/s",
        f"{async_.per_second / limit.per_second:.0%}",
        f"{async_.broker * 1e3:.2f} ms",
    )
    commits.add_row(
        "limit: 100 B write + fsync + directory fsync",
        "",
        f"{limit_dir.per_second:,.0f} /s, {limit_dir.latency_text()}",
        "",
        "",
    )
    out.print(commits)
    out.print(
        "limit: 100 B write() + fsync() of a file in the broker's temporary directory, "
        "in a loop, measured just before the commits.\n"
        "¹ mean time from the request's decoding to its encoded answer (seglog's /metrics), "
        "fsync included; the rest of a synchronous commit's latency is the client and the "
        "network stack."
    )
    sys.stdout.flush()


def machine_info(root: Path) -> str:
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return (
        f"{model}; {os.cpu_count()} cores; Python {platform.python_version()}; "
        f"librdkafka {librdkafka_version()[0]}; data in {root}"
    )


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--member":
        member_main(sys.argv[2])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke run")
    parser.add_argument("--repeat", type=int, help="leaves (and joins) per heartbeat setting (5)")
    parser.add_argument("--seconds", type=float, help="seconds per commit row and limit (10)")
    parser.add_argument("--dir", type=Path, help="where the temporary directory goes")
    args = parser.parse_args()
    repeat = args.repeat or (1 if args.quick else 5)
    seconds = args.seconds or (2.0 if args.quick else 10.0)

    root = Path(tempfile.mkdtemp(prefix=".group-bench-", dir=args.dir))
    began = time.perf_counter()
    broker = GroupBroker(root)
    try:
        info = machine_info(root)
        err.print(info)
        broker.start()
        rebalances = [rebalance_run(broker.bootstrap, root, hb, repeat) for hb in HEARTBEATS]
        topic = "commits"
        create_topic(broker.bootstrap, topic, PARTITIONS)
        os.sync()
        limit = fsync_rate(root, seconds, with_dir=False)
        limit_dir = fsync_rate(root, seconds, with_dir=True)
        err.print(
            f"[dim]fsync {limit.per_second:,.0f}/s, with directory {limit_dir.per_second:,.0f}/s[/]"
        )
        sync = measured(broker, lambda: sync_commits(broker.bootstrap, topic, seconds))
        err.print(f"[dim]sync commits {sync.per_second:,.0f}/s[/]")
        async_ = measured(broker, lambda: async_commits(broker.bootstrap, topic, seconds))
        print_report(info, rebalances, repeat, sync, async_, limit, limit_dir, args.quick)
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
        err.print(f"[dim]done in {time.perf_counter() - began:,.0f} s[/]")


if __name__ == "__main__":
    main()
