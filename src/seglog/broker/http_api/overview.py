"""``GET /v1/overview``: the cluster at a glance, and the throughput sampler behind it.

The sampler costs the request path nothing: every :data:`SAMPLE_SECONDS` a
task on the loop reads the counters the broker already keeps for
``/metrics`` (bytes and records in, bytes out, requests by API) and keeps
the last :data:`KEPT_SAMPLES` (15 minutes) of rates. A request to the route
only reads what was sampled, plus a ``statvfs`` of each log directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import shutil
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from aiohttp import web

import seglog
from seglog.broker.http_api.errors import ApiError
from seglog.broker.http_api.routes import SECURITY, Route, json_response
from seglog.broker.http_api.topic_access import caller, state_of
from seglog.broker.http_api.v3_cluster import obj
from seglog.broker.metrics import percentile
from seglog.broker.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from seglog.broker.state import BrokerState

SAMPLE_SECONDS = 5.0
"""How often the sampler reads the counters."""
KEPT_SAMPLES = 180
"""How many samples are kept: 15 minutes of them."""
RATE_SAMPLES = 12
"""A request rate is over the last minute (this many samples) or as much as there is."""


@dataclass(frozen=True)
class _Reading:
    """The counters at one moment."""

    time_ms: int
    monotonic: float
    bytes_in: int
    bytes_out: int
    messages_in: int
    requests: dict[str, int]


class ThroughputSampler:
    """Rates of the broker's counters every :data:`SAMPLE_SECONDS`, the last 15 minutes kept."""

    def __init__(self, state: BrokerState, interval: float = SAMPLE_SECONDS) -> None:
        self._state = state
        self.interval = interval
        self._readings: deque[_Reading] = deque(maxlen=KEPT_SAMPLES + 1)
        self._task: asyncio.Task[None] | None = None

    def _read(self) -> _Reading:
        metrics = self._state.metrics
        requests: dict[str, int] = {}
        for (api, _version), count in metrics.requests.items():
            requests[api] = requests.get(api, 0) + count
        return _Reading(
            int(time.time() * 1000),
            time.monotonic(),
            metrics.bytes_in,
            metrics.bytes_out,
            metrics.messages_in,
            requests,
        )

    def sample(self) -> None:
        """Read the counters now (the task does this every interval)."""
        self._readings.append(self._read())

    def start(self) -> None:
        """Sample on the running loop until :meth:`stop`."""
        self.sample()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.sample()

    async def stop(self) -> None:
        """Stop sampling."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def samples(self) -> list[dict[str, Any]]:
        """The rates between consecutive readings, oldest first."""
        readings = list(self._readings)
        out = []
        for before, after in itertools.pairwise(readings):
            seconds = max(after.monotonic - before.monotonic, 1e-3)
            out.append(
                {
                    "time_ms": after.time_ms,
                    "bytes_in_per_sec": (after.bytes_in - before.bytes_in) / seconds,
                    "bytes_out_per_sec": (after.bytes_out - before.bytes_out) / seconds,
                    "messages_in_per_sec": (after.messages_in - before.messages_in) / seconds,
                }
            )
        return out

    def request_rates(self) -> dict[str, float]:
        """Requests per second by API over the last minute sampled (empty before two readings)."""
        readings = list(self._readings)
        if len(readings) < 2:
            return {}
        before = readings[max(0, len(readings) - 1 - RATE_SAMPLES)]
        after = readings[-1]
        seconds = max(after.monotonic - before.monotonic, 1e-3)
        return {
            api: (count - before.requests.get(api, 0)) / seconds
            for api, count in after.requests.items()
        }


SAMPLER = web.AppKey("sampler", ThroughputSampler)
"""The application's throughput sampler."""


def _log_dir(path: str) -> dict[str, Any]:
    usage = shutil.disk_usage(path)
    return {
        "path": path,
        "used_bytes": usage.total - usage.free,
        "free_bytes": usage.free,
        "total_bytes": usage.total,
    }


async def overview(request: web.Request) -> web.StreamResponse:
    """The cluster, this node's listeners, disks, throughput and requests (DESCRIBE on CLUSTER)."""
    who = await caller(request)
    authorizer = request.app[SECURITY].authorizer
    if authorizer is not None and not authorizer.authorize(
        who.principal, who.host, Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        raise ApiError(
            403,
            "CLUSTER_AUTHORIZATION_FAILED",
            f"{who.principal} is not authorized to DESCRIBE the cluster",
        )
    state = state_of(request)
    cluster = state.cluster
    settings = state.settings
    mine = settings.advertised_for(settings.listeners[0].name)
    sampler = request.app[SAMPLER]
    rates = sampler.request_rates()
    requests = []
    metrics = state.metrics
    counts: dict[str, int] = {}
    for (api, _version), count in list(metrics.requests.items()):
        counts[api] = counts.get(api, 0) + count
    for api, times in sorted(list(metrics.times.items())):
        recent = sorted(list(times.recent))
        requests.append(
            {
                "api": api,
                "count": counts.get(api, times.count),
                "rate_per_sec": rates.get(api, 0.0),
                "p50_ms": percentile(recent, 0.5),
                "p99_ms": percentile(recent, 0.99),
            }
        )
    return json_response(
        {
            "cluster_id": state.cluster_id,
            "version": seglog.__version__,
            "node_id": cluster.node_id,
            "controller_id": cluster.controller_id,
            "nodes": [
                {
                    "node_id": node,
                    "host": cluster.advertised(mine, node).host,
                    "port": cluster.advertised(mine, node).port,
                    "alive": cluster.alive(node),
                }
                for node in cluster.node_ids()
            ],
            "listeners": [
                {
                    "name": x.name,
                    "host": x.host,
                    "port": x.port,
                    "security_protocol": x.security_protocol,
                }
                for x in settings.listeners
            ],
            "log_dirs": [_log_dir(str(settings.log_dir))],
            "throughput": {
                "interval_ms": int(sampler.interval * 1000),
                "samples": sampler.samples(),
            },
            "requests": requests,
        }
    )


_SAMPLE = obj(
    time_ms="integer",
    bytes_in_per_sec="number",
    bytes_out_per_sec="number",
    messages_in_per_sec="number",
)


def _array(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": item}


_OVERVIEW = obj(cluster_id="string", version="string", node_id="integer", controller_id="integer")
_OVERVIEW["properties"].update(
    nodes=_array(obj(node_id="integer", host="string", port="integer", alive="boolean")),
    listeners=_array(obj(name="string", host="string", port="integer", security_protocol="string")),
    log_dirs=_array(
        obj(path="string", used_bytes="integer", free_bytes="integer", total_bytes="integer")
    ),
    throughput={
        "type": "object",
        "properties": {"interval_ms": {"type": "integer"}, "samples": _array(_SAMPLE)},
    },
    requests=_array(
        obj(api="string", count="integer", rate_per_sec="number", p50_ms="number", p99_ms="number")
    ),
)

ROUTES = (
    Route(
        "GET",
        "/v1/overview",
        overview,
        "overview",
        "The cluster's nodes, this node's listeners, disks, throughput and request rates",
        response=_OVERVIEW,
        errors=(401, 403),
    ),
)
