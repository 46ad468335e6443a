"""The option surface of Spark's Kafka source and sink, parsed and validated without Spark.

Names, defaults, precedence and error messages follow Spark's
``KafkaSourceProvider`` so that a job can swap ``format("kafka")`` for
``format("seglog")`` and back. Spark hands options over case-insensitively
(its ``CaseInsensitiveDict`` lower-cases every key), so every look-up here is
on lower-cased names.

Where an offset range starts or ends is chosen in this order of preference,
as in Spark: a global timestamp (``startingTimestamp``), then timestamps per
partition (``startingOffsetsByTimestamp``), then ``startingOffsets``
(``earliest``, ``latest`` or JSON); the same for the ending side.

Typed columns (``valueFormat``/``keyFormat`` = ``avro``, ``json`` or
``protobuf``, with ``schema.registry.url``, ``schemaEvolution`` and ``mode``)
are seglog's too; see :mod:`seglog.spark.typed`. Every ``schema.registry.*``
option goes, without its prefix, to confluent-kafka's ``SchemaRegistryClient``
(``schema.registry.basic.auth.user.info`` and so on).

seglog adds one more thing: a ``path`` (``load("/path/to/log-dir")``) selects files
mode, where no broker is involved; ``kafka.bootstrap.servers`` is then not
needed and, with no subscription option, every topic of the directory is read
(but Kafka's internal topics, as with a pattern).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from seglog.spark.client_options import translate
from seglog.spark.offsets import (
    EARLIEST,
    LATEST,
    TopicPartition,
    parse_assign,
    parse_partition_offsets,
    parse_partition_timestamps,
)
from seglog.storage.filenames import is_internal

__all__ = [
    "Assign",
    "Earliest",
    "GlobalTimestamp",
    "Latest",
    "OffsetSpec",
    "SourceOptions",
    "SpecificOffsets",
    "SpecificTimestamps",
    "Strategy",
    "Subscribe",
    "SubscribePattern",
    "TypedOptions",
    "WriteOptions",
    "parse_source_options",
    "parse_write_options",
]

ASSIGN = "assign"
SUBSCRIBE = "subscribe"
SUBSCRIBE_PATTERN = "subscribepattern"
STRATEGY_KEYS = (ASSIGN, SUBSCRIBE, SUBSCRIBE_PATTERN)
# As Spark prints them in its errors.
_STRATEGY_NAMES = "assign, subscribe, subscribePattern"

_STARTING_OFFSETS = "startingoffsets"
_ENDING_OFFSETS = "endingoffsets"
_STARTING_TIMESTAMP = "startingtimestamp"
_ENDING_TIMESTAMP = "endingtimestamp"
_STARTING_BY_TIMESTAMP = "startingoffsetsbytimestamp"
_ENDING_BY_TIMESTAMP = "endingoffsetsbytimestamp"
_BY_TIMESTAMP_STRATEGY = "startingoffsetsbytimestampstrategy"

# kafka.* settings Spark refuses, with its reasons.
_UNSUPPORTED_CONSUMER = {
    "auto.offset.reset": (
        "Kafka option 'auto.offset.reset' is not supported. Instead set the source option "
        "'startingOffsets' to 'earliest' or 'latest' to specify where to start. Structured "
        "Streaming manages which offsets are consumed internally, rather than relying on the "
        "kafkaConsumer to do it. This will ensure that no data is missed when new "
        "topics/partitions are dynamically subscribed. Note that 'startingOffsets' only applies "
        "when a new Streaming query is started, and that resuming will always pick up from "
        "where the query left off. See the docs for more details."
    ),
    "key.deserializer": (
        "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte "
        "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize "
        "the keys."
    ),
    "value.deserializer": (
        "Kafka option 'value.deserializer' is not supported as values are deserialized as byte "
        "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize "
        "the values."
    ),
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}
_UNSUPPORTED_PRODUCER = {
    "key.serializer": (
        "Kafka option 'key.serializer' is not supported as keys are serialized with "
        "ByteArraySerializer."
    ),
    "value.serializer": (
        "Kafka option 'value.serializer' is not supported as value are serialized with "
        "ByteArraySerializer."
    ),
}

_DURATION = re.compile(r"\s*(\d+)\s*(ms|s|m|min|h|d)?\s*", re.IGNORECASE)
_DURATION_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


# ------------------------------------------------------------------ strategies


@dataclass(frozen=True)
class Assign:
    """``assign``: exactly these topic-partitions."""

    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class Subscribe:
    """``subscribe``: every partition of these topics (new partitions included)."""

    topics: tuple[str, ...]


@dataclass(frozen=True)
class SubscribePattern:
    """``subscribePattern``: every partition of the topics whose whole name matches."""

    pattern: str

    def matches(self, topic: str) -> bool:
        """True when ``topic`` matches the pattern as Java's ``Matcher.matches`` would."""
        return re.fullmatch(self.pattern, topic) is not None


Strategy = Assign | Subscribe | SubscribePattern | None
"""How partitions are chosen; None in files mode means every topic of the directory."""


def select_partitions(strategy: Strategy, available: list[TopicPartition]) -> list[TopicPartition]:
    """The partitions of ``available`` that ``strategy`` reads, sorted.

    ``assign`` returns its partitions whether or not they exist: the transport
    reports missing ones when it looks their offsets up, as Spark does. A
    pattern, and files mode's "every topic", leave out Kafka's internal topics
    (``__consumer_offsets``, ``__transaction_state`` ...), as the Java
    consumer's pattern subscription does (``exclude.internal.topics``);
    ``subscribe`` and ``assign`` read one when they name it.
    """
    if isinstance(strategy, Assign):
        return sorted(strategy.partitions)
    if isinstance(strategy, Subscribe):
        wanted = set(strategy.topics)
        return sorted(tp for tp in available if tp.topic in wanted)
    if isinstance(strategy, SubscribePattern):
        return sorted(
            tp for tp in available if not is_internal(tp.topic) and strategy.matches(tp.topic)
        )
    return sorted(tp for tp in available if not is_internal(tp.topic))


# -------------------------------------------------------------- offset specs


@dataclass(frozen=True)
class Earliest:
    """The log start offset of every partition."""


@dataclass(frozen=True)
class Latest:
    """The log end offset of every partition."""


@dataclass(frozen=True)
class SpecificOffsets:
    """Offsets per partition; -2 means earliest and -1 latest, as in Spark's JSON."""

    offsets: Mapping[TopicPartition, int]


@dataclass(frozen=True)
class GlobalTimestamp:
    """The first offset at or after one timestamp (ms), in every partition."""

    timestamp: int


@dataclass(frozen=True)
class SpecificTimestamps:
    """The first offset at or after a timestamp (ms) per partition."""

    timestamps: Mapping[TopicPartition, int]


OffsetSpec = Earliest | Latest | SpecificOffsets | GlobalTimestamp | SpecificTimestamps
"""Where a range starts or ends, before it is resolved against a log."""


# -------------------------------------------------------------- typed columns

FORMATS = ("binary", "avro", "json", "protobuf")
"""``valueFormat``/``keyFormat`` values; ``binary`` is Spark's Kafka columns as they are."""
EVOLUTIONS = ("latest", "fail")
MODES = ("FAILFAST", "PERMISSIVE")
_REGISTRY_PREFIX = "schema.registry."


@dataclass(frozen=True)
class TypedOptions:
    """How the key and value columns are typed (see :mod:`seglog.spark.typed`)."""

    value_format: str = "binary"
    key_format: str = "binary"
    registry: Mapping[str, str] = field(default_factory=dict)
    """``SchemaRegistryClient`` settings: the ``schema.registry.*`` options without the prefix."""
    schema_evolution: str = "latest"
    permissive: bool = False
    """``mode=PERMISSIVE``: a record that cannot be decoded reads as null instead of failing."""
    auto_register: bool = True
    """The sink registers a schema derived from the column when the subject has none."""
    value_message: str | None = None
    key_message: str | None = None
    """``valueProtobufMessage``/``keyProtobufMessage``: the Protobuf message a value/key is."""

    @property
    def typed(self) -> bool:
        """Whether the key or the value is typed."""
        return self.value_format != "binary" or self.key_format != "binary"

    def format_of(self, column: str) -> str:
        """The format of ``key`` or ``value``."""
        return self.value_format if column == "value" else self.key_format

    def message_of(self, column: str) -> str | None:
        """The Protobuf message named for ``key`` or ``value`` (None: the file's main one)."""
        return self.value_message if column == "value" else self.key_message


def _choice(params: Mapping[str, str], key: str, name: str, allowed: tuple[str, ...]) -> str:
    text = params.get(key, allowed[0]).strip()
    for value in allowed:
        if text.lower() == value.lower():
            return value
    raise ValueError(
        f"Invalid value '{params[key]}' for option '{name}', must be one of: {', '.join(allowed)}"
    )


def parse_typed_options(params: Mapping[str, str], *, files_mode: bool) -> TypedOptions:
    """The typed-column options of lower-cased ``params``; a typed format needs a registry URL
    unless a log directory (files mode) holds the registry."""
    registry = {
        key[len(_REGISTRY_PREFIX) :]: value
        for key, value in params.items()
        if key.startswith(_REGISTRY_PREFIX)
    }
    options = TypedOptions(
        value_format=_choice(params, "valueformat", "valueFormat", FORMATS),
        key_format=_choice(params, "keyformat", "keyFormat", FORMATS),
        registry=registry,
        schema_evolution=_choice(params, "schemaevolution", "schemaEvolution", EVOLUTIONS),
        permissive=_choice(params, "mode", "mode", MODES) == "PERMISSIVE",
        auto_register=_bool(params, "auto.register.schemas", "auto.register.schemas", True),
        value_message=params.get("valueprotobufmessage", "").strip() or None,
        key_message=params.get("keyprotobufmessage", "").strip() or None,
    )
    if options.typed and not files_mode and not registry.get("url", "").strip():
        column = "valueFormat" if options.value_format != "binary" else "keyFormat"
        raise ValueError(
            f"Option 'schema.registry.url' must be specified for {column}="
            f"{options.format_of('value' if column == 'valueFormat' else 'key')}"
        )
    return options


# -------------------------------------------------------------------- options


@dataclass(frozen=True)
class SourceOptions:
    """Every read option, parsed (see :func:`parse_source_options`)."""

    strategy: Strategy
    starting: OffsetSpec
    ending: OffsetSpec
    bootstrap_servers: str | None = None
    path: str | None = None
    kafka_params: Mapping[str, str] = field(default_factory=dict)
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    # What a lookup by timestamp does when no record is at or after it: "error" or "latest".
    no_match_strategy: str = "error"
    group_id_prefix: str = "spark-kafka-source"
    poll_timeout_ms: int = 120_000
    # How long a lookup (metadata, offsets) waits for the cluster: the Java client's
    # default.api.timeout.ms or request.timeout.ms, the shorter of those set.
    broker_timeout_ms: int = 30_000
    # seglog's addition: commit each finished micro-batch's offsets to this consumer group.
    commit_group: str | None = None
    # seglog's addition: key and value typed from a schema registry.
    typed: TypedOptions = field(default_factory=TypedOptions)

    @property
    def files_mode(self) -> bool:
        """True when the source reads a log directory instead of a broker."""
        return self.path is not None


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {key.lower(): value for key, value in options.items()}


def _int(params: Mapping[str, str], key: str, name: str) -> int | None:
    if key not in params:
        return None
    text = params[key].strip()
    try:
        return int(text)
    except ValueError:
        raise ValueError(
            f"Invalid value '{text}' for option '{name}', must be an integer"
        ) from None


def _positive(params: Mapping[str, str], key: str, name: str) -> int | None:
    value = _int(params, key, name)
    if value is not None and value <= 0:
        raise ValueError(f"{name} must be positive")
    return value


def _bool(params: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    if key not in params:
        return default
    text = params[key].strip().lower()
    if text not in ("true", "false"):
        raise ValueError(
            f"Invalid value '{params[key]}' for option '{name}', must be true or false"
        )
    return text == "true"


# The Java consumer's settings that end a wait for an unreachable cluster: a call
# (partitionsFor, offsetsForTimes ...) gives up after default.api.timeout.ms, a
# request after request.timeout.ms.
_BROKER_TIMEOUTS = ("default.api.timeout.ms", "request.timeout.ms")
_DEFAULT_BROKER_TIMEOUT_MS = 30_000


def _broker_timeout_ms(kafka: Mapping[str, str]) -> int:
    """The shortest of :data:`_BROKER_TIMEOUTS` that is set (``kafka.*`` names without the
    prefix), else 30 s."""
    given = []
    for name in _BROKER_TIMEOUTS:
        if name in kafka:
            text = kafka[name].strip()
            if not text.isdigit() or int(text) <= 0:
                raise ValueError(
                    f"Invalid value '{text}' for Kafka option '{name}', must be a positive "
                    "number of milliseconds"
                )
            given.append(int(text))
    return min(given) if given else _DEFAULT_BROKER_TIMEOUT_MS


def parse_duration_ms(text: str) -> int:
    """A Spark time string (``"15m"``, ``"30s"``, ``"500"`` as ms) in milliseconds."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"Invalid duration '{text}' for option 'maxTriggerDelay'")
    return int(match.group(1)) * _DURATION_MS[(match.group(2) or "ms").lower()]


def _strategy(params: Mapping[str, str], files_mode: bool) -> Strategy:
    given = [(key, params[key]) for key in STRATEGY_KEYS if key in params]
    if not given:
        if files_mode:
            return None
        raise ValueError(
            "One of the following options must be specified for Kafka source: "
            f"{_STRATEGY_NAMES}. See the docs for more details."
        )
    if len(given) > 1:
        raise ValueError(
            "Only one of the following options can be specified for Kafka source: "
            f"{_STRATEGY_NAMES}. See the docs for more details."
        )
    key, value = given[0]
    if key == ASSIGN:
        if not value.strip().startswith("{"):
            raise ValueError(
                f"No topicpartitions to assign as specified value for option 'assign' is '{value}'"
            )
        return Assign(tuple(parse_assign(value)))
    if key == SUBSCRIBE:
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise ValueError(
                f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'"
            )
        return Subscribe(topics)
    pattern = value.strip()
    if not pattern:
        raise ValueError(
            "Pattern to subscribe is empty as specified value for option "
            f"'subscribePattern' is '{value}'"
        )
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"Invalid subscribePattern '{pattern}': {exc}") from None
    return SubscribePattern(pattern)


def _offset_spec(
    params: Mapping[str, str],
    global_key: str,
    by_timestamp_key: str,
    offsets_key: str,
    default: OffsetSpec,
) -> OffsetSpec:
    """Spark's ``getKafkaOffsetRangeLimit``: timestamp, then per-partition timestamps, then
    offsets."""
    if global_key in params:
        text = params[global_key].strip()
        try:
            return GlobalTimestamp(int(text))
        except ValueError:
            raise ValueError(f"Expected a single long value, got {text}") from None
    if by_timestamp_key in params:
        return SpecificTimestamps(parse_partition_timestamps(params[by_timestamp_key].strip()))
    if offsets_key in params:
        text = params[offsets_key].strip()
        if text.lower() == "latest":
            return Latest()
        if text.lower() == "earliest":
            return Earliest()
        return SpecificOffsets(parse_partition_offsets(text))
    return default


def _kafka_params(params: Mapping[str, str], refused: Mapping[str, str]) -> dict[str, str]:
    kafka = {
        key[len("kafka.") :]: value for key, value in params.items() if key.startswith("kafka.")
    }
    for name, message in refused.items():
        if name in kafka:
            raise ValueError(message)
    return kafka


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Parse and validate read options as Spark's Kafka source does for a batch or stream query.

    Raises ValueError with Spark's message for anything Spark refuses.
    """
    params = _lower(options)
    path = params.get("path") or None
    files_mode = path is not None
    if streaming:
        if _ENDING_OFFSETS in params:
            raise ValueError("ending offset not valid in streaming queries")
        if _ENDING_BY_TIMESTAMP in params or _ENDING_TIMESTAMP in params:
            raise ValueError("ending timestamp not valid in streaming queries")
    starting = _offset_spec(
        params,
        _STARTING_TIMESTAMP,
        _STARTING_BY_TIMESTAMP,
        _STARTING_OFFSETS,
        Latest() if streaming else Earliest(),
    )
    ending = _offset_spec(
        params, _ENDING_TIMESTAMP, _ENDING_BY_TIMESTAMP, _ENDING_OFFSETS, Latest()
    )
    if not streaming:
        _check_batch_bounds(starting, ending)

    strategy = _strategy(params, files_mode)
    min_partitions = _int(params, "minpartitions", "minPartitions")
    if min_partitions is not None and min_partitions <= 0:
        raise ValueError("minPartitions must be positive")
    java_kafka = _kafka_params(params, _UNSUPPORTED_CONSUMER)
    broker_timeout_ms = _broker_timeout_ms(java_kafka)
    kafka = translate(java_kafka, producer=False)
    bootstrap = kafka.get("bootstrap.servers")
    if bootstrap is not None and files_mode:
        raise ValueError(
            f"Both a path ('{path}', files mode) and 'kafka.bootstrap.servers' ('{bootstrap}', "
            "network mode) are set: set one. load(path) reads a log directory's segment files "
            "with no broker; without a path the source reads through the broker."
        )
    if bootstrap is None and not files_mode:
        raise ValueError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"
        )
    max_per_trigger = _positive(params, "maxoffsetspertrigger", "maxOffsetsPerTrigger")
    min_per_trigger = _positive(params, "minoffsetspertrigger", "minOffsetsPerTrigger")
    if (
        min_per_trigger is not None
        and max_per_trigger is not None
        and min_per_trigger > max_per_trigger
    ):
        raise ValueError(
            f"The value of minOffsetPerTrigger({min_per_trigger}) is higher than the "
            f"maxOffsetsPerTrigger({max_per_trigger})."
        )
    no_match = params.get(_BY_TIMESTAMP_STRATEGY, "error").strip().lower()
    if no_match not in ("error", "latest"):
        raise ValueError(
            f"Invalid value '{params[_BY_TIMESTAMP_STRATEGY]}' for option "
            "'startingOffsetsByTimestampStrategy', must be 'error' or 'latest'"
        )
    return SourceOptions(
        strategy=strategy,
        starting=starting,
        ending=ending,
        bootstrap_servers=bootstrap,
        path=path,
        kafka_params=kafka,
        fail_on_data_loss=_bool(params, "failondataloss", "failOnDataLoss", True),
        include_headers=_bool(params, "includeheaders", "includeHeaders", False),
        min_partitions=min_partitions,
        max_records_per_partition=_positive(
            params, "maxrecordsperpartition", "maxRecordsPerPartition"
        ),
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=parse_duration_ms(params.get("maxtriggerdelay", "15m")),
        no_match_strategy=no_match,
        group_id_prefix=params.get("groupidprefix", "spark-kafka-source"),
        poll_timeout_ms=_positive(params, "kafkaconsumer.polltimeoutms", "pollTimeoutMs")
        or 120_000,
        commit_group=_commit_group(params, streaming, files_mode),
        broker_timeout_ms=broker_timeout_ms,
        typed=parse_typed_options(params, files_mode=files_mode),
    )


def _commit_group(params: Mapping[str, str], streaming: bool, files_mode: bool) -> str | None:
    group = params.get("commitoffsetstogroup", "").strip() or None
    if group is not None and (not streaming or files_mode):
        raise ValueError(
            "Option 'commitOffsetsToGroup' applies only to streaming queries over a broker"
        )
    return group


def _check_batch_bounds(starting: OffsetSpec, ending: OffsetSpec) -> None:
    """Spark's ``validateBatchOptions``: a batch cannot start at latest or end at earliest."""
    if isinstance(starting, Latest):
        raise ValueError("starting offset can't be latest for batch queries on Kafka")
    if isinstance(starting, SpecificOffsets):
        for tp, offset in starting.offsets.items():
            if offset == LATEST:
                raise ValueError(
                    f"startingOffsets for {tp} can't be latest for batch queries on Kafka"
                )
    if isinstance(ending, Earliest):
        raise ValueError("ending offset can't be earliest for batch queries on Kafka")
    if isinstance(ending, SpecificOffsets):
        for tp, offset in ending.offsets.items():
            if offset == EARLIEST:
                raise ValueError(
                    f"ending offset for {tp} can't be earliest for batch queries on Kafka"
                )


# --------------------------------------------------------------------- writes


@dataclass(frozen=True)
class WriteOptions:
    """Every write option, parsed (see :func:`parse_write_options`)."""

    bootstrap_servers: str
    topic: str | None
    kafka_params: Mapping[str, str]
    exactly_once: bool = False
    """``exactlyOnce``: write each micro-batch partition in a Kafka transaction (streams only)."""
    typed: TypedOptions = field(default_factory=TypedOptions)
    """How typed ``key``/``value`` columns are encoded (``valueFormat`` ...)."""


# librdkafka settings that make a producer fast for bulk writes; the user's kafka.* win.
THROUGHPUT_DEFAULTS = {
    "linger.ms": "20",
    "batch.size": "1000000",
    "queue.buffering.max.messages": "1000000",
    "compression.type": "none",
}


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Parse and validate write options as Spark's Kafka sink does."""
    params = _lower(options)
    if params.get("path"):
        raise ValueError(
            "Writing to a log directory is not supported: seglog's data source writes through a "
            "broker (set 'kafka.bootstrap.servers')"
        )
    kafka = translate(_kafka_params(params, _UNSUPPORTED_PRODUCER), producer=True)
    bootstrap = kafka.get("bootstrap.servers")
    if bootstrap is None:
        raise ValueError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer"
        )
    topic = params.get("topic")
    if topic is not None and not topic.strip():
        raise ValueError("Option 'topic' must not be empty")
    exactly_once = _bool(params, "exactlyonce", "exactlyOnce", False)
    if exactly_once and "transactional.id" in kafka:
        raise ValueError(
            "Option 'kafka.transactional.id' cannot be set with 'exactlyOnce': the sink derives "
            "one transactional id per query and partition"
        )
    return WriteOptions(
        bootstrap,
        topic.strip() if topic else None,
        kafka,
        exactly_once,
        parse_typed_options(params, files_mode=False),
    )
