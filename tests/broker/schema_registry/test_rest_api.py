"""The registry's REST API spoken raw: levels, modes, listings, and what a hostile body gets."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.broker.http_api.conftest import Answer, Api, wait_listening
from tests.broker.schema_registry.conftest import RegistryBroker


def avro_fields(*fields: tuple[str, str, Any]) -> dict[str, str]:
    """A register body: a record with ``(name, type, default or ...)`` fields."""
    out = []
    for name, kind, default in fields:
        field: dict[str, Any] = {"name": name, "type": kind}
        if default is not ...:
            field["default"] = default
        out.append(field)
    return {"schema": json.dumps({"type": "record", "name": "R", "fields": out})}


def send(api: Api, method: str, path: str, body: Any = None, **params: object) -> Answer:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        api.url(path, **params),
        data=data,
        method=method,
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    return api.send(request, None)


V1 = avro_fields(("a", "string", ...))
V2_ADDS_WITH_DEFAULT = avro_fields(("a", "string", ...), ("b", "int", 0))
V3_DROPS_A = avro_fields(("b", "int", 0))


@pytest.mark.parametrize(
    ("level", "second", "third", "registered"),
    [
        ("BACKWARD", V2_ADDS_WITH_DEFAULT, V3_DROPS_A, 3),
        ("FORWARD", V2_ADDS_WITH_DEFAULT, V3_DROPS_A, 2),
        ("FULL", V2_ADDS_WITH_DEFAULT, V3_DROPS_A, 2),
        ("NONE", avro_fields(("z", "long", ...)), V3_DROPS_A, 3),
    ],
)
def test_each_level_decides_what_registers(
    registry_broker: Callable[..., RegistryBroker],
    level: str,
    second: dict[str, str],
    third: dict[str, str],
    registered: int,
) -> None:
    api = registry_broker().api
    assert send(api, "PUT", "/config/s", {"compatibility": level}).body == {"compatibility": level}
    for body in (V1, second, third):
        answer = send(api, "POST", "/subjects/s/versions", body)
        assert answer.status in (200, 409), answer.body
        if answer.status == 409:
            assert answer.body["error_code"] == 409
            assert 'subject "s"' in answer.body["message"]
    assert len(send(api, "GET", "/subjects/s/versions").body) == registered


def test_transitive_levels_check_every_version(
    registry_broker: Callable[..., RegistryBroker],
) -> None:
    """v1 {a}, v2 {} (drops a), v3 {a without default}: v3 reads v2's data only with a
    default, so BACKWARD (against v2) refuses it as does BACKWARD_TRANSITIVE; v3' {a: int}
    is fine against v2 but cannot read v1's string a: only the transitive level refuses."""
    api = registry_broker().api
    send(api, "PUT", "/config/t", {"compatibility": "NONE"})
    send(api, "POST", "/subjects/t/versions", V1)
    send(api, "POST", "/subjects/t/versions", avro_fields())
    changed_type = avro_fields(("a", "int", 0))
    send(api, "PUT", "/config/t", {"compatibility": "BACKWARD"})
    plain = send(api, "POST", "/compatibility/subjects/t/versions/latest", changed_type)
    assert plain.body == {"is_compatible": True}
    send(api, "PUT", "/config/t", {"compatibility": "BACKWARD_TRANSITIVE"})
    transitive = send(
        api, "POST", "/compatibility/subjects/t/versions", changed_type, verbose="true"
    )
    assert transitive.body["is_compatible"] is False
    assert transitive.body["messages"]
    refused = send(api, "POST", "/subjects/t/versions", changed_type)
    assert (refused.status, refused.body["error_code"]) == (409, 409)


def test_modes(registry_broker: Callable[..., RegistryBroker]) -> None:
    api = registry_broker().api
    assert send(api, "GET", "/mode").body == {"mode": "READWRITE"}
    send(api, "POST", "/subjects/m/versions", V1)
    assert send(api, "PUT", "/mode/m", {"mode": "READONLY"}).body == {"mode": "READONLY"}
    refused = send(api, "POST", "/subjects/m/versions", V2_ADDS_WITH_DEFAULT)
    assert (refused.status, refused.body["error_code"]) == (422, 42205)
    assert send(api, "DELETE", "/subjects/m").body["error_code"] == 42205
    assert send(api, "DELETE", "/mode/m").body == {"mode": "READONLY"}
    assert send(api, "GET", "/mode/m").body["error_code"] == 40409
    assert send(api, "GET", "/mode/m", defaultToGlobal="true").body == {"mode": "READWRITE"}
    # IMPORT keeps the ids and versions given (a registry copied in), only when asked by force
    # over existing subjects.
    assert send(api, "PUT", "/mode", {"mode": "IMPORT"}).body["error_code"] == 42205
    assert send(api, "PUT", "/mode", {"mode": "IMPORT"}, force="true").body == {"mode": "IMPORT"}
    imported = send(api, "POST", "/subjects/i/versions", {**V1, "id": 100, "version": 7})
    assert imported.body == {"id": 100}
    assert send(api, "GET", "/subjects/i/versions").body == [7]
    assert send(api, "PUT", "/mode", {"mode": "SIDEWAYS"}).body["error_code"] == 42204
    send(api, "PUT", "/mode", {"mode": "READWRITE"})
    with_id = send(api, "POST", "/subjects/j/versions", {**V1, "id": 5})
    assert with_id.body["error_code"] == 42205


def test_listings_lookups_and_configs(registry_broker: Callable[..., RegistryBroker]) -> None:
    api = registry_broker().api
    assert send(api, "GET", "/").body == {}
    first = send(api, "POST", "/subjects/x-value/versions", V1).body["id"]
    send(api, "POST", "/subjects/x-value/versions", V2_ADDS_WITH_DEFAULT)
    send(api, "POST", "/subjects/y-value/versions", V1)
    assert send(api, "GET", "/subjects").body == ["x-value", "y-value"]
    assert send(api, "GET", "/subjects", subjectPrefix="y").body == ["y-value"]
    every = send(api, "GET", "/schemas").body
    assert [(s["subject"], s["version"]) for s in every] == [
        ("x-value", 1),
        ("x-value", 2),
        ("y-value", 1),
    ]
    latest = send(api, "GET", "/schemas", latestOnly="true").body
    assert [(s["subject"], s["version"]) for s in latest] == [("x-value", 2), ("y-value", 1)]
    assert send(api, "GET", f"/schemas/ids/{first}/versions").body == [
        {"subject": "x-value", "version": 1},
        {"subject": "y-value", "version": 1},
    ]
    text = urllib.request.urlopen(api.url("/subjects/x-value/versions/1/schema"), timeout=30)
    assert json.loads(text.read())["name"] == "R"
    found = send(api, "POST", "/subjects/x-value", V1).body
    assert (found["version"], found["id"]) == (1, first)
    assert (
        send(api, "POST", "/subjects/x-value", avro_fields(("q", "int", ...))).body["error_code"]
        == 40403
    )
    assert send(api, "GET", "/subjects/x-value/versions/0").body["error_code"] == 42202
    assert send(api, "GET", "/subjects/x-value/versions/latest").body["version"] == 2
    assert send(api, "GET", "/config").body == {"compatibilityLevel": "BACKWARD"}
    assert send(api, "GET", "/config/x-value").body["error_code"] == 40408
    assert send(api, "GET", "/config/x-value", defaultToGlobal="true").body == {
        "compatibilityLevel": "BACKWARD"
    }
    send(api, "PUT", "/config/x-value", {"compatibility": "full"})
    assert send(api, "GET", "/config/x-value").body["compatibilityLevel"] == "FULL"
    assert send(api, "DELETE", "/config/x-value").body["compatibilityLevel"] == "FULL"
    assert send(api, "GET", "/config/x-value").body["error_code"] == 40408


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b"[]",
        b'{"schema": 5}',
        b'{"schema": ""}',
        b'{"schema": "{}", "schemaType": "XML"}',
        b'{"schema": "\\"int\\"", "references": [{"name": 1}]}',
        "\u00ff".encode("latin-1"),
    ],
)
def test_malformed_bodies_get_an_error_and_the_registry_goes_on(
    registry_broker: Callable[..., RegistryBroker], body: bytes
) -> None:
    broker = registry_broker()
    request = urllib.request.Request(
        broker.api.url("/subjects/h/versions"), data=body, method="POST"
    )
    answer = broker.api.send(request, None)
    assert answer.status in (400, 422), answer.body
    assert isinstance(answer.body["error_code"], int) and answer.body["message"]
    assert send(broker.api, "POST", "/subjects/h/versions", V1).status == 200


def test_the_console_port_serves_the_registry_too(
    registry_broker: Callable[..., RegistryBroker],
) -> None:
    from tests.broker.conftest import free_port

    console = free_port()
    broker = registry_broker(**{"console.port": str(console)})
    wait_listening(console, broker.alive, broker.server.log)
    registered = send(Api(console), "POST", "/subjects/c-value/versions", V1).body["id"]
    assert send(broker.api, "GET", f"/schemas/ids/{registered}").status == 200
    assert send(Api(console), "GET", "/subjects").body == ["c-value"]


def test_the_same_avro_schema_with_properties_reordered_is_the_same_version(
    registry_broker: Callable[..., RegistryBroker],
) -> None:
    api = registry_broker().api
    record = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "string"}]}
    reordered = {"fields": [{"type": "string", "name": "a"}], "name": "R", "type": "record"}
    first = send(api, "POST", "/subjects/o/versions", {"schema": json.dumps(record)}).body
    again = send(api, "POST", "/subjects/o/versions", {"schema": json.dumps(reordered)}).body
    assert again == first
    assert send(api, "GET", "/subjects/o/versions").body == [1]
    found = send(api, "POST", "/subjects/o", {"schema": json.dumps(reordered)}).body
    assert found["version"] == 1


def test_a_schemas_topic_that_would_lose_schemas_is_refused_at_start(tmp_path: Path) -> None:
    """As Confluent's registry: _schemas must be compacted, with one partition."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
        ResourceType,
    )

    from tests.broker.conftest import BrokerProcess, free_port

    data = tmp_path / "data"
    plain = BrokerProcess(data)
    plain.start()
    admin = AdminClient({"bootstrap.servers": plain.bootstrap})
    topic = NewTopic("_schemas", 1, config={"cleanup.policy": "delete"})
    for future in admin.create_topics([topic]).values():
        future.result(30)
    assert plain.stop() == 0
    port = free_port()
    with_registry = BrokerProcess(data, {"schema.registry.port": str(port)})
    with pytest.raises(RuntimeError) as refused:
        with_registry.start()
    assert "_schemas has cleanup.policy=delete: it must be compact" in str(refused.value)
    plain.start()
    compact = ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, "_schemas", incremental_configs=[compact])
    admin = AdminClient({"bootstrap.servers": plain.bootstrap})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    assert plain.stop() == 0
    with_registry.start()
    try:
        wait_listening(port, with_registry.alive, with_registry.log)
        assert send(Api(port), "GET", "/subjects").body == []
    finally:
        with_registry.close()
