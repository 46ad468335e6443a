"""``seglog acls``: add, list and remove ACLs on a live broker with an authorizer."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker.conftest import BrokerProcess


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path / "data",
        {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # Plaintext clients are User:ANONYMOUS: made the administrator here.
            "super.users": "User:ANONYMOUS",
        },
    )
    process.start()
    yield process
    process.kill()


def _acls(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "seglog", "acls", *args, "--bootstrap-server", broker.bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_add_list_remove(broker: BrokerProcess) -> None:
    added = _acls(
        broker, "add", "--topic", "orders-", "--resource-pattern-type", "prefixed",
        "--allow-principal", "User:alice", "--operation", "read", "--operation", "describe",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert added.stdout.count("added TOPIC:PREFIXED:orders-") == 2
    denied = _acls(
        broker, "add", "--group", "g", "--deny-principal", "User:bob", "--operation", "all"
    )
    assert denied.returncode == 0, denied.stderr
    listed = _acls(broker, "list")
    assert sorted(listed.stdout.splitlines()) == [
        "GROUP:LITERAL:g (principal=User:bob, host=*, operation=ALL, permissionType=DENY)",
        "TOPIC:PREFIXED:orders- (principal=User:alice, host=*, operation=DESCRIBE, "
        "permissionType=ALLOW)",
        "TOPIC:PREFIXED:orders- (principal=User:alice, host=*, operation=READ, "
        "permissionType=ALLOW)",
    ]
    assert _acls(broker, "remove").returncode != 0  # everything needs --force
    removed = _acls(broker, "remove", "--topic", "orders-", "--operation", "read")
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.count("removed ") == 1
    assert len(_acls(broker, "list", "--principal", "User:alice").stdout.splitlines()) == 1
    bad = _acls(broker, "add", "--topic", "t", "--allow-principal", "alice", "--operation", "read")
    assert bad.returncode == 1 and "Could not parse principal" in bad.stderr
