"""The test ports' registry: a port is handed to one process of a run, once."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ports

DRAW = """
from tests import ports
ports.LOWEST, ports.EPHEMERAL = {lowest}, {end}
print(" ".join(str(ports.free_ports(1)) for _ in range({count})))
"""


@pytest.fixture
def window(monkeypatch: pytest.MonkeyPatch) -> range:
    """40 ports claimed from this run, then a registry of its own limited to them."""
    base = ports.free_ports(40)
    monkeypatch.setattr(ports, "LOWEST", base)
    monkeypatch.setattr(ports, "EPHEMERAL", base + 40)
    monkeypatch.setattr(ports, "_claimed_here", set())
    return range(base, base + 40)


@pytest.fixture
def claims(window: range, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "claims"
    directory.mkdir()
    monkeypatch.setenv(ports.CLAIMS_VARIABLE, str(directory))
    return directory


def _narrow(monkeypatch: pytest.MonkeyPatch, window: range, size: int) -> range:
    monkeypatch.setattr(ports, "EPHEMERAL", window.start + size)
    return window[:size]


def test_processes_drawing_at_once_never_get_the_same_port(window: range, claims: Path) -> None:
    script = DRAW.format(lowest=window.start, end=window.stop, count=15)
    drawers = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    drawn = [out.split() for out, _ in (d.communicate(timeout=120) for d in drawers)]
    assert [len(d) for d in drawn] == [15, 15]
    assert not set(drawn[0]) & set(drawn[1])
    assert sorted(p.name for p in claims.iterdir()) == sorted(drawn[0] + drawn[1])


def test_a_port_claimed_elsewhere_is_never_drawn(
    window: range, claims: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    narrow = _narrow(monkeypatch, window, 8)
    for port in narrow:
        if port != narrow[5]:
            (claims / str(port)).touch()
    assert ports.free_ports(1) == narrow[5]
    with pytest.raises(RuntimeError, match="no 1 consecutive free ports"):
        ports.free_ports(1)


def test_a_range_is_claimed_whole_or_not_at_all(
    window: range, claims: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    narrow = _narrow(monkeypatch, window, 4)
    (claims / str(narrow[2])).touch()  # every range of three ports crosses it
    with pytest.raises(RuntimeError, match="no 3 consecutive free ports"):
        ports.free_ports(3)
    assert [p.name for p in claims.iterdir()] == [str(narrow[2])]


def test_a_port_in_use_is_never_drawn(
    window: range, claims: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    narrow = _narrow(monkeypatch, window, 2)
    with socket.socket() as held:
        held.bind(("127.0.0.1", narrow[0]))
        assert ports.free_ports(1) == narrow[1]


def test_without_a_run_directory_a_process_still_never_repeats_a_port(
    window: range, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ports.CLAIMS_VARIABLE, raising=False)
    narrow = _narrow(monkeypatch, window, 5)
    assert sorted(ports.free_ports(1) for _ in range(5)) == list(narrow)
    with pytest.raises(RuntimeError):
        ports.free_ports(1)


def test_the_run_opened_a_directory_its_workers_share() -> None:
    assert Path(os.environ[ports.CLAIMS_VARIABLE]).is_dir()
