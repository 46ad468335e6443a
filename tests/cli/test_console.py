"""``seglog console``: the running broker's console URL, told by the broker itself."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from seglog.cli.main import cli
from tests.broker.conftest import BrokerProcess

TIMEOUT = 60.0


def test_prints_the_url_of_the_console(make_broker: Callable[..., BrokerProcess]) -> None:
    # console.port=0: a free port, which only the broker can tell.
    broker = make_broker(**{"console.port": "0"})
    result = CliRunner().invoke(cli, ["console", "--bootstrap-server", broker.bootstrap])
    assert result.exit_code == 0, (result.output, result.exception)
    url = result.stdout.strip()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/")
    with urllib.request.urlopen(url, timeout=TIMEOUT) as reply:
        assert reply.headers["Content-Type"].startswith("text/html")
        assert b"seglog console" in reply.read()


def test_a_broker_without_a_console_is_a_clear_error(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    broker = make_broker()
    result = CliRunner().invoke(cli, ["console", "--bootstrap-server", broker.bootstrap])
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stderr.startswith("seglog: error: "), result.stderr
    assert "serves no HTTP API: start it with --console-port N (console.port)\n" in result.stderr
    assert result.stdout == ""


def test_open_starts_the_browser_on_the_url(
    make_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    broker = make_broker(**{"console.port": "0"})
    # A "browser" that writes down what it was asked to open ($BROWSER, as webbrowser reads it).
    opened = tmp_path / "opened"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\nprintf "%s" "$1" > "{opened}"\n')
    browser.chmod(browser.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "BROWSER": str(browser), "DISPLAY": ""}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from seglog.cli.main import main; main()",
            "console",
            "--open",
            "--bootstrap-server",
            broker.bootstrap,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    url = done.stdout.strip()
    deadline = time.monotonic() + TIMEOUT
    while not opened.exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # webbrowser may start the browser in the background
    assert opened.read_text() == url
