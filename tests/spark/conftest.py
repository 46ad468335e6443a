"""Fixtures of the Spark data source tests: one local SparkSession, one real broker.

The broker is ``tests/broker``'s :class:`BrokerProcess` (``seglog serve`` as a
subprocess on a free port); its log directory doubles as the input of the
files-mode tests. Topics are unique per test.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from tests.broker.conftest import BrokerProcess

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A local SparkSession (2 cores, 2 shuffle partitions, no UI) with ``seglog`` registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import seglog.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("seglog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    seglog.spark.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One seglog broker for the session; small segments so topics span several files."""
    process = BrokerProcess(
        tmp_path_factory.mktemp("spark-broker") / "data",
        {"internal.log.segment.bytes": "65536", "log.index.interval.bytes": "1024"},
    )
    process.start()
    yield process
    assert process.alive(), "the broker died during the tests"
    assert process.stop() == 0


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test."""
    name = request.node.name
    cleaned = "".join(c if c.isalnum() else "-" for c in name)
    return f"spark-{cleaned}-{os.getpid()}"[:200]


@dataclass
class Produced:
    """A record as produced, to compare with what Spark reads back."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def create_topic(bootstrap: str, name: str, partitions: int = 1, **configs: str) -> None:
    """Create ``name`` and wait until its metadata is served."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=configs)]
    )
    futures[name].result(timeout=30)


def produce(
    bootstrap: str,
    name: str,
    records: Sequence[dict[str, Any]],
) -> list[Produced]:
    """Produce ``records`` (dicts of key/value/partition/timestamp/headers) and return them
    with their offsets, in delivery order per partition."""
    producer = ck.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": False}
    )
    delivered: list[Produced] = []
    errors: list[str] = []

    def reporter(headers: list[tuple[str, bytes | None]]) -> Any:
        def report(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(str(err))
                return
            delivered.append(
                Produced(
                    msg.partition(),
                    msg.offset(),
                    msg.key(),
                    msg.value(),
                    msg.timestamp()[1],
                    headers,
                )
            )

        return report

    for rec in records:
        kwargs = {k: v for k, v in rec.items() if v is not None}
        producer.produce(name, on_delivery=reporter(list(rec.get("headers") or [])), **kwargs)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors, errors
    return sorted(delivered, key=lambda p: (p.partition, p.offset))


def wait_until(check: Any, timeout: float = 20.0) -> None:
    """Poll ``check()`` until it is true."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)
