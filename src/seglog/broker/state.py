"""The broker's shared state: the log directory, settings, producer ids, waiting fetches.

Handlers get a :class:`BrokerState` and a request and return a response body.
Everything here runs on the event loop thread; storage calls made there are
synchronous and short (a write to the page cache). File work that takes longer
runs in a worker thread: fsyncs forced by ``flush.messages``, and the creation,
growth, reconfiguration and deletion of topics (auto-creation included).
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable

from seglog.broker.coordinator_runtime import CoordinatorRuntime
from seglog.broker.delayed_fetch import FetchPurgatory
from seglog.broker.dynamic_config import DynamicConfigs
from seglog.broker.group_config import GroupConfigs
from seglog.broker.nodes.cluster import Cluster
from seglog.broker.quotas import ClientQuotas
from seglog.broker.security.authorizer import Authorizer
from seglog.broker.security.failures import AuthenticationFailures
from seglog.broker.settings import BrokerSettings
from seglog.broker.share.service import ShareService
from seglog.broker.storage_errors import StorageErrorLog
from seglog.config import BrokerConfig
from seglog.coordinator.group_coordinator import create_coordinator
from seglog.coordinator.transaction_coordinator import create_transaction_coordinator
from seglog.storage.log_dir import LogDir
from seglog.storage.topic_admin import TopicAdministration

RECENT_TIMES = 1028
"""How many recent request times each API keeps for its percentiles.

Kafka's request-time histograms sample into a reservoir of 1,028 values
biased towards the last five minutes; a window of the last 1,028 requests
answers the same question (how slow are requests now) with one store per
request and no random numbers.
"""


class RequestTimes:
    """One API's request count, total time and its most recent times in ms."""

    __slots__ = ("_next", "count", "recent", "total_ms")

    def __init__(self) -> None:
        self.count = 0
        self.total_ms = 0.0
        #: Up to RECENT_TIMES times, overwritten oldest first once full.
        self.recent: list[float] = []
        self._next = 0

    def add(self, ms: float) -> None:
        """Count one request that took ``ms`` milliseconds."""
        self.count += 1
        self.total_ms += ms
        if len(self.recent) < RECENT_TIMES:
            self.recent.append(ms)
        else:
            self.recent[self._next] = ms
            self._next = (self._next + 1) % RECENT_TIMES


class TopicCounters:
    """What produce and fetch requests moved in and out of one topic."""

    __slots__ = ("bytes_in", "bytes_out", "fetch_requests", "messages_in", "produce_requests")

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.produce_requests = 0
        self.fetch_requests = 0


class Metrics:
    """Counters the request path keeps; ``/metrics`` reads them when scraped.

    Only the event loop writes them, each update an increment or a store; the
    scrape (in the metrics server's thread, see :mod:`seglog.broker.metrics`)
    copies each container in one step before reading it.
    """

    def __init__(self) -> None:
        #: Requests by (API name, version).
        self.requests: defaultdict[tuple[str, int], int] = defaultdict(int)
        #: Requests by (API name, error), NONE included, as Kafka's ErrorsPerSec.
        self.errors: defaultdict[tuple[str, str], int] = defaultdict(int)
        #: Handling time by API name.
        self.times: dict[str, RequestTimes] = {}
        #: Per topic; the broker-wide totals below outlive a deleted topic's entry.
        self.topics: dict[str, TopicCounters] = {}
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        #: Open connections and connections accepted, by listener name.
        self.connections: defaultdict[str, int] = defaultdict(int)
        self.connections_created: defaultdict[str, int] = defaultdict(int)

    def observe(self, api: str, version: int, error: str, seconds: float) -> None:
        """Count a request, its outcome and its handling time."""
        self.requests[(api, version)] += 1
        self.errors[(api, error)] += 1
        times = self.times.get(api)
        if times is None:
            times = self.times[api] = RequestTimes()
        times.add(seconds * 1000.0)

    def observe_also_as(self, name: str, version: int, seconds: float) -> None:
        """Count a request once more under another of Kafka's names (requests and times only).

        Kafka counts a fetch twice: as ``Fetch`` and as ``FetchConsumer`` (or
        ``FetchFollower``), and Kafka dashboards chart the latter.
        """
        self.requests[(name, version)] += 1
        times = self.times.get(name)
        if times is None:
            times = self.times[name] = RequestTimes()
        times.add(seconds * 1000.0)

    def topic(self, name: str) -> TopicCounters:
        """The counters of topic ``name`` (created at its first use)."""
        counters = self.topics.get(name)
        if counters is None:
            counters = self.topics[name] = TopicCounters()
        return counters

    def produced(self, topic: str, messages: int, size: int) -> None:
        """Count an append of ``messages`` records in ``size`` bytes by a produce request."""
        counters = self.topic(topic)
        counters.produce_requests += 1
        counters.messages_in += messages
        counters.bytes_in += size
        self.messages_in += messages
        self.bytes_in += size

    def fetched(self, topic: str, size: int) -> None:
        """Count ``size`` bytes of ``topic`` sent in a fetch response."""
        counters = self.topic(topic)
        counters.fetch_requests += 1
        counters.bytes_out += size
        self.bytes_out += size


class BrokerState:
    """What every handler may use."""

    def __init__(
        self,
        settings: BrokerSettings,
        log_dir: LogDir,
        cluster: Cluster | None = None,
        dynamic: DynamicConfigs | None = None,
        topic_admin: TopicAdministration | None = None,
    ) -> None:
        #: The settings in effect; replaced whole when a dynamic config changes.
        self.settings = settings
        self.log_dir = log_dir
        #: Where topics are created, grown, altered and deleted: the log directory
        #: itself unless given (one node of several forwards to the controller).
        self.topic_admin: TopicAdministration = log_dir if topic_admin is None else topic_admin
        #: The nodes sharing the log directory: a cluster of one for a broker alone.
        self.cluster = cluster or Cluster.alone(settings)
        #: The broker configs changed at run time (KIP-226); in memory only if not given.
        self.dynamic = (
            dynamic
            if dynamic is not None
            else DynamicConfigs(None, settings.node_id, settings.properties)
        )
        self.metrics = Metrics()
        # Storage errors answered to clients, logged with their cause (rate-limited).
        self.storage_errors = StorageErrorLog()
        #: Failed logins by listener and principal (the listeners' SASL settings share it).
        self.authentication_failures = AuthenticationFailures()
        #: The broker's authorizer (None: everything is allowed), for forwarded requests.
        self.authorizer: Authorizer | None = None
        self.quotas = ClientQuotas.load(log_dir.path, env=log_dir.env)
        self.cluster_id = settings.cluster_id or str(
            log_dir.meta_properties.get("cluster.id", "seglog")
        )
        self.started = time.time()
        #: The port the HTTP API listens on (None: not served); DescribeConfigs tells it.
        self.console_port: int | None = None
        #: The port the schema registry listens on (None: not served).
        self.schema_registry_port: int | None = None
        # Producer ids: unique per run, and above any id of an earlier run
        # (the clock in ms leaves room for a million producers per ms).
        self._producer_ids = itertools.count(int(time.time() * 1000) * 1000)
        #: Fetches waiting for data, by partition.
        self.fetch_purgatory = FetchPurgatory()
        # Partitions closed by a deletion (or released to another node) wake
        # their fetches, which answer the error at once, and take their share-partitions
        # with them; it happens on whichever thread deleted them.
        log_dir.on_partitions_closed = self._on_partitions_closed
        # What is kept by topic id (share groups' state) goes with a deleted topic.
        log_dir.on_topics_deleted = self._on_topics_deleted
        # Consumer groups; timers run on the event loop that serves the requests.
        self.coordinator = create_coordinator(
            log_dir,
            settings.properties,
            topic_admin=self.topic_admin,
            clock=time.time,
            call_later=lambda delay, callback: asyncio.get_running_loop().call_later(
                delay, callback
            ),
        )
        #: Group configs (KIP-848), kept in the log directory; the coordinator applies them.
        self.group_configs = GroupConfigs.load(
            log_dir.path, lambda: self.dynamic.effective(), env=log_dir.env
        )
        self.group_configs.on_change(self._apply_group_configs)
        self._apply_group_configs()
        #: Share groups' partitions, sessions and state (None: group.share.enable=false).
        self.shares: ShareService | None = None
        if BrokerConfig(settings.properties)["group.share.enable"]:
            self.shares = ShareService(
                log_dir,
                broker_props=lambda: self.dynamic.effective(),
                group_configs=self.group_configs,
                topic_admin=self.topic_admin,
                wake=self.fetch_purgatory.wake,
            )
            shares, env = self.shares, log_dir.env
            self.coordinator.share_partitions_assigned = lambda group_id, partitions: (
                shares.on_assigned(env, group_id, partitions)
            )
            self.coordinator.share_group_deleted = lambda group_id: shares.on_deleted(env, group_id)

        # Transactions: the coordinator's blocking operations run on its own
        # thread, one at a time, whoever asks, after __transaction_state is loaded.
        self.transactions = create_transaction_coordinator(
            log_dir,
            self.coordinator.store,
            dict(settings.properties),
            new_producer_id=self.next_producer_id,
            clock=time.time,
            topic_admin=self.topic_admin,
        )
        self.transactions_runtime = CoordinatorRuntime("seglog-transactions")
        self.transactions_stop = asyncio.Event()
        self.transactions_timer: asyncio.Task[None] | None = None

    def _apply_group_configs(self) -> None:
        """Hand the consumer groups' own settings to the coordinator (after every change)."""
        self.coordinator.group_overrides = self.group_configs.consumer_overrides()

    def _on_partitions_closed(self, keys: list[tuple[str, int]]) -> None:
        """Partitions no longer served here (any thread): wake their fetches, drop their shares."""
        self.fetch_purgatory.wake_threadsafe(keys)
        if self.shares is not None:
            self.shares.partitions_closed_threadsafe(keys)

    def _on_topics_deleted(self, topic_ids: list[uuid.UUID]) -> None:
        """Topics gone (any thread): the share state kept for them here goes too."""
        if self.shares is not None:
            self.shares.topics_deleted_threadsafe(self.log_dir.env, topic_ids)

    def next_producer_id(self) -> int:
        """A fresh producer id for InitProducerId (unique across the nodes)."""
        return self.cluster.producer_id(next(self._producer_ids))

    def topic_id(self, topic: str) -> uuid.UUID:
        """The topic's id (the zero uuid for unknown topics)."""
        info = self.log_dir.topic(topic)
        return info.topic_id if info is not None else uuid.UUID(int=0)

    async def notify_data(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        """Wake the fetches waiting on ``partitions`` that may now have enough.

        Called after what a partition offers readers changed: an append, a
        marker, a move of its log start. ``None``: a change of unknown scope;
        every waiting fetch checks. A coroutine so that another thread can
        hand it to the loop (``asyncio.run_coroutine_threadsafe``).
        """
        self.fetch_purgatory.wake(partitions)
