from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_demo_runs_as_the_installed_command(tmp_path: Path) -> None:
    seglog = Path(sys.executable).parent / "seglog"
    result = subprocess.run(
        [str(seglog), "demo", "--data", str(tmp_path / "data"), "--records", "3000"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "3,000" in result.stdout and "consistency check" in result.stdout
    assert (tmp_path / "data" / "demo-0" / "00000000000000000000.log").exists()
    again = subprocess.run(
        [str(seglog), "verify", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert again.returncode == 0 and "demo-0: " in again.stdout


def test_errors_are_one_line(tmp_path: Path) -> None:
    seglog = Path(sys.executable).parent / "seglog"
    (tmp_path / "data").mkdir()
    lock_holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from seglog import LogDir; d = LogDir.open(sys.argv[1]); "
            "print('ready', flush=True); time.sleep(30)",
            str(tmp_path / "data"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert lock_holder.stdout is not None and lock_holder.stdout.readline().strip() == "ready"
        result = subprocess.run(
            [str(seglog), "demo", "--data", str(tmp_path / "data"), "--records", "10"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        lock_holder.kill()
        lock_holder.wait()
        if lock_holder.stdout is not None:
            lock_holder.stdout.close()
    assert result.returncode == 1
    assert result.stderr.strip().startswith("seglog: error:")
    assert "Traceback" not in result.stderr
