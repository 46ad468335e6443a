"""``seglog consume``: print the messages of a topic, like kafka-console-consumer.sh or kcat -C.

No consumer group: the partitions are assigned (``Consumer.assign``) at the chosen
start, nothing is committed. Output goes to stdout as bytes, one message a line:

- ``value`` (default): the value, ``null`` for a null value, as the console consumer;
  ``--print-key`` puts the key and ``--key-separator`` (a tab) in front;
- ``kv``: key, separator, value, always;
- ``json``: one object a line with topic, partition, offset, timestamp,
  timestamp_type, key, value and headers (a list of ``[name, value]`` pairs). Bytes
  that are valid UTF-8 are strings; others are ``{"base64": "..."}``; null is null.

On a terminal, stderr shows a bar towards ``--max-messages`` (or, with
``--exit``, towards the partitions' ends, in offsets) or the count and rate. At
the end one summary line goes to stderr: records and their bytes, partitions,
errors, elapsed time. Ctrl-C (or SIGTERM) is how a consumer without ``--exit``
or ``--max-messages`` stops: it ends the current batch, writes the summary and
exits 0.
"""

from __future__ import annotations

import base64
import json
import sys
import time
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
from seglog.cli._progress import (
    Activity,
    Interrupted,
    Signals,
    plural,
    progress_wanted,
    size_text,
)
from seglog.cli.schemas import registry, registry_url_option, schema_source
from seglog.schemas.decoding import WireDecoder, WireFormatError, json_default
from seglog.schemas.formats import InvalidSchemaError

# Consumer errors after which waiting for more cannot help.
_FATAL = {
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError._AUTO_OFFSET_RESET,
    KafkaError.OFFSET_OUT_OF_RANGE,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
}

_FORMATS = ["raw", "avro", "json", "protobuf"]

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


_RAW: Any = object()
"""A key or value printed as its bytes (not decoded)."""


def _as_json(message: Message, key: Any = _RAW, value: Any = _RAW) -> bytes:
    timestamp_type, timestamp = message.timestamp()
    raw = message.headers() or []
    headers = list(raw.items()) if isinstance(raw, dict) else raw  # a consumer gives a list
    record = {
        "topic": message.topic(),
        "partition": message.partition(),
        "offset": message.offset(),
        "timestamp": timestamp if timestamp_type in _TIMESTAMP_TYPES else None,
        "timestamp_type": _TIMESTAMP_TYPES.get(timestamp_type),
        "key": _json_bytes(message.key()) if key is _RAW else key,
        "value": _json_bytes(message.value()) if value is _RAW else value,
        "headers": [[name, _json_bytes(value)] for name, value in headers],
    }
    return json.dumps(record, ensure_ascii=False, default=json_default).encode("utf-8")


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
    "--value-format",
    type=click.Choice(_FORMATS),
    default="raw",
    show_default=True,
    help="Decode values serialized against a schema registry (avro, json, protobuf) "
    "and print them as JSON.",
)
@click.option(
    "--key-format",
    type=click.Choice(_FORMATS),
    default="raw",
    show_default=True,
    help="The same for keys.",
)
@registry_url_option
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
    value_format: str,
    key_format: str,
    registry_url: str | None,
    client: ClientSettings,
) -> None:
    """Print the messages of TOPIC to stdout, one a line, without a consumer group.

    Progress shows on stderr when it is a terminal; a summary line (records,
    bytes, partitions, errors, time) always ends on stderr, also after Ctrl-C.

    \b
    Formats:
      value  the value (null for a null value); --print-key puts KEY<SEP> first
      kv     KEY<SEP>VALUE
      json   {"topic", "partition", "offset", "timestamp", "timestamp_type",
              "key", "value", "headers": [[name, value], ...]}; bytes that are
              not UTF-8 are shown as {"base64": "..."}

    With --value-format (or --key-format) avro, json or protobuf, each value
    in the schema registry's wire format is decoded with the schema its id
    names (asked of the registry the broker serves, or --schema-registry-url)
    and printed as JSON; one that is not in the format, or cannot be decoded,
    is printed as it is, with a warning.

    \b
    Examples:
      seglog consume orders --from-beginning --exit --format json
      seglog consume orders --from-beginning --value-format avro
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
    decoder = None
    if value_format != "raw" or key_format != "raw":
        decoder = WireDecoder(schema_source(registry(client, registry_url)))
    decode = _Decoding(decoder, key_format != "raw", value_format != "raw")
    began = time.monotonic()
    with reporting("bad client configuration"):
        consumer = Consumer(client.config(defaults))
    tally = _Tally()
    activity: Activity | None = None
    # Until the first message is asked for, a signal stops at once: nothing is under way.
    signals = Signals(raising=True)
    try:
        with signals:
            ids = topic_partitions(consumer, client, topic, partitions)
            assignment = _start_offsets(consumer, client, topic, ids, start, timestamp)
            with reporting(f"cannot assign {topic!r}"):
                consumer.assign(assignment)
            tally.partitions = len(ids)
            activity, offsets = _activity(
                consumer, client, topic, assignment, max_messages, exit_at_end
            )
            signals.raising = False
            with activity:
                _print_messages(
                    consumer,
                    activity,
                    offsets,
                    signals,
                    tally,
                    len(ids),
                    max_messages,
                    exit_at_end,
                    output,
                    print_key,
                    key_separator.encode(),
                    decode,
                )
    except Interrupted:
        pass  # a signal before the first poll, or a second one: stop at once
    finally:
        consumer.close()
        # Also before a failure's one-line error once messages were asked for: what
        # was printed until then. Not after a failure to start: that line says it all.
        if activity is not None or signals.stopped():
            summary = tally.summary(time.monotonic() - began)
            if signals.stopped():
                summary = f"stopped by {signals.name}: {summary}"
            (activity or Activity("consume", topic, show=False)).summary(summary)


class _Tally:
    """What was printed: the summary's figures."""

    def __init__(self) -> None:
        self.records = 0
        self.bytes = 0
        self.errors = 0
        self.partitions = 0

    def summary(self, elapsed: float) -> str:
        return (
            f"{plural(self.records, 'record')} ({size_text(self.bytes)} of keys and values) "
            f"from {plural(self.partitions, 'partition')}, {plural(self.errors, 'error')} "
            f"in {elapsed:.1f}s"
        )


def _activity(
    consumer: Consumer,
    client: ClientSettings,
    topic: str,
    assignment: list[TopicPartition],
    max_messages: int | None,
    exit_at_end: bool,
) -> tuple[Activity, _OffsetProgress | None]:
    """The progress display: a bar to --max-messages, or to the ends with --exit."""
    if max_messages is not None:
        return Activity("consume", topic, total=max_messages), None
    if not exit_at_end or not progress_wanted():
        return Activity("consume", topic), None
    # The total is in offsets (transaction markers take one too): ask for the ends
    # only when the bar is drawn, it costs a request per partition.
    progress = _OffsetProgress()
    for tp in assignment:
        with reporting(f"cannot get the offsets of {topic!r} partition {tp.partition}"):
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, tp.partition), timeout=client.timeout, cached=False
            )
        first = {OFFSET_BEGINNING: low, OFFSET_END: high}.get(tp.offset, tp.offset)
        progress.add(tp.partition, max(first, low), high)
    return Activity("consume", topic, total=progress.total, unit="offsets"), progress


class _Decoding:
    """Keys and values decoded from the registry's wire format, when asked."""

    def __init__(self, decoder: WireDecoder | None, keys: bool, values: bool) -> None:
        self._decoder = decoder
        self._keys = keys
        self._values = values

    def both(self, message: Message, tally: _Tally) -> tuple[Any, Any]:
        """The key and value to print: decoded, or :data:`_RAW` (not asked, or undecodable)."""
        key = self._one(message, message.key(), "key", tally) if self._keys else _RAW
        value = self._one(message, message.value(), "value", tally) if self._values else _RAW
        return key, value

    def _one(self, message: Message, data: bytes | None, what: str, tally: _Tally) -> Any:
        if data is None or self._decoder is None:
            return _RAW
        try:
            return self._decoder.decode(data)[1]
        except (WireFormatError, KeyError, InvalidSchemaError) as exc:
            tally.errors += 1
            where = f"{message.topic()!r} partition {message.partition()} offset {message.offset()}"
            reason = exc.args[0] if isinstance(exc, KeyError) else exc
            click.echo(
                f"seglog: warning: {where}: the {what} is printed as it is: {reason}", err=True
            )
            return _RAW

    @staticmethod
    def field(data: bytes | None, shown: Any) -> bytes:
        """A value printed alone: its bytes, or its decoded form as compact JSON."""
        if shown is _RAW:
            return _field(data)
        text = json.dumps(shown, ensure_ascii=False, separators=(",", ":"), default=json_default)
        return text.encode("utf-8")


class _OffsetProgress:
    """How far each partition is between its first offset and its end (for --exit)."""

    def __init__(self) -> None:
        self.first: dict[int, int] = {}
        self.end: dict[int, int] = {}
        self.position: dict[int, int] = {}

    def add(self, partition: int, first: int, end: int) -> None:
        self.first[partition] = first
        self.end[partition] = max(first, end)
        self.position[partition] = first

    @property
    def total(self) -> int:
        return sum(self.end[p] - self.first[p] for p in self.end)

    def completed(self) -> int:
        return sum(min(self.position[p], self.end[p]) - self.first[p] for p in self.position)


def _print_messages(
    consumer: Consumer,
    activity: Activity,
    offsets: _OffsetProgress | None,
    signals: Signals,
    tally: _Tally,
    partition_count: int,
    max_messages: int | None,
    exit_at_end: bool,
    output: str,
    print_key: bool,
    separator: bytes,
    decode: _Decoding,
) -> None:
    out = sys.stdout.buffer  # taken inside the activity: it may print above its display
    at_end: set[int | None] = set()
    while not signals.stopped():
        # Wait for one message (consume() would wait for a whole batch), then take
        # whatever else has already arrived.
        first = consumer.poll(0.5)
        batch = 500 if max_messages is None else min(500, max_messages - tally.records)
        rest = consumer.consume(batch - 1, timeout=0) if first is not None and batch > 1 else []
        printed = 0
        for message in [first, *rest] if first is not None else []:
            error = message.error()
            partition = message.partition()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(partition)
                    if offsets is not None and partition is not None:
                        offsets.position[partition] = offsets.end[partition]
                    continue
                if error.fatal() or error.code() in _FATAL:
                    raise ClientError(f"{message.topic()!r}: {error.str()}")
                tally.errors += 1
                click.echo(f"seglog: warning: {error.str()}", err=True)
                continue
            at_end.discard(partition)
            key, value = message.key(), message.value()
            shown_key, shown_value = decode.both(message, tally)
            if output == "json":
                line = _as_json(message, shown_key, shown_value)
            elif output == "kv" or print_key:
                line = decode.field(key, shown_key) + separator + decode.field(value, shown_value)
            else:
                line = decode.field(value, shown_value)
            out.write(line + b"\n")
            printed += 1
            tally.bytes += len(key or b"") + len(value or b"")
            if offsets is not None and partition is not None:
                offsets.position[partition] = (message.offset() or 0) + 1
        out.flush()
        tally.records += printed
        if offsets is not None:
            activity.update(completed=offsets.completed())
        elif printed:
            activity.advance(printed)
        if max_messages is not None and tally.records >= max_messages:
            return
        if exit_at_end and len(at_end) >= partition_count:
            return
