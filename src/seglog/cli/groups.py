"""``seglog groups``: list, describe, delete consumer and share groups and reset their
offsets, like kafka-consumer-groups.sh and kafka-share-groups.sh.

Consumer groups' admin requests go through confluent-kafka's ``AdminClient``
(ListGroups, DescribeGroups, DeleteGroups, OffsetFetch, OffsetCommit); share
groups' through raw requests (:mod:`seglog.cli._share`), as confluent-kafka
has none. Log-end offsets for the lag come from a ``Consumer``'s watermarks.
As with Kafka's tools, ``reset-offsets`` only shows the new offsets unless
``--execute`` is given, and the broker refuses it while the group has members.
"""

from __future__ import annotations

import re
import urllib.parse
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any

import click
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaError,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from seglog.cli import _share
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
from seglog.cli._http import JsonHttp, served_url
from seglog.cli._share import ShareGroup


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
    """List, describe and delete consumer and share groups, reset their offsets (like
    kafka-consumer-groups.sh and kafka-share-groups.sh)."""


_TYPES = {"consumer": ConsumerGroupType.CONSUMER, "classic": ConsumerGroupType.CLASSIC}


def _brokers(admin: AdminClient, client: ClientSettings) -> list[str]:
    """``host:port`` of every broker (each lists the groups it coordinates)."""
    with reporting(f"cannot list the brokers of {client.bootstrap}"):
        found = admin.list_topics(timeout=client.timeout).brokers
    return [f"{b.host}:{b.port}" for _, b in sorted(found.items())]


@groups.command("list")
@click.option("--state", "show_state", is_flag=True, help="Also show each group's type and state.")
@click.option(
    "--type",
    "group_type",
    type=click.Choice(["share", "consumer", "classic"]),
    default=None,
    help="Only groups of this type  [default: all]",
)
@client_options
def list_(show_state: bool, group_type: str | None, client: ClientSettings) -> None:
    """Print the id of every consumer and share group, one a line, sorted."""
    admin = _admin(client)
    found: dict[str, tuple[str, str]] = {}
    if group_type != "share":
        types = {_TYPES[group_type]} if group_type else None
        with reporting(f"cannot list the groups of {client.bootstrap}"):
            future = (
                admin.list_consumer_groups(request_timeout=client.timeout, types=types)
                if types
                else admin.list_consumer_groups(request_timeout=client.timeout)
            )
            listed = future.result(client.timeout + 1)
        if listed.errors:
            reason = error_text(listed.errors[0])
            raise ClientError(f"cannot list the groups of {client.bootstrap}: {reason}")
        for g in listed.valid:
            kind = str(getattr(g.type, "name", "CONSUMER")).capitalize()
            found[g.group_id] = (kind, _state(g.state))
    if group_type in ("share", None):
        for group_id, _, state in _share.list_groups(client, _brokers(admin, client), ["share"]):
            found[group_id] = ("Share", state)
    if show_state:
        rows = [[g, kind, state] for g, (kind, state) in sorted(found.items())]
        for line in text_table([["GROUP", "TYPE", "STATE"], *rows]):
            click.echo(line)
    else:
        for group_id in sorted(found):
            click.echo(group_id)


def _share_records(client: ClientSettings, group: str) -> dict[tuple[str, int], Any] | None:
    """Each partition's records by state and lag, from the broker's HTTP API (None: none).

    They live on each partition's leader, which only the broker can ask; without
    the API the description shows ``-`` for them.
    """
    try:
        base = served_url(client, "console.port", "HTTP API", "--console-port N", "")
    except ClientError:
        return None
    path = "/v1/share-groups/" + urllib.parse.quote(group, safe="")
    try:
        body = JsonHttp(base, client, "HTTP API").call("GET", path)
    except ClientError as exc:
        click.echo(f"(records by state not shown: {exc})", err=True)
        return None
    return {(p["topic"], p["partition"]): p for p in body["partitions"]}


def _describe_share(client: ClientSettings, group: ShareGroup) -> None:
    """A share group's state, partitions and members, as kafka-share-groups.sh shows them."""
    starts = _share.start_offsets(client, group)
    assigned = {tp for member in group.members for tp in member.assigned}
    partitions = sorted(set(starts) | assigned)
    records = _share_records(client, group.group_id)
    ends = _log_ends(client, partitions) if records is None else {}
    rows = []
    for key in partitions:
        facts = (records or {}).get(key)
        start = starts.get(key, -1)
        if facts is not None:
            lag = facts["lag"]
            counts = [facts[name] for name in _share.COUNTS]
        else:
            end = ends.get(key)
            lag = end - start if end is not None and start >= 0 else None
            counts = [None] * len(_share.COUNTS)
        row = [group.group_id, key[0], str(key[1]), str(start) if start >= 0 else "-"]
        row += ["-" if v is None else str(v) for v in [lag, *counts]]
        rows.append(row)
    click.echo(
        f"Share group {group.group_id} is {group.state} with {len(group.members)} member(s) "
        f"(group epoch {group.group_epoch}, assignment epoch {group.assignment_epoch}, "
        f"coordinator {group.coordinator})."
    )
    if rows:
        header = ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]
        header += ["IN-FLIGHT", "ACQUIRED", "AVAILABLE"]
        click.echo()
        for line in text_table([header, *rows]):
            click.echo(line)
    if group.members:
        header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH"]
        header.append("ASSIGNMENT")
        members = []
        for m in group.members:
            shown = ",".join(f"{t}:{p}" for t, p in m.assigned) or "-"
            count, epoch = str(len(m.assigned)), str(m.member_epoch)
            members.append([group.group_id, m.member_id, m.host, m.client_id, count, epoch, shown])
        click.echo()
        for line in text_table([header, *members]):
            click.echo(line)


@groups.command("describe")
@click.argument("group_ids", metavar="GROUP...", nargs=-1, required=True)
@client_options
def describe(group_ids: tuple[str, ...], client: ClientSettings) -> None:
    """Show each partition's committed offset, log end and lag, and who consumes it.

    Of a share group: its state and epochs, each partition's start offset, lag and
    records in flight (acquired, available: from the broker's HTTP API when it
    serves one, else -), and its members with their partitions.

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
        if n:
            click.echo()
        share = _share.describe(client, group)
        if share is not None:
            _describe_share(client, share)
            continue
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
        click.echo(f"Group {group} is {state} with {len(description.members)} member(s).")
        if rows:
            for line in text_table([header, *rows]):
                click.echo(line)


@groups.command("delete")
@click.argument("group_ids", metavar="GROUP...", nargs=-1, required=True)
@client_options
def delete(group_ids: tuple[str, ...], client: ClientSettings) -> None:
    """Delete empty consumer or share groups with their offsets."""
    admin = _admin(client)
    with reporting("cannot delete groups"):
        futures = admin.delete_consumer_groups(list(group_ids), request_timeout=client.timeout)
    for group in group_ids:
        _result(futures[group], client, group)
        click.echo(f"Deleted group {group}.")


@groups.command("delete-offsets")
@click.argument("group")
@click.option(
    "--topic", "topics", required=True, multiple=True, help="A topic to forget (repeatable)."
)
@client_options
def delete_offsets(group: str, topics: tuple[str, ...], client: ClientSettings) -> None:
    """Forget a share group's state in topics: it starts them over as a new group would.

    The group must have no active member (like kafka-share-groups.sh --delete-offsets).

    \b
    Example:
      seglog groups delete-offsets orders-share --topic orders
    """
    share = _share.describe(client, group)
    if share is None:
        raise ClientError(f"{group!r} is not a share group (delete-offsets is for share groups)")
    failed = False
    for topic, error in sorted(_share.delete_offsets(client, group, list(topics)).items()):
        if error is None:
            click.echo(f"Deleted the offsets of group {group} in topic {topic}.")
        else:
            failed = True
            click.echo(f"Error: topic {topic!r}: {error}", err=True)
    if failed:
        raise click.exceptions.Exit(1)


_DURATION = re.compile(
    r"P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?"
)


def _duration_ms(text: str) -> int:
    """An ISO-8601 duration ``PnDTnHnMnS`` in milliseconds."""
    found = _DURATION.fullmatch(text.strip().upper())
    if found is None or not any(found.groupdict().values()):
        raise click.BadParameter(f"expected PnDTnHnMnS (like P1DT2H or PT30M), got {text!r}")
    parts = {k: float(v or 0) for k, v in found.groupdict().items()}
    seconds = parts["d"] * 86400 + parts["h"] * 3600 + parts["m"] * 60 + parts["s"]
    return int(seconds * 1000)


def _datetime_ms(text: str) -> int:
    """ms since the epoch, or an ISO-8601 date-time (local time when it has no zone)."""
    if text.strip().lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise click.BadParameter(
            f"expected ms since the epoch or YYYY-MM-DDTHH:MM:SS[.sss][+HH:MM], got {text!r}"
        ) from None
    return int(moment.astimezone(UTC).timestamp() * 1000)


@groups.command("reset-offsets")
@click.argument("group")
@click.option("--topic", required=True, help="The topic whose offsets to reset.")
@partitions_option("Only this partition (repeatable)  [default: all]")
@click.option("--to-earliest", is_flag=True, help="To the first offset of each partition.")
@click.option("--to-latest", is_flag=True, help="To the log end of each partition.")
@click.option("--to-offset", type=click.IntRange(min=0), default=None, help="To this offset.")
@click.option("--shift-by", type=int, default=None, help="Move the current offsets by N.")
@click.option(
    "--to-datetime",
    "to_datetime",
    default=None,
    metavar="MS|ISO",
    help="To the first offset at or after a time: ms since the epoch, or "
    "YYYY-MM-DDTHH:MM:SS[.sss][+HH:MM] (local time without a zone).",
)
@click.option(
    "--by-duration",
    default=None,
    metavar="PnDTnHnMnS",
    help="To the first offset at or after this long ago (like PT30M or P1DT12H).",
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
    to_datetime: str | None,
    by_duration: str | None,
    execute: bool,
    client: ClientSettings,
) -> None:
    """Set GROUP's offsets of a topic; the group must have no active member.

    Of a consumer group, its committed offsets; of a share group, its start offsets
    (AlterShareGroupOffsets). Without --execute the new offsets are only printed, as
    kafka-consumer-groups.sh and kafka-share-groups.sh do. New offsets are kept within
    each partition's earliest and latest offsets.

    \b
    Example:
      seglog groups reset-offsets orders-app --topic orders --to-earliest --execute
    """
    chosen = [to_earliest, to_latest, to_offset is not None, shift_by is not None]
    chosen += [to_datetime is not None, by_duration is not None]
    if sum(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --shift-by, "
            "--to-datetime, --by-duration"
        )
    to_timestamp = None
    if to_datetime is not None:
        to_timestamp = _datetime_ms(to_datetime)
    elif by_duration is not None:
        now = int(datetime.now(UTC).timestamp() * 1000)
        to_timestamp = now - _duration_ms(by_duration)
    share = _share.describe(client, group)
    admin = _admin(client)
    with reporting("bad client configuration"):
        consumer = Consumer(client.config({"group.id": "seglog-cli", "enable.auto.commit": False}))
    try:
        ids = topic_partitions(consumer, client, topic, partitions)
        committed: dict[tuple[str, int], int] = {}
        if shift_by is not None:
            if share is not None:
                committed = _share.start_offsets(client, share)
            else:
                committed = _committed(admin, client, group)
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
    if execute and share is not None:
        _share.alter_start_offsets(client, group, topic, new)
    elif execute:
        _commit(admin, client, group, topic, new)
    rows = [[group, topic, str(p), str(o)] for p, o in sorted(new.items())]
    for line in text_table([["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], *rows]):
        click.echo(line)
    if not execute:
        click.echo("(not applied: add --execute to reset the offsets)")


def _commit(
    admin: AdminClient, client: ClientSettings, group: str, topic: str, new: dict[int, int]
) -> None:
    """Commit ``new`` offsets of ``topic`` for the consumer group (refused with members)."""
    request = [
        ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p, o) for p, o in new.items()])
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
