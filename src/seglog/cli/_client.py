"""What the Kafka client commands share: connection options and one-line errors.

``topics``, ``produce``, ``consume``, ``offsets``, ``groups`` and ``acls`` talk
to a broker through confluent-kafka (librdkafka). Each takes the same options,
which :func:`client_options` adds and folds into one :class:`ClientSettings`:

- ``--bootstrap-server HOST:PORT``, else ``$SEGLOG_BOOTSTRAP_SERVERS``, else the
  ``bootstrap.servers`` of the client properties file, else 127.0.0.1:9092;
- ``--command-config FILE`` (else ``$SEGLOG_CLIENT_CONFIG``): a client
  properties file as Kafka's tools take it (``security.protocol``,
  ``sasl.jaas.config``, ``ssl.truststore.location``...; Java names are
  translated to librdkafka's, librdkafka's own pass through);
- ``-X key=value``, any librdkafka property, applied last;
- ``--timeout SECONDS``: how long to wait for the broker, to connect and for
  each request (5 s by default).

Before its first request a command waits for the broker (:func:`wait_for_broker`):
librdkafka retries a refused connection, a failed TLS handshake or SASL
authentication forever and reports only ``Broker transport failure`` when the
request times out. Its ``error_cb`` and log lines say why at once; a cause that
goes on for a second (:data:`GRACE`) ends the command with one line naming it,
well before the timeout.

librdkafka's own log lines go to the ``seglog.cli.librdkafka`` logger at DEBUG
(see them with ``--log-level DEBUG``): a command reports what failed itself, as
one line, through :class:`ClientError`.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import click
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from seglog.config import parse_properties
from seglog.errors import SeglogError
from seglog.spark.client_options import translate

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_TIMEOUT = 5.0
"""Seconds a command waits for the broker unless ``--timeout`` says otherwise."""
BOOTSTRAP_ENV = "SEGLOG_BOOTSTRAP_SERVERS"
CLIENT_CONFIG_ENV = "SEGLOG_CLIENT_CONFIG"

R = TypeVar("R")

_log = logging.getLogger("seglog.cli.librdkafka")


class ClientError(SeglogError):
    """A request to the broker failed; the message is the one line shown to the user."""


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


# librdkafka's errors that say the broker cannot be used as configured. librdkafka
# retries them all; a command should not.
_CONNECTION_ERRORS = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._SSL,
        KafkaError._AUTHENTICATION,
        KafkaError._RESOLVE,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.ILLEGAL_SASL_STATE,
        KafkaError.UNSUPPORTED_SASL_MECHANISM,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
)
# "127.0.0.1:9093/bootstrap: " before, "(after 3ms in state SSL_HANDSHAKE)" after.
_BROKER_PREFIX = re.compile(r"^\S+/(?:bootstrap|-?\d+): ")
_AFTER = re.compile(
    r"\s*\(after \d+ms in state \w+(?:, \d+ identical error\(s\) suppressed)?\)\s*$"
)

_SPARK_PREFIX = re.compile(r"(?<![\w.])kafka\.")

GRACE = 1.0
"""Seconds a connection problem must last before a command gives up on it.

A host name with two addresses (``localhost``: ::1, then 127.0.0.1) fails on
the first before librdkafka tries the second, 100 ms later; several bootstrap
servers, one of them down, likewise.
"""


# librdkafka closes no connection silently: it logs why (facility FAIL), but
# reports only some of those reasons to error_cb.
_FAIL = "FAIL"
# A TLS listener drops a plaintext ApiVersions request without a word.
_DROPPED_AT_HELLO = re.compile(r"Disconnected.*in state APIVERSION_QUERY")
TLS_LISTENER_HINT = (
    "a TLS listener? (security.protocol=SSL or SASL_SSL, with --command-config or -X)"
)
"""What a connection closed at the first request most likely means."""


def cause(text: str) -> str:
    """librdkafka's description of a connection error, without broker name and timing."""
    return _AFTER.sub("", _BROKER_PREFIX.sub("", text))


# How telling a noted problem is: seglog's own hint, then librdkafka's error
# (error_cb), then its log line (which may say less: "Disconnected" where the
# error says "SSL handshake failed: Disconnected ... PLAINTEXT listener?").
_HINT, _ERROR, _LOG = 0, 1, 2


class ConnectionProblems:
    """librdkafka's ``error_cb`` and ``logger``: the signs the broker cannot be used.

    Every log line goes on to the ``seglog.cli.librdkafka`` logger at DEBUG.
    """

    def __init__(self, security_protocol: str = "plaintext") -> None:
        self._lock = threading.Lock()
        self._best: tuple[int, str] | None = None
        self._since = 0.0
        self._last = 0.0
        self._tls = security_protocol.lower() in ("ssl", "sasl_ssl")

    def __call__(self, error: KafkaError) -> None:
        if error.code() in _CONNECTION_ERRORS or error.fatal():
            self._note(_ERROR, cause(error.str()) or error.name())

    def log(self, level: int, msg: str, *args: object) -> None:
        """librdkafka's log line (``logger`` interface): kept at DEBUG, noted if a failure."""
        _log.debug(msg, *args)
        if len(args) == 3 and args[0] == _FAIL:
            text = str(args[2]).split("]: ", 1)[-1]
            if _DROPPED_AT_HELLO.search(text) and not self._tls:
                self._note(
                    _HINT,
                    f"the broker closed the connection at the first request: {TLS_LISTENER_HINT}",
                )
            elif "Disconnected" in text or "failed" in text:
                self._note(_LOG, cause(text))

    def _note(self, rank: int, text: str) -> None:
        with self._lock:
            self._last = time.monotonic()
            if self._best is None:
                self._since = self._last
            if (
                self._best is None
                or rank < self._best[0]
                # The same event said with more words ("SSL handshake failed: <it>").
                or (rank == self._best[0] and self._best[1] in text)
            ):
                self._best = (rank, text)

    def lasting(self, grace: float) -> str | None:
        """The most telling problem, if problems went on for ``grace`` seconds or more.

        One failed attempt is not enough: the next address, or a connection
        whose handshake is slow under load, may still succeed; while it is in
        progress no new problem comes. Problems seen again over ``grace``
        seconds, or one seen three graces ago with no answer since, are enough.
        """
        with self._lock:
            if self._best is None:
                return None
            # librdkafka holds back an error identical to the last one for a while
            # ("1 identical error(s) suppressed"): a problem not seen again may still
            # be going on. Three graces without an answer are enough.
            again = self._last - self._since >= grace
            if again or time.monotonic() - self._since >= 3 * grace:
                return self._best[1]
            return None

    def first(self) -> str | None:
        """The most telling problem seen, however recent."""
        with self._lock:
            return None if self._best is None else self._best[1]


@dataclass(frozen=True)
class ClientSettings:
    """Where the broker is, librdkafka overrides, and how long to wait for it."""

    bootstrap: str
    timeout: float
    properties: dict[str, str] = field(default_factory=dict)
    problems: ConnectionProblems = field(init=False, compare=False)

    def __post_init__(self) -> None:
        protocol = self.properties.get("security.protocol", "plaintext")
        object.__setattr__(self, "problems", ConnectionProblems(protocol))

    def config(self, defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A librdkafka configuration: bootstrap, the command's ``defaults``, then ``-X``."""
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "logger": self.problems,
            "error_cb": self.problems,
        }
        config.update(defaults or {})
        config.update(self.properties)
        return config

    @property
    def timeout_ms(self) -> int:
        return max(1, int(self.timeout * 1000))


def client_file(path: Path) -> dict[str, str]:
    """A client properties file (``--command-config``) in librdkafka's names.

    Raises ClientError naming the file when it cannot be read or holds what
    librdkafka cannot do (a JKS trust store, a Java class).
    """
    try:
        params = parse_properties(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ClientError(f"cannot read the client properties file {path}: {exc}") from None
    try:
        return translate(params, producer=False)
    except ValueError as exc:
        # The translation speaks to Spark jobs, whose options carry a "kafka." prefix;
        # in a properties file the names stand alone (a class name keeps its own).
        message = _SPARK_PREFIX.sub("", str(exc))
        raise ClientError(f"client properties file {path}: {message}") from None


def resolve(
    bootstrap_server: str | None,
    command_config: Path | None,
    properties: tuple[tuple[str, str], ...],
    timeout: float,
) -> ClientSettings:
    """Fold the connection options into settings; explicit options win over files."""
    merged = client_file(command_config) if command_config is not None else {}
    from_file = merged.pop("bootstrap.servers", None)
    merged.update(dict(properties))
    from_x = merged.pop("bootstrap.servers", None)
    bootstrap = bootstrap_server or from_x or from_file or DEFAULT_BOOTSTRAP
    return ClientSettings(bootstrap, timeout, merged)


def client_options(func: Callable[..., R]) -> Callable[..., R]:
    """Add the connection options (module docstring); pass them on as ``client``."""

    @functools.wraps(func)
    def wrapper(
        *args: Any,
        bootstrap_server: str | None,
        command_config: Path | None,
        properties: tuple[tuple[str, str], ...],
        timeout: float,
        **kwargs: Any,
    ) -> R:
        client = resolve(bootstrap_server, command_config, properties, timeout)
        return func(*args, client=client, **kwargs)

    decorated: Callable[..., R] = wrapper
    for option in reversed(connection_options()):
        decorated = option(decorated)
    return decorated


def connection_options() -> list[Callable[[Callable[..., Any]], Callable[..., Any]]]:
    """The click options of :func:`client_options`, for commands that resolve them themselves."""
    return [
        click.option(
            "--bootstrap-server",
            default=None,
            envvar=BOOTSTRAP_ENV,
            show_envvar=True,
            metavar="HOST:PORT",
            help=f"Broker(s) to connect to, comma separated [default: {DEFAULT_BOOTSTRAP}].",
        ),
        click.option(
            "--command-config",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            default=None,
            envvar=CLIENT_CONFIG_ENV,
            show_envvar=True,
            metavar="FILE",
            help="Client properties (security.protocol, sasl.*, ssl.*...), as Kafka's tools "
            "take them; options given here win.",
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
            default=DEFAULT_TIMEOUT,
            show_default=True,
            metavar="SECONDS",
            help="How long to wait for the broker: to connect, and for each request.",
        ),
    ]


class _Client(Protocol):
    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any: ...

    def poll(self, timeout: float = -1) -> Any: ...


def wait_for_broker(handle: _Client, settings: ClientSettings) -> None:
    """Return once the broker answers ``handle``; else ClientError saying why, promptly.

    Metadata is asked for in short turns; between them ``poll`` lets librdkafka
    report errors to :class:`ConnectionProblems`. A problem that lasts
    :data:`GRACE` seconds ends the wait; so does ``settings.timeout``.
    """
    what = f"cannot connect to {settings.bootstrap}"
    deadline = time.monotonic() + settings.timeout
    while True:
        left = deadline - time.monotonic()
        try:
            handle.list_topics(timeout=max(0.01, min(0.2, left)))
            return
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is not None and error.code() not in (
                KafkaError._TRANSPORT,
                KafkaError._TIMED_OUT,
            ):
                raise ClientError(f"{what}: {error_text(exc)}") from None
        handle.poll(0)
        problem = settings.problems.lasting(min(GRACE, settings.timeout / 2))
        if problem is None and time.monotonic() >= deadline:
            problem = settings.problems.first()
            if problem is None:
                raise ClientError(
                    f"{what}: no answer within {settings.timeout:g} s (--timeout to wait longer)"
                )
        if problem is not None:
            raise ClientError(f"{what}: {problem}")


def admin_client(settings: ClientSettings) -> AdminClient:
    """An AdminClient of ``settings``, once the broker answers it (see :func:`wait_for_broker`)."""
    with reporting("bad client configuration"):
        admin = AdminClient(settings.config())
    wait_for_broker(admin, settings)
    return admin


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


def topic_partitions(
    client: _Client, settings: ClientSettings, topic: str, wanted: tuple[int, ...] = ()
) -> list[int]:
    """The partition ids of ``topic`` (or the ``wanted`` ones, checked to exist).

    Waits for the broker first (:func:`wait_for_broker`). A topic that is still
    being created (LEADER_NOT_AVAILABLE) is asked about again until
    ``settings.timeout``; a producer's metadata request may be what creates it.
    """
    wait_for_broker(client, settings)
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
