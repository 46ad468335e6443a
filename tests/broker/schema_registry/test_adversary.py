"""The registry under attack: racing writers, vanished and lying clients, hostile bodies,
kill -9 and torn logs, records written by others, ``seglog mirror`` and compaction."""

from __future__ import annotations

import json
import random
import socket
import struct
import threading
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from seglog.cli.main import cli
from seglog.schemas.log_dir import read_registry
from tests.broker.conftest import BrokerProcess
from tests.broker.http_api.conftest import Answer, Api
from tests.broker.schema_registry.conftest import RegistryBroker

SCHEMA_TYPE = "application/vnd.schemaregistry.v1+json"
WAIT = 120.0
"""A generous bound on waiting for an event (a loaded machine is slow, never this slow)."""


def record(name: str, *fields: str) -> str:
    """An Avro record schema (every field with a default, so any two are compatible)."""
    return json.dumps(
        {
            "type": "record",
            "name": name,
            "fields": [{"name": f, "type": "string", "default": ""} for f in fields],
        }
    )


def send(api: Api, method: str, path: str, body: Any = None, **params: object) -> Answer:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        api.url(path, **params), data=data, method=method, headers={"Content-Type": SCHEMA_TYPE}
    )
    return api.send(request, None)


def raw_request(port: int, path: str, body: bytes, *, length: int | None = None) -> bytes:
    """The bytes of a POST carrying ``body`` (``length`` in Content-Length if given)."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: {SCHEMA_TYPE}\r\n"
        f"Content-Length: {len(body) if length is None else length}\r\n\r\n"
    )
    return head.encode() + body


def snapshot(api: Api) -> dict[str, Any]:
    """Everything the registry answers about its schemas and settings, deleted ones too."""
    subjects = send(api, "GET", "/subjects", deleted="true").body
    out: dict[str, Any] = {
        "subjects": subjects,
        "live": send(api, "GET", "/subjects").body,
        "schemas": send(api, "GET", "/schemas", deleted="true").body,
        "config": send(api, "GET", "/config").body,
    }
    for subject in subjects:
        out[f"config:{subject}"] = send(api, "GET", f"/config/{subject}").body
        out[f"versions:{subject}"] = send(
            api, "GET", f"/subjects/{subject}/versions", deleted="true"
        ).body
    ids = sorted({s["id"] for s in out["schemas"]})
    for schema_id in ids:
        out[f"id:{schema_id}"] = send(api, "GET", f"/schemas/ids/{schema_id}").body
        out[f"id:{schema_id}:versions"] = send(
            api, "GET", f"/schemas/ids/{schema_id}/versions", deleted="true"
        ).body
    return out


def process(broker: RegistryBroker) -> BrokerProcess:
    """The broker's one process (the tests that kill or cut it run a broker alone)."""
    assert isinstance(broker.server, BrokerProcess)
    return broker.server


# ------------------------------------------------------------------ concurrency


def hammer(urls: list[str]) -> None:
    """8 threads, each registering 10 schemas of its own (half under a subject all share) and
    one schema every thread registers, each thread through ``urls[thread % len(urls)]``."""
    threads, per_thread = 8, 10
    common = record("Common", "c")
    barrier = threading.Barrier(threads)
    results: list[tuple[str, str, int]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work(t: int) -> None:
        client = SchemaRegistryClient({"url": urls[t % len(urls)]})
        try:
            barrier.wait(WAIT)
            for i in range(per_thread):
                subject = "shared-value" if i % 2 == 0 else f"own{t}-value"
                schema = record(f"T{t}N{i}", "a")
                got = client.register_schema(subject, Schema(schema, "AVRO"))
                with lock:
                    results.append((subject, schema, got))
                if i == per_thread // 2:
                    for subject in (f"own{t}-value", "shared-value"):
                        got = client.register_schema(subject, Schema(common, "AVRO"))
                        with lock:
                            results.append((subject, common, got))
        except BaseException as exc:  # reported in the test's thread
            errors.append(exc)
        finally:
            client.close()

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(WAIT * 2)
    assert not errors, errors
    assert len(results) == threads * (per_thread + 2)

    # One id per distinct schema, a distinct one for each: the common schema shares its id.
    by_schema: dict[str, set[int]] = {}
    for _subject, schema, got in results:
        by_schema.setdefault(schema, set()).add(got)
    assert all(len(ids) == 1 for ids in by_schema.values()), by_schema
    ids = [next(iter(i)) for i in by_schema.values()]
    assert len(set(ids)) == len(by_schema) == threads * per_thread + 1

    # Versions 1..n per subject, each distinct schema once, as any node answers them.
    expected: dict[str, set[int]] = {}
    for subject, _schema, got in results:
        expected.setdefault(subject, set()).add(got)
    for url in urls:
        fresh = SchemaRegistryClient({"url": url})
        try:
            assert sorted(fresh.get_subjects()) == sorted(expected)
            for subject, subject_ids in expected.items():
                versions = fresh.get_versions(subject)
                assert versions == list(range(1, len(subject_ids) + 1)), subject
                held = [fresh.get_version(subject, v).schema_id for v in versions]
                assert sorted(held) == sorted(subject_ids), subject
        finally:
            fresh.close()


def test_eight_threads_registering_at_once(
    registry_broker: Callable[..., RegistryBroker],
) -> None:
    broker = registry_broker()
    assert send(broker.api, "PUT", "/config", {"compatibility": "NONE"}).status == 200
    hammer([broker.url])


def test_eight_threads_registering_at_once_through_two_nodes(
    registry_broker: Callable[..., RegistryBroker],
) -> None:
    broker = registry_broker(nodes=2)
    assert send(Api(broker.ports[1]), "PUT", "/config", {"compatibility": "NONE"}).status == 200
    hammer([f"http://127.0.0.1:{port}" for port in broker.ports])


# ------------------------------------------------------------ vanished, lying clients


@pytest.mark.parametrize("nodes", [1, 2])
def test_a_client_gone_right_after_sending_leaves_a_whole_schema_or_none(
    registry_broker: Callable[..., RegistryBroker], nodes: int
) -> None:
    broker = registry_broker(nodes=nodes)
    api = broker.api
    schemas = {f"gone{i}-value": record(f"Gone{i}", "a") for i in range(10)}
    for i, (subject, schema) in enumerate(schemas.items()):
        port = broker.ports[i % nodes]  # with 2 nodes, half handed on to the writer
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        if i % 2:
            # Half leave with a reset rather than a close: nothing is read after it.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        body = json.dumps({"schema": schema}).encode()
        sock.sendall(raw_request(port, f"/subjects/{subject}/versions", body))
        sock.close()
    # The registry goes on serving, and writes go on.
    after = send(api, "POST", "/subjects/after-value/versions", {"schema": record("After")})
    assert after.status == 200, after.body
    # Each was carried out whole or not at all (aiohttp runs a handler to its end without
    # its client, but one whose connection went before it started is never started).
    assert send(api, "GET", "/subjects/gone0-value/versions/1").status in (200, 404)
    broker.server.stop()
    state = read_registry(broker.server.data)
    broker.server.start()
    broker.wait()
    for subject, schema in schemas.items():
        got = send(api, "GET", f"/subjects/{subject}/versions/1")
        stored = state.version(subject, 1)
        if got.status == 404:
            assert stored is None, subject
            continue
        assert got.status == 200 and json.loads(got.body["schema"]) == json.loads(schema)
        assert stored is not None and stored.id == got.body["id"]
        assert send(api, "GET", f"/subjects/{subject}/versions").body == [1]
        by_id = send(api, "GET", f"/schemas/ids/{got.body['id']}")
        assert json.loads(by_id.body["schema"]) == json.loads(schema)


@pytest.mark.parametrize("sent", [0, 1, 40])
def test_a_body_shorter_than_its_content_length_then_a_close_writes_nothing(
    registry_broker: Callable[..., RegistryBroker], sent: int
) -> None:
    broker = registry_broker()
    body = json.dumps({"schema": record("Short", "a")}).encode()
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as sock:
            sock.sendall(
                raw_request(
                    broker.port, "/subjects/short-value/versions", body[:sent], length=len(body)
                )
            )
    ok = send(broker.api, "POST", "/subjects/ok-value/versions", {"schema": record("Ok")})
    assert ok.status == 200
    assert send(broker.api, "GET", "/subjects").body == ["ok-value"]
    assert read_registry(process(broker).data).subjects() == ["ok-value"]


def test_a_body_over_16_mib_gets_413_and_nothing_is_written(
    registry_broker: Callable[..., RegistryBroker],
) -> None:
    broker = registry_broker()
    huge = {"schema": json.dumps({"type": "string", "doc": "x" * (16 * 1024 * 1024 + 10)})}
    refused = send(broker.api, "POST", "/subjects/huge-value/versions", huge)
    assert refused.status == 413, refused.body
    assert isinstance(refused.body["error_code"], int) and refused.body["message"]
    assert send(broker.api, "GET", "/subjects").body == []
    assert read_registry(process(broker).data).subjects() == []
    assert send(broker.api, "POST", "/subjects/s-value/versions", {"schema": '"int"'}).status == 200


def test_deeply_nested_json_gets_a_clean_4xx(
    registry_broker: Callable[..., RegistryBroker],
) -> None:
    broker = registry_broker()
    api = broker.api
    deep = b"[" * 100_000 + b"]" * 100_000
    for path, method in (
        ("/subjects/deep-value/versions", "POST"),
        ("/subjects/deep-value", "POST"),
        ("/compatibility/subjects/deep-value/versions", "POST"),
        ("/config/deep-value", "PUT"),
        ("/mode/deep-value", "PUT"),
    ):
        request = urllib.request.Request(
            api.url(path), data=deep, method=method, headers={"Content-Type": SCHEMA_TYPE}
        )
        answer = api.send(request, None)
        assert answer.status == 400, (path, answer.body)
        assert "nested" in answer.body["message"]
    # The schema text nested deep, in a body that is not: an invalid schema.
    for schema_type in ("AVRO", "JSON"):
        text = '{"type":' * 100_000 + '"int"' + "}" * 100_000
        answer = send(
            api,
            "POST",
            "/subjects/deep-value/versions",
            {"schema": text, "schemaType": schema_type},
        )
        assert (answer.status, answer.body["error_code"]) == (422, 42201), answer.body
    text = 'syntax = "proto3";\n' + "message M {" * 5000 + "}" * 5000
    answer = send(
        api, "POST", "/subjects/deep-value/versions", {"schema": text, "schemaType": "PROTOBUF"}
    )
    assert (answer.status, answer.body["error_code"]) == (422, 42201), answer.body
    assert send(api, "GET", "/subjects").body == []
    assert send(api, "POST", "/subjects/deep-value/versions", {"schema": '"int"'}).status == 200


def test_lone_surrogates_get_a_clean_4xx(registry_broker: Callable[..., RegistryBroker]) -> None:
    """JSON may spell a half of a UTF-16 pair alone; no UTF-8 record can hold it."""
    broker = registry_broker()
    api = broker.api

    def raw(method: str, path: str, body: bytes) -> Answer:
        request = urllib.request.Request(
            api.url(path), data=body, method=method, headers={"Content-Type": SCHEMA_TYPE}
        )
        return api.send(request, None)

    lone, other_half = chr(0xD800), chr(0xDFFF)
    # json.dumps escapes them (ensure_ascii): the bodies are ASCII, the JSON in them is not
    # text once read.
    bodies: list[tuple[str, str, Any, int | None]] = [
        ("POST", "/subjects/s-value/versions", {"schema": '"string"', "x": lone}, 400),
        (
            "POST",
            "/subjects/s-value/versions",
            {"schema": json.dumps({"type": "string", "doc": lone})},  # inside the schema text
            422,
        ),
        (
            "POST",
            "/subjects/s-value/versions",
            {"schema": '"int"', "metadata": {"properties": {other_half: "a"}}},
            400,
        ),
        ("PUT", "/config/s-value", {"compatibility": "NONE", "alias": lone}, 400),
        ("POST", "/subjects/%ED%A0%80/versions", {"schema": '"int"'}, None),
        ("PUT", "/config/%ED%A0%80", {"compatibility": "NONE"}, None),
        ("PUT", "/mode/%ED%A0%80", {"mode": "READONLY"}, None),
    ]
    for method, path, doc, status in bodies:
        body = json.dumps(doc).encode("ascii")
        answer = raw(method, path, body)
        if status is None:
            assert answer.status < 500, (path, answer.body)
        else:
            assert answer.status == status, (path, body, answer.body)
        assert answer.status == 200 or isinstance(answer.body["error_code"], int)
    # (A path's undecodable escapes stay as they are written: a subject like another.)
    assert "s-value" not in send(api, "GET", "/subjects").body
    assert send(api, "POST", "/subjects/s-value/versions", {"schema": '"int"'}).status == 200


def wide_schema() -> str:
    """An Avro record of 30,000 fields: over 1 MiB of text."""
    fields = [{"name": f"field_{i:06d}", "type": "string"} for i in range(30_000)]
    schema = json.dumps({"type": "record", "name": "Wide", "fields": fields})
    assert len(schema) > 1024 * 1024
    return schema


@pytest.mark.parametrize("nodes", [1, 2])
def test_a_schema_of_1_mib_registers_and_reads_back(
    registry_broker: Callable[..., RegistryBroker], nodes: int
) -> None:
    broker = registry_broker(nodes=nodes)
    schema = wide_schema()
    # With 2 nodes, through the one that is not the writer too (clients take turns).
    client = broker.client()
    schema_id = client.register_schema("wide-value", Schema(schema, "AVRO"))
    fresh = broker.client()
    assert json.loads(fresh.get_schema(schema_id).schema_str) == json.loads(schema)
    latest = fresh.get_latest_version("wide-value")
    assert latest.schema_id == schema_id
    assert json.loads(latest.schema.schema_str) == json.loads(schema)
    # Registering it again (through the other node) finds it: the same id, no new version.
    again = send(Api(broker.ports[-1]), "POST", "/subjects/wide-value/versions", {"schema": schema})
    assert again.body == {"id": schema_id}
    assert fresh.get_versions("wide-value") == [1]


# ------------------------------------------------------------------ crashes


@pytest.mark.parametrize("nodes", [1, 2])
def test_kill_9_right_after_an_answer_keeps_the_schema(
    registry_broker: Callable[..., RegistryBroker], nodes: int
) -> None:
    broker = registry_broker(nodes=nodes)
    ids = []
    for round_ in range(2):
        answer = send(
            broker.api,
            "POST",
            f"/subjects/k{round_}-value/versions",
            {"schema": record(f"K{round_}", "a")},
        )
        assert answer.status == 200
        # At once: the answer came after the fsync, or not at all (with 2 nodes, half the
        # answers came through the node that handed the change to the writer).
        broker.kill_and_restart()
        ids.append(answer.body["id"])
    for round_, schema_id in enumerate(ids):
        got = send(broker.api, "GET", f"/subjects/k{round_}-value/versions/1")
        assert got.status == 200 and got.body["id"] == schema_id
    assert ids[0] < ids[1]


def batch_ends(segment: bytes) -> list[int]:
    """Where each record batch of a segment file ends (base offset, then its length)."""
    ends, position = [], 0
    while position + 12 <= len(segment):
        (length,) = struct.unpack_from(">i", segment, position + 8)
        position += 12 + length
        if position > len(segment):
            break
        ends.append(position)
    return ends


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_torn_tail_of_schemas_loses_only_the_torn_records(
    registry_broker: Callable[..., RegistryBroker], seed: int
) -> None:
    broker = registry_broker()
    ids = [
        send(
            broker.api, "POST", f"/subjects/t{i}-value/versions", {"schema": record(f"T{i}")}
        ).body["id"]
        for i in range(8)
    ]
    process(broker).kill()
    segments = sorted((process(broker).data / "_schemas-0").glob("*.log"))
    assert len(segments) == 1
    data = segments[0].read_bytes()
    ends = batch_ends(data)
    assert len(ends) == 8 and ends[-1] == len(data)  # one batch per registration
    rng = random.Random(seed)
    cut = rng.randrange(ends[4] + 1, len(data))  # inside one of the last three batches
    whole = sum(1 for end in ends if end <= cut)
    if seed == 3:
        # Garbage past the cut rather than nothing: what a torn page write leaves.
        data = data[:cut] + bytes(rng.randrange(256) for _ in range(len(data) - cut))
    else:
        data = data[:cut]
    segments[0].write_bytes(data)

    process(broker).start()
    broker.wait()
    for i, schema_id in enumerate(ids):
        got = send(broker.api, "GET", f"/subjects/t{i}-value/versions/1")
        if i < whole:
            assert got.status == 200 and got.body["id"] == schema_id, i
        else:
            assert got.status == 404, i
    assert send(broker.api, "GET", "/subjects").body == sorted(f"t{i}-value" for i in range(whole))
    # And it goes on: a new registration gets an id above every one left.
    new = send(broker.api, "POST", "/subjects/new-value/versions", {"schema": record("New")})
    assert new.status == 200 and new.body["id"] > max(ids[:whole])


# ------------------------------------------------------- records written by others


def produce(bootstrap: str, records: list[tuple[bytes, bytes | None]]) -> None:
    """Write ``records`` into ``_schemas`` as any Kafka client may, each in a batch of its own."""
    producer = Producer({"bootstrap.servers": bootstrap})
    errors: list[Any] = []
    for key, value in records:
        producer.produce(
            "_schemas", value, key, on_delivery=lambda e, _m: errors.append(e) if e else None
        )
        assert producer.flush(30) == 0
    assert not errors, errors


def test_records_a_plain_producer_writes_are_taken_in_or_skipped(
    registry_broker: Callable[..., RegistryBroker],
) -> None:
    broker = registry_broker()
    api = broker.api
    first = send(api, "POST", "/subjects/mine-value/versions", {"schema": '"string"'}).body["id"]
    theirs = json.dumps(
        {"type": "record", "name": "Theirs", "fields": [{"name": "x", "type": "long"}]}, indent=2
    )  # not seglog's spelling
    produce(
        broker.bootstrap,
        [
            # As a Confluent registry writes them.
            (
                b'{"keytype":"SCHEMA","subject":"theirs-value","version":1,"magic":1}',
                json.dumps(
                    {
                        "subject": "theirs-value",
                        "version": 1,
                        "id": 40,
                        "schema": theirs,
                        "deleted": False,
                    }
                ).encode(),
            ),
            (
                b'{"keytype":"CONFIG","subject":"theirs-value","magic":0}',
                b'{"compatibilityLevel":"FULL"}',
            ),
            (b'{"keytype":"NOOP","magic":0}', None),
            # Kinds seglog does not keep, and what no registry writes.
            (b'{"keytype":"CONTEXT","tenant":"default","context":".x","magic":0}', b"{}"),
            (b"not json", b"not json"),
            (b"[" * 100_000, b"{}"),
            (b'{"keytype":"CONFIG","subject":null,"magic":0}', b"[" * 100_000),
            (b'{"keytype":"SCHEMA","subject":"bad-value","version":1,"magic":1}', b'{"id":1}'),
            (b'{"keytype":"SCHEMA","subject":"bad-value","version":1,"magic":1}', b"\xff"),
            # Id 40 again, for another schema: skipped, the first keeps it.
            (
                b'{"keytype":"SCHEMA","subject":"clash-value","version":1,"magic":1}',
                json.dumps(
                    {"subject": "clash-value", "version": 1, "id": 40, "schema": '"int"'}
                ).encode(),
            ),
        ],
    )
    assert send(api, "GET", "/subjects").body == ["mine-value", "theirs-value"]
    got = send(api, "GET", "/schemas/ids/40")
    assert got.status == 200 and json.loads(got.body["schema"]) == json.loads(theirs)
    assert send(api, "GET", "/config/theirs-value").body["compatibilityLevel"] == "FULL"
    assert send(api, "GET", "/config").body["compatibilityLevel"] == "BACKWARD"
    # The same schema registered under another subject gets the id it already has.
    again = send(api, "POST", "/subjects/again-value/versions", {"schema": theirs})
    assert again.body == {"id": 40}
    # A new one gets an id above every one seen, the skipped clash's too.
    new = send(api, "POST", "/subjects/new-value/versions", {"schema": '"boolean"'})
    assert new.body["id"] > 40 > first
    # Records serialized with the producer-written schema decode.
    ctx = SerializationContext("theirs", MessageField.VALUE)
    payload = b"\x00" + (40).to_bytes(4, "big") + b"\x54"  # zigzag 42
    assert AvroDeserializer(broker.client())(payload, ctx) == {"x": 42}
    # A restarted broker folds the same records to the same state.
    before = snapshot(api)
    process(broker).stop()
    process(broker).start()
    broker.wait()
    assert snapshot(api) == before


def test_transactional_records_count_once_committed(
    registry_broker: Callable[..., RegistryBroker],
) -> None:
    """Read as a read_committed consumer reads it, as ``read_registry`` reads a log directory."""
    broker = registry_broker()
    api = broker.api

    def schema_record(subject: str, schema_id: int) -> tuple[bytes, bytes]:
        key = {"keytype": "SCHEMA", "subject": subject, "version": 1, "magic": 1}
        value = {"subject": subject, "version": 1, "id": schema_id, "schema": '"string"'}
        return json.dumps(key).encode(), json.dumps(value).encode()

    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": "sr-txn", "linger.ms": 0}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    key, value = schema_record("aborted-value", 700)
    producer.produce("_schemas", value, key)
    assert producer.flush(30) == 0
    producer.abort_transaction(30)
    assert send(api, "GET", "/subjects").body == []
    first = send(api, "POST", "/subjects/a-value/versions", {"schema": '"int"'}).body["id"]
    assert first == 1  # the aborted record's id is no id at all

    # An open transaction holds changes back until it ends (then they go on, above it).
    producer.begin_transaction()
    key, value = schema_record("open-value", 800)
    producer.produce("_schemas", value, key)
    assert producer.flush(30) == 0
    held = send(api, "POST", "/subjects/b-value/versions", {"schema": '"long"'})
    assert (held.status, held.body["error_code"]) == (500, 50002), held.body
    assert send(api, "GET", "/subjects").body == ["a-value"]
    producer.commit_transaction(30)
    assert send(api, "GET", "/subjects").body == ["a-value", "open-value"]
    after = send(api, "POST", "/subjects/b-value/versions", {"schema": '"long"'})
    assert after.status == 200 and after.body["id"] == 801
    process(broker).stop()
    assert read_registry(process(broker).data).subjects() == ["a-value", "b-value", "open-value"]


def test_schemas_deleted_and_made_again_under_a_running_registry(
    registry_broker: Callable[..., RegistryBroker],
) -> None:
    """The registry is its topic: deleted, its schemas are gone, and what is written next
    is what the registry answers (not the memory of the deleted topic)."""
    broker = registry_broker()
    api = broker.api
    for i in range(3):
        send(api, "POST", f"/subjects/old{i}-value/versions", {"schema": record(f"Old{i}")})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_topics(["_schemas"]).values():
        future.result(30)
    new = send(api, "POST", "/subjects/new-value/versions", {"schema": record("New")})
    assert new.status == 200, new.body
    assert send(api, "GET", "/subjects").body == ["new-value"]
    got = send(api, "GET", f"/schemas/ids/{new.body['id']}")
    assert json.loads(got.body["schema"])["name"] == "New"
    before = snapshot(api)
    process(broker).stop()
    process(broker).start()
    broker.wait()
    assert snapshot(api) == before


# ------------------------------------------------------------------ seglog mirror


def test_mirror_copies_the_registry_with_its_ids(
    registry_broker: Callable[..., RegistryBroker], tmp_path: Path
) -> None:
    a = registry_broker()
    b = registry_broker()
    source = a.client()
    source.set_compatibility(level="NONE")
    ids = {
        (subject, i): source.register_schema(subject, Schema(record(f"R{n}", *"abc"[:i]), "AVRO"))
        for n, subject in enumerate(["orders-value", "users-value", "orders-key"])
        for i in range(1, 4)
    }
    source.delete_version("users-value", 1)
    # A record over librdkafka's 1 MB default message size copies too.
    wide_id = source.register_schema("wide-value", Schema(wide_schema(), "AVRO"))
    serializer = AvroSerializer(
        source, record("Order", "a", "b"), conf={"auto.register.schemas": True}
    )
    ctx = SerializationContext("orders", MessageField.VALUE)
    values = [{"a": str(i), "b": "x" * i} for i in range(20)]
    producer = Producer({"bootstrap.servers": a.bootstrap})
    for value in values:
        producer.produce("orders", serializer(value, ctx))
    assert producer.flush(30) == 0
    source.set_compatibility("orders-value", "FULL")
    # B holds a registry of its own, with nothing in it yet.
    assert send(b.api, "GET", "/subjects").body == []

    args = [
        "mirror",
        "--from",
        a.bootstrap,
        "--to",
        b.bootstrap,
        "--topics",
        "_schemas|orders",
        "--state",
        str(tmp_path / "map.json"),
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert snapshot(b.api) == snapshot(a.api)
    target = b.client()
    assert json.loads(target.get_schema(wide_id).schema_str) == json.loads(wide_schema())
    assert target.get_versions("users-value") == [2, 3]
    assert target.get_latest_version("orders-key").schema_id == ids[("orders-key", 3)]
    assert target.get_compatibility("orders-value") == "FULL"

    consumer = Consumer(
        {"bootstrap.servers": b.bootstrap, "group.id": "g", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["orders"])
    deserializer = AvroDeserializer(b.client())
    got: list[Any] = []
    try:
        for _ in range(int(WAIT * 10)):
            if len(got) == len(values):
                break
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                got.append(deserializer(message.value(), ctx))
    finally:
        consumer.close()
    assert got == values
    # A registration on B after the mirror: an id above every mirrored one.
    mirrored = {s["id"] for s in send(b.api, "GET", "/schemas", deleted="true").body}
    new = target.register_schema("new-value", Schema(record("New"), "AVRO"))
    assert new > max(mirrored)
    # One way only: the target's own record is not in the source, and the next run says so.
    source.register_schema("later-value", Schema(record("Later"), "AVRO"))
    again = CliRunner().invoke(cli, args)
    assert again.exit_code != 0 and "not in the source" in again.output, again.output
    assert send(b.api, "GET", "/subjects/later-value/versions").status == 404


# ------------------------------------------------------------------ compaction


def schema_records(bootstrap: str) -> int:
    """How many records ``_schemas`` holds now, from its start to its end."""
    return len(schema_keys(bootstrap))


def schema_keys(bootstrap: str) -> list[bytes]:
    """The keys of the records ``_schemas`` holds now, from its start to its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "count",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        from confluent_kafka import TopicPartition

        low, high = consumer.get_watermark_offsets(TopicPartition("_schemas", 0), timeout=30)
        consumer.assign([TopicPartition("_schemas", 0, low)])
        keys, position = [], low
        while position < high:
            message = consumer.poll(1.0)
            if message is None or message.error() is not None:
                continue
            keys.append(message.key())
            position = message.offset() + 1
        return keys
    finally:
        consumer.close()


def compact_eagerly(bootstrap: str) -> None:
    """``_schemas`` rolled at each append, cleaned at once, its tombstones dropped at once."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "_schemas",
        incremental_configs=[
            ConfigEntry("segment.ms", "1", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "min.cleanable.dirty.ratio", "0.01", incremental_operation=AlterConfigOpType.SET
            ),
            ConfigEntry("delete.retention.ms", "0", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def test_compaction_of_schemas_keeps_the_state(
    registry_broker: Callable[..., RegistryBroker],
) -> None:
    broker = registry_broker(**{"log.cleaner.backoff.ms": "50"})
    compact_eagerly(broker.bootstrap)
    api = broker.api
    written = 0

    def change(method: str, path: str, body: Any = None, **params: object) -> Any:
        nonlocal written
        answer = send(api, method, path, body, **params)
        assert answer.status == 200, (path, answer.body)
        written += 1
        return answer.body

    change("PUT", "/config", {"compatibility": "NONE"})
    # A version as an older Confluent registry wrote it (its key spelled otherwise), deleted
    # for good here: its record must not outlive the tombstone in the compacted topic.
    legacy = json.dumps({"subject": "legacy-value", "version": 1, "id": 500, "schema": '"int"'})
    produce(
        broker.bootstrap,
        [
            (
                b'{"subject":"legacy-value","version":1,"magic":0,"keytype":"SCHEMA"}',
                legacy.encode(),
            )
        ],
    )
    change("DELETE", "/subjects/legacy-value/versions/1")
    change("DELETE", "/subjects/legacy-value/versions/1", permanent="true")
    for round_ in range(4):
        for s in range(3):
            subject = f"c{s}-value"
            for v in range(3):
                change(
                    "POST",
                    f"/subjects/{subject}/versions",
                    {"schema": record(f"C{s}V{v}R{round_}")},
                )
            change("PUT", f"/config/{subject}", {"compatibility": "NONE", "alias": f"r{round_}"})
        # Re-registering what is there writes nothing; deletes do.
        change("POST", "/subjects/c0-value/versions", {"schema": record(f"C0V2R{round_}")})
        change("DELETE", "/subjects/c1-value/versions/latest")
        if round_ == 1:
            change("DELETE", "/subjects/c2-value")
            change("DELETE", "/subjects/c2-value", permanent="true")
    before = snapshot(api)
    assert before["subjects"] == ["c0-value", "c1-value", "c2-value"]
    # At least one record per change but the four re-registrations (a permanent deletion
    # writes several): the cleaner, running on its own, has run once a dozen are gone.
    for _ in range(int(WAIT * 2)):
        if schema_records(broker.bootstrap) < written - 4 - 12:
            break
        threading.Event().wait(0.5)
    else:
        pytest.fail(f"the cleaner did not compact _schemas ({written} changes)")
    assert snapshot(api) == before
    process(broker).stop()
    process(broker).start()
    broker.wait()
    assert snapshot(api) == before


def test_a_registry_idle_while_compaction_drops_a_tombstone_reads_its_topic_again(
    registry_broker: Callable[..., RegistryBroker],
) -> None:
    """The registry reads ``_schemas`` at requests: one nobody asked while another wrote a
    tombstone (a mirror copying a deletion in) and the cleaner dropped it must not answer
    the version from what it read before."""
    broker = registry_broker(**{"log.cleaner.backoff.ms": "50"})
    compact_eagerly(broker.bootstrap)
    api = broker.api
    send(api, "PUT", "/config", {"compatibility": "NONE"})
    kept = send(api, "POST", "/subjects/kept-value/versions", {"schema": record("Kept")})
    gone = send(api, "POST", "/subjects/gone-value/versions", {"schema": record("Gone")})
    assert send(api, "GET", "/subjects").body == ["gone-value", "kept-value"]
    gone_key = b'{"keytype":"SCHEMA","subject":"gone-value","version":1,"magic":1}'
    produce(broker.bootstrap, [(gone_key, None)])
    # No request to the registry now, until the cleaner has dropped every record of the key.
    for round_ in range(int(WAIT * 2)):
        filler = b'{"keytype":"CONFIG","subject":"filler","magic":0}'
        produce(broker.bootstrap, [(filler, json.dumps({"alias": str(round_)}).encode())])
        if not any(k == gone_key for k in schema_keys(broker.bootstrap)):
            break
        threading.Event().wait(0.5)
    else:
        pytest.fail("the cleaner did not drop the tombstone")
    assert send(api, "GET", "/subjects").body == ["kept-value"]
    assert send(api, "GET", f"/schemas/ids/{gone.body['id']}").status == 404
    assert send(api, "GET", f"/schemas/ids/{kept.body['id']}").status == 200
    before = snapshot(api)
    process(broker).stop()
    process(broker).start()
    broker.wait()
    assert snapshot(api) == before
