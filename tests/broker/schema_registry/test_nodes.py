"""``seglog serve --nodes 2 --schema-registry-port P``: any node answers, one writes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.broker.http_api.conftest import Api, node_apis
from tests.broker.nodes.conftest import Cluster, free_ports, make_cluster

__all__ = ["make_cluster"]


def record(name: str, *fields: str) -> str:
    return json.dumps(
        {
            "type": "record",
            "name": name,
            "fields": [{"name": f, "type": "string", "default": ""} for f in fields],
        }
    )


def test_any_node_registers_and_answers(make_cluster: Any) -> None:
    port = free_ports(2)
    cluster: Cluster = make_cluster(2, **{"schema.registry.port": str(port)})
    urls = [f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}"]
    node_apis(cluster, port)
    clients = [SchemaRegistryClient({"url": url}) for url in urls]
    try:
        # Through each node in turn: whichever leads _schemas writes, the other forwards.
        ids = [
            clients[i % 2].register_schema(
                "orders-value", Schema(record("Order", *"abc"[: i + 1]), "AVRO")
            )
            for i in range(3)
        ]
        assert ids == sorted(set(ids))
        for url in urls:
            fresh = SchemaRegistryClient({"url": url})
            try:
                assert fresh.get_versions("orders-value") == [1, 2, 3]
                assert fresh.get_latest_version("orders-value").schema_id == ids[-1]
                assert [fresh.get_schema(i).schema_type for i in ids] == ["AVRO"] * 3
            finally:
                fresh.close()
        # A refusal made by the writer reaches a client of the other node as it is.
        with pytest.raises(SchemaRegistryError) as refused:
            clients[1].register_schema(
                "orders-value",
                Schema(record("Order", "x", "y").replace(', "default": ""', ""), "AVRO"),
            )
        assert refused.value.http_status_code == 409
        clients[1].set_compatibility("orders-value", "NONE")
        assert clients[0].get_compatibility("orders-value") == "NONE"
        # Records serialized through one node read through the other.
        ctx = SerializationContext("orders", MessageField.VALUE)
        encoded = AvroSerializer(clients[0], record("Order", "a"))({"a": "1"}, ctx)
        assert encoded is not None
        assert AvroDeserializer(clients[1])(encoded, ctx) == {"a": "1"}
        assert Api(port + 1).get("/subjects").body == ["orders-value"]
    finally:
        for client in clients:
            client.close()
