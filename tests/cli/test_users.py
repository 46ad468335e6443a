"""``seglog users``: SCRAM credentials of a log directory."""

from __future__ import annotations

import json
import stat
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
