"""The broker process: listen, serve, run background work, stop gracefully.

Start-up opens the log directory (recovering it after an unclean stop), starts
retention, delayed deletion, ``flush.ms`` and the compaction cleaner on
background threads, and listens on every listener. SIGTERM and SIGINT stop
accepting, close the connections, flush every partition, write the
checkpoints and the clean-shutdown marker.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import os
import signal
import time
from typing import Any

from seglog import __version__
from seglog.broker.connection import serve_connection
from seglog.broker.dispatch import NODES_LISTENER, handle_frame
from seglog.broker.dynamic_config import DynamicConfigs, effective_settings
from seglog.broker.handlers.groups import load_groups
from seglog.broker.handlers.transactions import stop_transaction_timers
from seglog.broker.http_api import partition_query, share_groups
from seglog.broker.http_api.auth import ConsoleSecurity
from seglog.broker.http_api.server import ConsoleServer
from seglog.broker.limits import Connections
from seglog.broker.metrics import MetricsServer, start_metrics_server
from seglog.broker.nodes import share as node_share
from seglog.broker.nodes import transactions as node_transactions
from seglog.broker.nodes.cluster import Cluster
from seglog.broker.nodes.control import NodeControl, open_member
from seglog.broker.schema_registry.metrics import RegistryCollector
from seglog.broker.schema_registry.server import RegistryServer
from seglog.broker.schema_registry.server import mount as mount_registry
from seglog.broker.schema_registry.store import OP as registry_op
from seglog.broker.schema_registry.store import RegistryStore
from seglog.broker.security.authorizer import Authorizer
from seglog.broker.security.failures import AuthenticationFailures
from seglog.broker.security.listener import ListenerSecurity
from seglog.broker.security.session import Session
from seglog.broker.settings import BrokerSettings
from seglog.broker.state import BrokerState
from seglog.config import BrokerConfig
from seglog.config_names import check_names, differing_from_defaults
from seglog.errors import InvalidConfigError
from seglog.storage import descriptors
from seglog.storage.log_dir import LogDir

logger = logging.getLogger(__name__)


class _AcceptErrors:
    """Logs accept failures for lack of descriptors once per interval, not once per retry.

    asyncio already stops accepting for a second after such a failure; what
    it also does is log an error with a traceback each time, which under a
    lasting shortage buries everything else in the log.
    """

    INTERVAL = 60.0

    def __init__(self) -> None:
        self._last = -self.INTERVAL
        self._suppressed = 0

    def handle(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if not (
            isinstance(exc, OSError)
            and exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
            and "accept" in str(context.get("message", ""))
        ):
            loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if now - self._last < self.INTERVAL:
            self._suppressed += 1
            return
        logger.error(
            "cannot accept connections: %s (%d descriptors open of %d; "
            "%d more such failures in the last %.0f s); retrying every second",
            exc.strerror,
            descriptors.open_count(),
            descriptors.limit(),
            self._suppressed,
            self.INTERVAL,
        )
        self._last = now
        self._suppressed = 0


def _log_settings(settings: BrokerSettings) -> None:
    """Say at start what this broker is: version, data directory, settings in force.

    Like Kafka's ``KafkaConfig values`` block, but only the settings that differ
    from their defaults, secrets hidden; then what seglog will not use.
    """
    logger.info(
        "seglog %s starting: node %d, data directory %s",
        __version__,
        settings.node_id,
        settings.log_dir.resolve(),
    )
    changed = differing_from_defaults(settings.properties)
    if changed:
        logger.info(
            "settings that differ from the defaults:\n%s",
            "\n".join(f"\t{name} = {value}" for name, value in changed),
        )
    names = check_names(settings.properties)
    for warning in names.warnings:
        logger.warning("%s", warning)
    if names.ignored:
        logger.info(
            "Kafka settings seglog has no use for (one node, no replication), ignored: %s",
            ", ".join(sorted(names.ignored)),
        )


class Broker:
    """A running broker; :meth:`serve` until :meth:`stop`."""

    def __init__(
        self,
        settings: BrokerSettings,
        cluster: Cluster | None = None,
        *,
        clean_shutdown: bool = False,
    ) -> None:
        """One node of ``cluster`` (by default a cluster of one: a broker alone).

        A node that shares its log directory is told by its supervisor whether
        its partitions were closed cleanly (``clean_shutdown``); alone, the
        clean-shutdown marker says.
        """
        self.cluster = cluster or Cluster.alone(settings)
        self.settings = self.cluster.node_settings(settings)
        settings = self.settings
        self._clean_shutdown = clean_shutdown
        self.log_dir: LogDir | None = None
        self._node: NodeControl | None = None
        self.state: BrokerState | None = None
        self._servers: list[asyncio.Server] = []
        self._stopped = asyncio.Event()
        self._connections: set[asyncio.Task[None]] = set()
        self._group_load: asyncio.Task[None] | None = None
        self._metrics: MetricsServer | None = None
        self._console: ConsoleServer | None = None
        self._registry: RegistryServer | None = None
        self._registry_store: RegistryStore | None = None
        self.connections = Connections(
            max_connections=settings.max_connections,
            max_connections_per_ip=settings.max_connections_per_ip,
            per_ip_overrides=dict(settings.max_connections_per_ip_overrides),
            queued_max_request_bytes=settings.queued_max_request_bytes,
            idle_ms=settings.connections_max_idle_ms,
        )

    async def start(self) -> None:
        """Open storage and start listening (InvalidConfigError for a listener not served).

        SIGTERM and SIGINT stop the broker from here on: one that arrives while it
        starts (as soon as a client can connect, say) stops it cleanly once started.
        """
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.stop)
        settings = self.settings
        settings.check_listeners()  # before anything is opened or bound
        settings.check_advertised()
        _log_settings(settings)
        config = BrokerConfig(settings.properties)
        authorizer = Authorizer.from_config(config, settings.log_dir)
        failures = AuthenticationFailures()
        secured = [
            ListenerSecurity.build(config, listener, settings.log_dir, authorizer, failures)
            for listener in settings.listeners
        ]
        before, after = descriptors.raise_soft_limit()
        if after != before:
            logger.info("open files limit raised from %d to %d", before, after)
        logger.info(
            "open files limit %d: %d kept in reserve for connections and serving",
            after,
            descriptors.reserve(),
        )
        asyncio.get_running_loop().set_exception_handler(_AcceptErrors().handle)
        # The configs changed at run time before this start apply from the first moment.
        dynamic = DynamicConfigs.load(settings.log_dir, settings.node_id, settings.properties)
        settings = self._with_dynamic(dynamic)
        node = self._node = open_member(
            self.cluster,
            settings.log_defaults,
            settings.log_dir_settings,
            clean_shutdown=self._clean_shutdown,
        )
        self.log_dir = node.log_dir
        node.start()
        self.log_dir.start_background()
        state = self.state = BrokerState(
            settings, self.log_dir, self.cluster, dynamic, topic_admin=node.topics
        )
        state.authentication_failures = failures
        state.authorizer = authorizer
        dynamic.on_change(self._apply_dynamic)
        node_transactions.install(state, node, asyncio.get_running_loop())
        node_share.install(state, node, asyncio.get_running_loop())

        def reload(request: dict[str, Any]) -> dict[str, Any]:
            # ACLs or client quotas changed on another node (see nodes.shared).
            if authorizer is not None:
                authorizer.reload()
            state.quotas.reload()
            state.dynamic.reload()
            state.group_configs.reload()
            return {"ok": True}

        node.handlers["reload"] = reload
        log_dir = self.log_dir
        # Another node's HTTP API asks about partitions this node leads (key lookups,
        # summaries, segments, records): one op for every question.
        node.handlers[partition_query.OP] = lambda request: partition_query.serve(log_dir, request)
        # A share group's records by state live in this node's share-partitions.
        share_groups.attach(log_dir, state.shares)
        registry_store = None
        if settings.schema_registry_port is not None or settings.console_port is not None:
            registry_store = self._registry_store = RegistryStore(state)
            # Another node's registry hands its changes to the writer (this node, if it
            # leads _schemas).
            node.handlers[registry_op] = registry_store.serve_forwarded
        peer_session = Session(NODES_LISTENER, between_nodes=True)

        async def from_peer(frame: memoryview) -> list[Any] | None:
            return await handle_frame(state, frame, peer_session)

        await node.listen(from_peer)
        self._group_load = asyncio.create_task(load_groups(self.state))
        self.connections.start_reaper()
        if settings.metrics_port is not None:
            # Before the listeners: once clients can connect, the page is there.
            # It runs off the loop, in prometheus_client's server thread (see
            # seglog.broker.metrics).
            self._metrics = start_metrics_server(
                self.state,
                settings.metrics_host,
                settings.metrics_port,
                [] if registry_store is None else [RegistryCollector(registry_store)],
            )
            logger.info(
                "metrics on http://%s:%d/metrics",
                settings.metrics_host or "0.0.0.0",
                self._metrics.port,
            )
        try:
            if settings.console_port is not None:
                # Before the listeners too; on the loop (aiohttp), its storage work in threads.
                console = self._console = ConsoleServer(
                    state,
                    ConsoleSecurity.of(secured, authorizer),
                    settings.console_host,
                    settings.console_port,
                    extra=None if registry_store is None else mount_registry(registry_store),
                )
                await console.start()
                state.console_port = console.port
                logger.info(
                    "HTTP API on %s://%s:%d/",
                    console.scheme,
                    settings.console_host or "0.0.0.0",
                    console.port,
                )
            if settings.schema_registry_port is not None:
                assert registry_store is not None
                await registry_store.start()
                registry = self._registry = RegistryServer(
                    state,
                    ConsoleSecurity.of(secured, authorizer),
                    registry_store,
                    settings.schema_registry_host,
                    settings.schema_registry_port,
                )
                await registry.start()
                state.schema_registry_port = registry.port
                logger.info(
                    "schema registry on %s://%s:%d/",
                    registry.scheme,
                    settings.schema_registry_host or "0.0.0.0",
                    registry.port,
                )
            for security in secured:
                listener = security.listener
                server = await asyncio.start_server(
                    functools.partial(self._on_connection, security),
                    listener.host or None,
                    listener.port,
                    reuse_address=True,
                    ssl=security.ssl_context,
                )
                self._servers.append(server)
                for sock in server.sockets:
                    logger.info(
                        "listening on %s (%s)",
                        sock.getsockname(),
                        listener.name
                        if listener.name == listener.security_protocol
                        else f"{listener.name}, {listener.security_protocol}",
                    )
        except BaseException:
            if self._metrics is not None:  # a listener could not bind: the page goes too
                self._metrics.close()
                self._metrics = None
            if self._console is not None:
                await self._console.close()
                self._console = None
            if self._registry is not None:
                await self._registry.close()
                self._registry = None
            raise

    def _with_dynamic(self, dynamic: DynamicConfigs) -> BrokerSettings:
        """The settings with ``dynamic``'s in effect (the static ones if they do not fit)."""
        try:
            settings = effective_settings(self.settings, dynamic.effective())
        except InvalidConfigError as exc:
            # Kafka starts with what it can apply and says why; so does seglog.
            logger.error("the dynamic broker configs could not be applied: %s", exc)
            return self.settings
        self.settings = settings
        self.connections.max_connections = settings.max_connections
        self.connections.max_connections_per_ip = settings.max_connections_per_ip
        self.connections.per_ip_overrides = dict(settings.max_connections_per_ip_overrides)
        return settings

    def _apply_dynamic(self) -> None:
        """Apply the dynamic configs as they now are (called after every change)."""
        assert self.state is not None and self.log_dir is not None
        settings = self._with_dynamic(self.state.dynamic)
        self.state.settings = settings
        self.log_dir.reconfigure(settings.log_defaults, settings.log_dir_settings)
        logger.info(
            "dynamic broker configs in effect: default %s, this broker %s",
            self.state.dynamic.default,
            self.state.dynamic.mine,
        )

    @property
    def port(self) -> int:
        """The port of the first listener (useful when configured as 0)."""
        return int(self._servers[0].sockets[0].getsockname()[1])

    async def _on_connection(
        self,
        security: ListenerSecurity,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        assert self.state is not None
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            await serve_connection(self.state, reader, writer, self.connections, security)
        except asyncio.CancelledError:
            pass  # the broker is shutting down
        finally:
            if task is not None:
                self._connections.discard(task)

    @property
    def console_port(self) -> int | None:
        """The port the HTTP API listens on (None: not served)."""
        return None if self.state is None else self.state.console_port

    @property
    def schema_registry_port(self) -> int | None:
        """The port the schema registry listens on (None: not served)."""
        return None if self.state is None else self.state.schema_registry_port

    @property
    def metrics_port(self) -> int | None:
        """The port ``/metrics`` listens on (None: not served)."""
        return None if self._metrics is None else self._metrics.port

    async def serve(self) -> None:
        """Run until :meth:`stop` is called (or a signal arrives)."""
        # A node sharing the directory runs under a supervisor; a broker alone does not.
        supervised = self.cluster.shares_log_dir
        watch = asyncio.create_task(self._watch_parent()) if supervised else None
        await self._stopped.wait()
        if watch is not None:
            watch.cancel()
        await self._shutdown()

    async def _watch_parent(self) -> None:
        """A node stops when its supervisor is gone (killed, say): it must not serve alone."""
        parent = os.getppid()
        while os.getppid() == parent:
            await asyncio.sleep(1.0)
        logger.error("the supervising process %d is gone: stopping", parent)
        self.stop()

    def stop(self) -> None:
        """Ask the broker to stop."""
        self._stopped.set()

    async def _shutdown(self) -> None:
        logger.info("shutting down")
        if self._metrics is not None:
            # Before storage closes: a scrape reads the partitions.
            await asyncio.to_thread(self._metrics.close)
            self._metrics = None
        if self._console is not None:
            # Before storage closes too: the lookups under way finish first.
            await self._console.close()
            self._console = None
        if self._registry is not None:
            await self._registry.close()
            self._registry = None
        if self._registry_store is not None:
            await self._registry_store.close()
            self._registry_store = None
        for server in self._servers:
            server.close()
        await self.connections.stop_reaper()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()
        if self.state is not None:
            if self._group_load is not None:
                await self._group_load  # its thread reads the log directory
            await stop_transaction_timers(self.state)
            self.state.coordinator.shutdown()
            if self.state.shares is not None:
                self.state.shares.close()
        if self._node is not None:  # None when start() failed before opening storage
            await self._node.stop()
        if self.log_dir is not None:
            self.log_dir.close()
        logger.info("stopped cleanly")


async def run_broker(
    settings: BrokerSettings, cluster: Cluster | None = None, *, clean_shutdown: bool = False
) -> None:
    """Start a broker (or one node of a cluster) and serve until a signal stops it."""
    broker = Broker(settings, cluster, clean_shutdown=clean_shutdown)
    await broker.start()
    await broker.serve()
