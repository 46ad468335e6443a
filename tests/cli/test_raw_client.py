"""The tools' own requests (``configs``, ``transactions``, share ``groups``) over every
security protocol: SASL_SSL with SCRAM and PLAIN, SSL with a client certificate, and
one-line errors when the settings are wrong. A real broker with three listeners."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from confluent_kafka import Producer

from seglog.cli.main import cli
from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.security.conftest import Certs, certs
from tests.broker.security.test_sasl import JAAS, add_scram_user
from tests.broker.share.helpers import (
    WAIT,
    create_topic,
    set_group_configs,
    share_consumer,
    wait_for_members,
)
from tests.cli.test_topics import ok, one_line_error

__all__ = ["certs"]


class Listeners:
    """The broker: PLAINTEXT, SASL_SSL (alice by SCRAM, admin by PLAIN), SSL with client auth."""

    def __init__(self, broker: BrokerProcess, sasl_ssl: int, ssl: int, certs: Certs) -> None:
        self.broker = broker
        self.sasl_ssl = f"127.0.0.1:{sasl_ssl}"
        self.ssl = f"127.0.0.1:{ssl}"
        self.certs = certs


@pytest.fixture(scope="module")
def listeners(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[Listeners]:
    broker = BrokerProcess(tmp_path_factory.mktemp("raw-client") / "data")
    add_scram_user("alice", "alice-secret")(broker.data)
    sasl_ssl, ssl = free_port(), free_port()
    broker.overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},SASL_SSL://127.0.0.1:{sasl_ssl},"
        f"SSL://127.0.0.1:{ssl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "group.initial.rebalance.delay.ms": "0",
    }
    broker.start()
    yield Listeners(broker, sasl_ssl, ssl, certs)
    assert broker.stop() == 0


def seglog(*args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--timeout", "20"])


def properties_file(path: Path, **settings: str) -> str:
    """A client properties file in Java's names, as Kafka's tools take it."""
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    return str(path)


def scram(certs: Certs, mechanism: str, user: str, password: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
        f'required username="{user}" password="{password}";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
    }


def mutual_tls(certs: Certs) -> list[str]:
    """librdkafka's properties (-X) for the SSL listener, with the client's certificate."""
    return [
        "-X", "security.protocol=SSL",
        "-X", f"ssl.ca.location={certs.ca}",
        "-X", f"ssl.certificate.location={certs.client_cert}",
        "-X", f"ssl.key.location={certs.client_key}",
    ]  # fmt: skip


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_transactions_over_sasl_ssl_with_scram(
    listeners: Listeners, tmp_path: Path, mechanism: str
) -> None:
    transactional_id = f"raw-{mechanism}-{time.monotonic_ns()}"
    producer = Producer(
        {"bootstrap.servers": listeners.broker.bootstrap, "transactional.id": transactional_id}
    )
    producer.init_transactions(WAIT)
    config = properties_file(
        tmp_path / "c.properties", **scram(listeners.certs, mechanism, "alice", "alice-secret")
    )
    out = ok(
        seglog("transactions", "list", "--bootstrap-server", listeners.sasl_ssl,
               "--command-config", config)
    )  # fmt: skip
    assert out.splitlines()[0].split() == ["TransactionalId", "ProducerId", "TransactionState"]
    assert transactional_id in out
    out = ok(
        seglog("transactions", "describe", transactional_id, "--bootstrap-server",
               listeners.sasl_ssl, "--command-config", config)
    )  # fmt: skip
    assert "Empty" in out.splitlines()[1]


def test_configs_over_sasl_ssl_creates_a_user_who_can_then_log_in(
    listeners: Listeners, tmp_path: Path
) -> None:
    admin = properties_file(
        tmp_path / "admin.properties",
        **{
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="admin" password="admin-secret";',
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(listeners.certs.ca),
        },
    )
    where = ["--bootstrap-server", listeners.sasl_ssl, "--command-config", admin]
    ok(
        seglog("configs", "--alter", "--entity-type", "users", "--entity-name", "carol",
               "--add-config", "SCRAM-SHA-512=[iterations=4096,password=carol-secret]", *where)
    )  # fmt: skip
    described = ok(
        seglog("configs", "--describe", "--entity-type", "users", "--entity-name", "carol", *where)
    )
    assert "carol" in described and "SCRAM-SHA-512" in described
    ok(seglog("configs", "--describe", "--entity-type", "brokers", "--entity-default", *where))
    # The user just created authenticates with seglog's own SCRAM client.
    carol = properties_file(
        tmp_path / "carol.properties",
        **scram(listeners.certs, "SCRAM-SHA-512", "carol", "carol-secret"),
    )
    ok(seglog("transactions", "list", "--bootstrap-server", listeners.sasl_ssl,
              "--command-config", carol))  # fmt: skip


def test_share_groups_over_mutual_tls(listeners: Listeners) -> None:
    broker = listeners.broker
    topic = create_topic(broker)
    group = f"g-{topic}"
    set_group_configs(broker, group, {"share.auto.offset.reset": "earliest"})
    secured = ["--bootstrap-server", listeners.ssl, *mutual_tls(listeners.certs)]
    consumer = share_consumer(broker, group, topic)
    try:
        wait_for_members(broker, group, 1)
        assert group in ok(seglog("groups", "list", *secured)).splitlines()
        assert ok(seglog("groups", "list", "--type", "share", *secured)).splitlines() == [group]
        described = ok(seglog("groups", "describe", group, *secured))
        assert described.startswith(f"Share group {group} is Stable with 1 member(s)")
    finally:
        consumer.close()
    ok(seglog("groups", "delete", group, *secured))
    assert group not in ok(seglog("groups", "list", *secured)).splitlines()


def test_wrong_scram_password_is_one_line(listeners: Listeners, tmp_path: Path) -> None:
    config = properties_file(
        tmp_path / "c.properties", **scram(listeners.certs, "SCRAM-SHA-256", "alice", "wrong")
    )
    one_line_error(
        seglog("transactions", "list", "--bootstrap-server", listeners.sasl_ssl,
               "--command-config", config),
        f"cannot reach {listeners.sasl_ssl}: SASL authentication error",
    )  # fmt: skip


def test_an_untrusted_broker_certificate_is_one_line(listeners: Listeners) -> None:
    one_line_error(
        seglog("configs", "--describe", "--entity-type", "topics", "--bootstrap-server",
               listeners.ssl, "-X", "security.protocol=SSL", "-X",
               f"ssl.ca.location={listeners.certs.other_ca}"),
        f"cannot reach {listeners.ssl}: SSL handshake failed: certificate verify failed",
    )  # fmt: skip


def test_mutual_tls_without_a_client_certificate_is_refused(listeners: Listeners) -> None:
    result = seglog(
        "transactions", "list", "--bootstrap-server", listeners.ssl,
        "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={listeners.certs.ca}",
    )  # fmt: skip
    one_line_error(result, "does the listener require a client certificate?")


def test_plaintext_spoken_to_a_tls_listener_says_so(listeners: Listeners) -> None:
    one_line_error(
        seglog("transactions", "list", "--bootstrap-server", listeners.ssl),
        "closed the connection: a TLS listener? (security.protocol=SSL or SASL_SSL",
    )


def test_tls_spoken_to_a_plaintext_listener_says_so(listeners: Listeners) -> None:
    one_line_error(
        seglog("transactions", "list", "--bootstrap-server", listeners.broker.bootstrap,
               "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={listeners.certs.ca}"),
        "a PLAINTEXT broker listener?",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (
            ["-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanism=OAUTHBEARER"],
            "speak SASL PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, not OAUTHBEARER",
        ),
        (
            ["-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanism=PLAIN"],
            "SASL PLAIN needs sasl.username and sasl.password",
        ),
        (
            ["-X", "security.protocol=SSL", "-X", "ssl.keystore.location=/k.p12"],
            "cannot read a PKCS#12 key store",
        ),
        (["-X", "security.protocol=QUIC"], "unknown security.protocol 'quic'"),
    ],
)
def test_what_cannot_be_spoken_is_one_line(
    listeners: Listeners, settings: list[str], expected: str
) -> None:
    one_line_error(
        seglog("transactions", "list", "--bootstrap-server", listeners.sasl_ssl, *settings),
        expected,
    )


def test_a_mechanism_the_listener_does_not_enable(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data")
    port = free_port()
    broker.overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    }
    broker.start()
    try:
        one_line_error(
            seglog("transactions", "list", "--bootstrap-server", f"127.0.0.1:{port}",
                   "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=SCRAM-SHA-256",
                   "-X", "sasl.username=alice", "-X", "sasl.password=x"),
            "SASL mechanism SCRAM-SHA-256 is not enabled on this listener (it offers PLAIN)",
        )  # fmt: skip
        out = ok(
            seglog("transactions", "list", "--bootstrap-server", f"127.0.0.1:{port}",
                   "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN",
                   "-X", "sasl.username=admin", "-X", "sasl.password=admin-secret")
        )  # fmt: skip
        assert out.startswith("TransactionalId")
    finally:
        broker.close()
