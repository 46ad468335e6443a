"""``seglog produce``: send the lines of stdin to a topic, like kafka-console-producer.sh.

One line is one message (the newline, and a ``\\r`` before it, are not part of it).
``--key-separator`` splits each line into key and value at the first separator,
as the console producer's ``parse.key=true`` / ``key.separator`` do. Failed
messages are reported on stderr as they fail.

On a terminal, stderr shows the records sent, delivered and failed and the
rate. At the end one summary line goes to stderr: lines read, delivered,
failed, and the last offset delivered to each partition. SIGINT or SIGTERM
stops reading stdin; the records already sent are waited for (a second signal
stops the wait) and the summary written, so that it says what the topic
holds. The exit status is 130 after SIGINT (143 after SIGTERM), 1 if any
message failed, 0 otherwise.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import click
from confluent_kafka import KafkaError, KafkaException, Message, Producer

from seglog.cli._client import (
    ClientSettings,
    client_options,
    error_text,
    key_values,
    reporting,
    topic_partitions,
)
from seglog.cli._progress import Activity, Interrupted, Rate, Signals, plural

# At most this many failed messages are described one by one; the rest are counted.
_REPORTED_FAILURES = 20


class _Deliveries:
    """What became of the lines: sent, delivered (and where), failed."""

    def __init__(self) -> None:
        self.lines = 0
        self.sent = 0
        self.delivered = 0
        self.failed = 0
        # The highest offset delivered to each partition (none with acks=0: unknown).
        self.last_offsets: dict[int, int] = {}

    def fail(self, line: int | None, reason: str) -> None:
        self.failed += 1
        if self.failed <= _REPORTED_FAILURES:
            where = f"line {line}" if line is not None else "a message"
            click.echo(f"seglog: {where}: not delivered: {reason}", err=True)

    def callback(self, line: int) -> Callable[[KafkaError | None, Message], None]:
        def delivered(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                self.fail(line, error.str())
                return
            self.delivered += 1
            offset = message.offset()
            partition = message.partition()
            if (
                offset is not None
                and partition is not None
                and offset > self.last_offsets.get(partition, -1)
            ):
                self.last_offsets[partition] = offset

        return delivered

    def status(self, rate: Rate) -> Callable[[], str]:
        """The progress display's figures, read at each redraw."""

        def text() -> str:
            return (
                f"{self.sent:,} sent, {self.delivered:,} delivered, {self.failed:,} failed, "
                f"{rate():,.0f} records/s"
            )

        return text

    def summary(self, unconfirmed: int, elapsed: float) -> str:
        rate = self.delivered / elapsed if elapsed > 0 else 0.0
        offsets = " ".join(f"{p}={o}" for p, o in sorted(self.last_offsets.items()))
        return (
            f"{plural(self.lines, 'line')}, {self.delivered} delivered, {self.failed} failed"
            + (f", {unconfirmed} unconfirmed" if unconfirmed else "")
            + f" in {elapsed:.1f}s ({rate:.0f} records/s); "
            + f"last offset by partition: {offsets or 'none'}"
        )


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

    Progress shows on stderr when it is a terminal; a summary line (delivered,
    failed, the last offset of each partition) always ends on stderr. Ctrl-C
    stops reading, waits for what was sent (Ctrl-C again: stop now) and exits
    130; a message not delivered makes the exit status 1.

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
    # librdkafka fails every message after message.timeout.ms (ours, or -X's); at the end
    # wait a little longer than that so each one is reported by its callback.
    message_timeout = float(config.get("message.timeout.ms", message_timeout_ms)) / 1000

    deliveries = _Deliveries()
    rate = Rate(lambda: deliveries.delivered)
    # Lines typed by hand (stdin a terminal) would be drawn over: no display then.
    typed = sys.stdin.isatty()
    activity = Activity(
        "produce", topic, status=deliveries.status(rate), show=False if typed else None
    )
    # Until the first line is read nothing is under way: a signal may stop it at once.
    with Signals(raising=True) as signals, activity:
        try:
            topic_partitions(producer, client, topic, (partition,) if partition is not None else ())
            _send_lines(
                producer,
                topic,
                key_separator,
                partition,
                [(key, value.encode()) for key, value in headers] or None,
                deliveries,
                signals,
            )
        except Interrupted:
            pass
        signals.raising = False
        unconfirmed = _wait_for_deliveries(producer, message_timeout + 5, signals, activity)
    summary = deliveries.summary(unconfirmed, activity.elapsed)
    if signals.received is not None:
        activity.summary(f"interrupted by {signals.name}: {summary}")
        raise SystemExit(signals.exit_code)
    activity.summary(summary)
    if deliveries.failed or unconfirmed:
        raise SystemExit(1)


def _send_lines(
    producer: Producer,
    topic: str,
    key_separator: str | None,
    partition: int | None,
    headers: list[tuple[str, str | bytes | None]] | None,
    deliveries: _Deliveries,
    signals: Signals,
) -> None:
    """Send stdin line by line until its end or a signal."""
    separator = key_separator.encode() if key_separator is not None else None
    target = partition if partition is not None else -1
    read = sys.stdin.buffer.readline
    while True:
        # Waiting for a line is the one place a signal stops at once: nothing is
        # half done there (a line read but not yet sent is simply not counted).
        signals.raising = True
        line = read()
        signals.raising = False
        if not line or signals.received is not None:  # (an attribute: the hot path)
            return
        deliveries.lines += 1
        number = deliveries.lines
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
                    partition=target,
                    headers=headers,
                    on_delivery=deliveries.callback(number),
                )
                deliveries.sent += 1
                break
            except BufferError:
                if signals.stopped():
                    return  # this line is not sent: the summary counts the lines sent
                producer.poll(0.1)  # the local queue is full: wait for deliveries
            except KafkaException as exc:
                deliveries.fail(number, error_text(exc))
                break
        producer.poll(0)


def _wait_for_deliveries(
    producer: Producer, timeout: float, signals: Signals, activity: Activity
) -> int:
    """Wait for the records in flight to be delivered or fail; the number still unknown.

    After a first signal too, so that the summary says exactly what the broker
    holds; a second one (raising :class:`Interrupted`) stops the wait.
    """
    deadline = time.monotonic() + timeout
    try:
        while len(producer) and time.monotonic() < deadline:
            if signals.stopped():
                activity.update(
                    description=f"{signals.name}: waiting for {len(producer):,} records "
                    "in flight (again to stop now)"
                )
            producer.flush(0.2)
    except Interrupted:
        pass
    return len(producer)
