"""``seglog topics``: create, list, describe, alter and delete topics, like kafka-topics.sh.

Every subcommand is one or two admin requests through confluent-kafka's
``AdminClient``; the broker decides and explains (its error messages are
passed on as they are).
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import click
from confluent_kafka import TopicCollection

# confluent-kafka re-exports these without ``as``, which mypy's strict mode does not
# count as an export; they are its documented public names all the same.
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from seglog.cli._client import (
    ClientError,
    ClientSettings,
    admin_client,
    client_options,
    error_name,
    error_text,
    key_values,
    reporting,
)

_UNKNOWN = "UNKNOWN_TOPIC_OR_PART"
_EXISTS = "TOPIC_ALREADY_EXISTS"


def _admin(client: ClientSettings) -> AdminClient:
    return admin_client(client)


# What _wait returns for a request that failed the way the user said to ignore
# (--if-exists, --if-not-exists); a successful create or delete returns None.
_SKIPPED = object()


def _wait(future: Future[Any], client: ClientSettings, topic: str, ignore: str = "") -> Any:
    """The result of an admin request about ``topic``; ``_SKIPPED`` if it failed with ``ignore``."""
    try:
        return future.result(client.timeout + 1)
    except Exception as exc:
        name = error_name(exc)
        if ignore and name == ignore:
            return _SKIPPED
        if name == _UNKNOWN:
            raise ClientError(f"topic {topic!r} does not exist") from None
        if name == _EXISTS:
            raise ClientError(f"topic {topic!r} already exists") from None
        raise ClientError(f"topic {topic!r}: {error_text(exc)}") from None


@click.group("topics")
def topics() -> None:
    """Create, list, describe, alter and delete topics on a broker (like kafka-topics.sh)."""


@topics.command("create")
@click.argument("topic")
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    default=None,
    help="Number of partitions  [default: the broker's num.partitions]",
)
@click.option(
    "--replication-factor",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Replicas of each partition (a single seglog broker takes only 1).",
)
@click.option(
    "--config",
    "configs",
    callback=key_values,
    metavar="KEY=VALUE",
    multiple=True,
    help="A topic config override, e.g. retention.ms=3600000 (repeatable).",
)
@click.option("--if-not-exists", is_flag=True, help="Do nothing if the topic already exists.")
@client_options
def create(
    topic: str,
    partitions: int | None,
    replication_factor: int,
    configs: tuple[tuple[str, str], ...],
    if_not_exists: bool,
    client: ClientSettings,
) -> None:
    """Create TOPIC."""
    admin = _admin(client)
    new = NewTopic(
        topic,
        num_partitions=partitions if partitions is not None else -1,
        replication_factor=replication_factor,
        config=dict(configs),
    )
    futures = admin.create_topics([new], request_timeout=client.timeout)
    if _wait(futures[topic], client, topic, _EXISTS if if_not_exists else "") is not _SKIPPED:
        click.echo(f"Created topic {topic}.")


@topics.command("list")
@click.option(
    "--exclude-internal", is_flag=True, help="Leave out internal topics (__consumer_offsets...)."
)
@client_options
def list_(exclude_internal: bool, client: ClientSettings) -> None:
    """Print the name of every topic, one a line, sorted."""
    admin = _admin(client)
    with reporting(f"cannot list topics of {client.bootstrap}"):
        metadata = admin.list_topics(timeout=client.timeout)
    names = sorted(metadata.topics)
    if exclude_internal and names:
        described = admin.describe_topics(TopicCollection(names), request_timeout=client.timeout)
        internal = set()
        for name, future in described.items():
            description = _wait(future, client, name, ignore=_UNKNOWN)
            if description is not _SKIPPED and description.is_internal:
                internal.add(name)
        names = [name for name in names if name not in internal]
    for name in names:
        click.echo(name)


def _node(node: Any) -> str:
    return "none" if node is None or node.id < 0 else str(node.id)


def _overrides(admin: AdminClient, client: ClientSettings, topic: str) -> str:
    """``k=v,k=v`` of the topic's own config overrides, as kafka-topics --describe shows."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    futures = admin.describe_configs([resource], request_timeout=client.timeout)
    entries = _wait(futures[resource], client, topic)
    pairs = []
    for name, entry in sorted(entries.items()):
        source = entry.source.value if isinstance(entry.source, ConfigSource) else entry.source
        if source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value:
            value = "<sensitive>" if entry.is_sensitive else entry.value
            pairs.append(f"{name}={value}")
    return ",".join(pairs)


@topics.command("describe")
@click.argument("topic_names", metavar="[TOPIC]...", nargs=-1)
@click.option("--if-exists", is_flag=True, help="Skip topics that do not exist.")
@click.option(
    "--exclude-internal", is_flag=True, help="Leave out internal topics (__consumer_offsets...)."
)
@client_options
def describe(
    topic_names: tuple[str, ...], if_exists: bool, exclude_internal: bool, client: ClientSettings
) -> None:
    """Show partitions, leaders, replicas and config overrides of each TOPIC (default: all).

    The layout is kafka-topics.sh --describe's: one line per topic, then one per partition.
    """
    admin = _admin(client)
    names = list(dict.fromkeys(topic_names))
    if not names:
        with reporting(f"cannot list topics of {client.bootstrap}"):
            names = sorted(admin.list_topics(timeout=client.timeout).topics)
        if not names:
            return
    futures = admin.describe_topics(TopicCollection(names), request_timeout=client.timeout)
    for name in names:
        description = _wait(futures[name], client, name, ignore=_UNKNOWN if if_exists else "")
        if description is _SKIPPED or (exclude_internal and description.is_internal):
            continue
        partitions = sorted(description.partitions, key=lambda p: p.id)
        replication = len(partitions[0].replicas) if partitions else 0
        click.echo(
            f"Topic: {name}\tTopicId: {description.topic_id}\t"
            f"PartitionCount: {len(partitions)}\tReplicationFactor: {replication}\t"
            f"Configs: {_overrides(admin, client, name)}"
        )
        for partition in partitions:
            replicas = ",".join(_node(node) for node in partition.replicas)
            isr = ",".join(_node(node) for node in partition.isr)
            click.echo(
                f"\tTopic: {name}\tPartition: {partition.id}\tLeader: {_node(partition.leader)}"
                f"\tReplicas: {replicas}\tIsr: {isr}"
            )


@topics.command("alter")
@click.argument("topic")
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    default=None,
    help="Grow the topic to this many partitions (CreatePartitions).",
)
@click.option(
    "--config",
    "configs",
    callback=key_values,
    metavar="KEY=VALUE",
    multiple=True,
    help="Set a topic config, e.g. retention.ms=3600000 (repeatable).",
)
@click.option(
    "--delete-config",
    "deleted",
    multiple=True,
    metavar="KEY",
    help="Remove a topic config override, back to the broker default (repeatable).",
)
@click.option("--if-exists", is_flag=True, help="Do nothing if the topic does not exist.")
@client_options
def alter(
    topic: str,
    partitions: int | None,
    configs: tuple[tuple[str, str], ...],
    deleted: tuple[str, ...],
    if_exists: bool,
    client: ClientSettings,
) -> None:
    """Change TOPIC's partition count and/or its configs (IncrementalAlterConfigs)."""
    if partitions is None and not configs and not deleted:
        raise click.UsageError("nothing to alter: give --partitions, --config or --delete-config")
    admin = _admin(client)
    ignore = _UNKNOWN if if_exists else ""
    if configs or deleted:
        changes = [
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
            for key, value in configs
        ] + [
            ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE)
            for key in deleted
        ]
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=changes)
        futures = admin.incremental_alter_configs([resource], request_timeout=client.timeout)
        if _wait(futures[resource], client, topic, ignore) is _SKIPPED:
            return
        done = [f"set {key}={value}" for key, value in configs] + [f"deleted {k}" for k in deleted]
        click.echo(f"Altered configs of topic {topic}: {', '.join(done)}.")
    if partitions is not None:
        grown = admin.create_partitions(
            [NewPartitions(topic, partitions)], request_timeout=client.timeout
        )
        if _wait(grown[topic], client, topic, ignore) is not _SKIPPED:
            click.echo(f"Topic {topic} now has {partitions} partitions.")


@topics.command("delete")
@click.argument("topic_names", metavar="TOPIC...", nargs=-1, required=True)
@click.option("--if-exists", is_flag=True, help="Do nothing for topics that do not exist.")
@client_options
def delete(topic_names: tuple[str, ...], if_exists: bool, client: ClientSettings) -> None:
    """Delete each TOPIC and its data."""
    admin = _admin(client)
    names = list(dict.fromkeys(topic_names))
    futures = admin.delete_topics(names, request_timeout=client.timeout)
    for name in names:
        if _wait(futures[name], client, name, _UNKNOWN if if_exists else "") is not _SKIPPED:
            click.echo(f"Deleted topic {name}.")
