"""Kafka's configuration names, defaults and parsing.

Topic-level log configs are described once in :data:`TOPIC_CONFIGS`: their
Kafka name (``segment.bytes``), the broker-level synonym that supplies the
default (``log.segment.bytes``), the type and the default Kafka 4.x uses. A
:class:`LogConfig` is the resolved set for one topic: topic overrides, over
broker settings, over Kafka's defaults.

``server.properties`` files are parsed with Java's ``.properties`` rules for
the common cases (``#``/``!`` comments, ``=``/``:``/space separators,
backslash line continuation).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seglog.errors import InvalidConfigError

LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One topic-level config: its names, type, default and lowest valid value."""

    name: str
    broker_name: str
    type: type
    default: Any
    minimum: float | None = None
    choices: tuple[str, ...] | None = None

    @property
    def attr(self) -> str:
        """The Python attribute name on :class:`LogConfig`."""
        return self.name.replace(".", "_")


TOPIC_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef("cleanup.policy", "log.cleanup.policy", str, "delete"),
    ConfigDef(
        "compression.type",
        "compression.type",
        str,
        "producer",
        choices=("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
    ),
    ConfigDef("delete.retention.ms", "log.cleaner.delete.retention.ms", int, 86_400_000, 0),
    ConfigDef("file.delete.delay.ms", "log.segment.delete.delay.ms", int, 60_000, 0),
    ConfigDef("flush.messages", "log.flush.interval.messages", int, LONG_MAX, 1),
    ConfigDef("flush.ms", "log.flush.interval.ms", int, LONG_MAX, 0),
    ConfigDef("index.interval.bytes", "log.index.interval.bytes", int, 4096, 0),
    ConfigDef("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", int, LONG_MAX, 1),
    ConfigDef("max.message.bytes", "message.max.bytes", int, 1_048_588, 0),
    ConfigDef(
        "message.timestamp.type",
        "log.message.timestamp.type",
        str,
        "CreateTime",
        choices=("CreateTime", "LogAppendTime"),
    ),
    ConfigDef(
        "message.timestamp.before.max.ms",
        "log.message.timestamp.before.max.ms",
        int,
        LONG_MAX,
        0,
    ),
    ConfigDef(
        "message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms", int, 3_600_000, 0
    ),
    ConfigDef("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio", float, 0.5, 0),
    ConfigDef("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", int, 0, 0),
    ConfigDef("preallocate", "log.preallocate", bool, False),
    ConfigDef("retention.bytes", "log.retention.bytes", int, -1),
    ConfigDef("retention.ms", "log.retention.ms", int, 604_800_000, -1),
    # Kafka 4.0 raised the floor of segment.bytes to 1 MiB (KIP-1030); seglog keeps a
    # lower floor so that tests and small deployments can roll often.
    ConfigDef("segment.bytes", "log.segment.bytes", int, 1_073_741_824, 14),
    ConfigDef("segment.index.bytes", "log.index.size.max.bytes", int, 10_485_760, 4),
    ConfigDef("segment.jitter.ms", "log.roll.jitter.ms", int, 0, 0),
    ConfigDef("segment.ms", "log.roll.ms", int, 604_800_000, 1),
)

CONFIGS_BY_NAME: dict[str, ConfigDef] = {c.name: c for c in TOPIC_CONFIGS}
CONFIGS_BY_BROKER_NAME: dict[str, ConfigDef] = {c.broker_name: c for c in TOPIC_CONFIGS}

# Broker synonyms in coarser units: Kafka lets log.retention.hours/minutes and
# log.roll.hours stand in for the millisecond names (the finest one given wins).
_COARSE_SYNONYMS: dict[str, tuple[str, int]] = {
    "log.retention.minutes": ("log.retention.ms", 60_000),
    "log.retention.hours": ("log.retention.ms", 3_600_000),
    "log.roll.hours": ("log.roll.ms", 3_600_000),
    "log.roll.jitter.hours": ("log.roll.jitter.ms", 3_600_000),
}


def parse_value(definition: ConfigDef, raw: object) -> Any:
    """Convert ``raw`` (a string from a file or request, or a Python value) to the config's type.

    Raises :class:`InvalidConfigError` naming the config when the value does not fit.
    """
    try:
        if definition.type is bool:
            if isinstance(raw, bool):
                value: Any = raw
            elif str(raw).strip().lower() in ("true", "false"):
                value = str(raw).strip().lower() == "true"
            else:
                raise ValueError(raw)
        elif definition.type is int:
            if isinstance(raw, bool):
                raise ValueError(raw)
            value = int(str(raw).strip())
        elif definition.type is float:
            value = float(str(raw).strip())
        else:
            value = str(raw).strip()
    except ValueError:
        raise InvalidConfigError(
            f"Invalid value {raw!r} for configuration {definition.name}: "
            f"expected {definition.type.__name__}"
        ) from None
    if definition.minimum is not None and value < definition.minimum:
        raise InvalidConfigError(
            f"Invalid value {value} for configuration {definition.name}: "
            f"value must be at least {definition.minimum}"
        )
    if definition.choices is not None and value not in definition.choices:
        raise InvalidConfigError(
            f"Invalid value {value} for configuration {definition.name}: "
            f"must be one of {', '.join(definition.choices)}"
        )
    if definition.name == "cleanup.policy":
        parts = [p.strip() for p in value.split(",") if p.strip()]
        if not parts or any(p not in ("delete", "compact") for p in parts):
            raise InvalidConfigError(
                f"Invalid value {value} for configuration cleanup.policy: "
                "must be delete, compact or both, comma-separated"
            )
        value = ",".join(sorted(set(parts), key=parts.index))
    return value


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
        """Build a config from topic-level ``overrides`` (Kafka names) over ``defaults``."""
        base = defaults if defaults is not None else cls()
        changes: dict[str, Any] = {}
        for name, raw in overrides.items():
            definition = CONFIGS_BY_NAME.get(name)
            if definition is None:
                raise InvalidConfigError(f"Unknown topic config name: {name}")
            changes[definition.attr] = parse_value(definition, raw)
        return dataclasses.replace(base, **changes)

    @classmethod
    def from_broker_properties(cls, properties: Mapping[str, object]) -> LogConfig:
        """Build broker-level defaults from ``log.*`` properties; other keys are ignored."""
        resolved: dict[str, object] = {}
        # Coarse synonyms first so that the finer-grained name overrides them.
        for name, (target, factor) in _COARSE_SYNONYMS.items():
            if name in properties:
                try:
                    resolved[target] = int(str(properties[name]).strip()) * factor
                except ValueError:
                    raise InvalidConfigError(
                        f"Invalid value {properties[name]!r} for configuration {name}"
                    ) from None
        for name, raw in properties.items():
            if name in CONFIGS_BY_BROKER_NAME:
                resolved[name] = raw
        changes: dict[str, Any] = {}
        for name, raw in resolved.items():
            definition = CONFIGS_BY_BROKER_NAME[name]
            value = parse_value(definition, raw)
            # Kafka treats a negative log.retention.ms as "unlimited".
            if definition.name == "retention.ms" and value < 0:
                value = -1
            changes[definition.attr] = value
        return dataclasses.replace(cls(), **changes)

    def to_properties(self) -> dict[str, str]:
        """Every topic config as Kafka name → string value (Kafka's textual form)."""
        out: dict[str, str] = {}
        for definition in TOPIC_CONFIGS:
            value = getattr(self, definition.attr)
            out[definition.name] = str(value).lower() if isinstance(value, bool) else str(value)
        return out

    def overrides_against(self, defaults: LogConfig) -> dict[str, str]:
        """The Kafka names whose value differs from ``defaults``, as strings."""
        mine, theirs = self.to_properties(), defaults.to_properties()
        return {k: v for k, v in mine.items() if theirs[k] != v}


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
