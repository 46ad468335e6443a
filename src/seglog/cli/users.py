"""``seglog users``: SCRAM users of a log directory (add, list, delete).

Changes the credentials file the broker reads (it rereads it when it
changes), so users can be created before the first start of a broker whose
listeners all require SASL, as ``kafka-storage format --add-scram`` does.
"""

from __future__ import annotations

from pathlib import Path

import click

from seglog.broker.security.credentials import SCRAM_FILE, ScramStore
from seglog.broker.security.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, make_credential
from seglog.errors import SeglogError
from seglog.storage.log_dir import looks_like_log_dir

_LOG_DIR = click.option(
    "--log-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default="./data",
    show_default=True,
    help="The broker's log directory (log.dirs).",
)
_CREATE = click.option(
    "--create",
    is_flag=True,
    help="Create the log directory if it does not exist, or use a directory that does not "
    "look like one (before a broker's first start).",
)
_MECHANISM = click.option(
    "--mechanism",
    "mechanisms",
    type=click.Choice(sorted(MECHANISMS)),
    multiple=True,
    help="SCRAM mechanism (repeatable) [default: both].",
)


def _checked(log_dir: Path, *, create: bool = False) -> Path:
    """``log_dir``, refused unless it is (or may become, with ``create``) a log directory.

    A mistyped ``--log-dir`` must not quietly become a new directory whose
    users no broker reads. An empty directory is accepted: nothing is there
    to be mistaken.
    """
    if create:
        log_dir.mkdir(parents=True, exist_ok=True)
        return log_dir
    if not log_dir.exists():
        raise SeglogError(
            f"{log_dir} does not exist; give the broker's log.dirs, "
            "or --create to make it (before the broker's first start)"
        )
    if not log_dir.is_dir():
        raise SeglogError(f"{log_dir} is not a directory")
    if not looks_like_log_dir(log_dir, (SCRAM_FILE,)) and any(log_dir.iterdir()):
        raise SeglogError(
            f"{log_dir} does not look like a log directory (no meta.properties, checkpoints, "
            "partitions or users); give the broker's log.dirs, or --create to use it anyway"
        )
    return log_dir


@click.group("users")
def users() -> None:
    """Manage SCRAM users (SCRAM-SHA-256/512 credentials) of a log directory."""


@users.command("add")
@click.argument("name")
@_LOG_DIR
@_CREATE
@_MECHANISM
@click.option(
    "--iterations",
    type=click.IntRange(MIN_ITERATIONS, MAX_ITERATIONS),
    default=MIN_ITERATIONS,
    show_default=True,
    help="SCRAM iterations.",
)
@click.password_option(
    "--password",
    help="The password (asked for, without echo, when not given).",
)
def add(
    name: str,
    log_dir: Path,
    create: bool,
    mechanisms: tuple[str, ...],
    iterations: int,
    password: str,
) -> None:
    """Add user NAME, or change its password (stored salted and hashed)."""
    _checked(log_dir, create=create)
    chosen = mechanisms or tuple(sorted(MECHANISMS))
    ScramStore(log_dir).change(
        [(name, m, make_credential(m, password, iterations)) for m in chosen], []
    )
    click.echo(f"{name}: {', '.join(chosen)}")


@users.command("list")
@_LOG_DIR
def list_users(log_dir: Path) -> None:
    """List users and their mechanisms (never their credentials)."""
    for name, credentials in sorted(ScramStore(_checked(log_dir)).users().items()):
        described = ", ".join(
            f"{m} (iterations={c.iterations})" for m, c in sorted(credentials.items())
        )
        click.echo(f"{name}: {described}")


@users.command("delete")
@click.argument("name")
@_LOG_DIR
@_MECHANISM
def delete(name: str, log_dir: Path, mechanisms: tuple[str, ...]) -> None:
    """Delete user NAME's credentials (all of them unless --mechanism is given)."""
    store = ScramStore(_checked(log_dir))
    chosen = mechanisms or tuple(sorted(store.users().get(name, {})))
    missing = store.change([], [(name, m) for m in chosen]) if chosen else [(name, "")]
    if missing:
        raise click.ClickException(f"no such credential: {name} {' '.join(m for _, m in missing)}")
    click.echo(f"deleted {name}: {', '.join(chosen)}")
