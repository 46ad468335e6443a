"""Strangers flooding a SASL listener while a logged-in producer works: it barely notices.

Attackers that never log in announce huge frames, send SCRAM messages of
hundreds of kilobytes and guess passwords from several threads at once. A
producer that did log in keeps its latency (its p99 under 50 ms, or within a
small factor of what it measured alone on a machine too busy for that) and
the broker's memory stays bounded.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer

from seglog.protocol.api_keys import ApiKey
from tests.broker.security.conftest import RawClient, Secured
from tests.broker.security.test_sasl import confluent, sasl_settings

ATTACK_SECONDS = 6.0


def _p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _produce_latencies(producer: Producer, topic: str, seconds: float) -> list[float]:
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        began = time.monotonic()
        producer.produce(topic, b"v" * 100)
        assert producer.flush(30) == 0
        latencies.append(time.monotonic() - began)
    return latencies


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _huge_frames(port: int, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(struct.pack(">i", 100_000_000) + b"\0" * 65536)
                while sock.recv(65536):
                    pass
        except OSError:
            pass


def _huge_scram(port: int, stop: threading.Event) -> None:
    token = b"n,,n=bob,r=abc" + b",x=" * 150_000  # 450 KB, under the frame limit
    while not stop.is_set():
        try:
            client = RawClient(port)
            client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})
            client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
            client.close()
        except OSError:
            pass


def _guesses(port: int, stop: threading.Event) -> None:
    attempt = 0
    while not stop.is_set():
        attempt += 1
        try:
            client = RawClient(port)
            client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
            token = f"\0admin\0guess{attempt}".encode()
            client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
            client.close()
        except OSError:
            pass


def test_a_logged_in_producer_is_not_slowed_by_strangers(
    secured_broker: Callable[..., Secured],
) -> None:
    broker = secured_broker("SASL_PLAINTEXT", **sasl_settings("SASL_PLAINTEXT"))
    producer = Producer(
        {**confluent(broker.bootstrap, "PLAIN", "bob", "bob-secret"), "linger.ms": 0}
    )
    _produce_latencies(producer, "good", 1.0)  # connected, topic created, warm
    alone = _p99(_produce_latencies(producer, "good", 3.0))
    stop = threading.Event()
    attackers = [
        threading.Thread(target=attack, args=(broker.port, stop), daemon=True)
        for attack in (_huge_frames,) * 6 + (_huge_scram,) * 2 + (_guesses,) * 8
    ]
    for attacker in attackers:
        attacker.start()
    try:
        attacked = _produce_latencies(producer, "good", ATTACK_SECONDS)
        assert broker.process.process is not None
        rss = _rss_bytes(broker.process.process.pid)
    finally:
        stop.set()
        for attacker in attackers:
            attacker.join(timeout=30)
    p99 = _p99(attacked)
    assert p99 < max(0.050, 4 * alone), f"p99 {p99 * 1000:.1f} ms, alone {alone * 1000:.1f} ms"
    assert rss < 300 << 20, f"the broker holds {rss >> 20} MB"
