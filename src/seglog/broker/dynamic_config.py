"""Dynamic broker configs (KIP-226): settings changed at run time, kept in the log directory.

Theory of operation
-------------------
A broker setting has up to four sources, in Kafka's order of precedence:

1. ``DYNAMIC_BROKER_CONFIG``: set at run time for one broker (the resource
   name is its node id);
2. ``DYNAMIC_DEFAULT_BROKER_CONFIG``: set at run time as the cluster-wide
   default (the resource name ``""``);
3. ``STATIC_BROKER_CONFIG``: ``server.properties`` and ``--override`` flags;
4. ``DEFAULT_CONFIG``: the table's default (:mod:`seglog.config`).

Only the settings the table marks ``dynamic`` may be changed; a per-broker
one only on one broker. A change is checked as Kafka's ``DynamicBrokerConfig``
checks it (non-dynamic names first, then each value with the table's parser,
then the per-broker ones at the default level) and refused with Kafka's
messages. Unlike Kafka, a name the table does not know is refused too: a typo
would otherwise be kept and silently do nothing.

Both levels live in one JSON file of the log directory,
``seglog-broker-configs.json``, replaced atomically (temporary file, fsync,
rename, directory fsync) through the directory's storage environment, so a
crash leaves the old or the new file whole. Several nodes share it as they
share the ACLs and the quotas (:mod:`seglog.broker.nodes.shared`): one node
changes it under the directory's admin lock and has the others re-read it.

The effective settings are the static ones overlaid with the default level,
then with this node's level; :func:`effective_settings` turns them into the
:class:`~seglog.broker.settings.BrokerSettings` fields that can change, which
the broker applies at once (:meth:`DynamicConfigs.apply` callbacks): new topic
defaults for every topic without an override, cleaner settings, the partition
count and auto-creation of later topics, connection limits.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from seglog.broker.settings import BrokerSettings, per_ip_overrides
from seglog.config import BrokerConfig, ConfigDef, Dynamic, LogConfig, broker_config
from seglog.errors import InvalidConfigError, SeglogError
from seglog.storage import io
from seglog.storage.log_dir import LogDirSettings

logger = logging.getLogger(__name__)

CONFIGS_FILE = "seglog-broker-configs.json"


class InvalidBrokerConfigError(SeglogError):
    """A dynamic broker config change Kafka refuses with INVALID_REQUEST (and this message)."""

    kafka_error = "INVALID_REQUEST"


def scala_set(names: Iterable[str]) -> str:
    """Names as Kafka's messages print them (a Scala ``Set``)."""
    return "Set(" + ", ".join(sorted(names)) + ")"


def definition_of(name: str) -> ConfigDef | None:
    """The table's definition of broker setting ``name`` (listener-prefixed names included)."""
    return broker_config(name)


def check_change(props: Mapping[str, str], per_broker: bool) -> None:
    """Refuse ``props`` as the dynamic configs of one broker (or the default) as Kafka does.

    Raises :class:`InvalidBrokerConfigError` with Kafka's messages: names that
    cannot change at run time, then a value that does not parse, then (at the
    cluster-wide level) names that can change only per broker.
    """
    unknown = [name for name in props if definition_of(name) is None]
    if unknown:
        raise InvalidBrokerConfigError(f"Unknown broker configs: {scala_set(unknown)}")
    static = [name for name in props if _mode(name) is None]
    if static:
        raise InvalidBrokerConfigError(
            f"Cannot update these configs dynamically: {scala_set(static)}"
        )
    for name, value in props.items():
        definition = definition_of(name)
        assert definition is not None
        try:
            definition.parse(value)
        except InvalidConfigError as exc:
            raise InvalidBrokerConfigError(str(exc)) from None
    if not per_broker:
        only_per_broker = [name for name in props if _mode(name) is Dynamic.PER_BROKER]
        if only_per_broker:
            raise InvalidBrokerConfigError(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {scala_set(only_per_broker)}"
            )


def _mode(name: str) -> Dynamic | None:
    definition = definition_of(name)
    return None if definition is None or definition.internal else definition.dynamic


def effective_settings(settings: BrokerSettings, props: Mapping[str, str]) -> BrokerSettings:
    """``settings`` with every field a dynamic config may change recomputed from ``props``.

    ``props`` are the effective properties (static, then the default level,
    then this broker's). Raises InvalidConfigError when they do not go together
    (the same checks as at start).
    """
    config = BrokerConfig(props)
    log_dir_settings = dataclasses.replace(
        LogDirSettings.from_properties(config), node_id=settings.log_dir_settings.node_id
    )
    return dataclasses.replace(
        settings,
        max_connections=config["max.connections"],
        max_connections_per_ip=config["max.connections.per.ip"],
        max_connections_per_ip_overrides=per_ip_overrides(
            config["max.connections.per.ip.overrides"] or ""
        ),
        auto_create_topics_enable=config["auto.create.topics.enable"],
        num_partitions=config["num.partitions"],
        log_defaults=LogConfig.from_broker_properties(config),
        log_dir_settings=log_dir_settings,
    )


class DynamicConfigs:
    """The dynamic configs of every broker sharing a log directory, and this broker's view.

    ``static`` are the properties the broker started with; ``node_id`` is
    this broker's id. Changes are written through ``env`` (blocking: fsync).
    """

    def __init__(
        self,
        path: Path | None,
        node_id: int,
        static: Mapping[str, str],
        *,
        env: io.Env | None = None,
    ) -> None:
        self._env = io.env_or_default(env)
        self.path = path
        self.node_id = node_id
        self.static: dict[str, str] = dict(static)
        self.default: dict[str, str] = {}
        self.brokers: dict[int, dict[str, str]] = {}
        self._listeners: list[Callable[[], None]] = []

    @classmethod
    def load(
        cls,
        log_dir: Path,
        node_id: int,
        static: Mapping[str, str],
        *,
        env: io.Env | None = None,
    ) -> DynamicConfigs:
        """The dynamic configs kept in ``log_dir`` (none without the file)."""
        configs = cls(log_dir / CONFIGS_FILE, node_id, static, env=env)
        configs._read()
        return configs

    def _read(self) -> None:
        if self.path is None:
            return
        raw = self._env.read_file(self.path)
        default: dict[str, str] = {}
        brokers: dict[int, dict[str, str]] = {}
        if raw is not None:
            data = json.loads(raw.decode("utf-8"))
            default = {str(k): str(v) for k, v in data.get("default", {}).items()}
            for node, values in data.get("brokers", {}).items():
                brokers[int(node)] = {str(k): str(v) for k, v in values.items()}
        # What no longer passes (a setting made static since, a value out of a
        # new range) is dropped with an error in the log, as Kafka drops it.
        self.default = _valid(default, per_broker=False, where="cluster-wide default")
        self.brokers = {
            node: _valid(values, per_broker=True, where=f"broker {node}")
            for node, values in brokers.items()
        }

    def reload(self) -> None:
        """Read the file again (another node changed it) and apply what changed."""
        self._read()
        self._notify()

    @property
    def mine(self) -> dict[str, str]:
        """This broker's own dynamic configs."""
        return dict(self.brokers.get(self.node_id, {}))

    def level(self, resource_name: str) -> dict[str, str]:
        """The dynamic configs of ``resource_name``: ``""`` the default, else a broker id."""
        if resource_name == "":
            return dict(self.default)
        return dict(self.brokers.get(int(resource_name), {}))

    def effective(
        self,
        default: Mapping[str, str] | None = None,
        mine: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """The properties in effect: static, then the default level, then this broker's."""
        props = dict(self.static)
        props.update(self.default if default is None else default)
        props.update(self.mine if mine is None else mine)
        return props

    def validate(self, resource_name: str, props: Mapping[str, str], base: BrokerSettings) -> None:
        """Check ``props`` as the new configs of ``resource_name`` (raises, changes nothing)."""
        per_broker = resource_name != ""
        check_change(props, per_broker)
        effective = self.effective(mine=props) if per_broker else self.effective(default=props)
        try:
            effective_settings(base, effective)
        except InvalidConfigError as exc:
            raise InvalidBrokerConfigError(str(exc)) from None

    def replace(self, resource_name: str, props: Mapping[str, str]) -> None:
        """Make ``props`` the configs of ``resource_name``, save them, apply them. Blocking."""
        default = dict(self.default)
        brokers = {node: dict(values) for node, values in self.brokers.items()}
        if resource_name == "":
            default = dict(props)
        elif props:
            brokers[int(resource_name)] = dict(props)
        else:
            brokers.pop(int(resource_name), None)
        self._save(default, brokers)
        self.default, self.brokers = default, brokers
        self._notify()

    def _save(self, default: Mapping[str, str], brokers: Mapping[int, Mapping[str, str]]) -> None:
        if self.path is None:
            return
        payload = {
            "version": 1,
            "default": dict(sorted(default.items())),
            "brokers": {
                str(node): dict(sorted(values.items()))
                for node, values in sorted(brokers.items())
                if values
            },
        }
        self._env.atomic_write_text(self.path, json.dumps(payload, indent=2) + "\n")

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after every change (here or read from another node)."""
        self._listeners.append(callback)

    def _notify(self) -> None:
        for callback in self._listeners:
            try:
                callback()
            except Exception:
                # The file is written already: a setting that cannot be applied here
                # must not stop the others from being applied.
                logger.exception("applying the dynamic broker configs failed")


def _valid(props: Mapping[str, str], *, per_broker: bool, where: str) -> dict[str, str]:
    kept: dict[str, str] = {}
    for name, value in props.items():
        try:
            check_change({name: value}, per_broker)
        except InvalidBrokerConfigError as exc:
            logger.error("dynamic config %s of the %s is ignored: %s", name, where, exc)
            continue
        kept[name] = value
    return kept
