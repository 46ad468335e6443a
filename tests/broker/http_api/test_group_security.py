"""Groups, ACLs, users, quotas and the overview on a SASL broker with ACLs: each refused or
filtered for a user exactly as a Kafka client of that user would be."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import Consumer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tests.broker.http_api.test_groups import consume, wait_for
from tests.broker.http_api.test_security import ADMIN, _prepare, _start
from tests.broker.security.conftest import Secured
from tests.broker.security.test_sasl import confluent

ALICE = ("alice", "alice-secret")


def _allow(admin: AdminClient, kind: ResourceType, name: str, operation: AclOperation) -> None:
    binding = AclBinding(
        kind,
        name,
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        operation,
        AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([binding]).values():
        future.result(30)


def test_groups_and_admin_views_follow_the_acls(
    secured_broker: Callable[..., Secured], topic: str
) -> None:
    broker, api = _start(secured_broker, "SASL_PLAINTEXT", write=True)
    _prepare(broker, topic)  # one record; alice and carol may READ the topic
    config = confluent(broker.bootstrap, "PLAIN", *ADMIN)
    cid = api.get("/v1/whoami", auth=ADMIN).body["cluster_id"]
    group = f"g-{topic}"
    consumer = Consumer(
        {**config, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumer.subscribe([topic])
    base = f"/v3/clusters/{cid}/consumer-groups"
    try:
        consume(consumer, 1)
        wait_for(
            api,
            base,
            lambda b: [g["consumer_group_id"] for g in b["data"]] == [group],
            auth=ADMIN,
        )
        # Without DESCRIBE on the group, alice's ListGroups leaves it out, DescribeGroups refuses.
        assert api.get(base, auth=ALICE).body["data"] == []
        refused = api.get(f"{base}/{group}", auth=ALICE)
        assert (refused.status, refused.body["error_code"]) == (403, 30)
        assert api.get(f"{base}/{group}/lags", auth=ALICE).status == 403
        admin = AdminClient(config)
        _allow(admin, ResourceType.GROUP, group, AclOperation.DESCRIBE)
        [item] = api.get(base, auth=ALICE).body["data"]
        assert item["consumer_group_id"] == group
        lags = api.get(f"{base}/{group}/lags", auth=ALICE).body["data"]
        assert [(x["topic_name"], x["current_offset"], x["lag"]) for x in lags] == [(topic, 1, 0)]
    finally:
        consumer.close()
    # A reset needs READ on the group (OffsetCommit's rule): alice has only DESCRIBE.
    wait_for(api, f"{base}/{group}", lambda b: b["state"] == "EMPTY", auth=ADMIN)
    denied = api.post(
        f"/v1/groups/{group}/offsets/reset", {"topic": topic, "to": "earliest"}, auth=ALICE
    )
    assert (denied.status, denied.body["error_code"]) == (403, 30)
    _allow(admin, ResourceType.GROUP, group, AclOperation.READ)
    done = api.post(
        f"/v1/groups/{group}/offsets/reset", {"topic": topic, "to": "earliest"}, auth=ALICE
    )
    assert done.status == 200, done.body
    assert done.body == {"offsets": [{"topic": topic, "partition": 0, "offset": 0}]}
    # The cluster-wide views need DESCRIBE (DESCRIBE_CONFIGS for quotas) on the cluster.
    for path in (f"/v3/clusters/{cid}/acls", "/v1/users", "/v1/quotas", "/v1/overview"):
        answer = api.get(path, auth=ALICE)
        assert (answer.status, answer.body["error_code"]) == (403, 31), path
    acls = api.get(f"/v3/clusters/{cid}/acls", auth=ADMIN).body
    assert acls["kind"] == "KafkaAclList"
    assert {
        "resource_type": "GROUP",
        "resource_name": group,
        "pattern_type": "LITERAL",
        "principal": "User:alice",
        "host": "*",
        "operation": "READ",
        "permission": "ALLOW",
    }.items() <= next(
        a for a in acls["data"] if a["resource_type"] == "GROUP" and a["operation"] == "READ"
    ).items()
    users = api.get("/v1/users", auth=ADMIN).body["users"]
    [carol] = [u for u in users if u["name"] == "carol"]
    assert carol["mechanisms"] and carol["mechanisms"][0]["mechanism"].startswith("SCRAM-SHA-")
    assert carol["mechanisms"][0]["iterations"] >= 4096
    assert api.get("/v1/quotas", auth=ADMIN).body == {"quotas": []}
    assert api.get("/v1/overview", auth=ADMIN).status == 200
    # Transactions the caller may not DESCRIBE are not listed (none here either way).
    assert api.get("/v1/transactions", auth=ALICE).body == {"transactions": []}
