"""``seglog produce``: send the lines of stdin to a topic, like kafka-console-producer.sh.

One line is one message (the newline, and a ``\\r`` before it, are not part of it).
``--key-separator`` splits each line into key and value at the first separator,
as the console producer's ``parse.key=true`` / ``key.separator`` do. Failed
messages are reported on stderr as they fail; the exit status is 1 if any did.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import click
from confluent_kafka import KafkaError, KafkaException, Message, Producer

from seglog.cli._client import (
    ClientError,
    ClientSettings,
    client_options,
    error_text,
    key_values,
    reporting,
    topic_partitions,
)

# At most this many failed messages are described one by one; the rest are counted.
_REPORTED_FAILURES = 20


class _Deliveries:
    """Counts and reports, line by line, the messages that were not delivered."""

    def __init__(self) -> None:
        self.failed = 0

    def fail(self, line: int | None, reason: str) -> None:
        self.failed += 1
        if self.failed <= _REPORTED_FAILURES:
            where = f"line {line}" if line is not None else "a message"
            click.echo(f"seglog: {where}: not delivered: {reason}", err=True)

    def callback(self, line: int) -> Callable[[KafkaError | None, Message], None]:
        def delivered(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                self.fail(line, error.str())

        return delivered


@click.command("produce")
@click.argument("topic")
@click.option(
    "--key-separator",
    metavar="SEP",
    default=None,
    help="Split each line into key and value at the first SEP (a line without SEP fails).",
)
@click.option(
    "--header",
    "headers",
    callback=key_values,
    multiple=True,
    metavar="KEY=VALUE",
    help="A header added to every message (repeatable).",
)
@click.option(
    "--partition",
    type=click.IntRange(min=0),
    default=None,
    help="Send every message to this partition  [default: by key, as librdkafka does]",
)
@click.option(
    "--compression",
    type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
    default=None,
    help="Compression codec of the batches  [default: librdkafka's, none]",
)
@click.option(
    "--acks",
    type=click.Choice(["all", "-1", "0", "1"]),
    default="all",
    show_default=True,
    help="Acknowledgements the broker must give before a message counts as delivered.",
)
@client_options
def produce(
    topic: str,
    key_separator: str | None,
    headers: tuple[tuple[str, str], ...],
    partition: int | None,
    compression: str | None,
    acks: str,
    client: ClientSettings,
) -> None:
    """Send each line of stdin to TOPIC as one message.

    \b
    Example:
      printf 'k1:hello\\nk2:world\\n' | seglog produce orders --key-separator :
    """
    if key_separator == "":
        raise click.BadParameter("must not be empty", param_hint="--key-separator")
    # --timeout bounds the wait for the broker (5 s); a message queued behind many
    # others may wait longer than that for its turn, so it is given at least 30 s.
    message_timeout_ms = max(client.timeout_ms, 30_000)
    defaults: dict[str, object] = {"acks": acks, "message.timeout.ms": message_timeout_ms}
    if compression is not None:
        defaults["compression.type"] = compression
    config = client.config(defaults)
    with reporting("bad client configuration"):
        producer = Producer(config)
    topic_partitions(producer, client, topic, (partition,) if partition is not None else ())

    separator = key_separator.encode() if key_separator is not None else None
    message_headers: list[tuple[str, str | bytes | None]] | None = [
        (key, value.encode()) for key, value in headers
    ] or None
    deliveries = _Deliveries()
    read = sys.stdin.buffer.readline
    number = 0
    while line := read():
        number += 1
        line = line.removesuffix(b"\n").removesuffix(b"\r")
        key: bytes | None = None
        if separator is not None:
            key, found, line = line.partition(separator)
            if not found:
                deliveries.fail(number, f"no key separator {key_separator!r} in the line")
                continue
        while True:
            try:
                producer.produce(
                    topic,
                    value=line,
                    key=key,
                    partition=partition if partition is not None else -1,
                    headers=message_headers,
                    on_delivery=deliveries.callback(number),
                )
                break
            except BufferError:
                producer.poll(0.1)  # the local queue is full: wait for deliveries
            except KafkaException as exc:
                deliveries.fail(number, error_text(exc))
                break
        producer.poll(0)

    # librdkafka fails every message after message.timeout.ms (ours, or -X's); wait a
    # little longer than that so each one is reported by its callback.
    message_timeout = float(config.get("message.timeout.ms", message_timeout_ms)) / 1000
    left = producer.flush(message_timeout + 5)
    for _ in range(left):
        deliveries.fail(None, "still queued when the producer gave up waiting")
    if deliveries.failed:
        raise ClientError(f"{deliveries.failed} of {number} messages were not delivered")
