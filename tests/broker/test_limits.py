"""Limits on what a client can make the broker hold: request memory, connections, idle time."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from seglog.broker.limits import DEFAULT_QUEUED_MAX_REQUEST_BYTES
from seglog.broker.settings import BrokerSettings
from seglog.errors import InvalidConfigError
from seglog.protocol import ApiKey, decode_response, encode_request
from tests.broker.conftest import BrokerProcess

_OPEN: list[socket.socket] = []


@pytest.fixture(autouse=True)
def _close_sockets() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def connect(broker: BrokerProcess, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket()
    _OPEN.append(sock)
    sock.bind((source, 0))
    sock.settimeout(10)
    sock.connect(("127.0.0.1", broker.port))
    return sock


def api_versions(sock: socket.socket, correlation: int = 1) -> bool:
    """Send ApiVersions v0; True when answered, False when the connection is closed."""
    request = encode_request(ApiKey.API_VERSIONS, 0, correlation, "limits", {})
    try:
        sock.sendall(struct.pack(">i", len(request)) + request)
        return receive_answer(sock, correlation)
    except (ConnectionError, BrokenPipeError):
        return False


def receive_answer(sock: socket.socket, correlation: int) -> bool:
    out = b""
    try:
        while len(out) < 4 or len(out) < 4 + struct.unpack(">i", out[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                return False
            out += chunk
    except ConnectionError:
        return False
    got, body = decode_response(ApiKey.API_VERSIONS, 0, memoryview(out)[4:])
    assert got == correlation and body["error_code"] == 0
    return True


def closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except ConnectionError:
        return True
    except TimeoutError:
        return False


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


class GoodProducer(threading.Thread):
    """Produces one message at a time and records each acknowledgement's latency."""

    def __init__(self, broker: BrokerProcess, topic: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        self.topic = topic
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.perf_counter()
            done: list[object] = []
            self.producer.produce(
                self.topic, value=b"good", on_delivery=lambda err, _msg, done=done: done.append(err)
            )
            self.producer.flush(10)
            if not done or done[0] is not None:
                self.errors.append(str(done))
            self.latencies.append(time.perf_counter() - started)

    def finish(self) -> None:
        self.stop.set()
        self.join(20)


def test_announced_sizes_cost_no_memory_until_the_bytes_arrive(make_broker, topic: str) -> None:  # type: ignore[no-untyped-def]
    broker = make_broker()
    good = GoodProducer(broker, topic)
    good.start()
    time.sleep(0.5)  # the topic exists and the broker's memory has settled
    before = rss_kib(broker.process.pid)
    hostile = []
    for _ in range(20):
        sock = connect(broker)
        sock.sendall(struct.pack(">i", 100 << 20) + b"\x00" * (64 << 10))
        hostile.append(sock)
    time.sleep(1.0)
    after = rss_kib(broker.process.pid)
    acknowledged = len(good.latencies)
    # The good producer goes on being answered while the hostile connections hang on.
    deadline = time.monotonic() + 60
    while len(good.latencies) <= acknowledged and time.monotonic() < deadline:
        time.sleep(0.05)
    good.finish()
    assert not good.errors
    assert len(good.latencies) > acknowledged, "the good producer stalled"
    # 20 x 100 MiB announced; a few MiB of buffers at most may follow the 1.25 MiB sent.
    assert after - before < 32 * 1024, f"RSS grew by {after - before} KiB"
    assert broker.alive()


def test_queued_request_bytes_pause_reading_and_resume(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker = make_broker(
        **{"socket.request.max.bytes": str(1 << 20), "queued.max.request.bytes": str(2 << 20)}
    )
    good = connect(broker)
    assert api_versions(good, 1)
    hostile = []
    for _ in range(3):
        sock = connect(broker)
        sock.sendall(struct.pack(">i", 1 << 20) + b"\x00" * (900 << 10))
        hostile.append(sock)
    time.sleep(0.5)
    # Over the bound: the broker reads from nobody, and fails nobody.
    request = encode_request(ApiKey.API_VERSIONS, 0, 2, "limits", {})
    good.sendall(struct.pack(">i", len(request)) + request)
    good.settimeout(0.5)
    with pytest.raises(TimeoutError):
        good.recv(1, socket.MSG_PEEK)
    for sock in hostile:
        sock.close()
    good.settimeout(10)
    assert receive_answer(good, 2)
    assert "reading paused on every connection" in broker.log.read_text()


def test_idle_and_stalled_connections_are_closed(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker = make_broker(**{"connections.max.idle.ms": "400"})
    silent = connect(broker)
    answered = connect(broker)
    assert api_versions(answered)
    stalled = connect(broker)
    stalled.sendall(struct.pack(">i", 1000) + b"x" * 10)
    busy = connect(broker)
    # A connection that keeps asking stays open past the idle period.
    for i in range(8):
        assert api_versions(busy, i + 2)
        time.sleep(0.1)
    for sock in (silent, answered, stalled):
        assert closed_within(sock, 60), sock
    # A frame trickled byte by byte is closed too, although bytes keep coming.
    trickle = connect(broker)
    trickle.sendall(struct.pack(">i", 1000))
    started = time.monotonic()
    with pytest.raises((ConnectionError, BrokenPipeError)):
        while time.monotonic() - started < 120:
            trickle.send(b"x")
            time.sleep(0.05)
    assert api_versions(connect(broker))


def test_connection_limits_per_ip_and_overall(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker = make_broker(
        **{
            "max.connections": "4",
            "max.connections.per.ip": "2",
            "max.connections.per.ip.overrides": "127.0.0.3:3",
        }
    )
    time.sleep(0.3)  # the start-up probe's connection is closed and no longer counted
    first = [connect(broker) for _ in range(2)]
    assert all(api_versions(sock) for sock in first)
    third = connect(broker)
    assert closed_within(third, 60), "a third connection from one IP must be closed"
    # The override lets 127.0.0.3 open three, but only two fit under max.connections.
    other = [connect(broker, "127.0.0.3") for _ in range(2)]
    assert all(api_versions(sock) for sock in other)
    assert closed_within(connect(broker, "127.0.0.3"), 60)
    # Closing one makes room again.
    first[0].close()
    time.sleep(0.2)
    assert api_versions(connect(broker))
    assert broker.alive()


def test_limit_settings_use_kafka_names_and_ranges() -> None:
    defaults = BrokerSettings.from_properties({})
    assert defaults.queued_max_request_bytes == DEFAULT_QUEUED_MAX_REQUEST_BYTES
    assert defaults.connections_max_idle_ms == 600_000
    assert defaults.max_connections == defaults.max_connections_per_ip == 2_147_483_647
    unbounded = BrokerSettings.from_properties({"queued.max.request.bytes": "-1"})
    assert unbounded.queued_max_request_bytes is None
    never = BrokerSettings.from_properties({"connections.max.idle.ms": "-1"})
    assert never.connections_max_idle_ms is None
    overrides = BrokerSettings.from_properties(
        {"max.connections.per.ip.overrides": "10.0.0.1:5, [::1]:0"}
    ).max_connections_per_ip_overrides
    assert overrides == {"10.0.0.1": 5, "::1": 0}
    for bad in (
        {"queued.max.request.bytes": "1000"},  # below socket.request.max.bytes
        {"max.connections.per.ip.overrides": "10.0.0.1"},
        {"max.connections": "-1"},
        {"connections.max.idle.ms": "x"},
    ):
        with pytest.raises(InvalidConfigError):
            BrokerSettings.from_properties(bad)
