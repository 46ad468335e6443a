"""``seglog serve``: run the broker (or ``--nodes N`` of them over one log directory)."""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
from pathlib import Path

import click

from seglog.broker.nodes.cluster import Cluster
from seglog.broker.nodes.supervisor import run_supervisor
from seglog.broker.server import run_broker
from seglog.broker.settings import BrokerSettings
from seglog.config import load_properties

TEST_NODE_HOOK = "SEGLOG_TEST_NODE_HOOK"
"""Tests only: ``module:function``, called with a node's settings and index before it starts.

The tests cut one node's power this way (``tests/broker/nodes/power_cut.py`` runs
the node over a file system that forgets what was not fsynced). Unset, as it is
outside the tests, nothing happens.
"""


def _run_test_node_hook(settings: BrokerSettings, node_index: int) -> None:
    spec = os.environ.get(TEST_NODE_HOOK)
    if spec:
        module, _, name = spec.partition(":")
        getattr(importlib.import_module(module), name)(settings, node_index)


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
@click.option(
    "--nodes",
    default=None,
    metavar="N|auto",
    help="Run N broker processes (nodes) over the log directory, node i on every listener's "
    "port + i; auto: one per core. Overrides the nodes property [default: 1].",
)
@click.option(
    "--console-port",
    type=click.IntRange(0, 65535),
    default=None,
    metavar="PORT",
    help="Serve the HTTP API (lookup by key, topics) on this port, at console.host "
    "(127.0.0.1 unless set); node i of --nodes on PORT + i. Overrides the console.port "
    "property [default: off].",
)
@click.option(
    "--schema-registry-port",
    type=click.IntRange(0, 65535),
    default=None,
    metavar="PORT",
    help="Serve the schema registry (Confluent's REST API) on this port, at "
    "schema.registry.host (127.0.0.1 unless set); node i of --nodes on PORT + i. Overrides "
    "the schema.registry.port property [default: off].",
)
@click.option("--node-index", type=int, default=None, hidden=True)
@click.option("--node-clean", is_flag=True, default=False, hidden=True)
def serve(
    properties_file: Path | None,
    overrides: tuple[str, ...],
    nodes: str | None,
    console_port: int | None,
    schema_registry_port: int | None,
    node_index: int | None,
    node_clean: bool,
) -> None:
    """Run the broker, as Kafka's kafka-server-start does.

    With no file and no overrides it listens on 127.0.0.1:9092 with data in ./data.
    """
    properties = load_properties(properties_file) if properties_file else {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--override")
        properties[key.strip()] = value.strip()
    if nodes is not None:
        properties["nodes"] = nodes
    if console_port is not None:
        properties["console.port"] = str(console_port)
    if schema_registry_port is not None:
        properties["schema.registry.port"] = str(schema_registry_port)
    settings = BrokerSettings.from_properties(properties)
    if node_index is not None:
        # One node of a supervisor's cluster (internal options, set by the supervisor).
        cluster = Cluster.for_node(settings, settings.nodes, node_index)
        _run_test_node_hook(settings, node_index)
        asyncio.run(run_broker(settings, cluster, clean_shutdown=node_clean))
    elif settings.nodes > 1:
        node_args = [str(properties_file)] if properties_file else []
        for item in overrides:
            node_args += ["--override", item]
        # A number, so that every node counts the same whatever "auto" would say.
        node_args += ["--nodes", str(settings.nodes)]
        if console_port is not None:
            node_args += ["--console-port", str(console_port)]
        if schema_registry_port is not None:
            node_args += ["--schema-registry-port", str(schema_registry_port)]
        sys.exit(run_supervisor(settings, node_args))
    else:
        asyncio.run(run_broker(settings))
