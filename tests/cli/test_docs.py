"""Every command has help text and is documented in the command line reference."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from seglog.cli.main import cli

REFERENCE = (Path(__file__).parent.parent.parent / "docs" / "cli.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_command_has_help_and_docs(name: str) -> None:
    command = cli.commands[name]
    assert command.help, f"seglog {name} has no help"
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0
    assert f"`seglog {name}" in REFERENCE, f"seglog {name} is not in docs/cli.md"
