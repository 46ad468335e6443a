"""``seglog mirror``: a run killed with kill -9 mid-copy and rerun leaves each record once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner
from confluent_kafka import Consumer, TopicPartition

from seglog.cli.main import cli
from seglog.storage.log_dir import LogDir, LogDirSettings
from tests.broker.conftest import BrokerProcess
from tests.mirror.conftest import (
    same_content,
    source_dir,
    source_records,
    target,
    target_records,
    write_events,
)

__all__ = ["source_dir", "target"]


def _held(bootstrap: str, topic: str, partitions: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        total = 0
        for p in range(partitions):
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=2)
            except Exception:  # the topic is not created yet
                return 0
            total += high - low
        return total
    finally:
        consumer.close()


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "seglog", "mirror", *args]


def test_kill_9_mid_copy_then_rerun_holds_each_record_once_in_order(
    tmp_path: Path, target: BrokerProcess
) -> None:
    root = tmp_path / "big"
    with LogDir.open(root, settings=LogDirSettings(log_cleaner_enable=False)) as logs:
        logs.create_topic("big", 2)
        write_events(logs, "big", 2, 40, 50)  # 2000 records a partition
    total = 4000
    state = tmp_path / "map.json"
    args = ["--to", target.bootstrap, "--log-dir", str(root), "--state", str(state)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    first = subprocess.Popen(
        # 100 records/s: the whole copy takes 40 s, so a slow probe on a loaded machine
        # still sees it mid-copy (the probe below may take seconds; the copy cannot end first).
        _command(*args, "--max-rate", "100"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        # Past the first save of the map (every second) and well before the end.
        while _held(target.bootstrap, "big", 2) < 400 and time.monotonic() < deadline:
            assert first.poll() is None, "the mirror ended before it could be killed"
            time.sleep(0.05)
    finally:
        first.kill()
        first.wait(10)
    time.sleep(0.3)  # a produce request already sent is appended by now
    before = _held(target.bootstrap, "big", 2)
    assert 0 < before < total

    rerun = subprocess.run(_command(*args), env=env, capture_output=True, timeout=60)
    assert rerun.returncode == 0, rerun.stderr.decode()
    out = rerun.stdout.decode()
    assert "0 created" in out
    copied = int(out.split(" partition(s), ")[1].split(" record(s)")[0])
    assert copied == total - before
    for p in (0, 1):
        expected = [same_content(r) for r in source_records(root, "big", p)]
        held = [same_content(r) for r in target_records(target.bootstrap, "big", p)]
        assert held == expected


def test_report_and_follow_flag_validation(
    source_dir: Path, target: BrokerProcess, tmp_path: Path
) -> None:
    args = ["mirror", "--to", target.bootstrap, "--log-dir", str(source_dir)]
    result = CliRunner().invoke(cli, [*args, "--state", str(tmp_path / "m.json")])
    assert result.exit_code == 0, result.output
    assert "2 topic(s) (2 created), 4 partition(s)" in result.output
    assert "g-events: 3 partition(s)" in result.output

    both = CliRunner().invoke(cli, [*args, "--from", target.bootstrap])
    assert both.exit_code == 2 and "not both" in both.output

    other = CliRunner().invoke(
        cli,
        [
            "mirror",
            "--to",
            "127.0.0.1:1",
            "--log-dir",
            str(source_dir),
            "--state",
            str(tmp_path / "m.json"),
        ],
    )
    assert other.exit_code == 1 and "not 127.0.0.1:1" in other.output


def test_a_second_run_copies_nothing_new(
    source_dir: Path, target: BrokerProcess, tmp_path: Path
) -> None:
    args = ["mirror", "--to", target.bootstrap, "--log-dir", str(source_dir)]
    args += ["--state", str(tmp_path / "m.json")]
    assert CliRunner().invoke(cli, args).exit_code == 0
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0, again.output
    assert "0 record(s)" in again.output
    for p in range(3):
        assert len(target_records(target.bootstrap, "events", p)) == 100


def test_follow_stops_on_sigterm_with_its_report(
    source_dir: Path, target: BrokerProcess, tmp_path: Path
) -> None:
    args = ["--to", target.bootstrap, "--log-dir", str(source_dir), "--follow"]
    args += ["--interval", "0.2", "--state", str(tmp_path / "m.json")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    follow = subprocess.Popen(
        _command(*args), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        while _held(target.bootstrap, "events", 3) < 300:
            assert time.monotonic() < deadline and follow.poll() is None
            time.sleep(0.1)
        time.sleep(0.5)  # at least one round with the lag table
    finally:
        follow.terminate()
        out, err = follow.communicate(timeout=30)
    assert follow.returncode == 0, err.decode()
    assert "4 partition(s), " in out.decode()
    assert "source end" in err.decode()  # the lag table


def test_piped_run_draws_no_progress_and_its_summary_starts_a_line(
    source_dir: Path, target: BrokerProcess, tmp_path: Path
) -> None:
    args = ["--to", target.bootstrap, "--log-dir", str(source_dir)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "FORCE_COLOR": "1"}
    done = subprocess.run(
        _command(*args, "--state", str(tmp_path / "m.json")),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # 2>&1: progress, had there been any, would come first
        timeout=120,
    )
    assert done.returncode == 0, done.stdout.decode()
    text = done.stdout.decode()
    assert "\x1b" not in text and "\r" not in text and "━" not in text
    (summary,) = [line for line in text.splitlines() if "Mirrored to " in line]
    assert summary.startswith("Mirrored to ") and summary.endswith(" MiB, 0 error(s)")
    assert "2 topic(s) (2 created), 4 partition(s), " in summary
