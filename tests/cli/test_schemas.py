"""``seglog schemas``: the registry the broker serves (found through the broker), or a URL."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner, Result

from seglog.cli.main import cli
from tests.broker.conftest import BrokerProcess

ORDER = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
ORDER_V2 = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": "string", "default": ""}],
}
ORDER_BAD = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "must", "type": "string"}],
}


def run(broker: BrokerProcess, *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(
        cli, ["schemas", *args, "--bootstrap-server", broker.bootstrap], input=stdin
    )


def write(tmp_path: Path, name: str, schema: object) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(schema))
    return str(path)


def test_register_list_show_check_config_delete(
    make_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    # schema.registry.port=0: a free port, which only the broker can tell.
    broker = make_broker(**{"schema.registry.port": "0"})
    registered = run(broker, "register", "orders-value", write(tmp_path, "o.avsc", ORDER))
    assert registered.exit_code == 0, (registered.output, registered.exception)
    schema_id = int(registered.stdout)
    # From standard input, again: the same id.
    again = run(broker, "register", "orders-value", "-", stdin=json.dumps(ORDER))
    assert int(again.stdout) == schema_id
    listed = run(broker, "list")
    assert listed.stdout.splitlines()[1].split() == [
        "orders-value",
        "1",
        "1",
        str(schema_id),
        "AVRO",
    ]
    shown = run(broker, "show", "orders-value")
    assert json.loads(shown.stdout) == ORDER
    assert f"id {schema_id}, AVRO" in shown.stderr
    by_id = run(broker, "show", "--id", str(schema_id), "--json")
    assert json.loads(json.loads(by_id.stdout)["schema"]) == ORDER
    ok = run(broker, "check", "orders-value", write(tmp_path, "o2.avsc", ORDER_V2))
    assert (ok.exit_code, ok.stdout) == (0, "compatible\n")
    bad = run(broker, "check", "orders-value", write(tmp_path, "bad.avsc", ORDER_BAD))
    assert bad.exit_code == 1
    assert "incompatible" in bad.stderr and "must" in bad.stderr
    refused = run(broker, "register", "orders-value", write(tmp_path, "bad2.avsc", ORDER_BAD))
    assert refused.exit_code == 1
    assert refused.stderr.startswith("seglog: error: ") and "incompatible" in refused.stderr
    assert run(broker, "config", "orders-value").stdout == "BACKWARD\n"
    assert run(broker, "config", "orders-value", "--set", "none").stdout == "NONE\n"
    assert run(broker, "config").stdout == "BACKWARD\n"
    assert run(broker, "register", "orders-value", str(tmp_path / "bad2.avsc")).exit_code == 0
    assert run(broker, "mode", "orders-value").stdout == "READWRITE\n"
    deleted = run(broker, "delete", "orders-value", "--version", "1")
    assert deleted.stdout == "orders-value: deleted version 1\n"
    assert run(broker, "delete", "orders-value").stdout == "orders-value: deleted version 2\n"
    assert run(broker, "list").stderr == "no subjects\n"
    gone = run(broker, "delete", "orders-value", "--permanent")
    assert gone.stdout == "orders-value: permanently deleted versions 1, 2\n"


def test_a_broker_without_a_registry_is_a_clear_error(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    result = run(make_broker(), "list")
    assert result.exit_code == 1
    assert (
        "serves no schema registry: start it with --schema-registry-port N "
        "(schema.registry.port), or give --schema-registry-url\n"
    ) in result.stderr


def test_an_unreachable_url_is_named(make_broker: Callable[..., BrokerProcess]) -> None:
    result = run(make_broker(), "list", "--schema-registry-url", "http://127.0.0.1:1")
    assert result.exit_code == 1
    assert "cannot reach the schema registry at http://127.0.0.1:1" in result.stderr


def test_consume_decodes_values_with_the_registry(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from tests.broker.conftest import free_port

    port = free_port()
    broker = make_broker(**{"schema.registry.port": str(port)})
    registry = SchemaRegistryClient({"url": f"http://127.0.0.1:{port}"})
    try:
        serialize = AvroSerializer(registry, json.dumps(ORDER))
        ctx = SerializationContext("orders", MessageField.VALUE)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(3):
            producer.produce("orders", key=b"k", value=serialize({"id": i}, ctx))
        producer.produce("orders", value=b"not in the wire format")
        assert producer.flush(30) == 0
    finally:
        registry.close()
    args = ["consume", "orders", "--from-beginning", "--exit", "--bootstrap-server"]
    plain = CliRunner().invoke(cli, [*args, broker.bootstrap, "--value-format", "avro"])
    assert plain.exit_code == 0, (plain.output, plain.exception)
    assert plain.stdout.splitlines() == [
        '{"id":0}',
        '{"id":1}',
        '{"id":2}',
        "not in the wire format",
    ]
    assert "offset 3: the value is printed as it is: unknown magic byte 110" in plain.stderr
    as_json = CliRunner().invoke(
        cli, [*args, broker.bootstrap, "--value-format", "avro", "--format", "json"]
    )
    values = [json.loads(line)["value"] for line in as_json.stdout.splitlines()]
    assert values == [{"id": 0}, {"id": 1}, {"id": 2}, "not in the wire format"]
    assert json.loads(as_json.stdout.splitlines()[0])["key"] == "k"
