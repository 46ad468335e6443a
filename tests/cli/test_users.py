"""``seglog users``: SCRAM credentials of a log directory."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from seglog.broker.security.credentials import SCRAM_FILE, ScramStore
from seglog.broker.security.scram import ScramServer, make_credential
from seglog.cli.main import cli


def _run(*args: str, input: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), input=input)
    return result.exit_code, result.output


def test_add_list_delete(tmp_path: Path) -> None:
    code, out = _run("users", "add", "alice", "--log-dir", str(tmp_path), "--password", "pw-1")
    assert code == 0, out
    code, out = _run(
        "users", "add", "bob", "--log-dir", str(tmp_path), "--mechanism", "SCRAM-SHA-512",
        "--iterations", "8192", input="pw-2\npw-2\n",
    )  # fmt: skip
    assert code == 0, out
    code, out = _run("users", "list", "--log-dir", str(tmp_path))
    assert out.splitlines() == [
        "alice: SCRAM-SHA-256 (iterations=4096), SCRAM-SHA-512 (iterations=4096)",
        "bob: SCRAM-SHA-512 (iterations=8192)",
    ]
    # Stored salted and hashed, readable by the owner only; never the password.
    path = tmp_path / SCRAM_FILE
    text = path.read_text()
    assert "pw-1" not in text and "pw-2" not in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    stored = json.loads(text)["users"]["alice"]["SCRAM-SHA-256"]
    assert set(stored) == {"salt", "stored_key", "server_key", "iterations"}
    code, out = _run("users", "delete", "alice", "--log-dir", str(tmp_path))
    assert code == 0, out
    code, out = _run("users", "list", "--log-dir", str(tmp_path))
    assert out.splitlines() == ["bob: SCRAM-SHA-512 (iterations=8192)"]
    code, out = _run("users", "delete", "nobody", "--log-dir", str(tmp_path))
    assert code != 0 and "no such credential" in out


def test_stored_credential_authenticates(tmp_path: Path) -> None:
    _run("users", "add", "alice", "--log-dir", str(tmp_path), "--password", "secret")
    stored = ScramStore(tmp_path).lookup("alice", "SCRAM-SHA-256")
    assert stored is not None
    again = make_credential("SCRAM-SHA-256", "secret", stored.iterations, stored.salt)
    assert again == stored
    assert (
        ScramServer("SCRAM-SHA-256", ScramStore(tmp_path).lookup)
        .respond(b"n,,n=alice,r=abc")
        .startswith(b"r=abc")
    )


def _seglog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "seglog", *args], capture_output=True, text=True, timeout=60
    )


def test_a_mistyped_log_dir_is_refused_not_created(tmp_path: Path) -> None:
    typo = tmp_path / "dta"
    done = _seglog("users", "add", "bob", "--log-dir", str(typo), "--password", "pw")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"seglog: error: {typo} does not exist; give the broker's log.dirs, "
        "or --create to make it (before the broker's first start)"
    ]
    assert not typo.exists()
    for command in (["list"], ["delete", "bob"]):
        done = _seglog("users", *command, "--log-dir", str(typo))
        assert done.returncode == 1 and "does not exist" in done.stderr
    assert not typo.exists()


def test_a_directory_that_is_not_a_log_directory_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "home"
    (elsewhere / "dbus-1").mkdir(parents=True)  # shaped like a partition folder, with no segment
    (elsewhere / "notes.txt").write_text("mine")
    done = _seglog("users", "add", "bob", "--log-dir", str(elsewhere), "--password", "pw")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"seglog: error: {elsewhere} does not look like a log directory (no meta.properties, "
        "checkpoints, partitions or users); give the broker's log.dirs, or --create to use it "
        "anyway"
    ]
    assert not (elsewhere / SCRAM_FILE).exists()


def test_create_makes_the_directory_and_then_it_is_one(tmp_path: Path) -> None:
    data = tmp_path / "new" / "data"
    done = _seglog("users", "add", "bob", "--log-dir", str(data), "--create", "--password", "pw")
    assert done.returncode == 0, done.stderr
    # Users alone mark it as a log directory: no --create needed from now on.
    done = _seglog("users", "add", "carol", "--log-dir", str(data), "--password", "pw")
    assert done.returncode == 0, done.stderr
    assert sorted(ScramStore(data).users()) == ["bob", "carol"]


def test_a_log_directory_a_broker_or_kafka_wrote_is_accepted(
    tmp_path: Path, kafka_partition: Path
) -> None:
    # kafka_partition: tmp_path/orders-0 with a segment and its indexes, as Kafka writes them.
    assert kafka_partition.parent == tmp_path
    (tmp_path / "unrelated.txt").write_text("x")
    done = _seglog("users", "add", "bob", "--log-dir", str(tmp_path), "--password", "pw")
    assert done.returncode == 0, done.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    done = _seglog("users", "add", "bob", "--log-dir", str(empty), "--password", "pw")
    assert done.returncode == 0, done.stderr
