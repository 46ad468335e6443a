"""``/v1/whoami``, the console's 401 without a browser prompt, and the cluster and brokers."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Callable

from tests.broker.http_api.conftest import TIMEOUT, Answer, Api, ApiBroker
from tests.broker.http_api.test_security import _start
from tests.broker.http_api.test_storage_routes import cluster_id
from tests.broker.security.conftest import Secured

StartBroker = Callable[..., ApiBroker]


def get(
    api: Api, path: str, *, auth: tuple[str, str] | None = None, headers: dict[str, str]
) -> Answer:
    """GET with extra request headers."""
    request = urllib.request.Request(api.url(path), headers=headers)
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as reply:
            return Answer(reply.status, json.loads(reply.read()), dict(reply.headers))
    except urllib.error.HTTPError as error:
        with error:
            return Answer(error.code, json.loads(error.read()), dict(error.headers))


def test_whoami_without_sasl(api_broker: StartBroker) -> None:
    served = api_broker()
    answer = served.api.get("/v1/whoami")
    assert answer.status == 200
    assert answer.body == {
        "principal": "User:ANONYMOUS",
        "authentication": "none",
        "write_enabled": False,
        "cluster_id": cluster_id(served.bootstrap),
    }
    writable = api_broker(**{"console.write.enable": "true"})
    assert writable.api.get("/v1/whoami").body["write_enabled"] is True


def test_whoami_and_the_console_header(secured_broker: Callable[..., Secured]) -> None:
    _, api = _start(secured_broker, "SASL_PLAINTEXT")
    bare = api.get("/v1/whoami")
    assert (bare.status, bare.body["error_code"]) == (401, 58)
    assert bare.headers["WWW-Authenticate"].startswith("Basic")
    # The console's page: the same refusal, without the header that makes a browser prompt.
    console = get(api, "/v1/whoami", headers={"X-Seglog-Console": "1"})
    assert (console.status, console.body["error_code"]) == (401, 58)
    assert "WWW-Authenticate" not in console.headers
    wrong = get(api, "/v1/whoami", auth=("alice", "nope"), headers={"X-Seglog-Console": "1"})
    assert wrong.status == 401
    assert "WWW-Authenticate" not in wrong.headers
    me = get(api, "/v1/whoami", auth=("alice", "alice-secret"), headers={"X-Seglog-Console": "1"})
    assert me.status == 200
    assert me.body["principal"] == "User:alice"
    assert me.body["authentication"] == "basic"
    assert me.body["write_enabled"] is False
    # SCRAM users log in as well.
    assert api.get("/v1/whoami", auth=("carol", "carol-secret")).body["principal"] == "User:carol"


def test_cluster_and_brokers(api_broker: StartBroker) -> None:
    served = api_broker()
    cid = cluster_id(served.bootstrap)
    clusters = served.api.get("/v3/clusters")
    assert clusters.status == 200
    assert clusters.body["kind"] == "KafkaClusterList"
    assert clusters.body["metadata"] == {"self": "/v3/clusters", "next": None}
    [item] = clusters.body["data"]
    assert item["kind"] == "KafkaCluster"
    assert item["metadata"]["self"] == f"/v3/clusters/{cid}"
    assert (item["cluster_id"], item["broker_count"]) == (cid, 1)
    one = served.api.get(f"/v3/clusters/{cid}")
    assert one.body == item
    assert served.api.get("/v3/clusters/not-this-one").status == 404
    brokers = served.api.get(f"/v3/clusters/{cid}/brokers")
    assert brokers.body["kind"] == "KafkaBrokerList"
    [broker] = brokers.body["data"]
    port = int(served.bootstrap.rsplit(":", 1)[1])
    assert broker["broker_id"] == item["controller_id"]
    assert (broker["port"], broker["rack"], broker["alive"]) == (port, None, True)
    assert broker["metadata"]["self"] == f"/v3/clusters/{cid}/brokers/{broker['broker_id']}"
