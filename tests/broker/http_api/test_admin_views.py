"""ACLs, SCRAM users and client quotas of a broker without SASL nor authorizer."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from seglog.protocol import ApiKey
from tests.broker.http_api.conftest import ApiBroker
from tests.broker.http_api.test_storage_routes import cluster_id
from tests.broker.nodes.conftest import Raw

StartBroker = Callable[..., ApiBroker]


def test_acls_users_and_quotas(api_broker: StartBroker) -> None:
    served = api_broker()
    api = served.api
    cid = cluster_id(served.bootstrap)
    # No authorizer: no ACL to list (DescribeAcls answers SECURITY_DISABLED).
    acls = api.get(f"/v3/clusters/{cid}/acls")
    assert acls.status == 200
    assert acls.body["data"] == []
    assert api.get("/v1/users").body == {"users": []}
    assert api.get("/v1/quotas").body == {"quotas": []}
    admin = AdminClient({"bootstrap.servers": served.bootstrap})
    upsert = UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"dave-secret"
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    assert api.get("/v1/users").body == {
        "users": [
            {"name": "dave", "mechanisms": [{"mechanism": "SCRAM-SHA-512", "iterations": 8192}]}
        ]
    }
    raw = Raw(served.process.port)
    try:
        answer = raw.call(
            ApiKey.ALTER_CLIENT_QUOTAS,
            1,
            {
                "entries": [
                    {
                        "entity": [{"entity_type": "client-id", "entity_name": "slow"}],
                        "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}],
                    }
                ],
                "validate_only": False,
            },
        )
    finally:
        raw.close()
    assert answer["entries"][0]["error_code"] == 0
    assert api.get("/v1/quotas").body == {
        "quotas": [
            {
                "entity": [{"entity_type": "client-id", "entity_name": "slow"}],
                "values": {"producer_byte_rate": 1024.0},
            }
        ]
    }
