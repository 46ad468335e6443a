"""Client quotas (KIP-13, KIP-124, KIP-546): settings, persistence, rates and throttle times.

Theory of operation
-------------------
A quota is set on an *entity*: a user, a client id, or a user and a client id
together, each either named or the default (``None``). Its values are
``producer_byte_rate`` and ``consumer_byte_rate`` (bytes per second) and
``request_percentage`` (per cent of one thread's time). They are kept in
``seglog-client-quotas.json`` in the log directory, rewritten atomically on
every change, so they survive a restart as Kafka's quota records do.

A request is charged to the most specific entity that has a quota of its kind,
in Kafka's order (``/users/<user>/clients/<client-id>``, then
``/users/<user>/clients/<default>``, ``/users/<user>``,
``/users/<default>/clients/<client-id>``, ``/users/<default>/clients/<default>``,
``/users/<default>``, ``/clients/<client-id>``, ``/clients/<default>``). A
quota set for a default entity is a quota for each user (or client id) apart.

Each (kind, user, client id) has a :class:`Rate`: Kafka's sampled rate over
``quota.window.num`` (11) windows of ``quota.window.size.seconds`` (1 s),
counting at least ten whole windows so that a first burst is not read as a
huge rate. When recording a value takes the rate above the quota, the client
is throttled for the time that brings the rate back to the quota (Kafka's
``QuotaUtils.throttleTime``: (rate - quota) / quota x window), at most one
window for the request quota. The broker answers with that time in
``throttle_time_ms`` and delays the answer by as much.

Without SASL every client is the user ``ANONYMOUS``, as Kafka names an
unauthenticated principal.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from seglog.storage import io

logger = logging.getLogger(__name__)

QUOTAS_FILE = "seglog-client-quotas.json"
ANONYMOUS = "ANONYMOUS"

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# Each key and whether Kafka types it LONG (whole numbers) rather than DOUBLE.
CLIENT_KEYS: dict[str, bool] = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
}
IP_KEYS: dict[str, bool] = {CONNECTION_CREATION_RATE: False}

SAMPLES = 11
WINDOW_MS = 1000

Entity = tuple[tuple[str, str | None], ...]
"""An entity: its (type, name) pairs sorted by type; a name of None is the default."""


def make_entity(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """The canonical form of an entity."""
    return tuple(sorted(pairs))


@dataclass
class _Sample:
    start_ms: int
    value: float = 0.0


@dataclass
class Rate:
    """Kafka's ``Rate`` over ``SAMPLES`` windows of ``WINDOW_MS`` (a ``SampledStat``)."""

    samples: list[_Sample] = field(default_factory=list)

    def record(self, value: float, now_ms: int) -> None:
        """Add ``value`` to the current window (a new one once it has lasted WINDOW_MS)."""
        self._purge(now_ms)
        if not self.samples or now_ms - self.samples[-1].start_ms >= WINDOW_MS:
            self.samples.append(_Sample(now_ms))
            del self.samples[:-SAMPLES]
        self.samples[-1].value += value

    def _purge(self, now_ms: int) -> None:
        horizon = now_ms - SAMPLES * WINDOW_MS
        self.samples = [s for s in self.samples if s.start_ms + WINDOW_MS > horizon]

    def window_ms(self, now_ms: int) -> int:
        """The time the rate is measured over: at least SAMPLES - 1 whole windows."""
        self._purge(now_ms)
        oldest = self.samples[0].start_ms if self.samples else now_ms
        elapsed = now_ms - oldest
        full = elapsed // WINDOW_MS
        if full < SAMPLES - 1:
            elapsed += (SAMPLES - 1 - full) * WINDOW_MS
        return elapsed

    def value(self, now_ms: int) -> float:
        """The rate per second."""
        window = self.window_ms(now_ms)
        return sum(s.value for s in self.samples) / (window / 1000)


class ClientQuotas:
    """The quota settings of a broker, persisted in its log directory, and the clients' rates."""

    def __init__(
        self,
        path: Path | None,
        settings: Mapping[Entity, dict[str, float]],
        *,
        env: io.Env | None = None,
    ) -> None:
        # The log directory's environment: the quota file lives beside its partitions.
        self._env = io.env_or_default(env)
        self.path = path
        self._settings: dict[Entity, dict[str, float]] = {k: dict(v) for k, v in settings.items()}
        self._rates: dict[tuple[str, Entity], Rate] = {}

    @classmethod
    def load(cls, log_dir: Path, *, env: io.Env | None = None) -> ClientQuotas:
        """The quotas saved in ``log_dir`` (none if it has no quota file), read through ``env``."""
        env = io.env_or_default(env)
        path = log_dir / QUOTAS_FILE
        settings: dict[Entity, dict[str, float]] = {}
        raw = env.read_file(path)
        if raw is not None:
            data = json.loads(raw.decode("utf-8"))
            for entry in data.get("entries", []):
                entity = make_entity((k, v) for k, v in entry["entity"].items())
                settings[entity] = {k: float(v) for k, v in entry["values"].items()}
        return cls(path, settings, env=env)

    def reload(self) -> None:
        """Read the quota file again (another process sharing the directory changed it)."""
        if self.path is None:
            return
        fresh = ClientQuotas.load(self.path.parent, env=self._env)
        self._settings = fresh._settings
        self._rates.clear()

    @property
    def active(self) -> bool:
        """Whether any quota is set (nothing is measured otherwise)."""
        return bool(self._settings)

    def entries(self) -> dict[Entity, dict[str, float]]:
        """Every entity with quotas, and its values."""
        return {k: dict(v) for k, v in self._settings.items()}

    def alter(self, changes: Mapping[Entity, Mapping[str, float | None]]) -> None:
        """Set (a value) or remove (None) quotas, and save them. Blocking (fsync)."""
        settings = {k: dict(v) for k, v in self._settings.items()}
        for entity, ops in changes.items():
            values = settings.setdefault(entity, {})
            for key, value in ops.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
            if not values:
                del settings[entity]
        self._save(settings)
        self._settings = settings
        self._rates.clear()  # a changed quota may change which entity a client is charged to

    def _save(self, settings: Mapping[Entity, dict[str, float]]) -> None:
        if self.path is None:
            return
        payload = {
            "version": 1,
            "entries": [
                {"entity": dict(entity), "values": values} for entity, values in settings.items()
            ],
        }
        self._env.atomic_write_text(self.path, json.dumps(payload, indent=2) + "\n")

    def _resolve(self, key: str, user: str, client_id: str) -> tuple[float, Entity] | None:
        """The quota of kind ``key`` for (user, client id), and the entity its rate is kept for."""
        candidates: list[tuple[Entity, Entity]] = []
        for user_name in (user, None):
            for client_name in (client_id, None, "-"):
                lookup = [(USER, user_name)]
                charged = [(USER, user)]
                if client_name != "-":
                    lookup.append((CLIENT_ID, client_name))
                    charged.append((CLIENT_ID, client_id))
                candidates.append((make_entity(lookup), make_entity(charged)))
        # Kafka's order: user+client, user+default client, user, then the same with the
        # default user (the generated order above), then client id alone.
        order = [candidates[i] for i in (0, 1, 2, 3, 4, 5)]
        order += [
            (make_entity([(CLIENT_ID, client_id)]), make_entity([(CLIENT_ID, client_id)])),
            (make_entity([(CLIENT_ID, None)]), make_entity([(CLIENT_ID, client_id)])),
        ]
        for lookup_entity, charged_entity in order:
            values = self._settings.get(lookup_entity)
            if values is not None and key in values:
                return values[key], charged_entity
        return None

    def record(self, key: str, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Charge ``value`` to the client's quota of kind ``key``; the throttle time in ms."""
        found = self._resolve(key, user, client_id)
        if found is None:
            return 0
        bound, entity = found
        rate = self._rates.setdefault((key, entity), Rate())
        rate.record(value, now_ms)
        observed = rate.value(now_ms)
        if observed <= bound:
            return 0
        throttle = round((observed - bound) / bound * rate.window_ms(now_ms))
        if key == REQUEST_PERCENTAGE:
            throttle = min(throttle, WINDOW_MS)  # Kafka bounds the request quota's throttle
        return int(throttle)
