"""Broker settings under Kafka's names, from ``server.properties`` and ``--override`` flags."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from seglog.broker.limits import DEFAULT_QUEUED_MAX_REQUEST_BYTES
from seglog.config import INT_MAX, BrokerConfig, LogConfig
from seglog.config_names import check_names
from seglog.errors import InvalidConfigError
from seglog.storage.log_dir import LogDirSettings, node_id

SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
"""Kafka's security protocols."""
SERVED_SECURITY_PROTOCOLS = SECURITY_PROTOCOLS
"""The ones seglog speaks: all of Kafka's."""
DEFAULT_SECURITY_PROTOCOL_MAP = {name: name for name in SECURITY_PROTOCOLS}
"""Kafka's default ``listener.security.protocol.map``: each protocol's own name."""

MAX_NODES = 1024
"""The most nodes one ``seglog serve`` runs (producer ids leave room for this many)."""


def node_count(value: object) -> int:
    """The ``nodes`` setting: a count from 1 to :data:`MAX_NODES`, or ``auto`` (the cores)."""
    text = str(value).strip().lower()
    if text == "auto":
        return max(1, min(MAX_NODES, os.cpu_count() or 1))
    try:
        count = int(text)
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_NODES:
        raise InvalidConfigError(
            f"Invalid value {value} for configuration nodes: "
            f"expected a number of nodes from 1 to {MAX_NODES}, or auto"
        )
    return count


_LISTENER = re.compile(r"([A-Za-z0-9_]+)://\[?([0-9a-zA-Z\-%._:]*?)\]?:([0-9]+)")


def _security_protocol_map(text: str) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL`` pairs, comma-separated."""
    result: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise InvalidConfigError(
                f"invalid value for listener.security.protocol.map: {item!r} "
                "(expected NAME:PROTOCOL)"
            )
        if protocol not in SECURITY_PROTOCOLS:
            raise InvalidConfigError(
                f"invalid value for listener.security.protocol.map: {item!r} "
                f"(unknown security protocol {protocol!r}; expected one of "
                f"{', '.join(sorted(SECURITY_PROTOCOLS))})"
            )
        result[name] = protocol
    return result


def per_ip_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs, comma-separated.

    Raises InvalidConfigError naming the pair that is not ``host:count``.
    """
    overrides: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        host, sep, count = item.rpartition(":")
        try:
            value = int(count)
        except ValueError:
            value = -1
        if not sep or not host or value < 0:
            raise InvalidConfigError(
                f"Invalid value {item} for configuration max.connections.per.ip.overrides: "
                "expected host:count"
            )
        overrides[host.strip("[]")] = value
    return overrides


@dataclass(frozen=True)
class Listener:
    """``NAME://host:port``."""

    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"
    """What the listener speaks, from ``listener.security.protocol.map``."""

    @classmethod
    def parse(cls, text: str, protocol_map: Mapping[str, str] | None = None) -> Listener:
        """Parse one listener such as ``PLAINTEXT://127.0.0.1:9092``.

        Its security protocol is the one ``protocol_map`` gives its name
        (Kafka's default map when None); a name the map lacks is refused, as
        Kafka refuses it.
        """
        # Kafka's own pattern: urlsplit would refuse names with an underscore
        # (SASL_SSL), which are not URL schemes.
        match = _LISTENER.fullmatch(text.strip())
        if match is None:
            raise InvalidConfigError(f"invalid listener {text!r}: expected NAME://host:port")
        name, host, port = match.group(1).upper(), match.group(2), int(match.group(3))
        if not 0 <= port <= 65535:
            raise InvalidConfigError(f"invalid listener {text!r}: port out of range")
        protocols = DEFAULT_SECURITY_PROTOCOL_MAP if protocol_map is None else protocol_map
        protocol = protocols.get(name)
        if protocol is None:
            raise InvalidConfigError(
                f"no security protocol defined for listener {name} (listener.security.protocol.map)"
            )
        return cls(name, host, port, protocol)

    @property
    def served(self) -> bool:
        """True when seglog speaks this listener's security protocol."""
        return self.security_protocol in SERVED_SECURITY_PROTOCOLS

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


@dataclass(frozen=True)
class BrokerSettings:
    """Everything the broker reads from its configuration."""

    node_id: int = 1
    listeners: tuple[Listener, ...] = (Listener("PLAINTEXT", "127.0.0.1", 9092),)
    advertised_listeners: tuple[Listener, ...] | None = None
    log_dir: Path = Path("./data")
    socket_request_max_bytes: int = 104_857_600
    queued_max_request_bytes: int | None = DEFAULT_QUEUED_MAX_REQUEST_BYTES
    """None: no bound (Kafka's -1)."""
    connections_max_idle_ms: int | None = 600_000
    """None: connections never expire (a negative setting, as in Kafka)."""
    max_connections: int = INT_MAX
    max_connections_per_ip: int = INT_MAX
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    auto_create_topics_enable: bool = True
    num_partitions: int = 1
    cluster_id: str | None = None
    metrics_host: str = "127.0.0.1"
    """Where ``/metrics`` listens (``metrics.host``; "" or 0.0.0.0: every interface)."""
    metrics_port: int | None = None
    console_host: str = "127.0.0.1"
    """Where the HTTP API listens (``console.host``)."""
    console_port: int | None = None
    """The HTTP API's port (``console.port``; None: not served, 0: any free port)."""
    console_write_enable: bool = False
    """Whether the HTTP API may write: produce, reset offsets (``console.write.enable``)."""
    schema_registry_host: str = "127.0.0.1"
    """Where the schema registry listens (``schema.registry.host``)."""
    schema_registry_port: int | None = None
    """The schema registry's port (``schema.registry.port``; None: not served, 0: any free)."""
    nodes: int = 1
    """How many broker processes (nodes) share the log directory (``nodes``)."""
    log_defaults: LogConfig = field(default_factory=LogConfig)
    log_dir_settings: LogDirSettings = field(default_factory=LogDirSettings)
    properties: Mapping[str, str] = field(default_factory=dict)

    def check_listeners(self) -> None:
        """Refuse listeners whose security protocol seglog does not speak.

        Serving plaintext on a listener configured for TLS or SASL would send
        what the operator meant to protect in the clear, to clients that
        cannot even talk to it: better not to start.
        """
        for listener in self.listeners:
            if not listener.served:
                raise InvalidConfigError(
                    f"listener {listener} uses security protocol {listener.security_protocol}, "
                    f"which seglog does not serve (it serves only "
                    f"{', '.join(sorted(SERVED_SECURITY_PROTOCOLS))}); refusing to start"
                )

    def check_advertised(self) -> None:
        """Refuse what Kafka refuses: duplicate names or ports, unknown advertised names."""
        names = [listener.name for listener in self.listeners]
        for name in names:
            if names.count(name) > 1:
                raise InvalidConfigError(
                    f"listeners: each listener must have a different name, {name} appears twice"
                )
        ports = [listener.port for listener in self.listeners if listener.port != 0]
        for port in ports:
            if ports.count(port) > 1:
                raise InvalidConfigError(
                    f"listeners: each listener must have a different port, {port} appears twice"
                )
        for listener in self.advertised_listeners or ():
            if listener.name not in names:
                raise InvalidConfigError(
                    f"advertised.listeners listener names must be equal to or a subset of the "
                    f"ones defined in listeners: {listener.name} is not in listeners"
                )

    def advertised_for(self, name: str | None) -> Listener:
        """The address given to clients connected to listener ``name`` (the first when None).

        ``advertised.listeners`` by the same name, else the listener itself; a
        wildcard or empty host is advertised as 127.0.0.1.
        """
        candidates = self.advertised_listeners or self.listeners
        listener = next((x for x in candidates if x.name == name), None)
        if listener is None:
            listener = next((x for x in self.listeners if x.name == name), candidates[0])
        if listener.host in ("", "0.0.0.0", "::"):
            return Listener(listener.name, "127.0.0.1", listener.port, listener.security_protocol)
        return listener

    def listener(self, name: str) -> Listener:
        """The listener named ``name``."""
        return next(x for x in self.listeners if x.name == name)

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> BrokerSettings:
        """Build settings from Kafka property names (unknown names are kept, unused).

        Every known name is parsed and validated through the configuration table
        (:data:`seglog.config.BROKER_CONFIGS`): a bad value raises InvalidConfigError
        with Kafka's message, and the broker refuses to start. So does a name
        that is likely a typo of a known one, or that would be ignored while it
        says where to listen (:func:`seglog.config_names.check_names`), and a
        ``log.dirs`` of several directories.
        """
        names = check_names(properties)
        if names.errors:
            # A likely typo or a setting of where to listen that would be ignored:
            # the broker would run otherwise than the operator believes.
            raise InvalidConfigError("\n".join(names.errors))
        config = BrokerConfig(properties)
        mapping = config["listener.security.protocol.map"]
        protocol_map = None if mapping is None else _security_protocol_map(str(mapping))
        listeners = tuple(
            Listener.parse(x, protocol_map) for x in str(config["listeners"]).split(",")
        )
        advertised = config["advertised.listeners"]
        log_dirs = config["log.dirs"] or config["log.dir"]
        directories = [d.strip() for d in str(log_dirs).split(",") if d.strip()]
        if not directories:
            raise InvalidConfigError("log.dirs names no directory: give one")
        if len(directories) > 1:
            # Kafka spreads partitions over every directory listed; seglog keeps
            # them in one, and storing all in the first would surprise whoever
            # sized the others.
            raise InvalidConfigError(
                f"log.dirs lists {len(directories)} directories ({log_dirs}); "
                "seglog stores in one log directory: give exactly one"
            )
        node = node_id(config)
        request_max = config["socket.request.max.bytes"]
        queued: int | None = config["queued.max.request.bytes"]
        if queued is not None and queued <= 0:
            queued = None  # Kafka's -1: no bound
        elif queued is not None and queued < request_max:
            raise InvalidConfigError(
                f"queued.max.request.bytes ({queued}) must be larger or equal to "
                f"socket.request.max.bytes ({request_max})"
            )
        idle_ms = config["connections.max.idle.ms"]
        return cls(
            node_id=node,
            listeners=listeners,
            advertised_listeners=(
                tuple(Listener.parse(x, protocol_map) for x in str(advertised).split(","))
                if advertised
                else None
            ),
            log_dir=Path(directories[0]),
            socket_request_max_bytes=request_max,
            queued_max_request_bytes=queued,
            connections_max_idle_ms=idle_ms if idle_ms >= 0 else None,
            max_connections=config["max.connections"],
            max_connections_per_ip=config["max.connections.per.ip"],
            max_connections_per_ip_overrides=per_ip_overrides(
                config["max.connections.per.ip.overrides"] or ""
            ),
            auto_create_topics_enable=config["auto.create.topics.enable"],
            num_partitions=config["num.partitions"],
            cluster_id=config["cluster.id"],
            metrics_host=config["metrics.host"] or "",
            metrics_port=config["metrics.port"],
            console_host=config["console.host"] or "",
            console_port=config["console.port"],
            console_write_enable=bool(config["console.write.enable"]),
            schema_registry_host=config["schema.registry.host"] or "",
            schema_registry_port=config["schema.registry.port"],
            nodes=node_count(config["nodes"]),
            log_defaults=LogConfig.from_broker_properties(config),
            log_dir_settings=LogDirSettings.from_properties(config),
            properties=dict(properties),
        )
