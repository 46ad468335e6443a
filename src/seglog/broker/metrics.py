"""The ``/metrics`` page in Prometheus' text format."""

from __future__ import annotations

import itertools

from seglog.broker.state import BrokerState, Metrics


def metrics_text(state: BrokerState) -> str:
    """Counters, latency histograms and log sizes."""
    m = state.metrics
    lines = [
        "# HELP seglog_bytes_in_total Record bytes appended by produce requests.",
        "# TYPE seglog_bytes_in_total counter",
        f"seglog_bytes_in_total {m.bytes_in}",
        "# HELP seglog_bytes_out_total Record bytes sent by fetch responses.",
        "# TYPE seglog_bytes_out_total counter",
        f"seglog_bytes_out_total {m.bytes_out}",
        "# HELP seglog_connections Open client connections.",
        "# TYPE seglog_connections gauge",
        f"seglog_connections {m.connections}",
        "# HELP seglog_requests_total Requests by API and error.",
        "# TYPE seglog_requests_total counter",
    ]
    for (api, error), count in sorted(m.requests.items()):
        lines.append(f'seglog_requests_total{{api="{api}",error="{error}"}} {count}')
    lines += [
        "# HELP seglog_request_seconds Request handling time.",
        "# TYPE seglog_request_seconds histogram",
    ]
    for api, buckets in sorted(m.latency_buckets.items()):
        cumulative = list(itertools.accumulate(buckets))
        for bound, count in zip((*Metrics.BUCKETS, "+Inf"), cumulative, strict=True):
            lines.append(f'seglog_request_seconds_bucket{{api="{api}",le="{bound}"}} {count}')
        lines.append(f'seglog_request_seconds_sum{{api="{api}"}} {m.latency_sum[api]}')
        lines.append(f'seglog_request_seconds_count{{api="{api}"}} {cumulative[-1]}')
    lines += [
        "# HELP seglog_log_size_bytes Bytes on disk of each partition.",
        "# TYPE seglog_log_size_bytes gauge",
    ]
    for (topic, partition), log in sorted(state.log_dir.logs().items()):
        if not log.closed:
            lines.append(
                f'seglog_log_size_bytes{{topic="{topic}",partition="{partition}"}} {log.size}'
            )
    return "\n".join(lines) + "\n"
