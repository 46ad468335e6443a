"""A live broker under random and mutated frames, while a well-behaved client produces.

Every frame comes from a valid request of an API and version the broker
advertises (:data:`seglog.protocol.api_keys.SUPPORTED`), as it is, mutated,
pipelined, cut short, or behind a lying size prefix; or from random bytes.
Each example uses its own connection. Throughout, a producer sends one
message at a time and times each acknowledgement. The broker must not die,
its memory must not grow beyond a fixed allowance, and the producer's p99
latency must stay under 50 ms.
"""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.protocol import encode_request
from seglog.protocol.api_keys import REGISTRY, SUPPORTED
from tests.broker.conftest import BrokerProcess
from tests.broker.test_limits import GoodProducer, api_versions, rss_kib
from tests.protocol.strategies import message_strategy
from tests.protocol.test_fuzz import mutate

pytestmark = pytest.mark.timeout(120)

EXAMPLES = 300
RSS_ALLOWANCE_KIB = 64 * 1024

CASES = [
    (api_key, version)
    for api_key, (low, high) in sorted(SUPPORTED.items())
    for version in range(low, high + 1)
]


@st.composite
def valid_requests(draw: st.DrawFn) -> bytes:
    """One request of an advertised API and version, encoded without its size prefix."""
    api_key, version = draw(st.sampled_from(CASES))
    body = draw(message_strategy(REGISTRY[api_key].request, version))
    correlation = draw(st.integers(-(2**31), 2**31 - 1))
    client_id = draw(st.none() | st.text(max_size=8))
    return encode_request(api_key, version, correlation, client_id, body)


def _framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    """What one connection sends."""
    kind = draw(st.sampled_from(["valid", "mutated", "pipelined", "cut", "lying", "random"]))
    if kind == "valid":
        return _framed(draw(valid_requests()))
    if kind == "mutated":
        return _framed(mutate(draw(valid_requests()), draw))
    if kind == "pipelined":
        frames = draw(st.lists(valid_requests(), min_size=2, max_size=4))
        return b"".join(_framed(f) for f in frames)
    if kind == "cut":
        data = _framed(draw(valid_requests()))
        return data[: draw(st.integers(0, len(data) - 1))]
    if kind == "lying":
        # A size prefix that does not match what follows: larger (up to past
        # socket.request.max.bytes), smaller, or negative.
        payload = draw(valid_requests())
        size = draw(
            st.sampled_from([-1, -(2**31), 0, 1, 2**31 - 1, 100 << 20, (100 << 20) + 1])
            | st.integers(0, len(payload) * 2)
        )
        return struct.pack(">i", size) + payload
    return draw(st.binary(max_size=300))


def _send(port: int, data: bytes) -> None:
    """Send ``data`` on a fresh connection, read briefly whatever comes back, close."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        try:
            sock.sendall(data)
            sock.settimeout(0.02)
            while sock.recv(65536):
                pass
        except (TimeoutError, ConnectionError):
            pass


def test_random_and_mutated_frames_against_a_live_broker(tmp_path: Path) -> None:
    broker = BrokerProcess(
        tmp_path / "data",
        {
            # What fuzzed requests may create stays small on disk.
            "log.index.size.max.bytes": "4096",
            "offsets.topic.num.partitions": "1",
        },
    )
    broker.start()
    good = GoodProducer(broker, "fuzz-network-good-producer")
    try:
        good.start()
        time.sleep(1.0)  # the topic exists; the broker's memory has settled
        warmed = len(good.latencies)
        before = rss_kib(_pid(broker))

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(streams())
        def fuzz(data: bytes) -> None:
            _send(broker.port, data)
            assert broker.alive()

        started = time.monotonic()
        fuzz()
        elapsed = time.monotonic() - started
        time.sleep(0.3)
        after = rss_kib(_pid(broker))
    finally:
        good.finish()
    assert broker.alive(), broker.log.read_text()[-3000:]
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        assert api_versions(sock)
    latencies = sorted(good.latencies[warmed:])
    assert not good.errors, good.errors[:3]
    assert len(latencies) > 50, (len(latencies), elapsed)
    p99 = latencies[int(len(latencies) * 0.99)]
    growth = after - before
    print(f"{EXAMPLES} examples in {elapsed:.1f} s; p99 {p99 * 1000:.1f} ms; RSS +{growth} KiB")
    assert after - before < RSS_ALLOWANCE_KIB, f"RSS grew by {after - before} KiB"
    assert broker.stop() == 0


def _pid(broker: BrokerProcess) -> int:
    assert broker.process is not None
    return broker.process.pid
