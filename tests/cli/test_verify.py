from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from seglog.cli.main import cli
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage.log_dir import LogDir


def _write(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("t", 2, {"internal.segment.bytes": "2000", "index.interval.bytes": "100"})
        for i in range(30):
            logs.append("t", i % 2, build_batch([SimpleRecord(value=b"v" * 200, key=b"k")]))


def test_verify_a_healthy_directory(tmp_path: Path) -> None:
    _write(tmp_path)
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    result = CliRunner().invoke(cli, ["verify", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "t-0: 15 batches" in result.output and "ok" in result.output
    after = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    assert before == after  # read only


def test_verify_reports_corruption(tmp_path: Path) -> None:
    _write(tmp_path)
    segment = sorted((tmp_path / "t-1").glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    data[len(data) // 2] ^= 0xFF
    segment.write_bytes(bytes(data))
    result = CliRunner().invoke(cli, ["verify", str(tmp_path)])
    assert result.exit_code == 2
    assert "t-1:" in result.output and "problem" in result.output


def test_verify_a_directory_in_use(tmp_path: Path) -> None:
    """The active segment's indexes are preallocated while a broker has the directory open (or
    after it was killed): their zero room is not entries, so it is no problem."""
    with LogDir.open(tmp_path) as logs:
        logs.create_topic("t", 1, {"index.interval.bytes": "100"})
        for _ in range(10):
            logs.append("t", 0, build_batch([SimpleRecord(value=b"v" * 200, key=b"k")]))
        logs.log("t", 0).flush()
        assert (tmp_path / "t-0" / "00000000000000000000.index").stat().st_size > 1000
        result = CliRunner().invoke(cli, ["verify", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "t-0: 10 batches" in result.output
