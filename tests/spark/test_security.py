"""The Spark source and writer over SASL_SSL, with the Java-style options users pass to Spark."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.security.conftest import Certs, certs  # noqa: F401  (the fixture)
from tests.spark.conftest import create_topic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="spark" password="spark-secret";'
)


@pytest.fixture
def sasl_ssl_broker(tmp_path: Path, certs: Certs) -> Iterator[tuple[BrokerProcess, int]]:  # noqa: F811
    process = BrokerProcess(tmp_path / "data")
    subprocess.run(
        [sys.executable, "-m", "seglog", "users", "add", "spark", "--log-dir",
         str(process.data), "--create", "--password", "spark-secret"],
        check=True, capture_output=True,
    )  # fmt: skip
    port = free_port()
    process.overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{process.port},SASL_SSL://127.0.0.1:{port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server),
    }
    process.start()
    yield process, port
    process.kill()


def _java_options(port: int, certs: Certs) -> dict[str, str]:  # noqa: F811
    return {
        "kafka.bootstrap.servers": f"127.0.0.1:{port}",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": SCRAM_JAAS,
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(certs.ca),
    }


def test_read_and_write_over_sasl_ssl(
    spark: SparkSession,
    sasl_ssl_broker: tuple[BrokerProcess, int],
    certs: Certs,  # noqa: F811
    topic: str,
) -> None:
    broker, port = sasl_ssl_broker
    create_topic(broker.bootstrap, topic)
    options = _java_options(port, certs)
    rows = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(100)], ["key", "value"])
    rows.write.format("seglog").mode("append").options(**options).option("topic", topic).save()
    read = spark.read.format("seglog").options(**options).option("subscribe", topic).load()
    values = sorted(r.value.decode() for r in read.select("value").collect())
    assert values == sorted(f"v{i}" for i in range(100))
