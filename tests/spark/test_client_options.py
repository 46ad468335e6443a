"""Java client options as Spark jobs set them, translated to librdkafka's (or refused)."""

from __future__ import annotations

import logging

import confluent_kafka as ck
import pytest

from seglog.spark import client_options
from seglog.spark.client_options import translate
from seglog.spark.options import parse_source_options, parse_write_options

PLAIN = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="alice" password="s3cr\\"et";'
)


def test_security_options_of_a_spark_job() -> None:
    options = parse_source_options(
        {
            "kafka.bootstrap.servers": "broker:9093",
            "subscribe": "t",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.jaas.config": PLAIN,
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": "/etc/ca.pem",
            "kafka.ssl.endpoint.identification.algorithm": "",
            "kafka.default.api.timeout.ms": "60000",
            "kafka.request.timeout.ms": "30000",
        },
        streaming=True,
    )
    assert dict(options.kafka_params) == {
        "bootstrap.servers": "broker:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": 's3cr"et',
        "ssl.ca.location": "/etc/ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
        "socket.timeout.ms": "30000",
    }


def test_producer_options_and_login_modules() -> None:
    scram = PLAIN.replace("plain.PlainLoginModule", "scram.ScramLoginModule")
    assert translate(
        {
            "sasl.jaas.config": scram,
            "acks": "all",
            "compression.type": "zstd",
            "linger.ms": "5",
            "batch.size": "65536",
            "client.id": "job",
            "delivery.timeout.ms": "90000",
            "max.block.ms": "10000",
            "buffer.memory": "33554432",
            "max.request.size": "2097152",
            "request.timeout.ms": "20000",
            "partitioner.class": "org.apache.kafka.clients.producer.internals.DefaultPartitioner",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": "/etc/client.p12",
            "ssl.keystore.password": "pw",
        },
        producer=True,
    ) == {
        "sasl.username": "alice",
        "sasl.password": 's3cr"et',
        "acks": "all",
        "compression.type": "zstd",
        "linger.ms": "5",
        "batch.size": "65536",
        "client.id": "job",
        "message.timeout.ms": "90000",
        "queue.buffering.max.kbytes": "32768",
        "message.max.bytes": "2097152",
        "request.timeout.ms": "20000",
        "partitioner": "murmur2_random",
        "ssl.keystore.location": "/etc/client.p12",
        "ssl.keystore.password": "pw",
    }
    kerberos = (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
        'keyTab="/etc/job.keytab" principal="job@EXAMPLE.COM";'
    )
    assert translate({"sasl.jaas.config": kerberos}, producer=False) == {
        "sasl.kerberos.keytab": "/etc/job.keytab",
        "sasl.kerberos.principal": "job@EXAMPLE.COM",
    }
    pem = translate(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": "KEY",
            "ssl.keystore.certificate.chain": "C",
        },
        producer=False,
    )
    assert pem == {"ssl.key.pem": "KEY", "ssl.certificate.pem": "C"}
    # librdkafka's own names pass through.
    assert translate({"sasl.username": "u", "queue.buffering.max.ms": "3"}, producer=True) == {
        "sasl.username": "u",
        "queue.buffering.max.ms": "3",
    }


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("ssl.truststore.location", "/etc/truststore.jks", "Convert it to PEM"),
        ("ssl.keystore.location", "/etc/keystore.jks", "Convert it to PKCS12"),
        ("partitioner.class", "com.example.MyPartitioner", "Write a 'partition' column"),
        (
            "sasl.jaas.config",
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
            "cannot run outside the JVM",
        ),
    ],
)
def test_what_librdkafka_cannot_do_is_refused_at_parse(option: str, value: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_write_options({"kafka.bootstrap.servers": "b:1", f"kafka.{option}": value})


def test_every_translation_is_a_setting_librdkafka_knows() -> None:
    config = translate(
        {
            "bootstrap.servers": "127.0.0.1:1",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": PLAIN,
            "delivery.timeout.ms": "90000",
            "buffer.memory": "33554432",
            "max.request.size": "2097152",
            "send.buffer.bytes": "131072",
            "receive.buffer.bytes": "65536",
            "partitioner.class": "org.apache.kafka.clients.producer.internals.DefaultPartitioner",
            "ssl.endpoint.identification.algorithm": "https",
        },
        producer=True,
    )
    ck.Producer(config).flush(0)  # raises on an unknown or malformed setting
    consumer_config = translate(
        {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "request.timeout.ms": "30000"},
        producer=False,
    )
    ck.Consumer(consumer_config).close()


@pytest.fixture
def warnings_log(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> pytest.LogCaptureFixture:
    """The warnings of seglog.spark.client_options, with none yet given in this process."""
    monkeypatch.setattr(client_options, "_warned", set())
    caplog.set_level(logging.WARNING, logger="seglog.spark.client_options")
    return caplog


def test_java_only_options_are_dropped_with_one_warning(
    warnings_log: pytest.LogCaptureFixture,
) -> None:
    spark_job = {
        "kafka.bootstrap.servers": "127.0.0.1:1",
        "subscribe": "t",
        "kafka.security.providers": "com.example.ProviderCreator",
        "kafka.partition.assignment.strategy": "org.apache.kafka.clients.consumer.StickyAssignor",
        "kafka.key.serializer": "org.apache.kafka.common.serialization.StringSerializer",
        "kafka.sasl.client.callback.handler.class": "com.example.Handler",
        "kafka.client.id": "job",
    }
    read = parse_source_options(spark_job, streaming=False)
    assert dict(read.kafka_params) == {"bootstrap.servers": "127.0.0.1:1", "client.id": "job"}
    (record,) = warnings_log.records
    assert record.levelno == logging.WARNING
    for name in (
        "kafka.security.providers",
        "kafka.partition.assignment.strategy",
        "kafka.key.serializer",
        "kafka.sasl.client.callback.handler.class",
    ):
        assert name in record.getMessage()
    assert "kafka.client.id" not in record.getMessage()
    # Parsed again (at planning, after load()): no second warning.
    parse_source_options(spark_job, streaming=True)
    assert len(warnings_log.records) == 1
    write = parse_write_options(
        {
            "kafka.bootstrap.servers": "127.0.0.1:1",
            "kafka.key.deserializer": "org.apache.kafka.common.serialization.StringDeserializer",
            "kafka.interceptor.classes": "com.example.Interceptor",
            "kafka.ssl.provider": "SunJSSE",
            "kafka.acks": "all",
        }
    )
    assert dict(write.kafka_params) == {"bootstrap.servers": "127.0.0.1:1", "acks": "all"}
    assert "kafka.key.deserializer" in warnings_log.records[-1].getMessage()
    # What is left is a configuration librdkafka takes.
    ck.Consumer({**read.kafka_params, "group.id": "g"}).close()
    ck.Producer(dict(write.kafka_params)).flush(0)


def test_options_with_a_librdkafka_name_are_translated() -> None:
    config = translate(
        {
            "bootstrap.servers": "127.0.0.1:1",
            "group.id": "g",
            # Java's default: range now, cooperative-sticky once every member has it.
            "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RangeAssignor,"
            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
            "fetch.max.wait.ms": "250",
        },
        producer=False,
    )
    assert config["partition.assignment.strategy"] == "range"
    assert config["fetch.wait.max.ms"] == "250"
    ck.Consumer(config).close()


def test_a_spark_consumer_still_refuses_the_deserializers() -> None:
    # Spark's Kafka source refuses them (keys and values are always bytes); so does seglog.
    with pytest.raises(ValueError, match="keys are deserialized as byte arrays"):
        parse_source_options(
            {
                "kafka.bootstrap.servers": "b:1",
                "subscribe": "t",
                "kafka.key.deserializer": "org.apache.kafka.common.serialization.X",
            },
            streaming=False,
        )


def test_the_wait_for_a_broker_follows_the_java_timeouts() -> None:
    def timeout(**kafka: str) -> int:
        options = {"kafka.bootstrap.servers": "b:1", "subscribe": "t"}
        options.update({"kafka." + k.replace("_", "."): v for k, v in kafka.items()})
        return parse_source_options(options, streaming=False).broker_timeout_ms

    assert timeout() == 30_000
    assert timeout(request_timeout_ms="2000") == 2000
    assert timeout(default_api_timeout_ms="4000") == 4000
    assert timeout(default_api_timeout_ms="60000", request_timeout_ms="5000") == 5000
    with pytest.raises(ValueError, match="Invalid value 'soon' for Kafka option"):
        timeout(request_timeout_ms="soon")
