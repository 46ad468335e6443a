"""Topic creation and deletion under faults, and a start with a partition that cannot open."""

from __future__ import annotations

import json
import socket
import struct
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from seglog.protocol import ApiKey, decode_response, encode_request, error_codes
from seglog.records.builder import SimpleRecord, build_batch
from tests.broker.conftest import BrokerProcess


class RawClient:
    """One connection speaking the wire protocol directly, to see every error code."""

    def __init__(self, broker: BrokerProcess, timeout: float = 30) -> None:
        self.sock = socket.create_connection(("127.0.0.1", broker.port), timeout=timeout)
        self.correlation = 0

    def send(self, api: ApiKey, version: int, body: dict[str, Any]) -> int:
        self.correlation += 1
        payload = encode_request(api, version, self.correlation, "test", body)
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        return self.correlation

    def receive(self, api: ApiKey, version: int) -> dict[str, Any]:
        (size,) = struct.unpack(">i", self._exactly(4))
        _, body = decode_response(api, version, memoryview(self._exactly(size)))
        return body

    def call(self, api: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.send(api, version, body)
        return self.receive(api, version)

    def _exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            out += chunk
        return bytes(out)

    def close(self) -> None:
        self.sock.close()

    # ---------------------------------------------------------------- helpers

    def metadata(self, *names: str, auto_create: bool = False) -> dict[str, dict[str, Any]]:
        body = self.call(
            ApiKey.METADATA,
            12,
            {
                "topics": [{"topic_id": uuid.UUID(int=0), "name": n} for n in names],
                "allow_auto_topic_creation": auto_create,
                "include_topic_authorized_operations": False,
            },
        )
        return {t["name"]: t for t in body["topics"]}

    def create(self, name: str, partitions: int = 1, **configs: str) -> dict[str, Any]:
        body = self.call(
            ApiKey.CREATE_TOPICS,
            7,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": partitions,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in configs.items()],
                    }
                ],
                "timeout_ms": 10_000,
                "validate_only": False,
            },
        )
        return body["topics"][0]  # type: ignore[no-any-return]

    def delete(self, name: str) -> dict[str, Any]:
        body = self.call(ApiKey.DELETE_TOPICS, 5, {"topic_names": [name], "timeout_ms": 10_000})
        return body["responses"][0]  # type: ignore[no-any-return]

    def produce(self, topic: str, partition: int, value: bytes) -> dict[str, Any]:
        batch = build_batch([SimpleRecord(value=value, timestamp=1_700_000_000_000)])
        body = self.call(
            ApiKey.PRODUCE,
            9,
            {
                "transactional_id": None,
                "acks": -1,
                "timeout_ms": 10_000,
                "topic_data": [
                    {
                        "name": topic,
                        "partition_data": [{"index": partition, "records": batch}],
                    }
                ],
            },
        )
        return body["responses"][0]["partition_responses"][0]  # type: ignore[no-any-return]


def code(name: str) -> int:
    return error_codes.code_for(name)


def test_restart_with_a_partition_that_cannot_open(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = make_broker()
    client = RawClient(broker)
    assert client.create("good")["error_code"] == 0
    assert client.create("bad", 2)["error_code"] == 0
    assert client.produce("bad", 0, b"x")["error_code"] == 0
    client.close()
    assert broker.stop() == 0
    # Corrupt one partition so that opening it raises.
    log_file = broker.data / "bad-0" / "00000000000000000000.log"
    log_file.unlink()
    log_file.mkdir()

    broker.start()  # the start does not refuse
    client = RawClient(broker)
    topics = client.metadata("good", "bad")
    assert topics["good"]["error_code"] == 0
    bad = {p["partition_index"]: p for p in topics["bad"]["partitions"]}
    assert bad[0]["error_code"] == code("LEADER_NOT_AVAILABLE")
    assert bad[0]["leader_id"] == -1 and bad[0]["offline_replicas"] == [1]
    assert bad[1]["error_code"] == 0
    assert client.produce("bad", 0, b"y")["error_code"] == code("KAFKA_STORAGE_ERROR")
    assert client.produce("bad", 1, b"y")["error_code"] == 0
    assert client.produce("good", 0, b"y")["error_code"] == 0
    log = broker.log.read_text()
    assert "partition 0 of topic bad cannot be opened" in log
    assert "Traceback" in log
    # The offline topic can still be deleted, and the next start is clean.
    assert client.delete("bad")["error_code"] == 0
    client.close()
    assert broker.stop() == 0
    broker.start()
    client = RawClient(broker)
    assert "bad" not in client.metadata()
    client.close()


def test_clients_cannot_create_internal_topics(make_broker) -> None:  # type: ignore[no-untyped-def]
    # A broker of its own: no other test's transaction has created __transaction_state.
    broker: BrokerProcess = make_broker()
    client = RawClient(broker)
    for name in ("__consumer_offsets", "__transaction_state"):
        result = client.create(name, 3)
        assert result["error_code"] == code("INVALID_REQUEST")
        assert f"Creation of internal topic {name} is prohibited" in result["error_message"]
    # Nor by asking for their metadata with auto-creation on.
    topics = client.metadata("__transaction_state", auto_create=True)
    assert topics["__transaction_state"]["error_code"] == code("UNKNOWN_TOPIC_OR_PARTITION")
    assert "__transaction_state" not in client.metadata()
    client.close()


def test_a_colliding_name_is_refused(broker: BrokerProcess, topic: str) -> None:
    client = RawClient(broker)
    base = topic.replace(".", "-")
    assert client.create(f"{base}_x")["error_code"] == 0
    result = client.create(f"{base}.x")
    assert result["error_code"] == code("INVALID_TOPIC_EXCEPTION")
    assert result["error_message"] == (f"Topic '{base}.x' collides with existing topic: {base}_x")
    assert f"{base}.x" not in client.metadata()
    client.close()


def test_a_topic_with_the_longest_name_can_be_deleted(broker: BrokerProcess) -> None:
    name = ("long-" + uuid.uuid4().hex) * 10
    name = name[:249]
    client = RawClient(broker)
    assert client.create(name, 3)["error_code"] == 0
    assert client.produce(name, 2, b"v")["error_code"] == 0
    assert client.delete(name)["error_code"] == 0
    assert name not in client.metadata()
    # A second delete is answered, not a dropped connection.
    assert client.delete(name)["error_code"] == code("UNKNOWN_TOPIC_OR_PARTITION")
    assert not any(p.name.startswith(name[:100]) for p in broker.data.iterdir())
    client.close()


def test_auto_creating_many_topics_does_not_block_other_requests(
    broker: BrokerProcess, topic: str
) -> None:
    """While one Metadata request creates 300 topics, other connections are answered."""
    other = RawClient(broker)
    assert other.create(topic)["error_code"] == 0
    assert other.produce(topic, 0, b"warm")["error_code"] == 0
    creator = RawClient(broker, timeout=120)
    names = [f"{topic}.auto.{i}" for i in range(300)]
    started = time.monotonic()
    creator.send(
        ApiKey.METADATA,
        12,
        {
            "topics": [{"topic_id": uuid.UUID(int=0), "name": n} for n in names],
            "allow_auto_topic_creation": True,
            "include_topic_authorized_operations": False,
        },
    )
    latencies = []
    creator.sock.setblocking(False)
    answered = None
    while answered is None:
        t0 = time.monotonic()
        if len(latencies) % 2:
            other.call(
                ApiKey.API_VERSIONS,
                3,
                {"client_software_name": "t", "client_software_version": "1"},
            )
        else:
            assert other.produce(topic, 0, b"during")["error_code"] == 0
        latencies.append(time.monotonic() - t0)
        try:
            if creator.sock.recv(1, socket.MSG_PEEK):
                answered = time.monotonic() - started
        except BlockingIOError:
            pass
        time.sleep(0.005)
    creator.sock.setblocking(True)
    body = creator.receive(ApiKey.METADATA, 12)
    assert len(body["topics"]) == 300
    assert {t["error_code"] for t in body["topics"]} == {code("LEADER_NOT_AVAILABLE")}
    assert len(other.metadata(*names)) == 300
    # Requests were answered while the creation ran: creating the topics on the event
    # loop held every other request until it was done (2.65 s for 300 topics), so the
    # first request after the Metadata request would have been answered with it.
    assert len(latencies) >= 5, (answered, latencies)
    for name in names:
        assert other.delete(name)["error_code"] == 0
    other.close()
    creator.close()


def test_a_topic_whose_stored_config_is_now_invalid(make_broker) -> None:  # type: ignore[no-untyped-def]
    """As an earlier version could have stored it: the broker starts; the topic is offline."""
    broker: BrokerProcess = make_broker()
    client = RawClient(broker)
    assert client.create("old")["error_code"] == 0
    assert client.create("fine")["error_code"] == 0
    client.close()
    assert broker.stop() == 0
    topics_file = broker.data / "seglog-topics.json"
    stored = json.loads(topics_file.read_text())
    stored["topics"]["old"]["configs"] = {"segment.bytes": "500"}
    topics_file.write_text(json.dumps(stored))
    broker.start()
    client = RawClient(broker)
    assert client.produce("fine", 0, b"x")["error_code"] == 0
    assert client.produce("old", 0, b"x")["error_code"] == code("KAFKA_STORAGE_ERROR")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "old")
    with pytest.raises(KafkaException) as caught:
        admin.describe_configs([resource])[resource].result(10)
    assert caught.value.args[0].name() == "INVALID_CONFIG"
    # Removing the bad override is allowed, and the next start serves the topic.
    change = ConfigResource(
        ConfigResource.Type.TOPIC,
        "old",
        incremental_configs=[
            ConfigEntry("segment.bytes", None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )
    admin.incremental_alter_configs([change])[change].result(10)
    client.close()
    assert broker.stop() == 0
    broker.start()
    client = RawClient(broker)
    assert client.produce("old", 0, b"x")["error_code"] == 0
    client.close()
