"""Progress and summaries of the long commands, as a user's terminal or pipe receives them.

Each command runs as a subprocess: with pipes (no terminal: no progress, stdout
exactly the data, one summary line on stderr), and with stderr on a pseudo-terminal
(progress drawn there, stdout untouched). A produce stopped by a signal mid-stream
reports what a consumer then reads back.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from seglog.cli._progress import Interrupted, Signals, plural, size_text
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage.log_dir import LogDir
from tests.broker.conftest import BrokerProcess

ESCAPE = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "TERM": "xterm-256color"}
    for size in ("COLUMNS", "LINES"):  # the terminal's own size, set below, is the one to use
        env.pop(size, None)
    env.update(extra)
    return env


def seglog(*args: str) -> list[str]:
    return [sys.executable, "-m", "seglog", *args]


def piped(args: list[str], data: bytes = b"", **env: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(args, input=data, capture_output=True, env=_env(**env), timeout=120)


def on_terminal(
    args: list[str], stdin: Path, stdout: Path, *, stdout_too: bool = False
) -> tuple[int, bytes]:
    """Run with stderr (and with ``stdout_too`` stdout) on a pseudo-terminal of 160
    columns; stdout otherwise to the file ``stdout``. Returns the exit code and all
    the terminal received."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
    with stdin.open("rb") as source, stdout.open("wb") as sink:
        process = subprocess.Popen(
            args, stdin=source, stdout=slave if stdout_too else sink, stderr=slave, env=_env()
        )
    os.close(slave)
    received = bytearray()
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every end of the terminal's other side is closed
                break
            if not chunk:
                break
            received += chunk
        code = process.wait(timeout=60)
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()
            process.wait()
    return code, bytes(received)


def visible_lines(terminal: bytes) -> list[str]:
    """The lines as they stay on the terminal: what follows the last carriage return of
    each (a redraw), escape sequences removed, empty ones left out."""
    lines = [line.rstrip(b"\r").rpartition(b"\r")[2] for line in terminal.split(b"\n")]
    return [text for line in lines if (text := ESCAPE.sub(b"", line).decode())]


def last_line(terminal: bytes) -> str:
    """The last line left on the terminal."""
    return visible_lines(terminal)[-1]


def held(broker: BrokerProcess, topic: str, partitions: int) -> int:
    """How many offsets the partitions of ``topic`` hold (0 before it exists)."""
    probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "probe"})
    try:
        return sum(
            probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        )
    except KafkaException:  # not created yet
        return 0
    finally:
        probe.close()


def create(broker: BrokerProcess, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def read_all(broker: BrokerProcess, topic: str, partitions: int) -> dict[int, list[int]]:
    """Every offset a consumer reads from each partition, from the start to the end."""
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        ends = {}
        for p in range(partitions):
            _, ends[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        seen: dict[int, list[int]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + 60
        while any(len(seen[p]) < ends[p] for p in seen) and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=0.5):
                partition, offset = message.partition(), message.offset()
                if message.error() is None and partition is not None and offset is not None:
                    seen[partition].append(offset)
        return seen
    finally:
        consumer.close()


def produced_summary(stderr: str) -> tuple[int, int, dict[int, int]]:
    """(lines, delivered, last offset by partition) of ``seglog produce``'s summary."""
    summary = stderr.splitlines()[-1]
    found = re.fullmatch(
        r"seglog produce: (?:interrupted by SIG(?:INT|TERM): )?(\d+) lines?, (\d+) delivered, "
        r"0 failed in [0-9.]+s \(\d+ records/s\); last offset by partition: (.*)",
        summary,
    )
    assert found is not None, stderr
    pairs = [item.split("=") for item in found[3].split()] if found[3] != "none" else []
    return int(found[1]), int(found[2]), {int(p): int(o) for p, o in pairs}


def _partitioned_log_dir(root: Path) -> None:
    with LogDir.open(root) as logs:
        logs.create_topic("t", 2, {"internal.segment.bytes": "4000"})
        for i in range(40):
            logs.append("t", i % 2, build_batch([SimpleRecord(value=b"v" * 300, key=b"k")]))


# --- no terminal: no progress, the data alone on stdout, one summary line on stderr ---


def test_piped_produce_and_consume_write_data_and_one_summary_line(
    broker: BrokerProcess, topic: str
) -> None:
    create(broker, topic, 2)
    lines = b"".join(b"k%d:value %d\n" % (i % 7, i) for i in range(500))
    # FORCE_COLOR makes rich believe in a terminal; progress must not.
    produced = piped(
        seglog("produce", topic, "--key-separator", ":", "--bootstrap-server", broker.bootstrap),
        lines,
        FORCE_COLOR="1",
    )
    assert produced.returncode == 0, produced.stderr
    assert produced.stdout == b""
    assert produced.stderr.count(b"\n") == 1 and b"\r" not in produced.stderr
    assert not ESCAPE.search(produced.stderr)
    count, delivered, last = produced_summary(produced.stderr.decode())
    assert count == delivered == 500
    seen = read_all(broker, topic, 2)
    assert last == {p: offsets[-1] for p, offsets in seen.items() if offsets}

    args = seglog("consume", topic, "--from-beginning", "-e", "--format", "kv")
    consumed = piped([*args, "--key-separator", ":", "--bootstrap-server", broker.bootstrap])
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.splitlines()) == sorted(lines.splitlines())
    (summary,) = consumed.stderr.decode().splitlines()
    assert re.fullmatch(
        r"seglog consume: 500 records \(.+ of keys and values\) from 2 partitions, "
        r"0 errors in [0-9.]+s",
        summary,
    ), summary

    # Both streams into one pipe (2>&1): the data first, the summary on its own line last.
    both = subprocess.run(
        [*args, "--max-messages", "10", "--bootstrap-server", broker.bootstrap],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=_env(),
        timeout=120,
    )
    assert both.returncode == 0
    *data, summary_line = both.stdout.decode().splitlines()
    assert len(data) == 10 and summary_line.startswith("seglog consume: 10 records (")


def test_piped_verify_and_dump_log_end_with_a_summary_line(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    _partitioned_log_dir(root)
    verified = piped(seglog("verify", str(root)), FORCE_COLOR="1")
    assert verified.returncode == 0, verified.stderr
    assert not ESCAPE.search(verified.stdout + verified.stderr)
    assert verified.stdout.decode().splitlines()[0].startswith("t-0: 20 batches, ")
    (summary,) = verified.stderr.decode().splitlines()
    nbytes = sum(p.stat().st_size for p in root.glob("t-*/*.log"))
    assert summary.startswith(
        f"seglog verify: 2 partitions, 40 batches, {size_text(nbytes)}, 0 problems in "
    )

    segments = sorted(str(p) for p in (root / "t-1").glob("*.log"))
    dumped = piped(seglog("dump-log", *segments))
    assert dumped.returncode == 0, dumped.stderr
    assert dumped.stdout.decode().count("baseOffset: ") == 20
    (summary,) = dumped.stderr.decode().splitlines()
    assert (
        summary.startswith(f"seglog dump-log: {plural(len(segments), 'file')}, 20 batches, ")
        and summary.endswith("s")
        and ", 0 problems in " in summary
    )


def test_piped_verify_of_a_damaged_partition_counts_its_problems(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    _partitioned_log_dir(root)
    segment = sorted((root / "t-1").glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    data[len(data) // 2] ^= 0xFF
    segment.write_bytes(bytes(data))
    verified = piped(seglog("verify", str(root)))
    assert verified.returncode == 2
    (summary,) = verified.stderr.decode().splitlines()
    assert re.search(r", [1-9]\d* problems? in 1 partition in [0-9.]+s$", summary), summary


# --- a terminal: progress on stderr, stdout untouched ---


def test_produce_shows_progress_on_a_terminal(
    broker: BrokerProcess, topic: str, tmp_path: Path
) -> None:
    source = tmp_path / "lines"
    source.write_bytes(b"".join(b"line %d\n" % i for i in range(2000)))
    code, terminal = on_terminal(
        seglog("produce", topic, "--bootstrap-server", broker.bootstrap), source, tmp_path / "out"
    )
    assert code == 0, terminal
    assert (tmp_path / "out").read_bytes() == b""
    shown = ESCAPE.sub(b"", terminal).decode()
    assert " sent, " in shown and " delivered, " in shown and " records/s" in shown
    assert b"\x1b[2K" in terminal  # lines redrawn in place
    assert last_line(terminal).startswith("seglog produce: 2000 lines, 2000 delivered, 0 failed")


def test_consume_draws_a_bar_to_the_end_and_keeps_stdout_clean(
    broker: BrokerProcess, topic: str, tmp_path: Path
) -> None:
    lines = b"".join(b"record %d\n" % i for i in range(300))
    assert (
        piped(seglog("produce", topic, "--bootstrap-server", broker.bootstrap), lines).returncode
        == 0
    )
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    args = seglog(
        "consume", topic, "--from-beginning", "-e", "--bootstrap-server", broker.bootstrap
    )
    code, terminal = on_terminal(args, empty, tmp_path / "out")
    assert code == 0, terminal
    assert (tmp_path / "out").read_bytes() == lines  # not a byte of progress in the data
    shown = ESCAPE.sub(b"", terminal).decode()
    assert "/ 300 offsets" in shown  # the bar's total: the partition's end
    assert "\u2501" in shown  # the bar itself
    assert last_line(terminal).startswith("seglog consume: 300 records (")


def test_verify_prints_its_lines_above_the_bar_when_stdout_is_the_terminal(
    tmp_path: Path,
) -> None:
    root = tmp_path / "logs"
    _partitioned_log_dir(root)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    code, terminal = on_terminal(
        seglog("verify", str(root)), empty, tmp_path / "unused", stdout_too=True
    )
    assert code == 0, terminal
    # Each partition's line is whole, on a line of its own (the bar was erased first).
    partition_lines = [line for line in visible_lines(terminal) if ": 20 batches, " in line]
    assert [line.split(":")[0] for line in partition_lines] == ["t-0", "t-1"]
    assert all(line.startswith("t-") and line.endswith(", ok") for line in partition_lines)
    assert " B / " in ESCAPE.sub(b"", terminal).decode()  # the bar over the segments' bytes
    assert last_line(terminal).startswith("seglog verify: 2 partitions, 40 batches, ")


# --- signals: what was delivered, exactly ---


def wait_until_held(broker: BrokerProcess, topic: str, partitions: int, count: int,
                    process: subprocess.Popen[bytes]) -> None:  # fmt: skip
    deadline = time.monotonic() + 60
    while held(broker, topic, partitions) < count:
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.05)


def stopped(process: subprocess.Popen[bytes], signum: int) -> tuple[int, str]:
    """Send ``signum``; the exit code and stderr once the process ended."""
    assert process.stderr is not None
    process.send_signal(signum)
    stderr = process.stderr.read().decode()
    return process.wait(timeout=60), stderr


def test_produce_interrupted_mid_stream_reports_what_a_consumer_reads(
    broker: BrokerProcess, topic: str
) -> None:
    create(broker, topic, 3)
    args = seglog("produce", topic, "--key-separator", ":", "--bootstrap-server", broker.bootstrap)
    written = 0
    # Unbuffered: what the feeder wrote is in the pipe, and closing it has nothing to flush.
    with subprocess.Popen(
        args, stdin=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), bufsize=0
    ) as process:
        assert process.stdin is not None

        def feed() -> None:
            # Lines keep coming until the producer stops reading: the signal comes mid-stream.
            nonlocal written
            assert process.stdin is not None
            try:
                while True:
                    chunk = b"".join(b"k%d:v%d\n" % (i, i) for i in range(written, written + 500))
                    view = memoryview(chunk)
                    while view:  # unbuffered: a write may take part of it
                        view = view[process.stdin.write(view) :]
                    written += 500
            except (BrokenPipeError, ValueError, OSError):
                pass

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        try:
            wait_until_held(broker, topic, 3, 3000, process)
            code, stderr = stopped(process, signal.SIGINT)
        finally:
            if process.poll() is None:
                process.kill()
        feeder.join(timeout=60)
    assert code == 130, stderr
    assert stderr.splitlines()[-1].startswith("seglog produce: interrupted by SIGINT: ")
    lines, delivered, last = produced_summary(stderr)
    assert delivered == lines >= 3000
    assert written > lines  # it stopped before the end of what was fed
    seen = read_all(broker, topic, 3)
    assert sum(len(offsets) for offsets in seen.values()) == delivered
    assert last == {p: offsets[-1] for p, offsets in seen.items() if offsets}
    assert len(last) == 3


def test_produce_stopped_by_sigterm_while_waiting_for_input(
    broker: BrokerProcess, topic: str
) -> None:
    args = seglog("produce", topic, "--bootstrap-server", broker.bootstrap)
    with subprocess.Popen(
        args, stdin=subprocess.PIPE, stderr=subprocess.PIPE, env=_env()
    ) as process:
        assert process.stdin is not None
        try:
            process.stdin.write(b"".join(b"m%d\n" % i for i in range(25)))
            process.stdin.flush()
            # The stream stays open: the producer is waiting for the next line when stopped.
            wait_until_held(broker, topic, 1, 25, process)
            code, stderr = stopped(process, signal.SIGTERM)
        finally:
            if process.poll() is None:
                process.kill()
    assert code == 143, stderr
    assert stderr.splitlines()[-1].startswith("seglog produce: interrupted by SIGTERM: ")
    assert produced_summary(stderr) == (25, 25, {0: 24})


def test_consume_stopped_by_sigint_counts_what_it_printed(
    broker: BrokerProcess, topic: str, tmp_path: Path
) -> None:
    lines = b"".join(b"r%d\n" % i for i in range(100))
    produced = piped(seglog("produce", topic, "--bootstrap-server", broker.bootstrap), lines)
    assert produced.returncode == 0
    out = tmp_path / "out"
    args = seglog("consume", topic, "--from-beginning", "--bootstrap-server", broker.bootstrap)
    with (
        out.open("wb") as sink,
        subprocess.Popen(args, stdout=sink, stderr=subprocess.PIPE, env=_env()) as process,
    ):
        try:
            deadline = time.monotonic() + 60
            while out.read_bytes() != lines:  # everything printed; it waits for more
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.05)
            code, stderr = stopped(process, signal.SIGINT)
        finally:
            if process.poll() is None:
                process.kill()
    assert code == 0, stderr  # Ctrl-C is how a consumer without --exit ends
    (summary,) = stderr.splitlines()
    assert summary.startswith("seglog consume: stopped by SIGINT: 100 records ("), summary


def test_dump_log_draws_a_bar_over_the_segment_bytes(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    _partitioned_log_dir(root)
    segments = sorted(str(p) for p in (root / "t-0").glob("*.log"))
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    code, terminal = on_terminal(seglog("dump-log", *segments), empty, tmp_path / "out")
    assert code == 0, terminal
    listing = (tmp_path / "out").read_text()
    assert listing.count("baseOffset: ") == 20 and "\x1b" not in listing
    total = sum(Path(p).stat().st_size for p in segments)
    assert f" / {size_text(total)}" in ESCAPE.sub(b"", terminal).decode()
    assert last_line(terminal).startswith(f"seglog dump-log: {len(segments)} files, 20 batches, ")


def test_signals_are_remembered_and_raised_only_where_allowed() -> None:
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with Signals() as signals:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0)  # the handler runs between two bytecodes of the main thread
        assert signals.stopped() and signals.name == "SIGTERM" and signals.exit_code == 143
        signals.raising = True
        with pytest.raises(Interrupted):
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # until the handler has run
                time.sleep(0.01)
        assert signals.name == "SIGTERM"  # the first one is the one reported
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_helpers_words() -> None:
    assert [plural(n, "batch") for n in (0, 1, 2)] == ["0 batches", "1 batch", "2 batches"]
    assert plural(3, "partition") == "3 partitions"
    assert [size_text(n) for n in (0, 1023, 1024, 1536, 10 * 1024 * 1024, 3 << 30)] == [
        "0 B",
        "1023 B",
        "1.00 KiB",
        "1.50 KiB",
        "10.0 MiB",
        "3.00 GiB",
    ]
