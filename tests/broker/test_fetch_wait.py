"""Fetch long polling: a waiting fetch is woken by a change to its own partitions only.

Against a real broker with its /metrics page: Kafka's purgatory gauges show
the waiting fetches (``…numdelayedoperations``) and their watch-list entries
(``…purgatorysize``); seglog's ``…delayedfetchmetrics_checks`` and
``…_wakeups`` count the fetches looked at after a change and those woken to
read again. Fetches are sent on plain sockets (so that each test knows exactly
which fetches wait), with a ``max_wait_ms`` of ten minutes: whatever answers
them sooner is the event under test, never the clock.
"""

from __future__ import annotations

import os
import socket
import struct
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from seglog.protocol import ApiKey, decode_response, encode_request
from tests.broker.conftest import BrokerProcess, free_port

FETCH_VERSION = 12
NEVER_MS = 600_000
"""A fetch's max_wait_ms: ten minutes, far beyond any wait of these tests."""
PATIENCE = 60.0
"""How long a test waits for an event (a generous bound under load, never the behaviour)."""

PURGATORY = "kafka_server_delayedoperationpurgatory_"
DELAYED_FETCH = "kafka_server_delayedfetchmetrics_"


class Purgatory:
    """A broker's purgatory figures, read from its /metrics page."""

    def __init__(self, metrics_port: int) -> None:
        self.metrics_port = metrics_port

    def metrics(self) -> dict[str, float]:
        """The figures now, by sample name (counters with ``_total``)."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            page = response.read().decode()
        return {
            sample.name: sample.value
            for family in text_string_to_metric_families(page)
            for sample in family.samples
            if sample.name.startswith((PURGATORY, DELAYED_FETCH))
        }

    def wait_until(self, check: Callable[[dict[str, float]], bool], what: str) -> dict[str, float]:
        """The figures once ``check`` holds (AssertionError after PATIENCE)."""
        deadline = time.monotonic() + PATIENCE
        while True:
            figures = self.metrics()
            if check(figures):
                return figures
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: still {figures}")
            time.sleep(0.05)

    def wait_waiting(self, count: int) -> dict[str, float]:
        """The figures once ``count`` fetches wait."""
        return self.wait_until(
            lambda m: m[PURGATORY + "numdelayedoperations"] == count,
            f"{count} waiting fetches",
        )


class Broker(Purgatory):
    """The module's broker and its purgatory figures."""

    def __init__(self, process: BrokerProcess, metrics_port: int) -> None:
        super().__init__(metrics_port)
        self.process = process

    @property
    def bootstrap(self) -> str:
        return self.process.bootstrap


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    metrics_port = free_port()
    process = BrokerProcess(
        tmp_path_factory.mktemp("fetch-wait") / "data", {"metrics.port": str(metrics_port)}
    )
    process.start()
    try:
        yield Broker(process, metrics_port)
    finally:
        assert process.stop() == 0


@pytest.fixture
def topic(request: pytest.FixtureRequest, broker: Broker) -> str:
    """A fresh two-partition topic for the test."""
    cleaned = "".join(c if c.isalnum() or c in "._" else "-" for c in request.node.name)
    name = f"{cleaned.removeprefix('test_')}-{os.getpid()}"[:200]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(30)
    return name


class RawFetch:
    """One Fetch sent on its own connection; its answer read when asked."""

    def __init__(
        self,
        port: int,
        topic: str,
        partitions: dict[int, int],
        *,
        min_bytes: int = 1,
        isolation_level: int = 0,
    ) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=PATIENCE)
        body = {
            "max_wait_ms": NEVER_MS,
            "min_bytes": min_bytes,
            "max_bytes": 1 << 20,
            "isolation_level": isolation_level,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {"partition": p, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
                        for p, offset in partitions.items()
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        request = encode_request(ApiKey.FETCH, FETCH_VERSION, 7, "fetch-wait", body)
        self.sock.sendall(struct.pack(">i", len(request)) + request)

    def answer(self) -> dict[int, dict[str, Any]]:
        """The answer's partitions by index (waits for it, up to PATIENCE)."""
        (size,) = struct.unpack(">i", self._exactly(4))
        _, response = decode_response(ApiKey.FETCH, FETCH_VERSION, memoryview(self._exactly(size)))
        self.sock.close()
        return {p["partition_index"]: p for t in response["responses"] for p in t["partitions"]}

    def _exactly(self, size: int) -> bytes:
        out = bytearray()
        while len(out) < size:
            chunk = self.sock.recv(size - len(out))
            assert chunk, "the broker closed the connection"
            out += chunk
        return bytes(out)


def _produce(broker: Broker, topic: str, partition: int, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for value in values:
        producer.produce(topic, value=value, partition=partition)
    assert producer.flush(PATIENCE) == 0


def test_a_fetch_on_one_partition_is_not_checked_for_appends_to_another(
    broker: Broker, topic: str
) -> None:
    fetch = RawFetch(broker.process.port, topic, {0: 0})
    before = broker.wait_waiting(1)
    assert before[PURGATORY + "purgatorysize"] == 1

    _produce(broker, topic, 1, [b"elsewhere"] * 20)
    after_b = broker.metrics()
    assert after_b[DELAYED_FETCH + "checks_total"] == before[DELAYED_FETCH + "checks_total"]
    assert after_b[DELAYED_FETCH + "wakeups_total"] == before[DELAYED_FETCH + "wakeups_total"]
    assert after_b[PURGATORY + "numdelayedoperations"] == 1

    _produce(broker, topic, 0, [b"here"])
    answer = fetch.answer()
    assert answer[0]["error_code"] == 0
    assert b"here" in bytes(answer[0]["records"])
    after_a = broker.wait_waiting(0)
    assert after_a[DELAYED_FETCH + "wakeups_total"] == before[DELAYED_FETCH + "wakeups_total"] + 1
    assert after_a[PURGATORY + "purgatorysize"] == 0
    assert after_a[DELAYED_FETCH + "expires_total"] == before[DELAYED_FETCH + "expires_total"]


def test_a_fetch_on_several_partitions_is_answered_by_data_on_any(
    broker: Broker, topic: str
) -> None:
    fetch = RawFetch(broker.process.port, topic, {0: 0, 1: 0})
    broker.wait_until(lambda m: m[PURGATORY + "purgatorysize"] == 2, "one fetch on two lists")
    _produce(broker, topic, 1, [b"second"])
    answer = fetch.answer()
    assert bytes(answer[0]["records"]) == b""
    assert b"second" in bytes(answer[1]["records"])
    broker.wait_until(lambda m: m[PURGATORY + "purgatorysize"] == 0, "watch lists emptied")


def test_every_fetch_waiting_on_a_partition_is_woken_by_its_data(
    broker: Broker, topic: str
) -> None:
    fetches = [RawFetch(broker.process.port, topic, {0: 0}) for _ in range(8)]
    before = broker.wait_waiting(8)
    assert before[PURGATORY + "purgatorysize"] == 8
    _produce(broker, topic, 0, [b"for everyone"])
    for fetch in fetches:
        answer = fetch.answer()
        assert answer[0]["error_code"] == 0
        assert b"for everyone" in bytes(answer[0]["records"])
    after = broker.wait_waiting(0)
    assert after[PURGATORY + "purgatorysize"] == 0
    assert after[DELAYED_FETCH + "wakeups_total"] == before[DELAYED_FETCH + "wakeups_total"] + 8


def test_a_fetch_short_of_min_bytes_waits_until_the_partition_has_them(
    broker: Broker, topic: str
) -> None:
    fetch = RawFetch(broker.process.port, topic, {0: 0}, min_bytes=4000)
    before = broker.wait_waiting(1)
    _produce(broker, topic, 0, [b"small"])
    # Checked, found short by its cheap check (no read), and still waiting.
    checked = broker.wait_until(
        lambda m: m[DELAYED_FETCH + "checks_total"] > before[DELAYED_FETCH + "checks_total"],
        "the fetch checked",
    )
    assert checked[DELAYED_FETCH + "wakeups_total"] == before[DELAYED_FETCH + "wakeups_total"]
    assert checked[PURGATORY + "numdelayedoperations"] == 1
    _produce(broker, topic, 0, [b"x" * 5000])
    answer = fetch.answer()
    records = bytes(answer[0]["records"])
    assert b"small" in records and b"x" * 5000 in records
    broker.wait_waiting(0)


@pytest.mark.parametrize("how", ["close", "reset"])
def test_a_client_that_goes_while_its_fetch_waits_leaves_no_waiter(
    broker: Broker, topic: str, how: str
) -> None:
    fetches = [RawFetch(broker.process.port, topic, {0: 0, 1: 0}) for _ in range(3)]
    before = broker.wait_waiting(3)
    assert before[PURGATORY + "purgatorysize"] == 6
    for fetch in fetches:
        if how == "reset":
            # SO_LINGER 0: the close sends a reset, the connection is lost at once.
            fetch.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        fetch.sock.close()
    after = broker.wait_waiting(0)
    assert after[PURGATORY + "purgatorysize"] == 0
    assert after[DELAYED_FETCH + "expires_total"] == before[DELAYED_FETCH + "expires_total"]
    # The broker still serves: a fetch there now is answered by new data.
    fetch = RawFetch(broker.process.port, topic, {0: 0})
    broker.wait_waiting(1)
    _produce(broker, topic, 0, [b"later"])
    assert b"later" in bytes(fetch.answer()[0]["records"])


def test_a_read_committed_fetch_wakes_on_the_commit_marker(broker: Broker, topic: str) -> None:
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic}-txn", "linger.ms": 0}
    )
    producer.init_transactions(PATIENCE)
    producer.begin_transaction()
    producer.produce(topic, value=b"in a transaction", partition=0)
    assert producer.flush(PATIENCE) == 0
    # The record is written but not stable: a read_committed fetch from 0 waits.
    fetch = RawFetch(broker.process.port, topic, {0: 0}, isolation_level=1)
    before = broker.wait_waiting(1)
    producer.commit_transaction(PATIENCE)
    answer = fetch.answer()
    assert answer[0]["error_code"] == 0
    assert b"in a transaction" in bytes(answer[0]["records"])
    assert answer[0]["last_stable_offset"] == 2  # the record and its marker
    after = broker.wait_waiting(0)
    assert after[DELAYED_FETCH + "wakeups_total"] == before[DELAYED_FETCH + "wakeups_total"] + 1


def test_a_fetch_waiting_on_a_deleted_topic_answers_at_once_with_the_error(
    broker: Broker, topic: str
) -> None:
    fetch = RawFetch(broker.process.port, topic, {0: 0, 1: 0})
    broker.wait_waiting(1)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([topic])[topic].result(PATIENCE)
    answer = fetch.answer()
    assert answer[0]["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert answer[1]["error_code"] == 3
    after = broker.wait_waiting(0)
    assert after[PURGATORY + "purgatorysize"] == 0
