"""The plans of the cluster APIs: ACLs, log directories, elections, reassignments,
client quotas, SCRAM credentials, and those every principal may call.

The ACL and SCRAM APIs need ALTER or DESCRIBE on the cluster; the cluster
tools, as Kafka, the cluster (ALTER to change, DESCRIBE to read; quotas
ALTER_CONFIGS and DESCRIBE_CONFIGS). A refusal answers each item asked about,
as Kafka's error responses do. ApiVersions, the SASL APIs and
DescribeCluster are open to everyone.
"""

from __future__ import annotations

from typing import Any

from seglog.broker.security.access import shapes
from seglog.broker.security.access.base import (
    CLUSTER_FAILED,
    Plan,
    allow,
)
from seglog.broker.security.authorizer import Operation
from seglog.protocol import entries
from seglog.protocol.api_keys import ApiKey
from seglog.protocol.entries import failed


def _alter_replica_log_dirs(body: dict[str, Any]) -> dict[str, Any]:
    key = ApiKey.ALTER_REPLICA_LOG_DIRS
    return entries.entry(
        key,
        "",
        results=[
            shapes.failed_partitions(
                key,
                "results",
                "partitions",
                CLUSTER_FAILED,
                t.get("partitions") or [],
                topic_name=t["name"],
            )
            for d in body.get("dirs") or []
            for t in d.get("topics") or []
        ],
    )


def _alter_client_quotas(body: dict[str, Any]) -> dict[str, Any]:
    key = ApiKey.ALTER_CLIENT_QUOTAS
    return entries.entry(
        key,
        "",
        entries=[
            failed(key, "entries", CLUSTER_FAILED, entity=e.get("entity", []))
            for e in body.get("entries") or []
        ],
    )


def _elect_leaders(body: dict[str, Any]) -> dict[str, Any]:
    """Refused: the whole response and each requested partition, as Kafka's error response."""
    key = ApiKey.ELECT_LEADERS
    return failed(
        key,
        "",
        CLUSTER_FAILED,
        replica_election_results=[
            entries.entry(
                key,
                "replica_election_results",
                topic=t["topic"],
                partition_result=[
                    failed(
                        key,
                        "replica_election_results.partition_result",
                        CLUSTER_FAILED,
                        partition_id=p,
                    )
                    for p in t.get("partitions") or []
                ],
            )
            for t in body.get("topic_partitions") or []
        ],
    )


def _alter_partition_reassignments(body: dict[str, Any]) -> dict[str, Any]:
    """Refused: the whole response and each requested partition, as Kafka's error response."""
    key = ApiKey.ALTER_PARTITION_REASSIGNMENTS
    return failed(
        key,
        "",
        CLUSTER_FAILED,
        responses=[
            shapes.failed_partitions(
                key,
                "responses",
                "partitions",
                CLUSTER_FAILED,
                (p["partition_index"] for p in t.get("partitions") or []),
                name=t["name"],
            )
            for t in body.get("topics") or []
        ],
    )


def _describe_user_scram_credentials(body: dict[str, Any]) -> dict[str, Any]:
    """Refused: the whole response and one failed result per user asked about.

    Kafka's error response leaves each result's user empty; so does this one.
    """
    key = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
    return failed(
        key,
        "",
        CLUSTER_FAILED,
        results=[failed(key, "results", CLUSTER_FAILED) for _ in body.get("users") or []],
    )


def _delete_acls_denied(body: dict[str, Any]) -> dict[str, Any]:
    key = ApiKey.DELETE_ACLS
    return entries.entry(
        key,
        "",
        filter_results=[
            failed(key, "filter_results", CLUSTER_FAILED) for _ in body.get("filters") or []
        ],
    )


PLANS: dict[int, Plan] = {
    ApiKey.API_VERSIONS: allow,
    ApiKey.SASL_HANDSHAKE: allow,
    ApiKey.SASL_AUTHENTICATE: allow,
    ApiKey.DESCRIBE_CLUSTER: allow,
    ApiKey.CREATE_ACLS: shapes.cluster(
        Operation.ALTER,
        lambda body: entries.entry(
            ApiKey.CREATE_ACLS,
            "",
            results=[
                failed(ApiKey.CREATE_ACLS, "results", CLUSTER_FAILED)
                for _ in body.get("creations") or []
            ],
        ),
    ),
    ApiKey.DELETE_ACLS: shapes.cluster(Operation.ALTER, _delete_acls_denied),
    ApiKey.DESCRIBE_ACLS: shapes.cluster(
        Operation.DESCRIBE, shapes.cluster_failed(ApiKey.DESCRIBE_ACLS)
    ),
    # Cluster tools: Kafka checks the cluster (or, for reads of topics, DESCRIBE on each).
    ApiKey.DESCRIBE_LOG_DIRS: shapes.cluster(
        Operation.DESCRIBE, shapes.cluster_failed(ApiKey.DESCRIBE_LOG_DIRS)
    ),
    ApiKey.ALTER_REPLICA_LOG_DIRS: shapes.cluster(Operation.ALTER, _alter_replica_log_dirs),
    ApiKey.ELECT_LEADERS: shapes.cluster(Operation.ALTER, _elect_leaders),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: shapes.cluster(
        Operation.ALTER, _alter_partition_reassignments
    ),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: shapes.cluster(
        Operation.DESCRIBE, shapes.cluster_failed(ApiKey.LIST_PARTITION_REASSIGNMENTS)
    ),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: shapes.cluster(
        Operation.DESCRIBE_CONFIGS, shapes.cluster_failed(ApiKey.DESCRIBE_CLIENT_QUOTAS)
    ),
    ApiKey.ALTER_CLIENT_QUOTAS: shapes.cluster(Operation.ALTER_CONFIGS, _alter_client_quotas),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: shapes.cluster(
        Operation.DESCRIBE, _describe_user_scram_credentials
    ),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: shapes.cluster(
        Operation.ALTER,
        lambda body: entries.entry(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            "",
            results=[
                failed(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "results", CLUSTER_FAILED, user=u)
                for u in dict.fromkeys(
                    i["name"] for i in [*body.get("deletions", []), *body.get("upsertions", [])]
                )
            ],
        ),
    ),
}
"""API key → its plan, for the cluster APIs and the open ones."""
