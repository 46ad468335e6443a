"""DescribeConfigs: each value with its source, synonyms, type and documentation.

Everything is driven from the configuration table (:mod:`seglog.config`):
names, types, defaults and sensitivity. The source of a value and its
synonyms follow Kafka's ConfigHelper:

- a topic config's synonyms are its topic override (``TOPIC_CONFIG``), then
  the broker-level names that supply its default (``log.retention.ms``,
  ``log.retention.minutes``, ``log.retention.hours``): first those given in
  the broker's properties (``STATIC_BROKER_CONFIG``), then those with a
  default of their own (``DEFAULT_CONFIG``). Kafka then drops the leading
  synonyms not named as the config's own broker name, so ``retention.ms``
  with nothing set has no synonyms (``log.retention.ms`` has no default of
  its own in Kafka: it comes from ``log.retention.hours``).
- the value's source is the first synonym's, ``DEFAULT_CONFIG`` without one.

Broker-level names set at run time (:mod:`seglog.broker.dynamic_config`)
come first, in Kafka's order of precedence: this broker's
(``DYNAMIC_BROKER_CONFIG``), the cluster-wide default's
(``DYNAMIC_DEFAULT_BROKER_CONFIG``), then ``STATIC_BROKER_CONFIG`` and
``DEFAULT_CONFIG``. A broker config is read-only unless the table marks it
dynamic. The cluster-wide default resource (name ``""``) lists only the
configs set at that level, each with its dynamic-default synonyms only.

A group's configs (the GROUP resource, :mod:`seglog.broker.group_config`)
are every group setting: one set for the group comes first
(``DYNAMIC_GROUP_CONFIG``), then the broker setting that supplies its
default, with that setting's own synonyms.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from seglog.broker.group_config import BROKER_DEFAULTS, GROUP_CONFIGS, GROUP_DOCS, defaults
from seglog.broker.security.session import Session
from seglog.broker.state import BrokerState
from seglog.config import (
    BROKER_CONFIGS,
    CONFIGS_BY_NAME,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigDef,
    Type,
    broker_config,
    is_sensitive,
)
from seglog.errors import SeglogError
from seglog.protocol import error_codes
from seglog.protocol.bodies.admin import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeConfigsResponseResults,
    DescribeConfigsResponseResultsConfigs,
    DescribeConfigsResponseResultsConfigsSynonyms,
)
from seglog.protocol.headers import RequestHeader

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
GROUP_RESOURCE = 32

# Kafka's DescribeConfigsResponse.ConfigSource ids.
TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
DYNAMIC_GROUP_CONFIG = 8

# Kafka's DescribeConfigsResponse.ConfigType ids.
CONFIG_TYPES: dict[Type, int] = {
    Type.BOOLEAN: 1,
    Type.STRING: 2,
    Type.INT: 3,
    Type.SHORT: 4,
    Type.LONG: 5,
    Type.DOUBLE: 6,
    Type.LIST: 7,
    Type.CLASS: 8,
    Type.PASSWORD: 9,
}
UNKNOWN_TYPE = 0

# Broker names that stand for one another, finest first (DynamicBrokerConfig.brokerConfigSynonyms).
_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
_SYNONYMS: dict[str, tuple[str, ...]] = {name: group for group in _SYNONYM_GROUPS for name in group}
# The finest name of each group has no default of its own in Kafka (it comes from a
# coarser one), whatever default the table resolves for it.
_NO_OWN_DEFAULT = frozenset(group[0] for group in _SYNONYM_GROUPS)
_LISTENER_PREFIX = re.compile(r"listener\.name\.[^.]+\.(?:[^.]+\.)?(?P<base>(?:sasl|ssl)\..+)")

TOPIC_DOCS: dict[str, str] = {
    "cleanup.policy": (
        "How old log segments are discarded: delete (by retention time or size), compact "
        "(keep the latest record of each key), or both."
    ),
    "compression.type": (
        "The codec the topic's batches are stored with; producer keeps the producer's codec."
    ),
    "delete.retention.ms": (
        "How long the delete markers (tombstones) of a compacted topic are kept after cleaning."
    ),
    "file.delete.delay.ms": "How long a segment file waits before it is deleted from disk.",
    "flush.messages": "The number of appended messages that forces an fsync of the log.",
    "flush.ms": "The time after which appended messages are fsynced.",
    "index.interval.bytes": "How many bytes of records come between two offset index entries.",
    "max.compaction.lag.ms": "The longest a record may stay uncompacted in the log.",
    "max.message.bytes": "The largest record batch the topic accepts, in bytes.",
    "message.timestamp.type": (
        "Whether a record's timestamp is the producer's (CreateTime) or the broker's "
        "(LogAppendTime)."
    ),
    "message.timestamp.before.max.ms": (
        "How far behind the broker's clock a record's CreateTime timestamp may be."
    ),
    "message.timestamp.after.max.ms": (
        "How far ahead of the broker's clock a record's CreateTime timestamp may be."
    ),
    "min.cleanable.dirty.ratio": (
        "The ratio of uncleaned to total log size above which the cleaner compacts the log."
    ),
    "min.compaction.lag.ms": "The least time a record stays uncompacted in the log.",
    "preallocate": "Whether segment files are preallocated on disk when created.",
    "retention.bytes": (
        "The size a partition may grow to before old segments are deleted; -1 for no limit."
    ),
    "retention.ms": "How long a segment is kept before it is deleted; -1 for no limit.",
    "segment.bytes": "The size of a segment file, after which the log rolls a new one.",
    "segment.index.bytes": "The size of a segment's offset and time index files.",
    "segment.jitter.ms": (
        "The most random jitter subtracted from segment.ms, so that segments do not all "
        "roll at once."
    ),
    "segment.ms": "The time after which the log rolls a new segment, even if it is not full.",
}
"""One line of documentation per topic config (the broker synonym shares it)."""


_Config = DescribeConfigsResponseResultsConfigs
"""One setting in a DescribeConfigs answer."""
_Synonym = DescribeConfigsResponseResultsConfigsSynonyms
"""One source of a setting, finest first."""


def documentation(definition: ConfigDef) -> str | None:
    """The documentation of a topic config, or of the broker name that supplies its default."""
    if definition.name in TOPIC_DOCS:
        return TOPIC_DOCS[definition.name]
    topic = _TOPIC_BY_BROKER_NAME.get(definition.name)
    if topic is not None and topic in TOPIC_DOCS:
        return f"The default of the topic config {topic}: {TOPIC_DOCS[topic]}"
    return None


_TOPIC_BY_BROKER_NAME: dict[str, str] = {
    c.broker_name: c.name for c in TOPIC_CONFIGS if c.broker_name is not None
}


def broker_synonym_names(name: str) -> tuple[str, ...]:
    """The broker names that may set ``name``, finest first (listener overrides, then base)."""
    if name in _SYNONYMS:
        return _SYNONYMS[name]
    match = _LISTENER_PREFIX.fullmatch(name)
    if match is not None:
        return (name, match.group("base"))
    return (name,)


def _synonyms(name: str, state: BrokerState, sensitive: bool) -> list[_Synonym]:
    """Kafka's ConfigHelper.configSynonyms for broker name ``name``, in order of precedence."""
    names = broker_synonym_names(name)
    dynamic = state.dynamic
    found: list[_Synonym] = []
    for given, source in (
        (dynamic.mine, DYNAMIC_BROKER_CONFIG),
        (dynamic.default, DYNAMIC_DEFAULT_BROKER_CONFIG),
        (dynamic.static, STATIC_BROKER_CONFIG),
    ):
        for synonym in names:
            if synonym in given:
                value = None if sensitive else given[synonym]
                found.append(_Synonym(name=synonym, value=value, source=source))
    for synonym in names:
        definition = broker_config(synonym)
        if definition is None or definition.default is None or synonym in _NO_OWN_DEFAULT:
            continue
        value = None if sensitive else definition.to_string(definition.default)
        found.append(_Synonym(name=synonym, value=value, source=DEFAULT_CONFIG))
    # Kafka drops leading synonyms not named ``name`` (a listener override when the
    # base config is described, a coarser name's entries when the finer one is).
    while found and found[0]["name"] != name:
        found.pop(0)
    return found


def _entry(
    name: str,
    value: str | None,
    synonyms: list[_Synonym],
    definition: ConfigDef | None,
    *,
    read_only: bool,
    sensitive: bool,
    include_synonyms: bool,
    include_documentation: bool,
) -> _Config:
    source = synonyms[0]["source"] if synonyms else DEFAULT_CONFIG
    # (No is_default: DescribeConfigs v0 had it; from v1 on, config_source says it.)
    return _Config(
        name=name,
        value=None if sensitive else value,
        read_only=read_only,
        config_source=source,
        is_sensitive=sensitive,
        synonyms=synonyms if include_synonyms else [],
        config_type=CONFIG_TYPES.get(definition.type, UNKNOWN_TYPE)
        if definition is not None
        else UNKNOWN_TYPE,
        documentation=(documentation(definition) if include_documentation and definition else None),
    )


def topic_entries(
    state: BrokerState,
    values: Mapping[str, str],
    overrides: Mapping[str, object],
    *,
    include_synonyms: bool = False,
    include_documentation: bool = False,
) -> list[dict[str, Any]]:
    """The entries of a topic whose resolved config is ``values`` and overrides ``overrides``.

    Plain dicts: CreateTopics picks its own fields from them.
    """
    return [
        dict(entry)
        for entry in _topic_entries(
            state,
            values,
            overrides,
            include_synonyms=include_synonyms,
            include_documentation=include_documentation,
        )
    ]


def _topic_entries(
    state: BrokerState,
    values: Mapping[str, str],
    overrides: Mapping[str, object],
    *,
    include_synonyms: bool,
    include_documentation: bool,
) -> list[_Config]:
    out = []
    for name, value in sorted(values.items()):
        definition = CONFIGS_BY_NAME[name]
        synonyms: list[_Synonym] = []
        if name in overrides:
            synonyms.append(_Synonym(name=name, value=value, source=TOPIC_CONFIG))
        if definition.broker_name is not None:
            synonyms += _synonyms(definition.broker_name, state, definition.sensitive)
        out.append(
            _entry(
                name,
                value,
                synonyms,
                definition,
                read_only=False,
                sensitive=definition.sensitive,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
        )
    return out


def _describe_topic(
    state: BrokerState, name: str, include_synonyms: bool, include_documentation: bool
) -> list[_Config]:
    info = state.log_dir.topics().get(name)
    if info is None:
        raise SeglogError(f"topic '{name}' does not exist")
    values = state.log_dir.topic_config(name).to_properties()
    return _topic_entries(
        state,
        values,
        info.overrides,
        include_synonyms=include_synonyms,
        include_documentation=include_documentation,
    )


def _describe_broker(
    state: BrokerState, include_synonyms: bool, include_documentation: bool
) -> list[_Config]:
    """Every broker setting as in effect: the table's, then any other given; secrets as null."""
    given = state.dynamic.static
    config = BrokerConfig(state.dynamic.effective())
    log_defaults = {
        CONFIGS_BY_NAME[k].broker_name: v for k, v in state.log_dir.defaults.to_properties().items()
    }
    values: dict[str, str | None] = {}
    for name, known in BROKER_CONFIGS.items():
        if known.internal:
            continue
        # A log default is shown as resolved (log.retention.hours gives log.retention.ms).
        values[name] = log_defaults.get(name, known.to_string(config[name]))
    for name in given:
        values.setdefault(name, given[name])
    if state.console_port is not None:
        # The port bound, which is where clients find the API: this node's (node i
        # serves console.port + i), or the one chosen for console.port=0.
        values["console.port"] = str(state.console_port)
    if state.schema_registry_port is not None:
        values["schema.registry.port"] = str(state.schema_registry_port)
    out: list[_Config] = []
    for name, value in sorted(values.items()):
        # Kafka answers a secret (and a setting it cannot type) with a null value.
        sensitive = is_sensitive(name)
        definition = broker_config(name)
        out.append(
            _entry(
                name,
                value,
                _synonyms(name, state, sensitive),
                definition,
                read_only=definition is None or definition.dynamic is None,
                sensitive=sensitive,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
        )
    return out


def _describe_default(
    state: BrokerState, include_synonyms: bool, include_documentation: bool
) -> list[_Config]:
    """The cluster-wide default resource: only what is set at that level (Kafka's answer)."""
    out: list[_Config] = []
    for name, value in sorted(state.dynamic.default.items()):
        sensitive = is_sensitive(name)
        definition = broker_config(name)
        synonyms = [
            s
            for s in _synonyms(name, state, sensitive)
            if s["source"] == DYNAMIC_DEFAULT_BROKER_CONFIG
        ]
        out.append(
            _entry(
                name,
                value,
                synonyms,
                definition,
                read_only=definition is None or definition.dynamic is None,
                sensitive=sensitive,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
        )
    return out


def _describe_group(
    state: BrokerState, group: str, include_synonyms: bool, include_documentation: bool
) -> list[_Config]:
    """Every group setting of ``group``: its own where set, else the broker's."""
    own = state.group_configs.of(group)
    values = defaults(state.dynamic.effective())
    values.update(own)
    out: list[_Config] = []
    for name, value in sorted(values.items()):
        definition = GROUP_CONFIGS[name]
        synonyms: list[_Synonym] = []
        if name in own:
            synonyms.append(_Synonym(name=name, value=value, source=DYNAMIC_GROUP_CONFIG))
        broker_name = BROKER_DEFAULTS.get(name)
        if broker_name is not None:
            synonyms += _synonyms(broker_name, state, False)
        else:  # no broker setting supplies it: the group setting's own default
            default = definition.to_string(definition.default)
            synonyms.append(_Synonym(name=name, value=default, source=DEFAULT_CONFIG))
        entry = _entry(
            name,
            value,
            synonyms,
            definition,
            read_only=False,
            sensitive=False,
            include_synonyms=include_synonyms,
            include_documentation=False,
        )
        if include_documentation:
            entry["documentation"] = GROUP_DOCS[name]
        out.append(entry)
    return out


async def describe_configs(
    state: BrokerState, header: RequestHeader, body: DescribeConfigsRequest, session: Session
) -> DescribeConfigsResponse:
    """DescribeConfigs for topics, this broker and groups: sources, synonyms, documentation."""
    synonyms = body["include_synonyms"]
    docs = body.get("include_documentation", False)
    results: list[DescribeConfigsResponseResults] = []
    for resource in body["resources"]:
        kind, name = resource["resource_type"], resource["resource_name"]
        result = DescribeConfigsResponseResults(
            error_code=0,
            error_message=None,
            resource_type=kind,
            resource_name=name,
            configs=[],
        )
        keys = resource["configuration_keys"] or None
        try:
            if kind == TOPIC_RESOURCE:
                if not state.log_dir.has_topic(name):
                    result["error_code"] = error_codes.code_for("UNKNOWN_TOPIC_OR_PARTITION")
                    result["error_message"] = f"topic '{name}' does not exist"
                else:
                    result["configs"] = _describe_topic(state, name, synonyms, docs)
            elif kind == BROKER_RESOURCE:
                if name == "":
                    result["configs"] = _describe_default(state, synonyms, docs)
                elif name == str(state.settings.node_id):
                    result["configs"] = _describe_broker(state, synonyms, docs)
                else:
                    result["error_code"] = error_codes.code_for("INVALID_REQUEST")
                    result["error_message"] = (
                        f"Unexpected broker id, expected {state.settings.node_id} or empty "
                        f"string, but received {name}"
                    )
            elif kind == GROUP_RESOURCE:
                if name == "":
                    result["error_code"] = error_codes.code_for("INVALID_REQUEST")
                    result["error_message"] = "Group name must not be empty"
                else:
                    result["configs"] = _describe_group(state, name, synonyms, docs)
            else:
                result["error_code"] = error_codes.code_for("INVALID_REQUEST")
                result["error_message"] = f"Unsupported resource type: {kind}"
        except SeglogError as exc:  # a stored config that is no longer valid
            result["error_code"] = error_codes.code_for_exception(exc)
            result["error_message"] = str(exc)
        if keys is not None:
            result["configs"] = [c for c in result["configs"] if c["name"] in keys]
        results.append(result)
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
