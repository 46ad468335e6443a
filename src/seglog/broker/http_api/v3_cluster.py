"""Who the caller is (``/v1/whoami``), and REST Proxy v3's cluster and its brokers.

The cluster and broker lists tell what a Kafka client's Metadata tells
anyone who has logged in (Kafka asks no ACL for them): the nodes, their
addresses on the first advertised listener, which is the controller and
which are running.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from seglog.broker.handlers.metadata import controller_id
from seglog.broker.http_api.routes import SECURITY, Param, Route, json_response
from seglog.broker.http_api.topic_access import caller, check_cluster, state_of

_CLUSTER = Param("cluster_id", "string", "the cluster's id", location="path")


def listing(kind: str, url: str, data: list[dict[str, Any]]) -> dict[str, Any]:
    """A REST Proxy v3 list body."""
    return {"kind": kind, "metadata": {"self": url, "next": None}, "data": data}


def cluster_url(request: web.Request) -> str:
    """``/v3/clusters/{c}`` of this cluster."""
    return f"/v3/clusters/{state_of(request).cluster_id}"


async def whoami(request: web.Request) -> web.StreamResponse:
    """The caller's principal, how it was told, and whether the console may write."""
    who = await caller(request)
    state = state_of(request)
    return json_response(
        {
            "principal": who.principal,
            "authentication": "none" if request.app[SECURITY].sasl is None else "basic",
            "write_enabled": state.settings.console_write_enable,
            "cluster_id": state.cluster_id,
        }
    )


def _cluster_item(request: web.Request) -> dict[str, Any]:
    state = state_of(request)
    url = cluster_url(request)
    cluster = state.cluster
    return {
        "kind": "KafkaCluster",
        "metadata": {"self": url},
        "cluster_id": state.cluster_id,
        "controller_id": controller_id(state),
        "broker_count": sum(1 for node in cluster.node_ids() if cluster.alive(node)),
        "controller": {"related": f"{url}/brokers/{controller_id(state)}"},
        "brokers": {"related": f"{url}/brokers"},
    }


async def list_clusters(request: web.Request) -> web.StreamResponse:
    """The one cluster."""
    await caller(request)
    return json_response(listing("KafkaClusterList", "/v3/clusters", [_cluster_item(request)]))


async def one_cluster(request: web.Request) -> web.StreamResponse:
    """This cluster (404 for another id)."""
    check_cluster(request)
    await caller(request)
    return json_response(_cluster_item(request))


async def list_brokers(request: web.Request) -> web.StreamResponse:
    """Every node of the cluster, running or not, at its advertised address."""
    check_cluster(request)
    await caller(request)
    state = state_of(request)
    cluster = state.cluster
    mine = state.settings.advertised_for(state.settings.listeners[0].name)
    url = cluster_url(request)
    data = []
    for node in cluster.node_ids():
        listener = cluster.advertised(mine, node)
        data.append(
            {
                "kind": "KafkaBroker",
                "metadata": {"self": f"{url}/brokers/{node}"},
                "cluster_id": state.cluster_id,
                "broker_id": node,
                "host": listener.host,
                "port": listener.port,
                "rack": None,
                "alive": cluster.alive(node),
                "is_controller": node == controller_id(state),
            }
        )
    return json_response(listing("KafkaBrokerList", f"{url}/brokers", data))


def list_schema(item: dict[str, Any]) -> dict[str, Any]:
    """The schema of a REST Proxy v3 list of ``item``."""
    return {
        "type": "object",
        "properties": {
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "data": {"type": "array", "items": item},
        },
    }


def obj(**fields: str) -> dict[str, Any]:
    """An object schema whose fields have the given JSON types (``"integer?"``: nullable)."""
    properties: dict[str, Any] = {}
    for name, kind in fields.items():
        schema: dict[str, Any] = {"type": kind.rstrip("?")}
        if kind.endswith("?"):
            schema["nullable"] = True
        properties[name] = schema
    return {"type": "object", "properties": properties}


_CLUSTER_ITEM = obj(cluster_id="string", controller_id="integer", broker_count="integer")
_BROKER_ITEM = obj(
    broker_id="integer",
    host="string",
    port="integer",
    rack="string?",
    alive="boolean",
    is_controller="boolean",
)

ROUTES = (
    Route(
        "GET",
        "/v1/whoami",
        whoami,
        "whoami",
        "The caller's principal, how it authenticated, and whether the console may write",
        response=obj(
            principal="string",
            authentication="string",
            write_enabled="boolean",
            cluster_id="string",
        ),
        errors=(401,),
    ),
    Route(
        "GET",
        "/v3/clusters",
        list_clusters,
        "listClusters",
        "The cluster (REST Proxy v3)",
        response=list_schema(_CLUSTER_ITEM),
        errors=(401,),
    ),
    Route(
        "GET",
        "/v3/clusters/{cluster_id}",
        one_cluster,
        "getCluster",
        "The cluster (REST Proxy v3)",
        params=(_CLUSTER,),
        response=_CLUSTER_ITEM,
        errors=(401, 404),
    ),
    Route(
        "GET",
        "/v3/clusters/{cluster_id}/brokers",
        list_brokers,
        "listBrokers",
        "Every node of the cluster and whether it is running (REST Proxy v3)",
        params=(_CLUSTER,),
        response=list_schema(_BROKER_ITEM),
        errors=(401, 404),
    ),
)
