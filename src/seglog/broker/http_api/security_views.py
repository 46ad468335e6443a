"""ACLs (REST Proxy v3), SCRAM users, client quotas and transactions, as a Kafka admin sees them.

Each is the answer of the request an admin client would send, handled as
the HTTP caller (:func:`~.kafka_calls.ask`): DescribeAcls and
DescribeUserScramCredentials need DESCRIBE on the cluster,
DescribeClientQuotas DESCRIBE_CONFIGS on it, and ListTransactions /
DescribeTransactions show only the transactional ids the caller may
DESCRIBE. A transaction is *hanging* when it has been open longer than its
own timeout (the broker aborts such a transaction on its next pass; one that
stays is what ``kafka-transactions --find-hanging`` looks for).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from seglog.broker.http_api.consumer_groups import refused
from seglog.broker.http_api.kafka_calls import ask
from seglog.broker.http_api.routes import Param, Route, json_response
from seglog.broker.http_api.topic_access import caller, check_cluster, state_of
from seglog.broker.http_api.v3_cluster import cluster_url, list_schema, listing, obj
from seglog.broker.security.authorizer import Operation, PatternType, Permission, ResourceType
from seglog.protocol import error_codes
from seglog.protocol.api_keys import ApiKey

DESCRIBE_ACLS_VERSION = 3
DESCRIBE_SCRAM_VERSION = 0
DESCRIBE_QUOTAS_VERSION = 1
LIST_TRANSACTIONS_VERSION = 1
DESCRIBE_TRANSACTIONS_VERSION = 0
_MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
_OPEN = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort"})


def _name(enum: type[Any], code: int) -> str:
    try:
        return str(enum(code).name)
    except ValueError:
        return "UNKNOWN"


async def acls(request: web.Request) -> web.StreamResponse:
    """Every ACL (DESCRIBE on the cluster)."""
    check_cluster(request)
    answer = await ask(
        request,
        ApiKey.DESCRIBE_ACLS,
        DESCRIBE_ACLS_VERSION,
        {
            "resource_type_filter": ResourceType.ANY,
            "resource_name_filter": None,
            "pattern_type_filter": PatternType.ANY,
            "principal_filter": None,
            "host_filter": None,
            "operation": Operation.ANY,
            "permission_type": Permission.ANY,
        },
    )
    url = f"{cluster_url(request)}/acls"
    if answer["error_code"] == error_codes.code_for("SECURITY_DISABLED"):
        # No authorizer: no ACL exists and everyone may do everything; nothing to list.
        return json_response(listing("KafkaAclList", url, []))
    if answer["error_code"] != 0:
        raise refused(answer["error_code"], answer.get("error_message"), "DescribeAcls")
    data = [
        {
            "kind": "KafkaAcl",
            "metadata": {"self": url},
            "cluster_id": state_of(request).cluster_id,
            "resource_type": _name(ResourceType, resource["resource_type"]),
            "resource_name": resource["resource_name"],
            "pattern_type": _name(PatternType, resource["pattern_type"]),
            "principal": acl["principal"],
            "host": acl["host"],
            "operation": _name(Operation, acl["operation"]),
            "permission": _name(Permission, acl["permission_type"]),
        }
        for resource in answer["resources"]
        for acl in resource["acls"]
    ]
    data.sort(
        key=lambda a: (a["resource_type"], a["resource_name"], a["principal"], a["operation"])
    )
    return json_response(listing("KafkaAclList", url, data))


async def users(request: web.Request) -> web.StreamResponse:
    """The SCRAM users and their mechanisms (DESCRIBE on the cluster)."""
    answer = await ask(
        request, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, DESCRIBE_SCRAM_VERSION, {"users": None}
    )
    if answer["error_code"] != 0:
        raise refused(answer["error_code"], answer.get("error_message"), "users")
    return json_response(
        {
            "users": sorted(
                (
                    {
                        "name": result["user"],
                        "mechanisms": [
                            {
                                "mechanism": _MECHANISMS.get(c["mechanism"], "UNKNOWN"),
                                "iterations": c["iterations"],
                            }
                            for c in result["credential_infos"]
                        ],
                    }
                    for result in answer["results"]
                    if result["error_code"] == 0
                ),
                key=lambda u: u["name"],
            )
        }
    )


async def quotas(request: web.Request) -> web.StreamResponse:
    """Every client quota (DESCRIBE_CONFIGS on the cluster)."""
    answer = await ask(
        request,
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        DESCRIBE_QUOTAS_VERSION,
        {"components": [], "strict": False},
    )
    if answer["error_code"] != 0:
        raise refused(answer["error_code"], answer.get("error_message"), "quotas")
    return json_response(
        {
            "quotas": [
                {
                    "entity": [
                        {"entity_type": e["entity_type"], "entity_name": e["entity_name"]}
                        for e in entry["entity"]
                    ],
                    "values": {v["key"]: v["value"] for v in entry["values"]},
                }
                for entry in answer["entries"] or ()
            ]
        }
    )


async def transactions(request: web.Request) -> web.StreamResponse:
    """The transactional ids the caller may DESCRIBE, on every node, and which hang."""
    await caller(request)
    cluster = state_of(request).cluster
    nodes = [n for n in cluster.node_ids() if cluster.alive(n)]

    async def of(node: int) -> list[dict[str, Any]]:
        listed = await ask(
            request,
            ApiKey.LIST_TRANSACTIONS,
            LIST_TRANSACTIONS_VERSION,
            {"state_filters": [], "producer_id_filters": [], "duration_filter": -1},
            node_id=node,
        )
        if listed["error_code"] != 0:
            raise refused(listed["error_code"], None, f"node {node}'s transactions")
        ids = [t["transactional_id"] for t in listed["transaction_states"]]
        if not ids:
            return []
        described = await ask(
            request,
            ApiKey.DESCRIBE_TRANSACTIONS,
            DESCRIBE_TRANSACTIONS_VERSION,
            {"transactional_ids": ids},
            node_id=node,
        )
        return [t for t in described["transaction_states"] if t["error_code"] == 0]

    per_node = await asyncio.gather(*(of(n) for n in nodes))
    now_ms = int(time.time() * 1000)
    out = []
    for t in sorted((t for ts in per_node for t in ts), key=lambda t: t["transactional_id"]):
        start = int(t["transaction_start_time_ms"])
        timeout = int(t["transaction_timeout_ms"])
        out.append(
            {
                "transactional_id": t["transactional_id"],
                "producer_id": t["producer_id"],
                "producer_epoch": t["producer_epoch"],
                "state": t["transaction_state"],
                "timeout_ms": timeout,
                "start_time_ms": start,
                "partitions": [
                    {"topic": topic["topic"], "partition": p}
                    for topic in t["topics"]
                    for p in topic["partitions"]
                ],
                "hanging": t["transaction_state"] in _OPEN
                and start >= 0
                and now_ms - start > timeout,
            }
        )
    return json_response({"transactions": out})


_ACL_ITEM = obj(
    resource_type="string",
    resource_name="string",
    pattern_type="string",
    principal="string",
    host="string",
    operation="string",
    permission="string",
)


def _array(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": item}


_USER = obj(name="string")
_USER["properties"]["mechanisms"] = _array(obj(mechanism="string", iterations="integer"))
_QUOTA = {
    "type": "object",
    "properties": {
        "entity": _array(obj(entity_type="string", entity_name="string?")),
        "values": {"type": "object", "additionalProperties": {"type": "number"}},
    },
}
_TXN = obj(
    transactional_id="string",
    producer_id="integer",
    producer_epoch="integer",
    state="string",
    timeout_ms="integer",
    start_time_ms="integer",
    hanging="boolean",
)
_TXN["properties"]["partitions"] = _array(obj(topic="string", partition="integer"))

ROUTES = (
    Route(
        "GET",
        "/v3/clusters/{cluster_id}/acls",
        acls,
        "listAcls",
        "Every ACL (DESCRIBE on the cluster, as DescribeAcls)",
        params=(Param("cluster_id", "string", "the cluster's id", location="path"),),
        response=list_schema(_ACL_ITEM),
        errors=(401, 403, 404),
    ),
    Route(
        "GET",
        "/v1/users",
        users,
        "listUsers",
        "The SCRAM users and their mechanisms (DESCRIBE on the cluster)",
        response={"type": "object", "properties": {"users": _array(_USER)}},
        errors=(401, 403),
    ),
    Route(
        "GET",
        "/v1/quotas",
        quotas,
        "listQuotas",
        "Every client quota (DESCRIBE_CONFIGS on the cluster)",
        response={"type": "object", "properties": {"quotas": _array(_QUOTA)}},
        errors=(401, 403),
    ),
    Route(
        "GET",
        "/v1/transactions",
        transactions,
        "listTransactions",
        "The transactions the caller may DESCRIBE, and whether each is hanging",
        response={"type": "object", "properties": {"transactions": _array(_TXN)}},
        errors=(401, 503),
    ),
)
