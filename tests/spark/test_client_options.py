"""Java client options as Spark jobs set them, translated to librdkafka's (or refused)."""

from __future__ import annotations

import confluent_kafka as ck
import pytest

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
        ("sasl.login.callback.handler.class", "com.example.Handler", "names Java classes"),
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
