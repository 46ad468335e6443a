"""The ``seglog`` command: a click group; each subcommand lives in its own module."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import click

from seglog import __version__
from seglog.errors import SeglogError

_GLOBAL_WITH_VALUE = ("--log-level",)


def _globals_first(args: list[str]) -> list[str]:
    """``args`` with the global options given after a subcommand moved before it.

    ``seglog serve --log-level debug`` then means ``seglog --log-level debug serve``.
    Nothing after ``--`` moves: from there on every word is an argument.
    """
    moved: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest += args[i:]
            break
        name = arg.split("=", 1)[0]
        if name in _GLOBAL_WITH_VALUE:
            if "=" in arg or i + 1 == len(args):
                moved.append(arg)
                i += 1
            else:
                moved += args[i : i + 2]
                i += 2
            continue
        rest.append(arg)
        i += 1
    return moved + rest


class _Group(click.Group):
    """A group that turns seglog's errors into one clear line instead of a traceback.

    Its global options may also be given after the subcommand.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if ctx.parent is None:
            args = _globals_first(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SeglogError as exc:
            # One line per problem (a broker's settings may have several).
            for line in str(exc).splitlines() or [""]:
                click.echo(f"seglog: error: {line}", err=True)
            sys.exit(1)
        except BrokenPipeError:
            raise
        except OSError as exc:
            click.echo(f"seglog: error: {exc}", err=True)
            sys.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="seglog")
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default=None,
    help="Verbosity of the log messages written to stderr "
    "[default: INFO for serve, as Kafka's broker logs; WARNING for the tools].",
)
@click.pass_context
def cli(ctx: click.Context, log_level: str | None) -> None:
    """seglog: a Kafka-compatible append-only log.

    Data is stored in Apache Kafka's own segment format. --log-level may also
    follow the subcommand (seglog serve --log-level debug).
    """
    if log_level is None:
        log_level = "INFO" if ctx.invoked_subcommand == "serve" else "WARNING"
    logging.basicConfig(
        level=getattr(logging, log_level.upper()),
        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)",
    )


def _register() -> None:
    from seglog.cli.acls import acls
    from seglog.cli.configs import configs
    from seglog.cli.console import console
    from seglog.cli.consume import consume
    from seglog.cli.demo import demo
    from seglog.cli.dump import dump_log
    from seglog.cli.find import find
    from seglog.cli.groups import groups
    from seglog.cli.mirror import mirror
    from seglog.cli.offsets import offsets
    from seglog.cli.produce import produce
    from seglog.cli.schemas import schemas
    from seglog.cli.serve import serve
    from seglog.cli.topics import topics
    from seglog.cli.transactions import transactions
    from seglog.cli.users import users
    from seglog.cli.verify import verify

    cli.add_command(dump_log)
    cli.add_command(verify)
    cli.add_command(demo)
    cli.add_command(serve)
    cli.add_command(topics)
    cli.add_command(produce)
    cli.add_command(consume)
    cli.add_command(offsets)
    cli.add_command(find)
    cli.add_command(groups)
    cli.add_command(mirror)
    cli.add_command(transactions)
    cli.add_command(users)
    cli.add_command(acls)
    cli.add_command(configs)
    cli.add_command(console)
    cli.add_command(schemas)


_register()


def main() -> None:
    """Entry point of the ``seglog`` console script."""
    try:
        cli(prog_name="seglog")
    except BrokenPipeError:
        # The reader went away (``seglog dump-log ... | head``): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
