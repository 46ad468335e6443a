"""``seglog console``: the running broker's console, its URL printed and optionally opened.

The console's port is what the broker answers for ``console.port`` to
DescribeConfigs (as ``seglog find`` asks it), on the host of the bootstrap
server; over an SSL or SASL_SSL client configuration the URL is HTTPS.
"""

from __future__ import annotations

import webbrowser
from pathlib import Path

import click

from seglog.cli._client import ClientError, connection_options, resolve
from seglog.cli.find import console_url


def _with_connection_options(func: click.decorators.FC) -> click.decorators.FC:
    for option in reversed(connection_options()):
        func = option(func)
    return func


@click.command("console")
@click.option("--open", "open_browser", is_flag=True, help="Open the console in a web browser.")
@_with_connection_options
def console(
    open_browser: bool,
    bootstrap_server: str | None,
    command_config: Path | None,
    properties: tuple[tuple[str, str], ...],
    timeout: float,
) -> None:
    """Print the URL of the running broker's web console (and with --open, open it).

    The broker serves its console when started with --console-port N
    (console.port).

    \b
    Examples:
      seglog console
      seglog console --open --bootstrap-server broker1:9092
    """
    client = resolve(bootstrap_server, command_config, properties, timeout)
    url = console_url(client, hint="") + "/"
    click.echo(url)
    if open_browser and not webbrowser.open(url):
        raise ClientError(f"no web browser could be started: open {url} yourself")
