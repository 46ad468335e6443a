"""``GET /v1/overview``: nodes, listeners, disks, and the sampled throughput."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from tests.broker.http_api.conftest import TIMEOUT, ApiBroker, create_topic
from tests.broker.http_api.test_storage_routes import cluster_id, produce

StartBroker = Callable[..., ApiBroker]


def test_overview_shows_the_produced_throughput(api_broker: StartBroker, topic: str) -> None:
    served = api_broker()
    create_topic(served.bootstrap, topic)
    first = served.api.get("/v1/overview")
    assert first.status == 200
    body = first.body
    assert body["cluster_id"] == cluster_id(served.bootstrap)
    assert body["version"]
    port = int(served.bootstrap.rsplit(":", 1)[1])
    [node] = body["nodes"]
    assert (node["node_id"], node["port"], node["alive"]) == (body["node_id"], port, True)
    [listener] = body["listeners"]
    assert (listener["port"], listener["security_protocol"]) == (port, "PLAINTEXT")
    [log_dir] = body["log_dirs"]
    assert Path(log_dir["path"]).resolve() == served.process.data.resolve()
    assert 0 < log_dir["free_bytes"] <= log_dir["total_bytes"]
    assert log_dir["used_bytes"] == log_dir["total_bytes"] - log_dir["free_bytes"]
    assert body["throughput"]["interval_ms"] == 5000
    assert {"CreateTopics", "Metadata"} <= {r["api"] for r in body["requests"]}
    produce(served.bootstrap, topic, [{"value": b"x" * 100} for _ in range(20)])
    # The sampler reads the counters every 5 s: wait for a sample that saw the records.
    deadline = time.monotonic() + TIMEOUT
    while True:
        samples = served.api.get("/v1/overview").body["throughput"]["samples"]
        moving = [s for s in samples if s["messages_in_per_sec"] > 0]
        if moving:
            break
        assert time.monotonic() < deadline, samples
        time.sleep(0.5)
    assert moving[0]["bytes_in_per_sec"] > 0
    assert all(s["time_ms"] > 0 for s in samples)
    produced = next(
        r for r in served.api.get("/v1/overview").body["requests"] if r["api"] == "Produce"
    )
    assert produced["count"] == 20
    assert produced["rate_per_sec"] > 0
    assert 0 < produced["p50_ms"] <= produced["p99_ms"]
