"""``seglog serve``: run the broker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from seglog.broker.server import run_broker
from seglog.broker.settings import BrokerSettings
from seglog.config import load_properties


@click.command("serve")
@click.argument(
    "properties_file", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="A broker property that overrides the file (repeatable), e.g. log.dirs=/var/seglog.",
)
def serve(properties_file: Path | None, overrides: tuple[str, ...]) -> None:
    """Run the broker, as Kafka's kafka-server-start does.

    With no file and no overrides it listens on 127.0.0.1:9092 with data in ./data.
    """
    properties = load_properties(properties_file) if properties_file else {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--override")
        properties[key.strip()] = value.strip()
    settings = BrokerSettings.from_properties(properties)
    asyncio.run(run_broker(settings))
