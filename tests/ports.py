"""Ports for the servers tests start: free when drawn, and never drawn twice in one run.

Tests run in several pytest-xdist worker processes at once, and a server binds its port
a while after the test drew it. A port drawn by one worker, still free while its broker
starts, could be drawn by another worker too, and one of the two servers would fail to
bind. So every port drawn is claimed, for the whole run and across all its workers, by
a file in a directory the run makes at its start (:func:`open_claims`, called by the
controlling process before it starts the workers, which inherit its environment).
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import tempfile
from pathlib import Path

CLAIMS_VARIABLE = "SEGLOG_TEST_PORT_CLAIMS"
"""The environment variable naming the run's directory of claimed ports."""

LOWEST = 20000
"""The lowest port drawn."""
EPHEMERAL = 32768
"""Where Linux's ephemeral range starts: every port drawn is below it."""

_entropy = random.SystemRandom()
"""Ports drawn from the system's entropy: no seeding by a test or plugin repeats them."""
_claimed_here: set[int] = set()
"""The ports this process claimed: enough on its own where no run directory is set."""


def open_claims() -> None:
    """Make the run's directory of claimed ports, unless a process above made it."""
    if CLAIMS_VARIABLE not in os.environ:
        os.environ[CLAIMS_VARIABLE] = tempfile.mkdtemp(prefix="seglog-test-ports-")


def close_claims() -> None:
    """Remove the run's directory of claimed ports, from the process that made it."""
    directory = os.environ.pop(CLAIMS_VARIABLE, None)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports free now, for servers to bind soon after.

    Chosen at random below Linux's ephemeral range: a port the kernel hands out (bind
    to 0) is where every outgoing connection on the machine takes its local port, so
    another test's client connection could take it before the server binds it. Never a
    port any process of this run was given before.
    """
    for _ in range(500):
        base = _entropy.randrange(LOWEST, EPHEMERAL - count + 1)
        wanted = range(base, base + count)
        if any(port in _claimed_here for port in wanted) or not _bindable(wanted):
            continue
        if _claim(wanted):
            return base
    raise RuntimeError(f"no {count} consecutive free ports below the ephemeral range")


def _bindable(ports: range) -> bool:
    socks = []
    try:
        for port in ports:
            sock = socket.socket()
            socks.append(sock)
            sock.bind(("127.0.0.1", port))
    except OSError:
        return False
    finally:
        for sock in socks:
            sock.close()
    return True


def _claim(ports: range) -> bool:
    """Claim every port of ``ports`` for this run, or none of them."""
    directory = os.environ.get(CLAIMS_VARIABLE)
    if directory is not None:
        made: list[Path] = []
        for port in ports:
            path = Path(directory, str(port))
            try:
                os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                for claim in made:
                    claim.unlink()
                return False
            made.append(path)
    _claimed_here.update(ports)
    return True
