"""The ``seglog`` group: global options after the subcommand too."""

from __future__ import annotations

from click.testing import CliRunner

from seglog.cli.main import _globals_first, cli


def test_global_options_move_before_the_subcommand() -> None:
    assert _globals_first(["serve", "--log-level", "debug", "x.properties"]) == [
        "--log-level", "debug", "serve", "x.properties",
    ]  # fmt: skip
    assert _globals_first(["topics", "list", "--log-level=ERROR"]) == [
        "--log-level=ERROR", "topics", "list",
    ]  # fmt: skip
    # After "--" every word is an argument, even one spelt like the option.
    assert _globals_first(["produce", "t", "--", "--log-level", "x"]) == [
        "produce", "t", "--", "--log-level", "x",
    ]  # fmt: skip


def test_log_level_after_a_subcommand_is_the_global_option() -> None:
    result = CliRunner().invoke(cli, ["verify", "--log-level", "ERROR", "--help"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(cli, ["users", "list", "--log-level", "nonsense"])
    assert result.exit_code == 2
    assert "Invalid value for '--log-level': 'nonsense' is not one of" in result.output
