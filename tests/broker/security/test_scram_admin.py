"""SCRAM credentials managed over the wire (KIP-554) with confluent-kafka's AdminClient."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from seglog.protocol.api_keys import ApiKey
from tests.broker.security.conftest import RawClient, Secured
from tests.broker.security.test_sasl import confluent, sasl_settings


def test_alter_then_log_in_then_describe_and_delete(
    secured_broker: Callable[..., Secured],
) -> None:
    broker = secured_broker("SASL_PLAINTEXT", **sasl_settings("SASL_PLAINTEXT"))
    admin = AdminClient(confluent(broker.bootstrap, "PLAIN", "admin", "admin-secret"))
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("dora", info, b"dora-secret")]
    )
    for future in futures.values():
        future.result(10)
    # The new user logs in at once.
    AdminClient(confluent(broker.bootstrap, "SCRAM-SHA-512", "dora", "dora-secret")).list_topics(
        timeout=10
    )
    described = {
        user: future.result(10)
        for user, future in admin.describe_user_scram_credentials(["dora"]).items()
    }
    assert [(i.mechanism, i.iterations) for i in described["dora"].scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 8192)
    ]
    with pytest.raises(KafkaException, match="does not exist"):
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(10)
    with pytest.raises(KafkaException, match="Too few iterations"):
        bad = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100)
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion("eve", bad, b"x")])[
            "eve"
        ].result(10)
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("dora", ScramMechanism.SCRAM_SHA_512)]
    )
    futures["dora"].result(10)
    with pytest.raises(KafkaException):
        AdminClient(
            {
                **confluent(broker.bootstrap, "SCRAM-SHA-512", "dora", "dora-secret"),
                "log_level": "0",
            }
        ).list_topics(timeout=3)


def test_describe_configs_hides_secrets(secured_broker: Callable[..., Secured]) -> None:
    broker = secured_broker(
        "SASL_PLAINTEXT",
        **sasl_settings("SASL_PLAINTEXT", **{"ssl.key.password": "key-secret"}),
    )
    admin = AdminClient(confluent(broker.bootstrap, "PLAIN", "admin", "admin-secret"))
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = admin.describe_configs([resource])[resource].result(10)
    shown = {name: (entry.value, entry.is_sensitive) for name, entry in configs.items()}
    assert shown["listener.name.sasl_plaintext.plain.sasl.jaas.config"] == (None, True)
    assert shown["ssl.key.password"] == (None, True)
    assert shown["sasl.enabled.mechanisms"] == ("PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", False)
    assert all("secret" not in (value or "") for value, _ in shown.values())


@pytest.mark.parametrize(
    ("salt", "salted", "message"),
    [
        (b"", b"s" * 32, "Salt must not be empty"),
        (b"salt", b"", "Salted password must be 32 bytes for SCRAM-SHA-256"),
        (b"salt", b"s" * 64, "Salted password must be 32 bytes for SCRAM-SHA-256"),
    ],
)
def test_a_credential_no_client_could_use_is_refused(
    secured_broker: Callable[..., Secured], salt: bytes, salted: bytes, message: str
) -> None:
    broker = secured_broker("SASL_PLAINTEXT", **sasl_settings("SASL_PLAINTEXT"))
    client = RawClient(broker.process.port)  # the PLAINTEXT listener: no authorizer here
    upsertion = {
        "name": "eve",
        "mechanism": 1,
        "iterations": 4096,
        "salt": salt,
        "salted_password": salted,
    }
    answer = client.request(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {"deletions": [], "upsertions": [upsertion]}
    )
    client.close()
    assert answer is not None
    assert answer["results"] == [
        {"user": "eve", "error_code": 93, "error_message": message}  # UNACCEPTABLE_CREDENTIAL
    ]
