"""What the Kafka client commands share: connection options and one-line errors.

``topics``, ``produce``, ``consume`` and ``offsets`` talk to a broker through
confluent-kafka (librdkafka). Each takes the same three options, which
:func:`client_options` adds and folds into one :class:`ClientSettings`:

- ``--bootstrap-server HOST:PORT`` (default 127.0.0.1:9092, like Kafka's tools),
- ``-X key=value``, any librdkafka property, applied last,
- ``--timeout SECONDS`` for each request to the broker.

librdkafka's own log lines go to the ``seglog.cli.librdkafka`` logger at DEBUG
(see them with ``seglog --log-level DEBUG``): a command reports what failed
itself, as one line, through :class:`ClientError`.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import socket
import struct
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import click
from confluent_kafka import KafkaError, KafkaException

from seglog.errors import SeglogError
from seglog.protocol import decode_response, encode_request

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

R = TypeVar("R")

_log = logging.getLogger("seglog.cli.librdkafka")


class ClientError(SeglogError):
    """A request to the broker failed; the message is the one line shown to the user."""


class _LibrdkafkaLog:
    """librdkafka's ``logger``: every line at DEBUG, whatever librdkafka's level."""

    def log(self, level: int, msg: str, *args: object) -> None:
        _log.debug(msg, *args)


_LIBRDKAFKA_LOG = _LibrdkafkaLog()


def key_values(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[tuple[str, str], ...]:
    """Click callback of a repeatable ``key=value`` option: the pairs, split at the first ``=``."""
    pairs = []
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected key=value, got {value!r}", ctx, param)
        pairs.append((key, rest))
    return tuple(pairs)


@dataclass(frozen=True)
class ClientSettings:
    """Where the broker is, librdkafka overrides, and how long to wait for it."""

    bootstrap: str
    timeout: float
    properties: dict[str, str] = field(default_factory=dict)

    def config(self, defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A librdkafka configuration: bootstrap, the command's ``defaults``, then ``-X``."""
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "logger": _LIBRDKAFKA_LOG}
        config.update(defaults or {})
        config.update(self.properties)
        return config

    @property
    def timeout_ms(self) -> int:
        return max(1, int(self.timeout * 1000))


def client_options(func: Callable[..., R]) -> Callable[..., R]:
    """Add ``--bootstrap-server``, ``-X`` and ``--timeout``; pass them on as ``client``."""

    @functools.wraps(func)
    def wrapper(
        *args: Any,
        bootstrap_server: str,
        properties: tuple[tuple[str, str], ...],
        timeout: float,
        **kwargs: Any,
    ) -> R:
        client = ClientSettings(bootstrap_server, timeout, dict(properties))
        return func(*args, client=client, **kwargs)

    options = [
        click.option(
            "--bootstrap-server",
            default=DEFAULT_BOOTSTRAP,
            show_default=True,
            metavar="HOST:PORT",
            help="Broker(s) to connect to, comma separated.",
        ),
        click.option(
            "-X",
            "--property",
            "properties",
            callback=key_values,
            metavar="KEY=VALUE",
            multiple=True,
            help="A librdkafka configuration property (repeatable).",
        ),
        click.option(
            "--timeout",
            type=click.FloatRange(min=0.001),
            default=30.0,
            show_default=True,
            metavar="SECONDS",
            help="How long to wait for each request to the broker.",
        ),
    ]
    decorated: Callable[..., R] = wrapper
    for option in reversed(options):
        decorated = option(decorated)
    return decorated


def error_text(error: BaseException | KafkaError) -> str:
    """The human part of a client error, without the exception's repr."""
    if isinstance(error, KafkaException) and error.args:
        error = error.args[0] if isinstance(error.args[0], KafkaError) else error
    if isinstance(error, KafkaError):
        return error.str()
    if isinstance(error, concurrent.futures.TimeoutError):
        return "timed out"
    return str(error) or type(error).__name__


def error_name(error: BaseException) -> str | None:
    """librdkafka's error name (``UNKNOWN_TOPIC_OR_PART``...) of a failed request, if any."""
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        return error.args[0].name()
    return None


@contextmanager
def reporting(what: str) -> Iterator[None]:
    """Turn a client failure inside the block into ``ClientError("<what>: <reason>")``."""
    try:
        yield
    except (KafkaException, concurrent.futures.TimeoutError) as exc:
        raise ClientError(f"{what}: {error_text(exc)}") from None
    except (ValueError, TypeError) as exc:
        # confluent-kafka refuses some bad configurations this way (-X values).
        raise ClientError(f"{what}: {exc}") from None


class _HasMetadata(Protocol):
    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any: ...


def topic_partitions(
    client: _HasMetadata, settings: ClientSettings, topic: str, wanted: tuple[int, ...] = ()
) -> list[int]:
    """The partition ids of ``topic`` (or the ``wanted`` ones, checked to exist).

    A topic that is still being created (LEADER_NOT_AVAILABLE) is asked about again
    until ``settings.timeout``; a producer's metadata request may be what creates it.
    """
    deadline = time.monotonic() + settings.timeout
    while True:
        with reporting(f"cannot get metadata from {settings.bootstrap}"):
            metadata = client.list_topics(topic, timeout=settings.timeout)
        described = metadata.topics.get(topic)
        error: KafkaError | None = described.error if described is not None else None
        if described is not None and error is None:
            break
        if error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise ClientError(f"topic {topic!r} does not exist")
        if time.monotonic() >= deadline:
            reason = error_text(error) if error is not None else "not in the metadata"
            raise ClientError(f"topic {topic!r}: {reason}")
        time.sleep(0.1)
    partitions = sorted(described.partitions)
    missing = sorted(set(wanted) - set(partitions))
    if missing:
        raise ClientError(
            f"topic {topic!r} has no partition {', '.join(map(str, missing))} "
            f"(partitions 0-{len(partitions) - 1})"
        )
    return sorted(set(wanted)) if wanted else partitions


def text_table(rows: list[list[str]]) -> list[str]:
    """Left-aligned columns two spaces apart, like ``kafka-consumer-groups.sh``'s tables."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def partitions_option(help_text: str) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """The repeatable ``--partition N`` option, passed on as ``partitions``."""
    return click.option(
        "--partition",
        "partitions",
        type=click.IntRange(min=0),
        multiple=True,
        help=help_text,
    )


def kafka_request(
    bootstrap: str, timeout: float, api: int, version: int, body: Mapping[str, Any]
) -> Any:
    """One request, encoded by :mod:`seglog.protocol`, to the first bootstrap server; its answer.

    For what librdkafka cannot ask (the cluster-wide default broker resource,
    client quotas): a plain connection, so PLAINTEXT listeners only.
    """
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")

    def exactly(sock: socket.socket, size: int) -> bytes:
        out = bytearray()
        while len(out) < size:
            chunk = sock.recv(size - len(out))
            if not chunk:
                raise ClientError(f"{bootstrap} closed the connection")
            out += chunk
        return bytes(out)

    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout) as sock:
            payload = encode_request(api, version, 1, "seglog", body)
            sock.sendall(struct.pack(">i", len(payload)) + payload)
            (size,) = struct.unpack(">i", exactly(sock, 4))
            _, answer = decode_response(api, version, memoryview(exactly(sock, size)))
    except (OSError, ValueError) as exc:
        raise ClientError(f"cannot reach {bootstrap}: {exc}") from exc
    return answer
