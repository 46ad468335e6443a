"""Setting names checked as Kafka checks them: unknown names, likely typos, and removed ones.

Kafka starts with a setting it does not know and warns (``The configuration
'x' was supplied but isn't a known config``): plugins read settings of their
own. seglog does the same for a name that resembles nothing it knows, but a
name one or two keystrokes away from a known one is almost always a typo
(``log.retention.hour``, ``listener``), and ignoring it would run the broker
with a setting the operator believes is in force; so such a name refuses to
start, naming the setting meant::

    `listener` is not a known setting; did you mean `listeners`?

The known names are seglog's table (:data:`seglog.config.BROKER_CONFIGS`,
listener-prefixed forms included) and :data:`KAFKA_IGNORED`: Kafka broker
settings that seglog accepts and has no use for (one node, no replication,
no ZooKeeper or controller quorum), so that a ``server.properties`` written for
Kafka starts unchanged.

Settings that would silently change *where* seglog listens or stores refuse
to start too: Kafka's removed ``port``/``host.name`` family and a topic-level
name given at broker level (``retention.ms`` for ``log.retention.ms``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from seglog.config import BROKER_CONFIGS, CONFIGS_BY_NAME, broker_config, is_sensitive
from seglog.errors import InvalidConfigError

KAFKA_IGNORED: frozenset[str] = frozenset(
    {
        # KRaft roles and the controller quorum: seglog has no separate controller.
        "process.roles",
        "controller.quorum.voters",
        "controller.quorum.bootstrap.servers",
        "controller.quorum.election.timeout.ms",
        "controller.quorum.fetch.timeout.ms",
        "controller.quorum.request.timeout.ms",
        "controller.listener.names",
        "inter.broker.listener.name",
        "security.inter.broker.protocol",
        "sasl.mechanism.inter.broker.protocol",
        "sasl.mechanism.controller.protocol",
        "metadata.log.dir",
        "metadata.log.segment.bytes",
        "metadata.log.segment.ms",
        "metadata.max.retention.bytes",
        "metadata.max.retention.ms",
        "initial.broker.registration.timeout.ms",
        "broker.heartbeat.interval.ms",
        "broker.session.timeout.ms",
        "broker.rack",
        "reserved.broker.max.id",
        "zookeeper.connect",
        # Socket buffers: the OS decides.
        "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes",
        "socket.listen.backlog.size",
        # Replication: one copy of each partition.
        "default.replication.factor",
        "min.insync.replicas",
        "unclean.leader.election.enable",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        "share.coordinator.state.topic.replication.factor",
        "share.coordinator.state.topic.min.isr",
        "replica.lag.time.max.ms",
        "replica.fetch.max.bytes",
        "replica.fetch.wait.max.ms",
        "replica.socket.timeout.ms",
        "replica.high.watermark.checkpoint.interval.ms",
        "auto.leader.rebalance.enable",
        "leader.imbalance.check.interval.seconds",
        "leader.imbalance.per.broker.percentage",
        "controlled.shutdown.enable",
        # Features seglog always has, or tunes itself.
        "delete.topic.enable",
        "log.message.downconversion.enable",
        "offsets.commit.timeout.ms",
        "offsets.load.buffer.size",
        "offsets.topic.compression.codec",
        "group.coordinator.rebalance.protocols",
        "transaction.partition.verification.enable",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "fetch.max.bytes",
        "producer.purgatory.purge.interval.requests",
        "fetch.purgatory.purge.interval.requests",
        "log.initial.task.delay.ms",
        "remote.log.storage.system.enable",
        "log.local.retention.ms",
        "log.local.retention.bytes",
        # Metrics reporters and quotas' sampling.
        "metric.reporters",
        "metrics.num.samples",
        "metrics.recording.level",
        "metrics.sample.window.ms",
        "kafka.metrics.reporters",
        "kafka.metrics.polling.interval.secs",
        "quota.window.num",
        "quota.window.size.seconds",
        # Java-side security plumbing (keystores are read by seglog itself).
        "ssl.endpoint.identification.algorithm",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.secure.random.implementation",
        "ssl.provider",
        "unstable.api.versions.enable",
        "unstable.feature.versions.enable",
    }
)
"""Kafka broker settings seglog accepts without using them (logged at start)."""

REMOVED: dict[str, str] = {
    "port": "listeners=PLAINTEXT://host:port",
    "host.name": "listeners=PLAINTEXT://host:port",
    "advertised.port": "advertised.listeners=PLAINTEXT://host:port",
    "advertised.host.name": "advertised.listeners=PLAINTEXT://host:port",
}
"""Kafka settings of where to listen that Kafka removed, and what replaced them.

Kafka 4 ignores them; a broker that listened elsewhere than the file says would
be worse than one that does not start.
"""


@dataclass(frozen=True)
class NameCheck:
    """What :func:`check_names` found: refusals, warnings and Kafka settings seglog ignores."""

    errors: tuple[str, ...]
    warnings: tuple[str, ...]
    ignored: tuple[str, ...]


def _distance(a: str, b: str, limit: int) -> int:
    """Edit distance of ``a`` and ``b`` (adjacent swaps count one), or ``limit + 1`` if above.

    Optimal string alignment over two rows of the table plus the one before
    (what a swap needs); the loop stops as soon as a row exceeds ``limit``.
    """
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    before: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else 1
            best = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                best = min(best, before[j - 2] + 1)
            current[j] = best
        if min(current) > limit:
            return limit + 1
        before, previous = previous, current
    return previous[-1]


def _limit(name: str) -> int:
    # One slip in a short name, two in a long one: "listener" for "listeners",
    # "auto.create.topic.enable" for "auto.create.topics.enable".
    return 1 if len(name) < 8 else 2


def _known_names() -> list[str]:
    return sorted(set(BROKER_CONFIGS) | KAFKA_IGNORED)


def closest(name: str) -> str | None:
    """The known setting ``name`` most likely misspells, or None when none is close."""
    if name.lower().startswith("listener.name."):
        # listener.name.<listener>.[<mechanism>.]<setting>: compare the setting part.
        parts = name.split(".")
        for cut in (3, 4):
            if len(parts) > cut:
                meant = closest(".".join(parts[cut:]))
                if meant is not None and meant.startswith(("ssl.", "sasl.")):
                    return ".".join(parts[:cut]) + "." + meant
        return None
    limit = _limit(name)
    best: tuple[int, str] | None = None
    for known in _known_names():
        distance = _distance(name.lower(), known, limit)
        if distance <= limit and (best is None or distance < best[0]):
            best = (distance, known)
    return None if best is None else best[1]


def check_names(names: Iterable[str]) -> NameCheck:
    """Check setting names as the broker does at start; see the module docstring."""
    errors: list[str] = []
    warnings: list[str] = []
    ignored: list[str] = []
    for name in names:
        if broker_config(name) is not None:
            continue
        if name in KAFKA_IGNORED:
            ignored.append(name)
        elif name in REMOVED:
            errors.append(
                f"`{name}` was removed from Kafka and seglog does not read it; "
                f"set {REMOVED[name]} instead"
            )
        elif name in CONFIGS_BY_NAME and CONFIGS_BY_NAME[name].broker_name is not None:
            errors.append(
                f"`{name}` is a topic setting; the broker's default for every topic "
                f"is `{CONFIGS_BY_NAME[name].broker_name}`"
            )
        elif (meant := closest(name)) is not None:
            errors.append(f"`{name}` is not a known setting; did you mean `{meant}`?")
        else:
            warnings.append(f"`{name}` is not a known setting (a plugin's?): it is ignored")
    return NameCheck(tuple(errors), tuple(warnings), tuple(ignored))


HIDDEN = "[hidden]"
"""What the start-up log shows instead of a secret (Kafka's word for it)."""


def _secret(name: str) -> bool:
    lowered = name.lower()
    if name in KAFKA_IGNORED:
        return False
    # Unknown names may hold a plugin's secret; any name that says so is one.
    return is_sensitive(name) or "password" in lowered or "secret" in lowered


def differing_from_defaults(properties: Mapping[str, str]) -> list[tuple[str, str]]:
    """``(name, shown value)`` of every given setting whose value is not its default.

    Secrets (PASSWORD settings, and names seglog does not know, which may be a
    plugin's secret) show as :data:`HIDDEN`; a value that does not parse is
    shown as given (the broker refuses it anyway).
    """
    out: list[tuple[str, str]] = []
    for name in sorted(properties):
        raw = properties[name]
        definition = broker_config(name)
        if definition is not None:
            try:
                if definition.parse(raw) == definition.default:
                    continue
            except InvalidConfigError:
                pass
        out.append((name, HIDDEN if _secret(name) else str(raw)))
    return out
