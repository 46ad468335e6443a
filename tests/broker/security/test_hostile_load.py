"""Strangers flooding a SASL listener while a logged-in producer works: it is still served.

Attackers that never log in announce huge frames, send SCRAM messages of
hundreds of kilobytes and guess passwords from several threads at once. A
producer that did log in has every one of its records acknowledged while they
do, and the broker's memory stays bounded. (How much its latency moves is a
figure for a benchmark, not a bound for a test: it depends on the machine.)
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer

from seglog.protocol.api_keys import ApiKey
from tests.broker.security.conftest import RawClient, Secured
from tests.broker.security.test_sasl import confluent, sasl_settings

#: Records the producer sends one at a time, each acknowledged before the next, under attack.
ATTACKED_RECORDS = 300


class _Attempts:
    """How many attacks the attackers have made (each thread counts its own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def add(self) -> None:
        with self._lock:
            self.count += 1


ATTEMPTS = _Attempts()


def _produce_one_by_one(producer: Producer, topic: str, count: int) -> None:
    for _ in range(count):
        producer.produce(topic, b"v" * 100)
        assert producer.flush(60) == 0, "a logged-in producer's record was not acknowledged"


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
        ATTEMPTS.add()


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
        ATTEMPTS.add()


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
        ATTEMPTS.add()


def test_a_logged_in_producer_is_not_slowed_by_strangers(
    secured_broker: Callable[..., Secured],
) -> None:
    broker = secured_broker("SASL_PLAINTEXT", **sasl_settings("SASL_PLAINTEXT"))
    producer = Producer(
        {**confluent(broker.bootstrap, "PLAIN", "bob", "bob-secret"), "linger.ms": 0}
    )
    _produce_one_by_one(producer, "good", 10)  # connected, topic created
    stop = threading.Event()
    attackers = [
        threading.Thread(target=attack, args=(broker.port, stop), daemon=True)
        for attack in (_huge_frames,) * 6 + (_huge_scram,) * 2 + (_guesses,) * 8
    ]
    for attacker in attackers:
        attacker.start()
    try:
        # The attack is under way (every kind has been tried a few times) before producing.
        wait_until = threading.Event()
        for _ in range(6000):
            if ATTEMPTS.count >= 3 * len(attackers) or wait_until.wait(0.01):
                break
        before = ATTEMPTS.count
        _produce_one_by_one(producer, "good", ATTACKED_RECORDS)
        assert ATTEMPTS.count > before, "the strangers stopped attacking while the producer worked"
        assert broker.process.process is not None
        rss = _rss_bytes(broker.process.process.pid)
    finally:
        stop.set()
        for attacker in attackers:
            attacker.join(timeout=30)
    assert rss < 300 << 20, f"the broker holds {rss >> 20} MB"
