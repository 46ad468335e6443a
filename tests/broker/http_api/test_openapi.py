"""The OpenAPI document against what is served: every GET route answers its documented schema.

`test_records.py` checks that the document lists exactly the registered routes;
here each documented GET route is called on a broker holding a topic, records
and a consumer group, and its answer is validated against the schema the
document gives for it (OpenAPI 3.0's ``nullable`` read as JSON Schema's
``null`` type). A route whose path parameter this test cannot fill fails the
test, so a new route is checked from the day it is added. Each must also
refuse a query parameter it does not take.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any

import jsonschema
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.broker.http_api.conftest import TIMEOUT, ApiBroker, create_topic
from tests.broker.http_api.test_storage_routes import StartBroker, cluster_id
from tests.broker.share.helpers import share_consumer, wait_for_members

GROUP = "openapi-group"
SHARE_GROUP = "openapi-share-group"


def json_schema(schema: Any) -> Any:
    """An OpenAPI 3.0 schema as a JSON Schema: ``nullable: true`` admits ``null``."""
    if isinstance(schema, list):
        return [json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {k: json_schema(v) for k, v in schema.items() if k != "nullable"}
    if schema.get("nullable"):
        kind = converted.get("type")
        if isinstance(kind, str):
            converted["type"] = [kind, "null"]
        if "enum" in converted:
            converted["enum"] = [*converted["enum"], None]
    return converted


def _populate(bootstrap: str, topic: str) -> None:
    create_topic(bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(10):
        producer.produce(topic, key=f"k{i % 3}".encode(), value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    message = None
    for _ in range(int(TIMEOUT)):
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            break
    assert message is not None and message.error() is None
    consumer.commit(message=message, asynchronous=False)
    consumer.close()


def test_every_get_route_answers_its_documented_schema(api_broker: StartBroker, topic: str) -> None:
    served: ApiBroker = api_broker()
    _populate(served.bootstrap, topic)
    # A share group with its partitions assigned (left empty: its member closed).
    member = share_consumer(served.process, SHARE_GROUP, topic)
    try:
        member.poll(0.5)
        wait_for_members(served.process, SHARE_GROUP, 1)
    finally:
        member.close()
    document = served.api.get("/openapi.json").body
    path_values = {
        "topic": topic,
        "partition": "0",
        "partition_id": "0",
        "cluster_id": cluster_id(served.bootstrap),
        "consumer_group_id": GROUP,
        "group": GROUP,
        "group_id": GROUP,
        "share_group": SHARE_GROUP,
        "broker_id": "0",
    }
    # Routes that need a query parameter to answer at all.
    queries: dict[str, dict[str, str]] = {
        "/v1/topics/{topic}/records": {"key": "k1", "all": "true"},
        "/v1/topics/{topic}/partitions/{partition}/records": {"offset": "0"},
    }
    checked = []
    for path, item in document["paths"].items():
        operation = item.get("get")
        if operation is None:
            continue
        content = operation["responses"]["200"].get("content", {})
        if "application/json" not in content:
            continue  # the console's page and files: not JSON
        url = path
        for param in operation["parameters"]:
            if param["in"] != "path":
                continue
            name = param["name"]
            assert name in path_values, f"{path}: no value for path parameter {name!r}"
            url = url.replace("{" + name + "}", urllib.parse.quote(path_values[name], safe=""))
        answer = served.api.get(url, **queries.get(path, {}))
        assert answer.status == 200, (path, answer.body)
        schema = json_schema(content["application/json"]["schema"])
        jsonschema.validate(answer.body, schema)
        # A parameter the route does not take is refused, not ignored.
        misspelt = served.api.get(url, **queries.get(path, {}), no_such_parameter="1")
        assert (misspelt.status, misspelt.body["error_code"]) == (400, 42), (path, misspelt)
        checked.append(path)
    assert "/v1/topics/{topic}/records" in checked
    assert len(checked) >= 5


def test_the_document_is_valid_json_with_an_operation_id_each(api_broker: StartBroker) -> None:
    served = api_broker()
    with urllib.request.urlopen(served.api.url("/openapi.json"), timeout=TIMEOUT) as reply:
        document = json.loads(reply.read())
    ids = [op["operationId"] for item in document["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids)), "operationId must be unique"
