"""``GET /v1/topics/{topic}/records``: records produced with confluent-kafka, found over HTTP."""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from seglog.broker.http_api.auth import ConsoleSecurity
from seglog.broker.http_api.server import application
from tests.broker.conftest import BrokerProcess
from tests.broker.http_api.conftest import Api, ApiBroker, create_topic, wait_listening

StartBroker = Callable[..., ApiBroker]


def _produce(bootstrap: str, topic: str, records: list[dict[str, Any]]) -> None:
    """Each of ``records`` (``produce``'s keyword arguments), in order, acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for record in records:
        producer.produce(topic, **record)
        producer.flush(30)  # one at a time: their order is the test's
    assert producer.flush(30) == 0


@pytest.fixture
def served(api_broker: StartBroker) -> ApiBroker:
    return api_broker()


def test_newest_all_and_limit(served: ApiBroker, topic: str) -> None:
    create_topic(served.bootstrap, topic)
    _produce(
        served.bootstrap,
        topic,
        [{"key": b"k1", "value": f"v{i}".encode()} for i in range(5)]
        + [{"key": b"k2", "value": b"other"}, {"key": None, "value": b"no key"}],
    )
    newest = served.api.records(topic, key="k1")
    assert newest.status == 200
    assert newest.body == {
        "records": [
            {
                "topic": topic,
                "partition": 0,
                "offset": 4,
                "timestamp": newest.body["records"][0]["timestamp"],
                "key": "k1",
                "key_encoding": "utf8",
                "value": "v4",
                "value_encoding": "utf8",
                "headers": [],
            }
        ]
    }
    every = served.api.records(topic, key="k1", all="true").body["records"]
    assert [(r["offset"], r["value"]) for r in every] == [(4 - i, f"v{4 - i}") for i in range(5)]
    limited = served.api.records(topic, key="k1", all="true", limit=2).body["records"]
    assert [r["offset"] for r in limited] == [4, 3]
    # Without all, the newest only, whatever the limit.
    assert len(served.api.records(topic, key="k1", limit=3).body["records"]) == 1
    assert served.api.records(topic, key="never written", all="true").body == {"records": []}


def test_bytes_null_values_and_headers(served: ApiBroker, topic: str) -> None:
    create_topic(served.bootstrap, topic)
    binary = b"\xff\x00key"
    _produce(
        served.bootstrap,
        topic,
        [
            {"key": binary, "value": b"\xfe\xff", "headers": [("h", b"\x80"), ("t", b"text")]},
            {"key": binary, "value": None, "headers": [("n", None)]},
        ],
    )
    key_b64 = base64.b64encode(binary).decode()
    found = served.api.records(topic, key_base64=key_b64, all="true").body["records"]
    assert [(r["value"], r["value_encoding"]) for r in found] == [
        (None, None),
        (base64.b64encode(b"\xfe\xff").decode(), "base64"),
    ]
    assert {(r["key"], r["key_encoding"]) for r in found} == {(key_b64, "base64")}
    assert found[0]["headers"] == [{"key": "n", "value": None, "value_encoding": None}]
    assert found[1]["headers"] == [
        {"key": "h", "value": base64.b64encode(b"\x80").decode(), "value_encoding": "base64"},
        {"key": "t", "value": "text", "value_encoding": "utf8"},
    ]


def test_time_range(served: ApiBroker, topic: str) -> None:
    create_topic(served.bootstrap, topic)
    _produce(
        served.bootstrap,
        topic,
        [{"key": b"k", "value": f"at {t}".encode(), "timestamp": t} for t in (1000, 2000, 3000)],
    )
    values = [
        r["value"]
        for r in served.api.records(topic, key="k", all="true", **{"from": 1500, "to": 3000}).body[
            "records"
        ]
    ]
    assert values == ["at 3000", "at 2000"]
    newest_before = served.api.records(topic, key="k", to=2999).body["records"]
    assert [r["timestamp"] for r in newest_before] == [2000]
    assert served.api.records(topic, key="k", **{"from": 3001}).body == {"records": []}


def test_partitions_merged_newest_first(served: ApiBroker, topic: str) -> None:
    create_topic(served.bootstrap, topic, partitions=3)
    _produce(
        served.bootstrap,
        topic,
        [
            {"key": b"k", "value": b"p0 old", "partition": 0, "timestamp": 1000},
            {"key": b"k", "value": b"p1", "partition": 1, "timestamp": 2000},
            {"key": b"k", "value": b"p2", "partition": 2, "timestamp": 1500},
            {"key": b"k", "value": b"p0 new", "partition": 0, "timestamp": 3000},
        ],
    )
    every = served.api.records(topic, key="k", all="true").body["records"]
    assert [(r["partition"], r["value"]) for r in every] == [
        (0, "p0 new"),
        (1, "p1"),
        (2, "p2"),
        (0, "p0 old"),
    ]
    assert [r["value"] for r in served.api.records(topic, key="k").body["records"]] == ["p0 new"]
    only_2 = served.api.records(topic, key="k", all="true", partition=2).body["records"]
    assert [(r["partition"], r["value"]) for r in only_2] == [(2, "p2")]


def test_read_committed_skips_an_aborted_transaction(served: ApiBroker, topic: str) -> None:
    create_topic(served.bootstrap, topic)
    _produce(served.bootstrap, topic, [{"key": b"k", "value": b"plain"}])
    producer = Producer(
        {"bootstrap.servers": served.bootstrap, "transactional.id": f"http-{topic}"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"committed")
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"aborted")
    producer.produce(topic, key=b"k", value=b"aborted too")
    # Written before the abort (librdkafka drops what it has not sent when aborting).
    assert producer.flush(30) == 0
    producer.abort_transaction(30)

    committed = served.api.records(
        topic, key="k", all="true", isolation_level="read_committed"
    ).body["records"]
    assert [r["value"] for r in committed] == ["committed", "plain"]
    newest = served.api.records(topic, key="k", isolation_level="read_committed")
    assert [r["value"] for r in newest.body["records"]] == ["committed"]
    uncommitted = served.api.records(topic, key="k", all="true").body["records"]
    assert [r["value"] for r in uncommitted] == ["aborted too", "aborted", "committed", "plain"]

    # A transaction still open: read_committed stops at its first offset (the LSO).
    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"open")
    assert producer.flush(30) == 0
    newest = served.api.records(topic, key="k", isolation_level="read_committed")
    assert [r["value"] for r in newest.body["records"]] == ["committed"]
    assert [r["value"] for r in served.api.records(topic, key="k").body["records"]] == ["open"]
    producer.commit_transaction(30)
    newest = served.api.records(topic, key="k", isolation_level="read_committed")
    assert [r["value"] for r in newest.body["records"]] == ["open"]


def test_unknown_topic_and_partition_are_404(served: ApiBroker, topic: str) -> None:
    missing = served.api.records(f"{topic}-missing", key="k")
    assert (missing.status, missing.body["error_code"]) == (404, 3)
    assert f"{topic}-missing" in missing.body["message"]
    create_topic(served.bootstrap, topic, partitions=2)
    beyond = served.api.records(topic, key="k", partition=2)
    assert (beyond.status, beyond.body["error_code"]) == (404, 3)
    no_route = served.api.get("/v1/nothing-here")
    assert (no_route.status, no_route.body["error_code"]) == (404, 42)


def test_key_index_turned_on_at_run_time(served: ApiBroker, topic: str) -> None:
    """Records written before the index was turned on are found (built in the background)."""
    create_topic(served.bootstrap, topic, **{"key.index.enable": "false"})
    _produce(served.bootstrap, topic, [{"key": b"k", "value": f"v{i}".encode()} for i in range(3)])
    admin = AdminClient({"bootstrap.servers": served.bootstrap})
    change = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("key.index.enable", "true", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([change])[change].result(30)
    found = served.api.records(topic, key="k", all="true").body["records"]
    assert [r["value"] for r in found] == ["v2", "v1", "v0"]


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({}, "key"),
        ({"key": "a", "key_base64": "YQ=="}, "key"),
        ({"key_base64": "not base64!"}, "key_base64"),
        ({"key": "a", "limit": "0"}, "limit"),
        ({"key": "a", "limit": "many"}, "limit"),
        ({"key": "a", "all": "yes"}, "all"),
        ({"key": "a", "partition": "-1"}, "partition"),
        ({"key": "a", "isolation_level": "serializable"}, "isolation_level"),
        ({"key": "a", "from": "2000", "to": "1000"}, "from"),
        ({"key": "a", "form": "1000"}, "form"),
    ],
)
def test_bad_parameters_are_400(
    served: ApiBroker, topic: str, params: dict[str, str], says: str
) -> None:
    create_topic(served.bootstrap, topic)
    answer = served.api.records(topic, **params)
    assert (answer.status, answer.body["error_code"]) == (400, 42)
    assert says in answer.body["message"]


def test_a_topic_without_key_index_is_400_saying_how_to_turn_it_on(
    served: ApiBroker, topic: str
) -> None:
    create_topic(served.bootstrap, topic, **{"key.index.enable": "false"})
    answer = served.api.records(topic, key="a")
    assert (answer.status, answer.body["error_code"]) == (400, 42)
    assert "key.index.enable=true" in answer.body["message"]


def test_a_parameter_given_twice_is_400(served: ApiBroker, topic: str) -> None:
    create_topic(served.bootstrap, topic)
    status, body = _raw_get(served.api.port, f"/v1/topics/{topic}/records?key=a&key=b")
    assert status == 400
    assert json.loads(body) == {
        "error_code": 42,
        "message": "parameter 'key' is given more than once",
    }


def _raw_get(port: int, target: str) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_topics_lists_names(served: ApiBroker, topic: str) -> None:
    create_topic(served.bootstrap, topic)
    create_topic(served.bootstrap, f"{topic}-b")
    answer = served.api.get("/v1/topics")
    assert answer.status == 200
    assert {topic, f"{topic}-b"} <= set(answer.body["topics"])
    assert answer.body["topics"] == sorted(answer.body["topics"])


def test_openapi_documents_exactly_the_served_routes(served: ApiBroker) -> None:
    document = served.api.get("/openapi.json").body
    assert document["openapi"].startswith("3.")
    documented = {
        (method.upper(), path) for path, item in document["paths"].items() for method in item
    }
    # The routes the application registers (its router needs no broker to be listed).
    app = application(cast(Any, None), ConsoleSecurity())
    served_routes = {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.method != "HEAD" and route.resource is not None
    }
    assert documented == served_routes
    records = document["paths"]["/v1/topics/{topic}/records"]["get"]
    names = {p["name"] for p in records["parameters"]}
    assert names == {
        "topic",
        "key",
        "key_base64",
        "all",
        "limit",
        "partition",
        "from",
        "to",
        "isolation_level",
    }
    assert {"200", "400", "401", "403", "404"} <= set(records["responses"])


def test_a_client_that_disconnects_mid_request_does_not_hurt_the_broker(
    served: ApiBroker, topic: str
) -> None:
    create_topic(served.bootstrap, topic)
    _produce(served.bootstrap, topic, [{"key": b"k", "value": b"v"}])
    target = f"/v1/topics/{topic}/records?key=k&all=true"
    for _ in range(20):
        # Half a request line, half the headers, a whole request unread: each then gone.
        for data in (
            b"GET /v1/top",
            f"GET {target} HTTP/1.1\r\nHost: x\r\n".encode(),
            f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
        ):
            with socket.create_connection(("127.0.0.1", served.api.port), timeout=60) as sock:
                sock.sendall(data)
                # A reset rather than a polite close: the rudest way to leave.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    assert served.process.alive()
    assert [r["value"] for r in served.api.records(topic, key="k").body["records"]] == ["v"]
    _produce(served.bootstrap, topic, [{"key": b"k", "value": b"after"}])
    assert [r["value"] for r in served.api.records(topic, key="k").body["records"]] == ["after"]


def _listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on (from /proc: its sockets' inodes)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_off_by_default_no_port_opened(tmp_path: Path) -> None:
    process = BrokerProcess(tmp_path / "data")
    process.start()
    try:
        assert process.process is not None
        assert _listening_ports(process.process.pid) == {process.port}
        assert "HTTP API" not in process.log.read_text()
    finally:
        process.close()


def test_the_port_is_told_by_describe_configs(
    make_broker: Callable[..., BrokerProcess], topic: str
) -> None:
    """console.port=0 takes a free port; DescribeConfigs tells which (how clients find it)."""
    process = make_broker(**{"console.port": "0"})
    admin = AdminClient({"bootstrap.servers": process.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([resource])[resource].result(30)
    port = int(configs["console.port"].value)
    assert port > 0
    assert configs["console.host"].value == "127.0.0.1"
    wait_listening(port, process.alive, process.log)
    create_topic(process.bootstrap, topic)
    _produce(process.bootstrap, topic, [{"key": b"k", "value": b"v"}])
    assert [r["value"] for r in Api(port).records(topic, key="k").body["records"]] == ["v"]


def test_many_records(served: ApiBroker, topic: str) -> None:
    """More records than are encoded on the event loop: the same answer, from a thread."""
    create_topic(served.bootstrap, topic)
    producer = Producer({"bootstrap.servers": served.bootstrap})
    for i in range(400):
        producer.produce(topic, key=b"k" if i % 2 else b"other", value=f"{i}".encode())
    assert producer.flush(30) == 0
    found = served.api.records(topic, key="k", all="true").body["records"]
    assert [r["value"] for r in found] == [f"{i}" for i in range(399, 0, -2)]
    assert len(served.api.records(topic, key="k", all="true", limit=150).body["records"]) == 150
