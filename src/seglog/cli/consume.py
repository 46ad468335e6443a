"""``seglog consume``: print the messages of a topic, like kafka-console-consumer.sh or kcat -C.

No consumer group: the partitions are assigned (``Consumer.assign``) at the chosen
start, nothing is committed. Output goes to stdout as bytes, one message a line:

- ``value`` (default): the value, ``null`` for a null value, as the console consumer;
  ``--print-key`` puts the key and ``--key-separator`` (a tab) in front;
- ``kv``: key, separator, value, always;
- ``json``: one object a line with topic, partition, offset, timestamp,
  timestamp_type, key, value and headers (a list of ``[name, value]`` pairs). Bytes
  that are valid UTF-8 are strings; others are ``{"base64": "..."}``; null is null.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

import click
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    Message,
    TopicPartition,
)

from seglog.cli._client import (
    ClientError,
    ClientSettings,
    client_options,
    partitions_option,
    reporting,
    topic_partitions,
)

# Consumer errors after which waiting for more cannot help.
_FATAL = {
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError._AUTO_OFFSET_RESET,
    KafkaError.OFFSET_OUT_OF_RANGE,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
}

_TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}


def _start_offset(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> int | str | None:
    """``--offset``: ``earliest``, ``latest`` or an offset (a non-negative integer)."""
    if value is None or value in ("earliest", "latest"):
        return value
    if not value.isdigit():
        raise click.BadParameter(f"expected earliest, latest or an offset >= 0, got {value!r}")
    return int(value)


def _json_bytes(data: bytes | str | None) -> Any:
    if data is None or isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def _as_json(message: Message) -> bytes:
    timestamp_type, timestamp = message.timestamp()
    raw = message.headers() or []
    headers = list(raw.items()) if isinstance(raw, dict) else raw  # a consumer gives a list
    record = {
        "topic": message.topic(),
        "partition": message.partition(),
        "offset": message.offset(),
        "timestamp": timestamp if timestamp_type in _TIMESTAMP_TYPES else None,
        "timestamp_type": _TIMESTAMP_TYPES.get(timestamp_type),
        "key": _json_bytes(message.key()),
        "value": _json_bytes(message.value()),
        "headers": [[name, _json_bytes(value)] for name, value in headers],
    }
    return json.dumps(record, ensure_ascii=False).encode("utf-8")


def _field(data: bytes | None) -> bytes:
    return b"null" if data is None else data


def _start_offsets(
    consumer: Consumer,
    client: ClientSettings,
    topic: str,
    partitions: list[int],
    offset: int | str,
    timestamp: int | None,
) -> list[TopicPartition]:
    """Where each partition starts: a logical offset, a checked number, or by time."""
    if timestamp is not None:
        wanted = [TopicPartition(topic, p, timestamp) for p in partitions]
        with reporting(f"cannot look up offsets by time in {topic!r}"):
            found = consumer.offsets_for_times(wanted, timeout=client.timeout)
        for tp in found:
            if tp.error is not None:
                raise ClientError(f"{topic!r} partition {tp.partition}: {tp.error.str()}")
            # -1: no message at or after the time; start at the end, as Kafka's tools do.
            if tp.offset < 0:
                tp.offset = OFFSET_END
        return found
    if offset == "earliest":
        return [TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions]
    if offset == "latest":
        return [TopicPartition(topic, p, OFFSET_END) for p in partitions]
    assert isinstance(offset, int)
    for p in partitions:
        # Checked here so that a bad offset is one clear error, not a reset or a retry loop.
        with reporting(f"cannot get the offsets of {topic!r} partition {p}"):
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=client.timeout, cached=False
            )
        if not low <= offset <= high:
            raise ClientError(
                f"offset {offset} is out of range for {topic!r} partition {p} "
                f"(earliest {low}, latest {high})"
            )
    return [TopicPartition(topic, p, offset) for p in partitions]


@click.command("consume")
@click.argument("topic")
@partitions_option("Read only this partition (repeatable)  [default: all]")
@click.option("--from-beginning", is_flag=True, help="Start at the earliest offset.")
@click.option(
    "--offset",
    callback=_start_offset,
    metavar="N|earliest|latest",
    default=None,
    help="Start at this offset of each partition, or earliest/latest  [default: latest]",
)
@click.option(
    "--timestamp",
    type=int,
    default=None,
    metavar="MS",
    help="Start at the first message with a timestamp at or after MS (ms since the epoch).",
)
@click.option(
    "--max-messages",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Stop after N messages.",
)
@click.option(
    "-e",
    "--exit",
    "exit_at_end",
    is_flag=True,
    help="Stop when the end of every partition is reached (like kcat -e).",
)
@click.option(
    "--format",
    "output",
    type=click.Choice(["value", "kv", "json"]),
    default="value",
    show_default=True,
    help="How each message is printed (see above).",
)
@click.option("--print-key", is_flag=True, help="With --format value: print the key too.")
@click.option(
    "--key-separator",
    metavar="SEP",
    default="\t",
    help="Between key and value in the value and kv formats  [default: a tab]",
)
@client_options
def consume(
    topic: str,
    partitions: tuple[int, ...],
    from_beginning: bool,
    offset: int | str | None,
    timestamp: int | None,
    max_messages: int | None,
    exit_at_end: bool,
    output: str,
    print_key: bool,
    key_separator: str,
    client: ClientSettings,
) -> None:
    """Print the messages of TOPIC to stdout, one a line, without a consumer group.

    \b
    Formats:
      value  the value (null for a null value); --print-key puts KEY<SEP> first
      kv     KEY<SEP>VALUE
      json   {"topic", "partition", "offset", "timestamp", "timestamp_type",
              "key", "value", "headers": [[name, value], ...]}; bytes that are
              not UTF-8 are shown as {"base64": "..."}

    \b
    Example:
      seglog consume orders --from-beginning --exit --format json
    """
    chosen = [from_beginning, offset is not None, timestamp is not None]
    if sum(chosen) > 1:
        raise click.UsageError("give only one of --from-beginning, --offset and --timestamp")
    start = "earliest" if from_beginning else offset if offset is not None else "latest"
    defaults: dict[str, object] = {
        "group.id": "seglog-cli",  # required by librdkafka; never joined (assign only)
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
    }
    if exit_at_end:
        # The end of a partition is seen when a fetch comes back empty, after the
        # broker's long poll: keep that short when the end is what we wait for.
        defaults["fetch.wait.max.ms"] = 100
    with reporting("bad client configuration"):
        consumer = Consumer(client.config(defaults))
    try:
        ids = topic_partitions(consumer, client, topic, partitions)
        assignment = _start_offsets(consumer, client, topic, ids, start, timestamp)
        with reporting(f"cannot assign {topic!r}"):
            consumer.assign(assignment)
        _print_messages(
            consumer,
            len(ids),
            max_messages,
            exit_at_end,
            output,
            print_key,
            key_separator.encode(),
        )
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a consumer without --exit or --max-messages stops
    finally:
        consumer.close()


def _print_messages(
    consumer: Consumer,
    partition_count: int,
    max_messages: int | None,
    exit_at_end: bool,
    output: str,
    print_key: bool,
    separator: bytes,
) -> None:
    out = sys.stdout.buffer
    printed = 0
    at_end: set[int | None] = set()
    while True:
        # Wait for one message (consume() would wait for a whole batch), then take
        # whatever else has already arrived.
        first = consumer.poll(0.5)
        batch = 500 if max_messages is None else min(500, max_messages - printed)
        rest = consumer.consume(batch - 1, timeout=0) if first is not None and batch > 1 else []
        for message in [first, *rest] if first is not None else []:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                    continue
                if error.fatal() or error.code() in _FATAL:
                    raise ClientError(f"{message.topic()!r}: {error.str()}")
                click.echo(f"seglog: warning: {error.str()}", err=True)
                continue
            at_end.discard(message.partition())
            if output == "json":
                line = _as_json(message)
            elif output == "kv" or print_key:
                line = _field(message.key()) + separator + _field(message.value())
            else:
                line = _field(message.value())
            out.write(line + b"\n")
            printed += 1
        out.flush()
        if max_messages is not None and printed >= max_messages:
            return
        if exit_at_end and len(at_end) >= partition_count:
            return
