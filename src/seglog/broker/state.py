"""The broker's shared state: the log directory, settings, producer ids, fetch waiters.

Handlers get a :class:`BrokerState` and a request and return a response body.
Everything here runs on the event loop thread; storage calls made there are
synchronous and short (a write to the page cache). File work that takes longer
runs in a worker thread: fsyncs forced by ``flush.messages``, and the creation,
growth, reconfiguration and deletion of topics (auto-creation included).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import contextvars
import itertools
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from seglog.broker.dynamic_config import DynamicConfigs
from seglog.broker.nodes.cluster import Cluster
from seglog.broker.quotas import ClientQuotas
from seglog.broker.settings import BrokerSettings
from seglog.broker.storage_errors import StorageErrorLog
from seglog.coordinator.group_coordinator import create_coordinator
from seglog.coordinator.transaction_coordinator import create_transaction_coordinator
from seglog.storage.log_dir import LogDir

CLIENT_HOST: contextvars.ContextVar[str] = contextvars.ContextVar("client_host", default="unknown")
"""The address of the client whose request is being handled, as Kafka shows it ("/10.0.0.7").

Each connection is served by its own asyncio task, which sets this once; the
handlers of that connection's requests read it (DescribeGroups shows it).
"""


@dataclass
class Metrics:
    """Counters exported on ``/metrics`` in Prometheus format."""

    bytes_in: int = 0
    bytes_out: int = 0
    requests: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    #: Per API, how many requests fell in each bucket (not cumulative; the
    #: /metrics page adds them up, as Prometheus histograms are).
    latency_buckets: dict[str, list[int]] = field(default_factory=dict)
    latency_sum: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    connections: int = 0

    BUCKETS: tuple[float, ...] = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 1.0, 5.0)

    def observe(self, api: str, error: str, seconds: float) -> None:
        """Count a request and its latency."""
        self.requests[(api, error)] += 1
        buckets = self.latency_buckets.get(api)
        if buckets is None:
            buckets = self.latency_buckets[api] = [0] * (len(self.BUCKETS) + 1)
        buckets[bisect.bisect_left(self.BUCKETS, seconds)] += 1
        self.latency_sum[api] += seconds


class BrokerState:
    """What every handler may use."""

    def __init__(
        self,
        settings: BrokerSettings,
        log_dir: LogDir,
        cluster: Cluster | None = None,
        dynamic: DynamicConfigs | None = None,
    ) -> None:
        #: The settings in effect; replaced whole when a dynamic config changes.
        self.settings = settings
        self.log_dir = log_dir
        #: The other nodes sharing the log directory (None: this broker is alone).
        self.cluster = cluster
        #: The broker configs changed at run time (KIP-226); in memory only if not given.
        self.dynamic = (
            dynamic
            if dynamic is not None
            else DynamicConfigs(None, settings.node_id, settings.properties)
        )
        self.metrics = Metrics()
        # Storage errors answered to clients, logged with their cause (rate-limited).
        self.storage_errors = StorageErrorLog()
        self.quotas = ClientQuotas.load(log_dir.path, env=log_dir.env)
        self.cluster_id = settings.cluster_id or str(
            log_dir.meta_properties.get("cluster.id", "seglog")
        )
        self.started = time.time()
        # Producer ids: unique per run, and above any id of an earlier run
        # (the clock in ms leaves room for a million producers per ms).
        self._producer_ids = itertools.count(int(time.time() * 1000) * 1000)
        self._data_arrived = asyncio.Condition()
        self._data_waiters = 0
        # Consumer groups; timers run on the event loop that serves the requests.
        self.coordinator = create_coordinator(
            log_dir,
            settings.properties,
            clock=time.time,
            call_later=lambda delay, callback: asyncio.get_running_loop().call_later(
                delay, callback
            ),
        )

        # Transactions: the coordinator's blocking calls run in a worker thread,
        # one at a time (the lock), after __transaction_state is loaded.
        self.transactions = create_transaction_coordinator(
            log_dir,
            self.coordinator.store,
            dict(settings.properties),
            new_producer_id=self.next_producer_id,
            clock=time.time,
        )
        self.transactions_lock = asyncio.Lock()
        self.transactions_stop = asyncio.Event()
        self.transactions_timer: asyncio.Task[None] | None = None

    def next_producer_id(self) -> int:
        """A fresh producer id for InitProducerId (unique across the nodes)."""
        if self.cluster is not None:
            return self.cluster.producer_id(next(self._producer_ids))
        return next(self._producer_ids)

    def topic_id(self, topic: str) -> uuid.UUID:
        """The topic's id (the zero uuid for unknown topics)."""
        info = self.log_dir.topic(topic)
        return info.topic_id if info is not None else uuid.UUID(int=0)

    async def notify_data(self) -> None:
        """Wake fetches waiting for data (called after every append)."""
        if not self._data_waiters:
            return  # the common case under produce load: nobody to wake
        async with self._data_arrived:
            self._data_arrived.notify_all()

    async def wait_for_data(self, timeout: float) -> None:
        """Wait until an append happens or ``timeout`` seconds pass."""
        if timeout <= 0:
            return
        self._data_waiters += 1
        try:
            async with self._data_arrived:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._data_arrived.wait(), timeout)
        finally:
            self._data_waiters -= 1
