"""Broker settings under Kafka's names, from ``server.properties`` and ``--override`` flags."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from seglog.config import LogConfig
from seglog.errors import InvalidConfigError
from seglog.storage.log_dir import LogDirSettings


@dataclass(frozen=True)
class Listener:
    """``NAME://host:port``."""

    name: str
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Listener:
        """Parse one listener such as ``PLAINTEXT://127.0.0.1:9092``."""
        parts = urlsplit(text.strip())
        if not parts.scheme or parts.port is None:
            raise InvalidConfigError(f"invalid listener {text!r}: expected NAME://host:port")
        return cls(parts.scheme.upper(), parts.hostname or "", parts.port)


@dataclass(frozen=True)
class BrokerSettings:
    """Everything the broker reads from its configuration."""

    node_id: int = 1
    listeners: tuple[Listener, ...] = (Listener("PLAINTEXT", "127.0.0.1", 9092),)
    advertised_listeners: tuple[Listener, ...] | None = None
    log_dir: Path = Path("./data")
    socket_request_max_bytes: int = 104_857_600
    auto_create_topics_enable: bool = True
    num_partitions: int = 1
    cluster_id: str | None = None
    metrics_port: int | None = None
    log_defaults: LogConfig = field(default_factory=LogConfig)
    log_dir_settings: LogDirSettings = field(default_factory=LogDirSettings)
    properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def advertised(self) -> Listener:
        """The listener clients are told to connect to."""
        listener = (self.advertised_listeners or self.listeners)[0]
        if listener.host in ("", "0.0.0.0", "::"):
            return Listener(listener.name, "127.0.0.1", listener.port)
        return listener

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> BrokerSettings:
        """Build settings from Kafka property names (unknown names are kept, unused)."""

        def get(name: str, default: str) -> str:
            return str(properties.get(name, default)).strip()

        def integer(name: str, default: int) -> int:
            try:
                return int(get(name, str(default)))
            except ValueError:
                raise InvalidConfigError(
                    f"invalid value for {name}: {properties[name]!r}"
                ) from None

        listeners = tuple(
            Listener.parse(x) for x in get("listeners", "PLAINTEXT://127.0.0.1:9092").split(",")
        )
        advertised = properties.get("advertised.listeners")
        log_dirs = get("log.dirs", get("log.dir", "./data"))
        node_id = integer("node.id", integer("broker.id", 1))
        metrics = properties.get("metrics.port")
        dir_settings = LogDirSettings.from_properties({**properties, "node.id": str(node_id)})
        return cls(
            node_id=node_id,
            listeners=listeners,
            advertised_listeners=(
                tuple(Listener.parse(x) for x in str(advertised).split(",")) if advertised else None
            ),
            log_dir=Path(log_dirs.split(",")[0]),
            socket_request_max_bytes=integer("socket.request.max.bytes", 104_857_600),
            auto_create_topics_enable=get("auto.create.topics.enable", "true").lower() == "true",
            num_partitions=integer("num.partitions", 1),
            cluster_id=properties.get("cluster.id"),
            metrics_port=int(metrics) if metrics else None,
            log_defaults=LogConfig.from_broker_properties(properties),
            log_dir_settings=dir_settings,
            properties=dict(properties),
        )
