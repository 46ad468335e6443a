"""Broker settings under Kafka's names, from ``server.properties`` and ``--override`` flags."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from seglog.config import BrokerConfig, LogConfig
from seglog.errors import InvalidConfigError
from seglog.storage.log_dir import LogDirSettings, node_id


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
        """Build settings from Kafka property names (unknown names are kept, unused).

        Every known name is parsed and validated through the configuration table
        (:data:`seglog.config.BROKER_CONFIGS`): a bad value raises InvalidConfigError
        with Kafka's message, and the broker refuses to start.
        """
        config = BrokerConfig(properties)
        listeners = tuple(Listener.parse(x) for x in str(config["listeners"]).split(","))
        advertised = config["advertised.listeners"]
        log_dirs = config["log.dirs"] or config["log.dir"]
        node = node_id(config)
        return cls(
            node_id=node,
            listeners=listeners,
            advertised_listeners=(
                tuple(Listener.parse(x) for x in str(advertised).split(",")) if advertised else None
            ),
            log_dir=Path(str(log_dirs).split(",")[0].strip()),
            socket_request_max_bytes=config["socket.request.max.bytes"],
            auto_create_topics_enable=config["auto.create.topics.enable"],
            num_partitions=config["num.partitions"],
            cluster_id=config["cluster.id"],
            metrics_port=config["metrics.port"],
            log_defaults=LogConfig.from_broker_properties(config),
            log_dir_settings=LogDirSettings.from_properties(config),
            properties=dict(properties),
        )
