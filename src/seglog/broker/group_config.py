"""Group configs (KIP-848): settings of one consumer or share group, kept in the log directory.

Theory of operation
-------------------
A group config (the ``GROUP`` config resource, type 32) overrides, for one
group, a broker setting of the group coordinator: ``consumer.session.timeout.ms``
takes the place of ``group.consumer.session.timeout.ms`` for that group only.
A setting not given for a group is the broker's (``DEFAULT_CONFIG`` in
DescribeConfigs, as Kafka answers).

A change is checked as Kafka's ``GroupConfig.validate`` checks it: unknown
names first, then each value with its type and validator, then the resulting
settings of the group (its own over the broker's) against the broker's
bounds (``group.consumer.min.session.timeout.ms`` ...), with Kafka's
messages; Kafka answers all of them with INVALID_CONFIG.

The groups' settings live in one JSON file of the log directory,
``seglog-group-configs.json``, replaced atomically through the directory's
storage environment as the dynamic broker configs are
(:mod:`seglog.broker.dynamic_config`), so a crash leaves the old or the new
file whole. After every change (here or re-read after another node's) the
listeners are called: the broker hands the consumer groups' session timeouts
and heartbeat intervals to the group coordinator.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from seglog.config import (
    BrokerConfig,
    ConfigDef,
    Type,
    ValidOffsetReset,
    ValidString,
    at_least,
    between,
)
from seglog.errors import InvalidConfigError
from seglog.storage import io

logger = logging.getLogger(__name__)

GROUP_CONFIGS_FILE = "seglog-group-configs.json"

GROUP_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in (
        ConfigDef("consumer.session.timeout.ms", Type.INT, None, at_least(1)),
        ConfigDef("consumer.heartbeat.interval.ms", Type.INT, None, at_least(1)),
        ConfigDef("share.session.timeout.ms", Type.INT, None, at_least(1)),
        ConfigDef("share.heartbeat.interval.ms", Type.INT, None, at_least(1)),
        ConfigDef("share.record.lock.duration.ms", Type.INT, None, at_least(1000)),
        ConfigDef("share.auto.offset.reset", Type.STRING, "latest", ValidOffsetReset()),
        ConfigDef("share.delivery.count.limit", Type.INT, None, between(2, 10)),
        ConfigDef("share.partition.max.record.locks", Type.INT, None, between(100, 10_000)),
        ConfigDef("errors.deadletterqueue.topic.name", Type.STRING, ""),
        ConfigDef("errors.deadletterqueue.copy.record.enable", Type.BOOLEAN, False),
        ConfigDef(
            "share.isolation.level",
            Type.STRING,
            "read_uncommitted",
            ValidString(("read_committed", "read_uncommitted")),
        ),
    )
}
"""The group settings, under Kafka's names; a None default is the broker setting's."""

GROUP_DOCS: dict[str, str] = {
    "consumer.session.timeout.ms": (
        "How long a member of the consumer group may go without a heartbeat before it is "
        "removed from the group."
    ),
    "consumer.heartbeat.interval.ms": "How often the consumer group's members heartbeat.",
    "share.session.timeout.ms": (
        "How long a member of the share group may go without a heartbeat before it is removed."
    ),
    "share.heartbeat.interval.ms": "How often the share group's members heartbeat.",
    "share.record.lock.duration.ms": "How long a record acquired by a share group stays locked.",
    "share.auto.offset.reset": (
        "Where a share-partition starts when the group first reads it: latest, earliest, "
        "or by_duration:<ISO-8601 duration> (the first record written within that time)."
    ),
    "share.delivery.count.limit": (
        "How many times a record may be delivered to the share group before it is archived "
        "(and dead-lettered, with errors.deadletterqueue.topic.name)."
    ),
    "share.partition.max.record.locks": (
        "How many records of one partition the share group may hold in flight at once."
    ),
    "errors.deadletterqueue.topic.name": (
        "The topic that receives the share group's records that were rejected or reached the "
        "delivery count limit (KIP-1191); empty for none. It must start with the broker's "
        "errors.deadletterqueue.topic.name.prefix."
    ),
    "errors.deadletterqueue.copy.record.enable": (
        "Whether a dead-lettered record carries the original key and value, or only the "
        "headers that say where it came from and why."
    ),
    "share.isolation.level": (
        "Whether the share group reads transactional records before they are committed "
        "(read_uncommitted) or only once committed (read_committed)."
    ),
}
"""One line of documentation per group setting (DescribeConfigs' include_documentation)."""

BROKER_DEFAULTS: dict[str, str] = {
    "consumer.session.timeout.ms": "group.consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms": "group.consumer.heartbeat.interval.ms",
    "share.session.timeout.ms": "group.share.session.timeout.ms",
    "share.heartbeat.interval.ms": "group.share.heartbeat.interval.ms",
    "share.record.lock.duration.ms": "group.share.record.lock.duration.ms",
    "share.delivery.count.limit": "group.share.delivery.count.limit",
    "share.partition.max.record.locks": "group.share.partition.max.record.locks",
}
"""The broker setting that supplies the default of a group setting."""

# (group setting, broker bound, whether it is the lower bound), in Kafka's order of checks.
_BOUNDS: tuple[tuple[str, str, bool], ...] = (
    ("consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms", True),
    ("consumer.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms", False),
    ("consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms", True),
    ("consumer.session.timeout.ms", "group.consumer.max.session.timeout.ms", False),
    ("share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms", True),
    ("share.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms", False),
    ("share.session.timeout.ms", "group.share.min.session.timeout.ms", True),
    ("share.session.timeout.ms", "group.share.max.session.timeout.ms", False),
    ("share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms", True),
    ("share.record.lock.duration.ms", "group.share.max.record.lock.duration.ms", False),
    ("share.delivery.count.limit", "group.share.min.delivery.count.limit", True),
    ("share.delivery.count.limit", "group.share.max.delivery.count.limit", False),
)


def defaults(broker: Mapping[str, str]) -> dict[str, str]:
    """Every group setting's default, from the broker properties ``broker``."""
    config = BrokerConfig(broker)
    out: dict[str, str] = {}
    for name, definition in GROUP_CONFIGS.items():
        source = BROKER_DEFAULTS.get(name)
        value = config[source] if source is not None else definition.default
        out[name] = str(definition.to_string(value))
    return out


def resolved(broker: Mapping[str, str], group: Mapping[str, str]) -> dict[str, Any]:
    """The parsed settings of a group with configs ``group`` (the broker's where not given)."""
    props = defaults(broker)
    props.update(group)
    return {name: GROUP_CONFIGS[name].parse(value) for name, value in props.items()}


def validate(props: Mapping[str, str], broker: Mapping[str, str]) -> None:
    """Refuse ``props`` as a group's configs as Kafka does (InvalidConfigError, its messages)."""
    for name in props:
        if name not in GROUP_CONFIGS:
            raise InvalidConfigError(f"Unknown group config name: {name}")
    values = resolved(broker, props)
    config = BrokerConfig(broker)
    for name, bound, lower in _BOUNDS:
        limit = int(config[bound])
        if lower and values[name] < limit:
            raise InvalidConfigError(f"{name} must be greater than or equal to {bound}")
        if not lower and values[name] > limit:
            raise InvalidConfigError(f"{name} must be less than or equal to {bound}")
    for kind in ("consumer", "share"):
        session, heartbeat = f"{kind}.session.timeout.ms", f"{kind}.heartbeat.interval.ms"
        if values[session] <= values[heartbeat]:
            raise InvalidConfigError(f"{session} must be greater than {heartbeat}")


class GroupConfigs:
    """The configs of every group, kept in the log directory (in memory only without a path).

    ``broker`` returns the broker properties in effect (the bounds and defaults).
    Changes are written through ``env`` (blocking: fsync).
    """

    def __init__(
        self,
        path: Path | None,
        broker: Callable[[], Mapping[str, str]],
        *,
        env: io.Env | None = None,
    ) -> None:
        self._env = io.env_or_default(env)
        self.path = path
        self._broker = broker
        self.groups: dict[str, dict[str, str]] = {}
        self._listeners: list[Callable[[], None]] = []

    @classmethod
    def load(
        cls,
        log_dir: Path,
        broker: Callable[[], Mapping[str, str]],
        *,
        env: io.Env | None = None,
    ) -> GroupConfigs:
        """The group configs kept in ``log_dir`` (none without the file)."""
        configs = cls(log_dir / GROUP_CONFIGS_FILE, broker, env=env)
        configs._read()
        return configs

    def _read(self) -> None:
        if self.path is None:
            return
        raw = self._env.read_file(self.path)
        groups: dict[str, dict[str, str]] = {}
        if raw is not None:
            data = json.loads(raw.decode("utf-8"))
            for group, values in data.get("groups", {}).items():
                props = {str(k): str(v) for k, v in values.items()}
                # A group's settings that no longer fit (the broker's bounds changed)
                # are dropped with an error in the log: the broker's then apply.
                try:
                    validate(props, self._broker())
                except InvalidConfigError as exc:
                    logger.error("the configs of group %s are ignored: %s", group, exc)
                    continue
                groups[str(group)] = props
        self.groups = groups

    def reload(self) -> None:
        """Read the file again (another node changed it) and apply it."""
        self._read()
        self._notify()

    def of(self, group: str) -> dict[str, str]:
        """The configs set for ``group`` (empty: all the broker's)."""
        return dict(self.groups.get(group, {}))

    def check(self, props: Mapping[str, str]) -> None:
        """Check ``props`` as a group's new configs (raises InvalidConfigError)."""
        validate(props, self._broker())

    def replace(self, group: str, props: Mapping[str, str]) -> None:
        """Make ``props`` the configs of ``group``, save them, apply them. Blocking."""
        groups = {name: dict(values) for name, values in self.groups.items()}
        if props:
            groups[group] = dict(props)
        else:
            groups.pop(group, None)
        if self.path is not None:
            payload = {
                "version": 1,
                "groups": {
                    name: dict(sorted(values.items())) for name, values in sorted(groups.items())
                },
            }
            self._env.atomic_write_text(self.path, json.dumps(payload, indent=2) + "\n")
        self.groups = groups
        self._notify()

    def consumer_overrides(self) -> dict[str, dict[str, int]]:
        """The consumer and share groups' own session timeouts and heartbeat intervals,
        by group and under the group config's name."""
        out: dict[str, dict[str, int]] = {}
        for group, props in self.groups.items():
            values: dict[str, int] = {
                name: int(GROUP_CONFIGS[name].parse(props[name]))
                for name in (
                    "consumer.session.timeout.ms",
                    "consumer.heartbeat.interval.ms",
                    "share.session.timeout.ms",
                    "share.heartbeat.interval.ms",
                )
                if name in props
            }
            if values:
                out[group] = values
        return out

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after every change (here or read from another node)."""
        self._listeners.append(callback)

    def _notify(self) -> None:
        for callback in self._listeners:
            try:
                callback()
            except Exception:
                # The file is written already: one listener failing must not stop the others.
                logger.exception("applying the group configs failed")
