"""``seglog groups``: list, describe, delete consumer groups and reset their offsets,
like kafka-consumer-groups.sh.

Admin requests go through confluent-kafka's ``AdminClient`` (ListGroups,
DescribeGroups, DeleteGroups, OffsetFetch, OffsetCommit); log-end offsets for
the lag come from a ``Consumer``'s watermarks. As with Kafka's tool,
``reset-offsets`` only shows the new offsets unless ``--execute`` is given, and
the broker refuses it while the group has members.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import click
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from seglog.cli._client import (
    ClientError,
    ClientSettings,
    admin_client,
    client_options,
    error_name,
    error_text,
    partitions_option,
    reporting,
    text_table,
    topic_partitions,
)


def _admin(client: ClientSettings) -> AdminClient:
    return admin_client(client)


def _result(future: Future[Any], client: ClientSettings, group: str) -> Any:
    try:
        return future.result(client.timeout + 1)
    except Exception as exc:
        if error_name(exc) == "GROUP_ID_NOT_FOUND":
            raise ClientError(f"group {group!r} does not exist") from None
        if error_name(exc) == "NON_EMPTY_GROUP":
            raise ClientError(f"group {group!r} has active members") from None
        raise ClientError(f"group {group!r}: {error_text(exc)}") from None


def _state(value: Any) -> str:
    """Kafka's name of a confluent-kafka ConsumerGroupState."""
    names = {
        "PREPARING_REBALANCING": "PreparingRebalance",
        "COMPLETING_REBALANCING": "CompletingRebalance",
    }
    name = str(getattr(value, "name", value))
    return names.get(name, name.capitalize())


def _committed(
    admin: AdminClient, client: ClientSettings, group: str
) -> dict[tuple[str, int], int]:
    request = [ConsumerGroupTopicPartitions(group)]
    futures = admin.list_consumer_group_offsets(request, request_timeout=client.timeout)
    result = _result(futures[group], client, group)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or []}


def _log_ends(client: ClientSettings, partitions: list[tuple[str, int]]) -> dict[Any, int]:
    with reporting("bad client configuration"):
        consumer = Consumer(client.config({"group.id": "seglog-cli", "enable.auto.commit": False}))
    try:
        ends = {}
        for topic, partition in partitions:
            with reporting(f"cannot get the log end of {topic!r} partition {partition}"):
                low_high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=client.timeout, cached=False
                )
            ends[(topic, partition)] = int(low_high[1])
        return ends
    finally:
        consumer.close()


@click.group("groups")
def groups() -> None:
    """List, describe and delete consumer groups, reset their offsets (like
    kafka-consumer-groups.sh)."""


@groups.command("list")
@click.option("--state", "show_state", is_flag=True, help="Also show each group's state.")
@client_options
def list_(show_state: bool, client: ClientSettings) -> None:
    """Print the id of every consumer group, one a line, sorted."""
    admin = _admin(client)
    with reporting(f"cannot list the groups of {client.bootstrap}"):
        listed = admin.list_consumer_groups(request_timeout=client.timeout).result(
            client.timeout + 1
        )
    if listed.errors:
        reason = error_text(listed.errors[0])
        raise ClientError(f"cannot list the groups of {client.bootstrap}: {reason}")
    found = sorted((g.group_id, _state(g.state)) for g in listed.valid)
    if show_state:
        for line in text_table([["GROUP", "STATE"], *[[g, s] for g, s in found]]):
            click.echo(line)
    else:
        for group_id, _ in found:
            click.echo(group_id)


@groups.command("describe")
@click.argument("group_ids", metavar="GROUP...", nargs=-1, required=True)
@client_options
def describe(group_ids: tuple[str, ...], client: ClientSettings) -> None:
    """Show each partition's committed offset, log end and lag, and who consumes it.

    \b
    Example:
      seglog groups describe orders-app
    """
    admin = _admin(client)
    with reporting("cannot describe groups"):
        futures = admin.describe_consumer_groups(list(group_ids), request_timeout=client.timeout)
    header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
    header += ["CONSUMER-ID", "CLIENT-ID"]
    for n, group in enumerate(group_ids):
        description = _result(futures[group], client, group)
        state = _state(description.state)
        if state == "Dead":
            raise ClientError(f"group {group!r} does not exist")
        owners: dict[tuple[str, int], Any] = {}
        for member in description.members:
            for tp in member.assignment.topic_partitions if member.assignment else []:
                owners[(tp.topic, tp.partition)] = member
        committed = _committed(admin, client, group)
        partitions = sorted(set(committed) | set(owners))
        ends = _log_ends(client, partitions)
        rows = []
        for key in partitions:
            offset = committed.get(key, -1)
            end = ends[key]
            member = owners.get(key)
            rows.append(
                [
                    group,
                    key[0],
                    str(key[1]),
                    str(offset) if offset >= 0 else "-",
                    str(end),
                    str(end - offset) if offset >= 0 else "-",
                    member.member_id if member else "-",
                    member.client_id if member else "-",
                ]
            )
        if n:
            click.echo()
        click.echo(f"Group {group} is {state} with {len(description.members)} member(s).")
        if rows:
            for line in text_table([header, *rows]):
                click.echo(line)


@groups.command("delete")
@click.argument("group_ids", metavar="GROUP...", nargs=-1, required=True)
@client_options
def delete(group_ids: tuple[str, ...], client: ClientSettings) -> None:
    """Delete empty groups with their committed offsets."""
    admin = _admin(client)
    with reporting("cannot delete groups"):
        futures = admin.delete_consumer_groups(list(group_ids), request_timeout=client.timeout)
    for group in group_ids:
        _result(futures[group], client, group)
        click.echo(f"Deleted group {group}.")


@groups.command("reset-offsets")
@click.argument("group")
@click.option("--topic", required=True, help="The topic whose offsets to reset.")
@partitions_option("Only this partition (repeatable)  [default: all]")
@click.option("--to-earliest", is_flag=True, help="To the first offset of each partition.")
@click.option("--to-latest", is_flag=True, help="To the log end of each partition.")
@click.option("--to-offset", type=click.IntRange(min=0), default=None, help="To this offset.")
@click.option("--shift-by", type=int, default=None, help="Move the committed offsets by N.")
@click.option(
    "--to-datetime",
    "to_timestamp",
    type=int,
    default=None,
    metavar="MS",
    help="To the first offset at or after MS (ms since the epoch).",
)
@click.option("--execute", is_flag=True, help="Apply the new offsets (default: only show them).")
@client_options
def reset_offsets(
    group: str,
    topic: str,
    partitions: tuple[int, ...],
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    shift_by: int | None,
    to_timestamp: int | None,
    execute: bool,
    client: ClientSettings,
) -> None:
    """Set GROUP's committed offsets of a topic; the group must have no active member.

    Without --execute the new offsets are only printed, as kafka-consumer-groups.sh does.
    New offsets are kept within each partition's earliest and latest offsets.

    \b
    Example:
      seglog groups reset-offsets orders-app --topic orders --to-earliest --execute
    """
    chosen = [to_earliest, to_latest, to_offset is not None, shift_by is not None]
    chosen.append(to_timestamp is not None)
    if sum(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --shift-by, --to-datetime"
        )
    admin = _admin(client)
    with reporting("bad client configuration"):
        consumer = Consumer(client.config({"group.id": "seglog-cli", "enable.auto.commit": False}))
    try:
        ids = topic_partitions(consumer, client, topic, partitions)
        committed = _committed(admin, client, group) if shift_by is not None else {}
        by_time: dict[int, int] = {}
        if to_timestamp is not None:
            wanted = [TopicPartition(topic, p, to_timestamp) for p in ids]
            with reporting(f"cannot look up offsets by time in {topic!r}"):
                found = consumer.offsets_for_times(wanted, timeout=client.timeout)
            by_time = {tp.partition: tp.offset for tp in found}
        new: dict[int, int] = {}
        for p in ids:
            with reporting(f"cannot get the offsets of {topic!r} partition {p}"):
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=client.timeout, cached=False
                )
            if to_earliest:
                target = low
            elif to_latest:
                target = high
            elif to_offset is not None:
                target = to_offset
            elif shift_by is not None:
                current = committed.get((topic, p), -1)
                target = (current if current >= 0 else low) + shift_by
            else:
                target = by_time[p] if by_time[p] >= 0 else high
            new[p] = min(max(target, low), high)
    finally:
        consumer.close()
    if execute:
        request = [
            ConsumerGroupTopicPartitions(
                group, [TopicPartition(topic, p, o) for p, o in new.items()]
            )
        ]
        with reporting(f"cannot reset the offsets of group {group!r}"):
            futures = admin.alter_consumer_group_offsets(request, request_timeout=client.timeout)
        try:
            result = futures[group].result(client.timeout + 1)
        except Exception as exc:
            if error_name(exc) == "UNKNOWN_MEMBER_ID":
                raise ClientError(f"group {group!r} has active members: stop them first") from None
            raise ClientError(f"group {group!r}: {error_text(exc)}") from None
        for tp in result.topic_partitions or []:
            if tp.error is not None and tp.error.code() == KafkaError.UNKNOWN_MEMBER_ID:
                raise ClientError(f"group {group!r} has active members: stop them first")
            if tp.error is not None:
                raise ClientError(f"{topic!r} partition {tp.partition}: {tp.error.str()}")
    rows = [[group, topic, str(p), str(o)] for p, o in sorted(new.items())]
    for line in text_table([["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], *rows]):
        click.echo(line)
    if not execute:
        click.echo("(not applied: add --execute to reset the offsets)")
