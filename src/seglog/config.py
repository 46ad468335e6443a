"""Every configuration setting, in one table: Kafka's names, types, defaults, ranges.

A :class:`ConfigDef` describes one setting as Kafka's ``ConfigDef.define`` does:
its name, its :class:`Type`, its default, an optional validator (a
:class:`Range` or a :class:`ValidString`/:class:`ValidList`) and whether it is
internal. ``PASSWORD`` settings (and any setting seglog does not know) are
sensitive: DescribeConfigs answers them with a null value, as Kafka does.

There are two tables:

- :data:`TOPIC_CONFIGS`: the topic-level log configs (``segment.bytes``), each
  with the broker-level synonym that supplies its default (``log.segment.bytes``).
- :data:`BROKER_CONFIGS`: every broker-level name: the synonyms above, the
  storage engine's and the coordinator's settings, the network and security
  settings. :class:`BrokerConfig` parses a ``server.properties`` mapping through
  it once; :class:`LogConfig`, ``LogDirSettings``, ``CoordinatorConfig`` and
  ``BrokerSettings`` read their values from there. The settings that may change
  while the broker runs carry a :class:`Dynamic` mode (KIP-226; see
  :mod:`seglog.broker.dynamic_config`).

Parsing follows Kafka's rules and messages (``ConfigDef.parseType`` and the
validators), so that a client sees what a Kafka broker would tell it::

    Invalid value 1000000000000 for configuration segment.index.bytes: Not a number of type INT
    Invalid value 0 for configuration segment.ms: Value must be at least 1

``server.properties`` files are parsed with Java's ``.properties`` rules for
the common cases (``#``/``!`` comments, ``=``/``:``/space separators,
backslash line continuation).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seglog.errors import InvalidConfigError

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
DOUBLE_MAX = 1.7976931348623157e308


class Dynamic(enum.Enum):
    """Whether and where a broker setting may change at run time (KIP-226's update modes).

    Kafka's ``DynamicBrokerConfig`` names two modes: a ``per-broker`` setting is
    changed on one broker only (resource name: its id); a ``cluster-wide`` one
    on one broker or as the cluster-wide default (resource name ``""``). A
    setting without a mode is read at start only.
    """

    PER_BROKER = "per-broker"
    CLUSTER_WIDE = "cluster-wide"


class Type(enum.Enum):
    """Kafka's ``ConfigDef.Type``."""

    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    SHORT = "SHORT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"


_INTEGER_BOUNDS = {
    Type.SHORT: (-(2**15), 2**15 - 1),
    Type.INT: (-(2**31), INT_MAX),
    Type.LONG: (-(2**63), LONG_MAX),
}
# What Java's Integer/Long.parseLong and Double.parseDouble accept, less the exotic
# forms (hex floats, "1d"); Python's int() and float() would also take "1_000" and "nan".
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _invalid(name: str, value: object, why: str) -> InvalidConfigError:
    return InvalidConfigError(f"Invalid value {value} for configuration {name}: {why}")


@dataclass(frozen=True, slots=True)
class Range:
    """Kafka's ``Range.atLeast`` / ``Range.between``: numeric bounds, inclusive."""

    min: float | None = None
    max: float | None = None

    def check(self, name: str, value: Any) -> None:
        """Raise InvalidConfigError with Kafka's message unless ``value`` is in range."""
        if isinstance(value, float) and math.isnan(value):
            # Java's comparisons let NaN through every range; a NaN ratio or rate is
            # never meant, so seglog refuses it.
            raise _invalid(name, value, "Value must be a number")
        if self.min is not None and value < self.min:
            raise _invalid(name, value, f"Value must be at least {_number(self.min)}")
        if self.max is not None and value > self.max:
            raise _invalid(name, value, f"Value must be no more than {_number(self.max)}")


@dataclass(frozen=True, slots=True)
class ValidString:
    """Kafka's ``ValidString.in``: one of a fixed set of strings."""

    choices: tuple[str, ...]

    def check(self, name: str, value: Any) -> None:
        """Raise InvalidConfigError with Kafka's message unless ``value`` is a choice."""
        if value not in self.choices:
            raise _invalid(name, value, f"String must be one of: {', '.join(self.choices)}")


@dataclass(frozen=True, slots=True)
class ValidList:
    """Kafka's ``ValidList.in``: a non-empty list whose every item is a choice."""

    choices: tuple[str, ...]

    def check(self, name: str, value: Any) -> None:
        """Raise InvalidConfigError with Kafka's message unless every item is a choice."""
        if not value:
            raise _invalid(name, "", "Empty list is not allowed")
        for item in value:
            if item not in self.choices:
                raise _invalid(name, item, f"String must be one of: {', '.join(self.choices)}")


_ISO_DURATION = re.compile(
    r"P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?"
)


def duration_ms(text: str) -> int | None:
    """The milliseconds of an ISO-8601 duration as Java's ``Duration.parse`` reads it, or None."""
    match = _ISO_DURATION.fullmatch(text.upper())
    if match is None or text.upper() in ("P", "PT") or text.upper().endswith("T"):
        return None
    days, hours, minutes = (int(match[g] or 0) for g in ("d", "h", "m"))
    seconds = float(match["s"] or 0)
    return int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)


@dataclass(frozen=True, slots=True)
class ValidOffsetReset:
    """Kafka's ``ShareGroupAutoOffsetResetStrategy`` check: latest, earliest or by_duration:ISO."""

    def check(self, name: str, value: Any) -> None:
        """Raise InvalidConfigError unless ``value`` names a reset strategy."""
        text = str(value).strip().lower()
        if text in ("latest", "earliest"):
            return
        if text.startswith("by_duration:"):
            if duration_ms(text.removeprefix("by_duration:").strip()) is not None:
                return
            raise _invalid(name, value, "Invalid duration")
        choices = "latest, earliest, by_duration:PnDTnHnMn.nS"
        raise _invalid(name, value, f"String must be one of: {choices}")


Validator = Range | ValidString | ValidList | ValidOffsetReset


def _number(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def at_least(minimum: float) -> Range:
    """``Range.atLeast(minimum)``."""
    return Range(minimum, None)


def between(minimum: float, maximum: float) -> Range:
    """``Range.between(minimum, maximum)``."""
    return Range(minimum, maximum)


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One setting: its Kafka name, type, default and validator.

    ``broker_name`` is, for a topic-level config, the broker-level synonym
    that supplies its default (``log.segment.bytes`` for ``segment.bytes``).
    ``internal`` settings are parsed but never described (Kafka's
    ``defineInternal``). ``dynamic`` says whether (and where) a broker
    setting may be changed at run time (None: at start only).
    """

    name: str
    type: Type
    default: Any
    validator: Validator | None = None
    broker_name: str | None = None
    internal: bool = False
    dynamic: Dynamic | None = None

    @property
    def attr(self) -> str:
        """The Python attribute name (dots and dashes as underscores)."""
        return self.name.replace(".", "_").replace("-", "_")

    @property
    def sensitive(self) -> bool:
        """Whether the value is a secret (Kafka's PASSWORD type)."""
        return self.type is Type.PASSWORD

    def parse(self, raw: object) -> Any:
        """Convert ``raw`` (a string from a file or a request, or a Python value) and validate it.

        Raises :class:`InvalidConfigError` with Kafka's message when it does not fit.
        """
        value = parse_type(self.name, self.type, raw)
        if self.validator is not None and value is not None:
            self.validator.check(self.name, value)
        return value

    def to_string(self, value: Any) -> str | None:
        """The value in Kafka's textual form (what DescribeConfigs shows)."""
        return format_value(self.type, value)


def parse_type(name: str, kind: Type, raw: object) -> Any:
    """Kafka's ``ConfigDef.parseType``: ``raw`` as a value of ``kind``, or InvalidConfigError."""
    if raw is None:
        return None
    text = raw.strip() if isinstance(raw, str) else raw
    if kind is Type.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        if isinstance(text, str) and text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise _invalid(name, raw, "Expected value to be either true or false")
    if kind in _INTEGER_BOUNDS:
        low, high = _INTEGER_BOUNDS[kind]
        if isinstance(raw, int) and not isinstance(raw, bool):
            value = raw
        elif isinstance(text, str) and _INTEGER.fullmatch(text):
            value = int(text)
        else:
            raise _invalid(name, raw, f"Not a number of type {kind.value}")
        if not low <= value <= high:
            raise _invalid(name, raw, f"Not a number of type {kind.value}")
        return value
    if kind is Type.DOUBLE:
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return float(raw)
        if isinstance(text, str) and _DOUBLE.fullmatch(text):
            return float(text)
        raise _invalid(name, raw, "Not a number of type DOUBLE")
    if kind is Type.LIST:
        if isinstance(raw, (list, tuple)):
            return [str(x).strip() for x in raw]
        text = str(text)
        return [x.strip() for x in text.split(",")] if text else []
    return str(text)


def format_value(kind: Type, value: Any) -> str | None:
    """A parsed value back in Kafka's textual form."""
    if value is None:
        return None
    if kind is Type.BOOLEAN:
        return "true" if value else "false"
    if kind is Type.LIST:
        return ",".join(value)
    if kind is Type.DOUBLE:
        return repr(float(value))
    return str(value)


def _topic(
    name: str,
    broker_name: str,
    kind: Type,
    default: Any,
    validator: Validator | None = None,
    *,
    internal: bool = False,
) -> ConfigDef:
    return ConfigDef(name, kind, default, validator, broker_name, internal)


_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

TOPIC_CONFIGS: tuple[ConfigDef, ...] = (
    _topic(
        "cleanup.policy",
        "log.cleanup.policy",
        Type.LIST,
        ["delete"],
        ValidList(("compact", "delete")),
    ),
    _topic(
        "compression.type",
        "compression.type",
        Type.STRING,
        "producer",
        ValidString(_COMPRESSION_TYPES),
    ),
    _topic(
        "delete.retention.ms",
        "log.cleaner.delete.retention.ms",
        Type.LONG,
        86_400_000,
        at_least(0),
    ),
    _topic("file.delete.delay.ms", "log.segment.delete.delay.ms", Type.LONG, 60_000, at_least(0)),
    _topic("flush.messages", "log.flush.interval.messages", Type.LONG, LONG_MAX, at_least(1)),
    _topic("flush.ms", "log.flush.interval.ms", Type.LONG, LONG_MAX, at_least(0)),
    _topic("index.interval.bytes", "log.index.interval.bytes", Type.INT, 4096, at_least(0)),
    _topic(
        "max.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
        Type.LONG,
        LONG_MAX,
        at_least(1),
    ),
    # seglog's (Kafka has no such config): a .keyindex per segment, for lookups by key.
    _topic("key.index.enable", "log.key.index.enable", Type.BOOLEAN, False),
    _topic("max.message.bytes", "message.max.bytes", Type.INT, 1_048_588, at_least(0)),
    _topic(
        "message.timestamp.type",
        "log.message.timestamp.type",
        Type.STRING,
        "CreateTime",
        ValidString(("CreateTime", "LogAppendTime")),
    ),
    _topic(
        "message.timestamp.before.max.ms",
        "log.message.timestamp.before.max.ms",
        Type.LONG,
        LONG_MAX,
        at_least(0),
    ),
    _topic(
        "message.timestamp.after.max.ms",
        "log.message.timestamp.after.max.ms",
        Type.LONG,
        3_600_000,
        at_least(0),
    ),
    _topic(
        "min.cleanable.dirty.ratio",
        "log.cleaner.min.cleanable.ratio",
        Type.DOUBLE,
        0.5,
        between(0, 1),
    ),
    _topic("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", Type.LONG, 0, at_least(0)),
    _topic("preallocate", "log.preallocate", Type.BOOLEAN, False),
    _topic("retention.bytes", "log.retention.bytes", Type.LONG, -1),
    _topic("retention.ms", "log.retention.ms", Type.LONG, 604_800_000, at_least(-1)),
    # Kafka 4.0 raised the floor of segment.bytes to 1 MiB (KIP-1030); the internal
    # setting below is Kafka's own way round it for tests that want tiny segments.
    _topic("segment.bytes", "log.segment.bytes", Type.INT, 1_073_741_824, at_least(1024 * 1024)),
    _topic(
        "internal.segment.bytes",
        "internal.log.segment.bytes",
        Type.INT,
        None,
        at_least(14),
        internal=True,
    ),
    _topic("segment.index.bytes", "log.index.size.max.bytes", Type.INT, 10_485_760, at_least(4)),
    _topic("segment.jitter.ms", "log.roll.jitter.ms", Type.LONG, 0, at_least(0)),
    _topic("segment.ms", "log.roll.ms", Type.LONG, 604_800_000, at_least(1)),
)

CONFIGS_BY_NAME: dict[str, ConfigDef] = {c.name: c for c in TOPIC_CONFIGS}
CONFIGS_BY_BROKER_NAME: dict[str, ConfigDef] = {
    c.broker_name: c for c in TOPIC_CONFIGS if c.broker_name is not None
}


def _broker(
    name: str,
    kind: Type,
    default: Any,
    validator: Validator | None = None,
    *,
    internal: bool = False,
    dynamic: Dynamic | None = None,
) -> ConfigDef:
    return ConfigDef(name, kind, default, validator, None, internal, dynamic)


_CLUSTER = Dynamic.CLUSTER_WIDE
_PER_BROKER = Dynamic.PER_BROKER


# Broker-level names of seglog's own settings and of Kafka's that seglog reads. The
# topic configs' broker synonyms are added below from TOPIC_CONFIGS.
_BROKER_ONLY: tuple[ConfigDef, ...] = (
    # --- node, listeners, directories
    _broker("node.id", Type.INT, 1, at_least(0)),
    _broker("broker.id", Type.INT, -1),
    _broker("cluster.id", Type.STRING, None),
    _broker("listeners", Type.STRING, "PLAINTEXT://127.0.0.1:9092"),
    _broker("advertised.listeners", Type.STRING, None),
    _broker("listener.security.protocol.map", Type.STRING, None),
    _broker("log.dir", Type.STRING, "./data"),
    _broker("log.dirs", Type.STRING, None),
    _broker("metrics.host", Type.STRING, "127.0.0.1"),
    _broker("metrics.port", Type.INT, None, between(0, 65535)),
    # seglog's: the console's HTTP API (lookup by key, topics), off unless a port is given.
    _broker("console.host", Type.STRING, "127.0.0.1"),
    _broker("console.port", Type.INT, None, between(0, 65535)),
    # seglog's: whether the console may write (produce a test message, reset group offsets);
    # off, the API is read-only whatever the ACLs allow.
    _broker("console.write.enable", Type.BOOLEAN, False),
    # seglog's: the schema registry (Confluent's REST API over _schemas), off unless a port
    # is given; also served on the console's port when that is on.
    _broker("schema.registry.host", Type.STRING, "127.0.0.1"),
    _broker("schema.registry.port", Type.INT, None, between(0, 65535)),
    _broker("nodes", Type.STRING, "1"),
    # Static in Kafka; seglog also lets these two change at run time (for later creations).
    _broker("auto.create.topics.enable", Type.BOOLEAN, True, dynamic=_CLUSTER),
    _broker("num.partitions", Type.INT, 1, at_least(1), dynamic=_CLUSTER),
    # --- network limits
    _broker("socket.request.max.bytes", Type.INT, 104_857_600, at_least(1)),
    _broker("connections.max.idle.ms", Type.LONG, 600_000),
    _broker("max.connections", Type.INT, INT_MAX, at_least(0), dynamic=_CLUSTER),
    _broker("max.connections.per.ip", Type.INT, INT_MAX, at_least(0), dynamic=_CLUSTER),
    _broker("max.connections.per.ip.overrides", Type.STRING, "", dynamic=_CLUSTER),
    # Kafka's default is -1 (no bound); seglog bounds what clients can make it hold.
    # -1 (any value <= 0) still lifts the bound.
    _broker("queued.max.request.bytes", Type.LONG, 536_870_912),
    _broker("queued.max.requests", Type.INT, 500, at_least(1)),
    # --- security (secrets are PASSWORD: never shown)
    _broker("sasl.enabled.mechanisms", Type.LIST, ["GSSAPI"]),
    _broker("sasl.jaas.config", Type.PASSWORD, None),
    # seglog's: a file of PLAIN users (user=password lines), beside the JAAS user_ entries.
    _broker("sasl.plain.users.file", Type.STRING, None),
    _broker("connections.max.reauth.ms", Type.LONG, 0),
    _broker("connection.failed.authentication.delay.ms", Type.INT, 100, at_least(0)),
    _broker("sasl.server.max.receive.size", Type.INT, 524_288, at_least(1)),
    # seglog's: how long a connection of a SASL listener may take to authenticate.
    _broker("sasl.server.authentication.timeout.ms", Type.LONG, 30_000, at_least(1)),
    _broker("authorizer.class.name", Type.STRING, ""),
    _broker("super.users", Type.STRING, None),
    _broker("allow.everyone.if.no.acl.found", Type.BOOLEAN, False),
    _broker("ssl.protocol", Type.STRING, "TLSv1.3"),
    _broker("ssl.enabled.protocols", Type.LIST, ["TLSv1.2", "TLSv1.3"]),
    _broker("ssl.cipher.suites", Type.LIST, []),
    _broker("ssl.client.auth", Type.STRING, "none", ValidString(("required", "requested", "none"))),
    _broker("ssl.principal.mapping.rules", Type.STRING, "DEFAULT"),
    _broker("ssl.keystore.type", Type.STRING, "JKS"),
    _broker("ssl.truststore.type", Type.STRING, "JKS"),
    _broker("ssl.keystore.location", Type.STRING, None),
    _broker("ssl.keystore.password", Type.PASSWORD, None),
    _broker("ssl.key.password", Type.PASSWORD, None),
    _broker("ssl.keystore.key", Type.PASSWORD, None),
    _broker("ssl.keystore.certificate.chain", Type.PASSWORD, None),
    _broker("ssl.truststore.location", Type.STRING, None),
    _broker("ssl.truststore.password", Type.PASSWORD, None),
    _broker("ssl.truststore.certificates", Type.PASSWORD, None),
    # --- coarse synonyms of millisecond log settings (the finest one given wins)
    _broker("log.retention.minutes", Type.INT, None),
    _broker("log.retention.hours", Type.INT, 168),
    _broker("log.roll.hours", Type.INT, 168, at_least(1)),
    _broker("log.roll.jitter.hours", Type.INT, 0, at_least(0)),
    # --- the storage engine (LogDirSettings)
    _broker("log.retention.check.interval.ms", Type.LONG, 300_000, at_least(1)),
    _broker("log.flush.offset.checkpoint.interval.ms", Type.INT, 60_000, at_least(0)),
    _broker("log.flush.start.offset.checkpoint.interval.ms", Type.INT, 60_000, at_least(0)),
    # Kafka's default is Long.MAX_VALUE (never); seglog checks flush.ms every second.
    _broker("log.flush.scheduler.interval.ms", Type.LONG, 1_000, at_least(1)),
    _broker("log.cleaner.enable", Type.BOOLEAN, True),
    _broker("log.cleaner.backoff.ms", Type.LONG, 15_000, at_least(0), dynamic=_CLUSTER),
    _broker(
        "log.cleaner.dedupe.buffer.size", Type.LONG, 134_217_728, at_least(1), dynamic=_CLUSTER
    ),
    _broker(
        "log.cleaner.io.max.bytes.per.second",
        Type.DOUBLE,
        DOUBLE_MAX,
        at_least(0),
        dynamic=_CLUSTER,
    ),
    _broker("producer.id.expiration.ms", Type.INT, 86_400_000, at_least(1), dynamic=_CLUSTER),
    _broker("producer.id.expiration.check.interval.ms", Type.INT, 600_000, at_least(1)),
    # --- Kafka's dynamic settings seglog has no use for (it has no such thread
    # pools, no Kerberos): accepted, kept and described as Kafka does, so that
    # tools which change them (librdkafka's admin tests) get Kafka's answers.
    _broker("background.threads", Type.INT, 10, at_least(1), dynamic=_CLUSTER),
    _broker("num.io.threads", Type.INT, 8, at_least(1), dynamic=_CLUSTER),
    _broker("num.network.threads", Type.INT, 3, at_least(1), dynamic=_CLUSTER),
    _broker("num.replica.fetchers", Type.INT, 1, dynamic=_CLUSTER),
    _broker("num.recovery.threads.per.data.dir", Type.INT, 2, at_least(1), dynamic=_CLUSTER),
    _broker("log.cleaner.threads", Type.INT, 1, at_least(0), dynamic=_CLUSTER),
    _broker("log.cleaner.io.buffer.size", Type.INT, 524_288, at_least(0), dynamic=_CLUSTER),
    _broker("log.cleaner.io.buffer.load.factor", Type.DOUBLE, 0.9, dynamic=_CLUSTER),
    _broker("max.connection.creation.rate", Type.INT, INT_MAX, at_least(0), dynamic=_CLUSTER),
    _broker("sasl.kerberos.service.name", Type.STRING, None, dynamic=_PER_BROKER),
    _broker("sasl.kerberos.min.time.before.relogin", Type.LONG, 60_000, dynamic=_PER_BROKER),
    _broker("sasl.kerberos.ticket.renew.jitter", Type.DOUBLE, 0.05, dynamic=_PER_BROKER),
    _broker("sasl.kerberos.ticket.renew.window.factor", Type.DOUBLE, 0.8, dynamic=_PER_BROKER),
    # --- the group coordinator (CoordinatorConfig)
    _broker("group.initial.rebalance.delay.ms", Type.INT, 3_000, at_least(0)),
    _broker("group.min.session.timeout.ms", Type.INT, 6_000, at_least(0)),
    _broker("group.max.session.timeout.ms", Type.INT, 1_800_000, at_least(0)),
    _broker("group.max.size", Type.INT, INT_MAX, at_least(1)),
    _broker("group.consumer.session.timeout.ms", Type.INT, 45_000, at_least(1)),
    _broker("group.consumer.heartbeat.interval.ms", Type.INT, 5_000, at_least(1)),
    # The bounds of the group configs (GroupConfig): a group's own value must lie within them.
    _broker("group.consumer.min.session.timeout.ms", Type.INT, 45_000, at_least(1)),
    _broker("group.consumer.max.session.timeout.ms", Type.INT, 60_000, at_least(1)),
    _broker("group.consumer.min.heartbeat.interval.ms", Type.INT, 5_000, at_least(1)),
    _broker("group.consumer.max.heartbeat.interval.ms", Type.INT, 15_000, at_least(1)),
    _broker("group.share.session.timeout.ms", Type.INT, 45_000, at_least(1)),
    _broker("group.share.min.session.timeout.ms", Type.INT, 45_000, at_least(1)),
    _broker("group.share.max.session.timeout.ms", Type.INT, 60_000, at_least(1)),
    _broker("group.share.heartbeat.interval.ms", Type.INT, 5_000, at_least(1)),
    _broker("group.share.min.heartbeat.interval.ms", Type.INT, 5_000, at_least(1)),
    _broker("group.share.max.heartbeat.interval.ms", Type.INT, 15_000, at_least(1)),
    _broker("group.share.record.lock.duration.ms", Type.INT, 30_000, at_least(1_000)),
    _broker("group.share.min.record.lock.duration.ms", Type.INT, 15_000, at_least(1_000)),
    _broker("group.share.max.record.lock.duration.ms", Type.INT, 60_000, at_least(1_000)),
    # --- share groups (KIP-932)
    _broker("group.share.enable", Type.BOOLEAN, True),
    _broker("group.share.delivery.count.limit", Type.INT, 5, between(2, 10)),
    _broker("group.share.min.delivery.count.limit", Type.INT, 2, between(2, 10)),
    _broker("group.share.max.delivery.count.limit", Type.INT, 10, between(2, 10)),
    _broker("group.share.partition.max.record.locks", Type.INT, 2_000, between(100, 10_000)),
    _broker("group.share.max.size", Type.INT, 200, between(10, 1_000)),
    _broker("group.share.max.share.sessions", Type.INT, 2_000, at_least(1)),
    _broker("group.share.assignors", Type.LIST, ["simple"]),
    _broker("share.coordinator.state.topic.num.partitions", Type.INT, 50, at_least(1)),
    _broker("share.coordinator.state.topic.segment.bytes", Type.INT, 104_857_600, at_least(1)),
    _broker(
        "share.coordinator.snapshot.update.records.per.snapshot", Type.INT, 500, between(0, 500)
    ),
    _broker(
        "share.coordinator.cold.partition.snapshot.interval.ms", Type.INT, 300_000, at_least(1)
    ),
    _broker("share.coordinator.state.topic.prune.interval.ms", Type.INT, 300_000, at_least(1)),
    _broker("errors.deadletterqueue.topic.name.prefix", Type.STRING, "dlq."),
    _broker("errors.deadletterqueue.auto.create.topics.enable", Type.BOOLEAN, False),
    _broker("offsets.retention.minutes", Type.INT, 10_080, at_least(1)),
    _broker("offsets.retention.check.interval.ms", Type.LONG, 600_000, at_least(1)),
    _broker("offset.metadata.max.bytes", Type.INT, 4_096, at_least(0)),
    _broker("offsets.topic.num.partitions", Type.INT, 50, at_least(1)),
    _broker("offsets.topic.segment.bytes", Type.INT, 104_857_600, at_least(1)),
    _broker("offsets.topic.replication.factor", Type.SHORT, 3, at_least(1)),
    # --- the transaction coordinator
    _broker("transaction.max.timeout.ms", Type.INT, 900_000, at_least(1)),
    _broker("transaction.state.log.num.partitions", Type.INT, 50, at_least(1)),
    _broker("transaction.state.log.segment.bytes", Type.INT, 104_857_600, at_least(1)),
    _broker(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        Type.INT,
        10_000,
        at_least(1),
    ),
    _broker("transactional.id.expiration.ms", Type.INT, 604_800_000, at_least(1)),
    _broker(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        Type.INT,
        3_600_000,
        at_least(1),
    ),
)


def _broker_synonym(topic: ConfigDef) -> ConfigDef:
    assert topic.broker_name is not None
    default = topic.default
    validator = topic.validator
    if topic.name == "retention.ms":
        # log.retention.ms has no floor: any negative value means "unlimited".
        validator = None
    # Kafka lets every topic config's first broker synonym change at run time,
    # cluster-wide (DynamicLogConfig); its coarse synonyms (log.retention.hours)
    # stay static.
    dynamic = None if topic.internal else Dynamic.CLUSTER_WIDE
    return ConfigDef(
        topic.broker_name, topic.type, default, validator, None, topic.internal, dynamic
    )


BROKER_CONFIGS: dict[str, ConfigDef] = {
    **{c.name: c for c in _BROKER_ONLY},
    **{c.broker_name: _broker_synonym(c) for c in TOPIC_CONFIGS if c.broker_name is not None},
}
"""Every broker-level setting by Kafka name."""

_COARSE_SYNONYMS: dict[str, tuple[str, int]] = {
    "log.retention.minutes": ("log.retention.ms", 60_000),
    "log.retention.hours": ("log.retention.ms", 3_600_000),
    "log.roll.hours": ("log.roll.ms", 3_600_000),
    "log.roll.jitter.hours": ("log.roll.jitter.ms", 3_600_000),
}
# Listener-prefixed settings (listener.name.<listener>.<mechanism>.sasl.jaas.config,
# listener.name.<listener>.ssl.keystore.password, ...) take the type of their last part.
_LISTENER_PREFIX = re.compile(r"listener\.name\.[^.]+\.(?:[^.]+\.)?(?P<base>(?:sasl|ssl)\..+)")


def broker_config(name: str) -> ConfigDef | None:
    """The definition of a broker-level ``name``, listener-prefixed names included."""
    definition = BROKER_CONFIGS.get(name)
    if definition is not None:
        return definition
    match = _LISTENER_PREFIX.fullmatch(name)
    if match is not None:
        base = BROKER_CONFIGS.get(match.group("base"))
        if base is not None:
            return dataclasses.replace(base, name=name)
    return None


def is_sensitive(name: str) -> bool:
    """Whether a broker-level setting must not be shown.

    Kafka treats a setting whose type it does not know as sensitive too
    (``KafkaConfig.maybeSensitive``): an unknown key may hold a secret.
    """
    definition = broker_config(name)
    return definition is None or definition.sensitive


class BrokerConfig(Mapping[str, Any]):
    """A broker's properties parsed through :data:`BROKER_CONFIGS`, once.

    Every known name given is parsed and validated (the first bad one raises
    :class:`InvalidConfigError` with Kafka's message); names seglog does not
    know are kept as strings. Indexing gives the parsed value, or the default.
    """

    def __init__(self, properties: Mapping[str, object]) -> None:
        self.properties: dict[str, str] = {k: str(v) for k, v in properties.items()}
        self._values: dict[str, Any] = {}
        for name, raw in properties.items():
            definition = broker_config(name)
            if definition is not None:
                self._values[name] = definition.parse(raw)

    def __getitem__(self, name: str) -> Any:
        if name in self._values:
            return self._values[name]
        definition = broker_config(name)
        if definition is None:
            raise KeyError(name)
        return definition.default

    def __iter__(self) -> Iterator[str]:
        return iter(BROKER_CONFIGS)

    def __len__(self) -> int:
        return len(BROKER_CONFIGS)

    def is_set(self, name: str) -> bool:
        """Whether ``name`` was given (rather than defaulted)."""
        return name in self.properties


def _field_value(definition: ConfigDef, value: Any) -> Any:
    """A parsed value as :class:`LogConfig` keeps it (cleanup.policy as "compact,delete")."""
    if definition.type is Type.LIST:
        return ",".join(dict.fromkeys(value))
    return value


def parse_value(definition: ConfigDef, raw: object) -> Any:
    """Parse ``raw`` for a topic config, as :class:`LogConfig` keeps it.

    Raises :class:`InvalidConfigError` naming the config when the value does not fit.
    """
    return _field_value(definition, definition.parse(raw))


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The resolved log configuration of one topic, under Kafka's names and defaults.

    Attribute names are the Kafka names with dots as underscores
    (``segment.bytes`` → ``segment_bytes``).
    """

    cleanup_policy: str = "delete"
    compression_type: str = "producer"
    delete_retention_ms: int = 86_400_000
    file_delete_delay_ms: int = 60_000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    index_interval_bytes: int = 4096
    key_index_enable: bool = False
    max_compaction_lag_ms: int = LONG_MAX
    max_message_bytes: int = 1_048_588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    preallocate: bool = False
    retention_bytes: int = -1
    retention_ms: int = 604_800_000
    segment_bytes: int = 1_073_741_824
    segment_index_bytes: int = 10_485_760
    segment_jitter_ms: int = 0
    segment_ms: int = 604_800_000

    @property
    def compact(self) -> bool:
        """True when cleanup.policy includes compact."""
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        """True when cleanup.policy includes delete."""
        return "delete" in self.cleanup_policy.split(",")

    @classmethod
    def from_properties(
        cls, overrides: Mapping[str, object], defaults: LogConfig | None = None
    ) -> LogConfig:
        """Build a config from topic-level ``overrides`` (Kafka names) over ``defaults``.

        Every value is checked against :data:`TOPIC_CONFIGS`; the first bad one
        raises :class:`InvalidConfigError` with Kafka's message.
        """
        base = defaults if defaults is not None else cls()
        changes: dict[str, Any] = {}
        internal: dict[str, Any] = {}
        for name, raw in overrides.items():
            definition = CONFIGS_BY_NAME.get(name)
            if definition is None:
                raise InvalidConfigError(f"Unknown topic config name: {name}")
            value = parse_value(definition, raw)
            if definition.internal:
                internal[definition.name] = value
            else:
                changes[definition.attr] = value
        return _apply_internal(dataclasses.replace(base, **changes), internal)

    @classmethod
    def from_broker_properties(cls, properties: Mapping[str, object]) -> LogConfig:
        """Build broker-level defaults from ``log.*`` properties; other keys are ignored."""
        config = properties if isinstance(properties, BrokerConfig) else BrokerConfig(properties)
        given = {name: config[name] for name in config.properties if name in BROKER_CONFIGS}
        # Coarse synonyms stand in only for a finer name that was not given; the
        # finest coarse one wins (minutes over hours), as in Kafka.
        for name, (target, factor) in reversed(_COARSE_SYNONYMS.items()):
            if name in given and target not in config.properties:
                value = given[name]
                given[target] = value * factor if value >= 0 else -1
        changes: dict[str, Any] = {}
        internal: dict[str, Any] = {}
        for name, value in given.items():
            definition = CONFIGS_BY_BROKER_NAME.get(name)
            if definition is None:
                continue
            if definition.name == "retention.ms" and value < 0:
                value = -1  # Kafka treats a negative log.retention.ms as "unlimited"
            if definition.internal:
                internal[definition.name] = value
            else:
                changes[definition.attr] = _field_value(definition, value)
        return _apply_internal(dataclasses.replace(cls(), **changes), internal)

    def to_properties(self) -> dict[str, str]:
        """Every (described) topic config as Kafka name → string value (Kafka's textual form)."""
        out: dict[str, str] = {}
        for definition in TOPIC_CONFIGS:
            if definition.internal:
                continue
            value = getattr(self, definition.attr)
            out[definition.name] = str(value).lower() if isinstance(value, bool) else str(value)
        return out

    def overrides_against(self, defaults: LogConfig) -> dict[str, str]:
        """The Kafka names whose value differs from ``defaults``, as strings."""
        mine, theirs = self.to_properties(), defaults.to_properties()
        return {k: v for k, v in mine.items() if theirs[k] != v}


def _apply_internal(config: LogConfig, internal: Mapping[str, Any]) -> LogConfig:
    size = internal.get("internal.segment.bytes")
    return config if size is None else dataclasses.replace(config, segment_bytes=size)


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text into a dict (later keys win)."""
    result: dict[str, str] = {}
    logical: list[str] = []
    for raw_line in text.splitlines():
        line = raw_line.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        # An odd number of trailing backslashes continues the line.
        stripped = line.rstrip("\r\n")
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2 == 1:
            logical.append(stripped[:-1])
            continue
        logical.append(stripped)
        entry = "".join(logical)
        logical = []
        key_end = len(entry)
        for i, ch in enumerate(entry):
            if ch in "=: \t" and (i == 0 or entry[i - 1] != "\\"):
                key_end = i
                break
        key = entry[:key_end].replace("\\", "").strip()
        rest = entry[key_end:].lstrip(" \t")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t")
        if key:
            result[key] = rest.strip()
    return result


def load_properties(path: str | Path) -> dict[str, str]:
    """Read a ``server.properties`` file."""
    return parse_properties(Path(path).read_text(encoding="utf-8"))


# Options of a JAAS entry: name=value, the value quoted or bare.
_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


def jaas_options(text: str) -> dict[str, str]:
    """The options of a ``LoginModule required a="b" c="d";`` JAAS entry (``sasl.jaas.config``)."""
    return {
        m.group(1): (m.group(2) if m.group(2) is not None else m.group(3)).replace('\\"', '"')
        for m in _JAAS_OPTION.finditer(text)
    }
