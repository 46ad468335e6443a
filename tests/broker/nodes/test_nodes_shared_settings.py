"""ACLs and client quotas changed through one node apply on every node."""

from __future__ import annotations

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from seglog.protocol import ApiKey
from tests.broker.nodes.conftest import Cluster, Raw


def _alter_quota(port: int, client: str, rate: float) -> None:
    raw = Raw(port)
    answer = raw.call(
        ApiKey.ALTER_CLIENT_QUOTAS,
        1,
        {
            "entries": [
                {
                    "entity": [{"entity_type": "client-id", "entity_name": client}],
                    "ops": [{"key": "producer_byte_rate", "value": rate, "remove": False}],
                }
            ],
            "validate_only": False,
        },
    )
    raw.close()
    assert answer["entries"][0]["error_code"] == 0


def _quotas(port: int) -> dict[str, float]:
    raw = Raw(port)
    answer = raw.call(
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        1,
        {
            "components": [{"entity_type": "client-id", "match_type": 2, "match": None}],
            "strict": False,
        },
    )
    raw.close()
    return {
        entry["entity"][0]["entity_name"]: entry["values"][0]["value"]
        for entry in answer["entries"] or []
    }


def test_acls_and_quotas_reach_every_node(make_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster: Cluster = make_cluster(
        2,
        **{"authorizer.class.name": "seglog", "allow.everyone.if.no.acl.found": "true"},
    )
    # Changed through each node in turn: neither change may undo the other.
    for node, client in ((2, "a"), (1, "b")):
        _alter_quota(cluster.port(node), client, 1000.0 * node)
    assert _quotas(cluster.port(1)) == _quotas(cluster.port(2)) == {"a": 2000.0, "b": 1000.0}

    admins = {n: AdminClient({"bootstrap.servers": cluster.bootstrap(n)}) for n in (1, 2)}
    for node, user in ((2, "User:alice"), (1, "User:bob")):
        binding = AclBinding(
            ResourceType.TOPIC,
            "shared",
            ResourcePatternType.LITERAL,
            user,
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        admins[node].create_acls([binding])[binding].result(20)
    everything = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    for node in (1, 2):
        found = admins[node].describe_acls(everything).result(20)
        assert sorted(b.principal for b in found) == ["User:alice", "User:bob"]
