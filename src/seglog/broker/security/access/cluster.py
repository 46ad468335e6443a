"""The plans of the cluster APIs: ACLs, log directories, elections, reassignments,
client quotas, SCRAM credentials, and those every principal may call.

The ACL and SCRAM APIs need ALTER or DESCRIBE on the cluster; the cluster
tools, as Kafka, the cluster (ALTER to change, DESCRIBE to read; quotas
ALTER_CONFIGS and DESCRIBE_CONFIGS). A refusal answers each item asked about,
as Kafka's error responses do. ApiVersions, the SASL APIs and
DescribeCluster are open to everyone.
"""

from __future__ import annotations

from seglog.broker.security.access.base import CLUSTER_FAILED, Access, Decision, Plan, allow
from seglog.broker.security.access.shapes import cluster_failed, on_cluster
from seglog.broker.security.authorizer import Operation
from seglog.protocol.api_keys import ApiKey
from seglog.protocol.bodies import acls, admin, quotas, replicas, security
from seglog.protocol.entries import entry_as, failed_as

# ------------------------------------------------------------------ ACLs


def _create_acls(
    access: Access, version: int, body: acls.CreateAclsRequest
) -> Decision[acls.CreateAclsResponse]:
    return on_cluster(
        access,
        Operation.ALTER,
        lambda: entry_as(
            acls.CreateAclsResponse,
            results=[
                failed_as(acls.CreateAclsResponseResults, CLUSTER_FAILED) for _ in body["creations"]
            ],
        ),
    )


def _delete_acls(
    access: Access, version: int, body: acls.DeleteAclsRequest
) -> Decision[acls.DeleteAclsResponse]:
    return on_cluster(
        access,
        Operation.ALTER,
        lambda: entry_as(
            acls.DeleteAclsResponse,
            filter_results=[
                failed_as(acls.DeleteAclsResponseFilterResults, CLUSTER_FAILED)
                for _ in body["filters"]
            ],
        ),
    )


def _describe_acls(
    access: Access, version: int, body: acls.DescribeAclsRequest
) -> Decision[acls.DescribeAclsResponse]:
    return on_cluster(access, Operation.DESCRIBE, cluster_failed(acls.DescribeAclsResponse))


# ------------------------------------------------------------------ cluster tools
# Kafka checks the cluster (or, for reads of topics, DESCRIBE on each); a refusal
# answers each item asked about, as Kafka's error responses do.


def _describe_log_dirs(
    access: Access, version: int, body: admin.DescribeLogDirsRequest
) -> Decision[admin.DescribeLogDirsResponse]:
    return on_cluster(access, Operation.DESCRIBE, cluster_failed(admin.DescribeLogDirsResponse))


def _alter_replica_log_dirs(
    access: Access, version: int, body: replicas.AlterReplicaLogDirsRequest
) -> Decision[replicas.AlterReplicaLogDirsResponse]:
    def refusal() -> replicas.AlterReplicaLogDirsResponse:
        results = [
            replicas.AlterReplicaLogDirsResponseResults(
                topic_name=t["name"],
                partitions=[
                    failed_as(
                        replicas.AlterReplicaLogDirsResponseResultsPartitions,
                        CLUSTER_FAILED,
                        partition_index=i,
                    )
                    for i in t["partitions"]
                ],
            )
            for d in body["dirs"]
            for t in d["topics"]
        ]
        return entry_as(replicas.AlterReplicaLogDirsResponse, results=results)

    return on_cluster(access, Operation.ALTER, refusal)


def _elect_leaders(
    access: Access, version: int, body: replicas.ElectLeadersRequest
) -> Decision[replicas.ElectLeadersResponse]:
    """Refused: the whole response and each requested partition, as Kafka's error response."""

    def refusal() -> replicas.ElectLeadersResponse:
        results = [
            replicas.ElectLeadersResponseReplicaElectionResults(
                topic=t["topic"],
                partition_result=[
                    failed_as(
                        replicas.ElectLeadersResponseReplicaElectionResultsPartitionResult,
                        CLUSTER_FAILED,
                        partition_id=i,
                    )
                    for i in t["partitions"]
                ],
            )
            for t in body["topic_partitions"] or []
        ]
        return failed_as(
            replicas.ElectLeadersResponse, CLUSTER_FAILED, replica_election_results=results
        )

    return on_cluster(access, Operation.ALTER, refusal)


def _alter_partition_reassignments(
    access: Access, version: int, body: replicas.AlterPartitionReassignmentsRequest
) -> Decision[replicas.AlterPartitionReassignmentsResponse]:
    """Refused: the whole response and each requested partition, as Kafka's error response."""

    def refusal() -> replicas.AlterPartitionReassignmentsResponse:
        responses = [
            replicas.AlterPartitionReassignmentsResponseResponses(
                name=t["name"],
                partitions=[
                    failed_as(
                        replicas.AlterPartitionReassignmentsResponseResponsesPartitions,
                        CLUSTER_FAILED,
                        partition_index=part["partition_index"],
                    )
                    for part in t["partitions"]
                ],
            )
            for t in body["topics"]
        ]
        return failed_as(
            replicas.AlterPartitionReassignmentsResponse, CLUSTER_FAILED, responses=responses
        )

    return on_cluster(access, Operation.ALTER, refusal)


def _list_partition_reassignments(
    access: Access, version: int, body: replicas.ListPartitionReassignmentsRequest
) -> Decision[replicas.ListPartitionReassignmentsResponse]:
    kind = replicas.ListPartitionReassignmentsResponse
    return on_cluster(access, Operation.DESCRIBE, cluster_failed(kind))


# ------------------------------------------------------------------ quotas and credentials


def _describe_client_quotas(
    access: Access, version: int, body: quotas.DescribeClientQuotasRequest
) -> Decision[quotas.DescribeClientQuotasResponse]:
    kind = quotas.DescribeClientQuotasResponse
    return on_cluster(access, Operation.DESCRIBE_CONFIGS, cluster_failed(kind))


def _alter_client_quotas(
    access: Access, version: int, body: quotas.AlterClientQuotasRequest
) -> Decision[quotas.AlterClientQuotasResponse]:
    def refusal() -> quotas.AlterClientQuotasResponse:
        failed_entries = [
            failed_as(
                quotas.AlterClientQuotasResponseEntries,
                CLUSTER_FAILED,
                entity=[
                    quotas.AlterClientQuotasResponseEntriesEntity(
                        entity_type=part["entity_type"], entity_name=part["entity_name"]
                    )
                    for part in e["entity"]
                ],
            )
            for e in body["entries"]
        ]
        return entry_as(quotas.AlterClientQuotasResponse, entries=failed_entries)

    return on_cluster(access, Operation.ALTER_CONFIGS, refusal)


def _describe_user_scram_credentials(
    access: Access, version: int, body: security.DescribeUserScramCredentialsRequest
) -> Decision[security.DescribeUserScramCredentialsResponse]:
    """Refused: the whole response and one failed result per user asked about.

    Kafka's error response leaves each result's user empty; so does this one.
    """

    def refusal() -> security.DescribeUserScramCredentialsResponse:
        results = [
            failed_as(security.DescribeUserScramCredentialsResponseResults, CLUSTER_FAILED)
            for _ in body["users"] or []
        ]
        return failed_as(
            security.DescribeUserScramCredentialsResponse, CLUSTER_FAILED, results=results
        )

    return on_cluster(access, Operation.DESCRIBE, refusal)


def _alter_user_scram_credentials(
    access: Access, version: int, body: security.AlterUserScramCredentialsRequest
) -> Decision[security.AlterUserScramCredentialsResponse]:
    def refusal() -> security.AlterUserScramCredentialsResponse:
        users = dict.fromkeys(i["name"] for i in [*body["deletions"], *body["upsertions"]])
        results = [
            failed_as(security.AlterUserScramCredentialsResponseResults, CLUSTER_FAILED, user=user)
            for user in users
        ]
        return entry_as(security.AlterUserScramCredentialsResponse, results=results)

    return on_cluster(access, Operation.ALTER, refusal)


PLANS: dict[int, Plan] = {
    ApiKey.API_VERSIONS: allow,
    ApiKey.SASL_HANDSHAKE: allow,
    ApiKey.SASL_AUTHENTICATE: allow,
    ApiKey.DESCRIBE_CLUSTER: allow,
    ApiKey.CREATE_ACLS: _create_acls,
    ApiKey.DELETE_ACLS: _delete_acls,
    ApiKey.DESCRIBE_ACLS: _describe_acls,
    ApiKey.DESCRIBE_LOG_DIRS: _describe_log_dirs,
    ApiKey.ALTER_REPLICA_LOG_DIRS: _alter_replica_log_dirs,
    ApiKey.ELECT_LEADERS: _elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: _list_partition_reassignments,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: _describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: _alter_client_quotas,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _alter_user_scram_credentials,
}
"""API key → its plan, for the cluster APIs and the open ones."""
