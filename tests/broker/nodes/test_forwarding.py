"""Topic administration sent to a node that is not the controller travels in an Envelope.

The node forwards the client's request whole, with the client's principal and
address (KIP-590); the controller authorizes and handles it with the ordinary
handler. A client cannot send an Envelope itself.
"""

from __future__ import annotations

import socket
import struct
import urllib.request
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from prometheus_client.parser import text_string_to_metric_families

from seglog.protocol import ApiKey, encode_request
from seglog.protocol.error_codes import code_for
from tests.broker.nodes.conftest import Cluster, Raw, free_ports


def _create(port: int, name: str, *, validate_only: bool = False) -> dict[str, Any]:
    raw = Raw(port)
    try:
        body = raw.call(
            ApiKey.CREATE_TOPICS,
            7,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": 2,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 60_000,
                "validate_only": validate_only,
            },
        )
    finally:
        raw.close()
    return body["topics"][0]  # type: ignore[no-any-return]


def _requests(metrics_port: int, request: str) -> float:
    """How many ``request`` requests the node behind ``metrics_port`` has handled."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30) as page:
        text = page.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "kafka_network_requestmetrics_requests_total"
        and sample.labels.get("request") == request
    )


def test_creation_through_a_node_is_carried_out_by_the_controller(make_cluster: Any) -> None:
    metrics = free_ports(2)
    cluster: Cluster = make_cluster(2, **{"metrics.port": str(metrics)})
    before = _requests(metrics, "Envelope")
    answer = _create(cluster.port(2), "through-two")
    assert answer["error_code"] == 0, answer
    assert answer["num_partitions"] == 2  # the controller's own answer, whole
    # The controller handled one Envelope (and the CreateTopics inside it).
    assert _requests(metrics, "Envelope") == before + 1
    assert _requests(metrics + 1, "Envelope") == 0
    # Sent again through either node: the controller says it exists.
    for node in (1, 2):
        again = _create(cluster.port(node), "through-two")
        assert again["error_code"] == code_for("TOPIC_ALREADY_EXISTS"), again
    # validate_only is the controller's business too: nothing is created.
    checked = _create(cluster.port(2), "only-checked", validate_only=True)
    assert checked["error_code"] == 0, checked
    assert _create(cluster.port(1), "only-checked")["error_code"] == 0


def test_the_controller_authorizes_a_forwarded_request_as_its_client(make_cluster: Any) -> None:
    cluster: Cluster = make_cluster(
        2, **{"authorizer.class.name": "seglog", "allow.everyone.if.no.acl.found": "true"}
    )
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(1)})
    # Allowed to everyone from anywhere but denied to the anonymous client from
    # 127.0.0.1: the principal and the address must both travel with the request.
    # (CREATE on the cluster would allow every topic: it gets the same pair.)
    bindings = [
        AclBinding(resource, name, pattern, principal, host, AclOperation.CREATE, permission)
        for resource, name, pattern in (
            (ResourceType.TOPIC, "secret-", ResourcePatternType.PREFIXED),
            (ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL),
        )
        for principal, host, permission in (
            ("User:*", "*", AclPermissionType.ALLOW),
            ("User:ANONYMOUS", "127.0.0.1", AclPermissionType.DENY),
        )
    ]
    for future in admin.create_acls(bindings).values():
        future.result(30)
    denied = _create(cluster.port(2), "secret-plans")
    assert denied["error_code"] == code_for("TOPIC_AUTHORIZATION_FAILED"), denied
    allowed = _create(cluster.port(2), "open-plans")
    assert allowed["error_code"] == 0, allowed


@pytest.mark.parametrize("node", [1, 2])
def test_a_client_cannot_send_an_envelope(make_cluster: Any, node: int) -> None:
    cluster: Cluster = make_cluster(2) if node == 2 else make_cluster(1)
    inner = encode_request(ApiKey.CREATE_TOPICS, 7, 1, "inside", {"topics": [], "timeout_ms": 0})
    envelope = encode_request(
        ApiKey.ENVELOPE,
        0,
        9,
        "client",
        {
            "request_data": inner,
            "request_principal": b"User:admin",
            "client_host_address": b"\x7f\x00\x00\x01",
        },
    )
    with socket.create_connection(("127.0.0.1", cluster.port(node)), timeout=60) as sock:
        sock.sendall(struct.pack(">i", len(envelope)) + envelope)
        # Not an API of the client listeners: the connection closes unanswered.
        assert sock.recv(4) == b""
