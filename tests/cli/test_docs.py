"""Every command has help text and is documented in the README or a page of docs/."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from seglog.cli.main import cli

ROOT = Path(__file__).parent.parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = README + "".join(page.read_text(encoding="utf-8") for page in (ROOT / "docs").glob("*.md"))


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_command_has_help_and_docs(name: str) -> None:
    command = cli.commands[name]
    assert command.help, f"seglog {name} has no help"
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0
    assert f"`seglog {name}" in DOCS, f"seglog {name} is not in the README nor in docs/"
