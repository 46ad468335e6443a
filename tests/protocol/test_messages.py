"""Every described API: golden bytes per family, round trips, and kafka-python agreement.

Golden bytes are written out field by field from Kafka's message
specifications, never produced by the encoder under test.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from seglog.protocol import decode_request, decode_response, encode_request, encode_response
from seglog.protocol.api_keys import REGISTRY, SUPPORTED, ApiKey
from seglog.protocol.schema import Message, decode, encode
from tests.protocol.strategies import joined, message_strategy, normalise


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def string(s: str | None) -> bytes:
    """STRING / NULLABLE_STRING: int16 length."""
    return i16(-1) if s is None else i16(len(s.encode())) + s.encode()


def cstring(s: str | None) -> bytes:
    """COMPACT_(NULLABLE_)STRING: uvarint length + 1 (all test strings are short)."""
    return b"\x00" if s is None else bytes([len(s.encode()) + 1]) + s.encode()


def req_header_v1(key: int, version: int, correlation: int, client: str | None) -> bytes:
    return i16(key) + i16(version) + i32(correlation) + string(client)


def req_header_v2(key: int, version: int, correlation: int, client: str | None) -> bytes:
    return req_header_v1(key, version, correlation, client) + b"\x00"


NO_TAGS = b"\x00"


def assert_contains(decoded: Any, expected: Any, where: str = "body") -> None:
    """``decoded`` holds ``expected``; dicts may hold more keys (fields left at defaults)."""
    decoded = normalise(decoded)
    if isinstance(expected, dict):
        assert isinstance(decoded, dict), where
        for name, value in expected.items():
            assert name in decoded, f"{where}.{name}"
            assert_contains(decoded[name], value, f"{where}.{name}")
    elif isinstance(expected, list):
        assert isinstance(decoded, list) and len(decoded) == len(expected), where
        for i, (got, want) in enumerate(zip(decoded, expected, strict=True)):
            assert_contains(got, want, f"{where}[{i}]")
    else:
        assert decoded == normalise(expected), where


def check_request(key: int, version: int, body: dict[str, Any], wire: bytes) -> dict[str, Any]:
    """``body`` encodes to ``wire`` (header included) and ``wire`` decodes back."""
    assert encode_request(key, version, 7, "cli", body) == wire
    request = decode_request(memoryview(wire), check_supported=False)
    assert request.header == (key, version, 7, "cli")
    assert_contains(request.body, body)
    return request.body


def check_response(key: int, version: int, body: dict[str, Any], wire: bytes) -> dict[str, Any]:
    assert joined(encode_response(key, version, 7, body)) == wire
    correlation, decoded = decode_response(key, version, memoryview(wire))
    assert correlation == 7
    assert_contains(decoded, body)
    return decoded


# -- ApiVersions ------------------------------------------------------------------------------


def test_api_versions_v0_request_and_response() -> None:
    check_request(18, 0, {}, req_header_v1(18, 0, 7, "cli"))
    rows = [{"api_key": 0, "min_version": 0, "max_version": 9}]
    wire = i32(7) + i16(0) + i32(1) + i16(0) + i16(0) + i16(9)
    check_response(18, 0, {"error_code": 0, "api_keys": rows}, wire)


def test_api_versions_v3_request() -> None:
    body = {"client_software_name": "sw", "client_software_version": "1.0"}
    wire = req_header_v2(18, 3, 7, "cli") + cstring("sw") + cstring("1.0") + NO_TAGS
    check_request(18, 3, body, wire)


def test_api_versions_v3_response_header_v0_and_tagged_features() -> None:
    body = {
        "error_code": 0,
        "api_keys": [{"api_key": 1, "min_version": 4, "max_version": 12}],
        "throttle_time_ms": 5,
        "supported_features": [{"name": "f", "min_version": 1, "max_version": 2}],
    }
    feature = cstring("f") + i16(1) + i16(2) + NO_TAGS
    tagged = b"\x01" + b"\x00" + bytes([1 + len(feature)]) + b"\x02" + feature
    wire = (
        i32(7)  # response header v0: no tagged-field byte even though the body is flexible
        + i16(0)
        + b"\x02"
        + i16(1)
        + i16(4)
        + i16(12)
        + NO_TAGS
        + i32(5)
        + tagged
    )
    decoded = check_response(18, 3, body, wire)
    assert decoded["finalized_features_epoch"] == -1  # a tagged field not sent: its default


# -- Metadata ---------------------------------------------------------------------------------


def test_metadata_v1_request() -> None:
    topics = [{"name": "a"}, {"name": "bc"}]
    wire = req_header_v1(3, 1, 7, "cli") + i32(2) + string("a") + string("bc")
    check_request(3, 1, {"topics": topics}, wire)
    # v1+: a null array asks for every topic.
    check_request(3, 1, {"topics": None}, req_header_v1(3, 1, 7, "cli") + i32(-1))


def test_metadata_v12_request() -> None:
    tid = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    body = {
        "topics": [{"topic_id": tid, "name": None}, {"topic_id": uuid.UUID(int=0), "name": "t"}],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": True,
    }
    wire = (
        req_header_v2(3, 12, 7, "cli")
        + b"\x03"
        + tid.bytes
        + b"\x00"  # null name
        + NO_TAGS
        + bytes(16)
        + cstring("t")
        + NO_TAGS
        + b"\x00"
        + b"\x01"
        + NO_TAGS
    )
    check_request(3, 12, body, wire)


def test_metadata_v1_response() -> None:
    body = {
        "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
        "controller_id": 1,
        "topics": [
            {
                "error_code": 0,
                "name": "t",
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": 0,
                        "leader_id": 1,
                        "replica_nodes": [1],
                        "isr_nodes": [1],
                    }
                ],
            }
        ],
    }
    wire = (
        i32(7)
        + i32(1)
        + i32(1)
        + string("h")
        + i32(9092)
        + string(None)
        + i32(1)  # controller id
        + i32(1)
        + i16(0)
        + string("t")
        + b"\x00"
        + i32(1)
        + i16(0)
        + i32(0)
        + i32(1)
        + i32(1)
        + i32(1)
        + i32(1)
        + i32(1)
    )
    check_response(3, 1, body, wire)


# -- Produce ----------------------------------------------------------------------------------

RECORDS = bytes(range(70))  # stands for a record batch: opaque to the protocol layer


def test_produce_v3_request_with_records() -> None:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 2, "records": RECORDS}]}],
    }
    wire = (
        req_header_v1(0, 3, 7, "cli")
        + string(None)
        + i16(-1)
        + i32(30000)
        + i32(1)
        + string("t")
        + i32(1)
        + i32(2)
        + i32(len(RECORDS))
        + RECORDS
    )
    decoded = check_request(0, 3, body, wire)
    records = decoded["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(records, memoryview)


def test_produce_v9_request_with_records() -> None:
    body = {
        "transactional_id": "tx",
        "acks": 1,
        "timeout_ms": 1500,
        "topic_data": [
            {
                "name": "t",
                "partition_data": [{"index": 0, "records": RECORDS}, {"index": 1, "records": None}],
            }
        ],
    }
    wire = (
        req_header_v2(0, 9, 7, "cli")
        + cstring("tx")
        + i16(1)
        + i32(1500)
        + b"\x02"
        + cstring("t")
        + b"\x03"
        + i32(0)
        + bytes([len(RECORDS) + 1])
        + RECORDS
        + NO_TAGS
        + i32(1)
        + b"\x00"  # null records
        + NO_TAGS
        + NO_TAGS
        + NO_TAGS
    )
    check_request(0, 9, body, wire)


def test_produce_v9_response() -> None:
    partition = {
        "index": 0,
        "error_code": 0,
        "base_offset": 10,
        "log_append_time_ms": -1,
        "log_start_offset": 0,
        "record_errors": [],
        "error_message": None,
    }
    body = {"responses": [{"name": "t", "partition_responses": [partition]}]}
    wire = (
        i32(7)
        + NO_TAGS  # response header v1
        + b"\x02"
        + cstring("t")
        + b"\x02"
        + i32(0)
        + i16(0)
        + i64(10)
        + i64(-1)
        + i64(0)
        + b"\x01"  # empty record_errors
        + b"\x00"  # null error message
        + NO_TAGS
        + NO_TAGS
        + i32(0)  # throttle
        + NO_TAGS
    )
    check_response(0, 9, body, wire)


# -- Fetch ------------------------------------------------------------------------------------


def test_fetch_v4_response() -> None:
    partition = {
        "partition_index": 1,
        "error_code": 0,
        "high_watermark": 100,
        "last_stable_offset": 100,
        "aborted_transactions": None,
        "records": RECORDS,
    }
    body = {"throttle_time_ms": 0, "responses": [{"topic": "t", "partitions": [partition]}]}
    wire = (
        i32(7)
        + i32(0)
        + i32(1)
        + string("t")
        + i32(1)
        + i32(1)
        + i16(0)
        + i64(100)
        + i64(100)
        + i32(-1)  # null aborted transactions
        + i32(len(RECORDS))
        + RECORDS
    )
    check_response(1, 4, body, wire)


def test_fetch_v12_response_with_a_tagged_current_leader() -> None:
    partition = {
        "partition_index": 0,
        "error_code": 6,
        "high_watermark": 5,
        "last_stable_offset": 5,
        "log_start_offset": 0,
        "current_leader": {"leader_id": 2, "leader_epoch": 3},
        "aborted_transactions": [{"producer_id": 9, "first_offset": 4}],
        "preferred_read_replica": -1,
        "records": b"",
    }
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [{"topic": "t", "partitions": [partition]}],
    }
    leader = i32(2) + i32(3) + NO_TAGS
    wire = (
        i32(7)
        + NO_TAGS
        + i32(0)
        + i16(0)
        + i32(0)
        + b"\x02"
        + cstring("t")
        + b"\x02"
        + i32(0)
        + i16(6)
        + i64(5)
        + i64(5)
        + i64(0)
        + b"\x02"
        + i64(9)
        + i64(4)
        + NO_TAGS
        + i32(-1)
        + b"\x01"  # empty records
        + b"\x01\x01"
        + bytes([len(leader)])
        + leader  # tag 1: current_leader
        + NO_TAGS
        + NO_TAGS
    )
    decoded = check_response(1, 12, body, wire)
    got = decoded["responses"][0]["partitions"][0]
    assert got["diverging_epoch"] == {"epoch": -1, "end_offset": -1}  # not sent: default


def test_fetch_v12_request() -> None:
    partition = {
        "partition": 0,
        "current_leader_epoch": 1,
        "fetch_offset": 42,
        "last_fetched_epoch": -1,
        "log_start_offset": -1,
        "partition_max_bytes": 1 << 20,
    }
    body = {
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 50 << 20,
        "isolation_level": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": "t", "partitions": [partition]}],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    wire = (
        req_header_v2(1, 12, 7, "cli")
        + i32(-1)
        + i32(500)
        + i32(1)
        + i32(50 << 20)
        + i8(1)
        + i32(0)
        + i32(-1)
        + b"\x02"
        + cstring("t")
        + b"\x02"
        + i32(0)
        + i32(1)
        + i64(42)
        + i32(-1)
        + i64(-1)
        + i32(1 << 20)
        + NO_TAGS
        + NO_TAGS
        + b"\x01"
        + cstring("")
        + NO_TAGS
    )
    check_request(1, 12, body, wire)


# -- offsets, groups, admin, producer ids, SASL -------------------------------------------------


def test_list_offsets_v1_request() -> None:
    body = {
        "replica_id": -1,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": -2}]}],
    }
    wire = (
        req_header_v1(2, 1, 7, "cli") + i32(-1) + i32(1) + string("t") + i32(1) + i32(0) + i64(-2)
    )
    check_request(2, 1, body, wire)


def test_offset_for_leader_epoch_v4_response() -> None:
    partition = {"error_code": 0, "partition": 1, "leader_epoch": 2, "end_offset": 30}
    body = {"throttle_time_ms": 0, "topics": [{"topic": "t", "partitions": [partition]}]}
    wire = (
        i32(7)
        + NO_TAGS
        + i32(0)
        + b"\x02"
        + cstring("t")
        + b"\x02"
        + i16(0)
        + i32(1)
        + i32(2)
        + i64(30)
        + NO_TAGS
        + NO_TAGS
        + NO_TAGS
    )
    check_response(23, 4, body, wire)


def test_join_group_v0_request() -> None:
    body = {
        "group_id": "g",
        "session_timeout_ms": 10000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"\x00\x01"}],
    }
    wire = (
        req_header_v1(11, 0, 7, "cli")
        + string("g")
        + i32(10000)
        + string("")
        + string("consumer")
        + i32(1)
        + string("range")
        + i32(2)
        + b"\x00\x01"
    )
    decoded = check_request(11, 0, body, wire)
    assert decoded["protocols"][0]["metadata"] == b"\x00\x01"  # bytes fields are bytes


def test_heartbeat_v4_request() -> None:
    body = {"group_id": "g", "generation_id": 3, "member_id": "m", "group_instance_id": None}
    wire = req_header_v2(12, 4, 7, "cli") + cstring("g") + i32(3) + cstring("m") + b"\x00" + NO_TAGS
    check_request(12, 4, body, wire)


def test_find_coordinator_v4_response() -> None:
    row = {
        "key": "g",
        "node_id": 1,
        "host": "h",
        "port": 9092,
        "error_code": 0,
        "error_message": None,
    }
    body = {"throttle_time_ms": 0, "coordinators": [row]}
    wire = (
        i32(7)
        + NO_TAGS
        + i32(0)
        + b"\x02"
        + cstring("g")
        + i32(1)
        + cstring("h")
        + i32(9092)
        + i16(0)
        + b"\x00"
        + NO_TAGS
        + NO_TAGS
    )
    check_response(10, 4, body, wire)


def test_offset_commit_v2_request() -> None:
    partition = {"partition_index": 0, "committed_offset": 5, "committed_metadata": None}
    body = {
        "group_id": "g",
        "generation_id_or_member_epoch": 1,
        "member_id": "m",
        "retention_time_ms": -1,
        "topics": [{"name": "t", "partitions": [partition]}],
    }
    wire = (
        req_header_v1(8, 2, 7, "cli")
        + string("g")
        + i32(1)
        + string("m")
        + i64(-1)
        + i32(1)
        + string("t")
        + i32(1)
        + i32(0)
        + i64(5)
        + string(None)
    )
    check_request(8, 2, body, wire)


def test_create_topics_v2_request() -> None:
    topic = {
        "name": "t",
        "num_partitions": 3,
        "replication_factor": 1,
        "assignments": [],
        "configs": [{"name": "cleanup.policy", "value": "compact"}],
    }
    body = {"topics": [topic], "timeout_ms": 1000, "validate_only": False}
    wire = (
        req_header_v1(19, 2, 7, "cli")
        + i32(1)
        + string("t")
        + i32(3)
        + i16(1)
        + i32(0)
        + i32(1)
        + string("cleanup.policy")
        + string("compact")
        + i32(1000)
        + b"\x00"
    )
    check_request(19, 2, body, wire)


def test_describe_cluster_v0_response() -> None:
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "cluster_id": "c",
        "controller_id": 1,
        "brokers": [{"broker_id": 1, "host": "h", "port": 9092, "rack": None}],
        "cluster_authorized_operations": -(2**31),
    }
    wire = (
        i32(7)
        + NO_TAGS
        + i32(0)
        + i16(0)
        + b"\x00"
        + cstring("c")
        + i32(1)
        + b"\x02"
        + i32(1)
        + cstring("h")
        + i32(9092)
        + b"\x00"
        + NO_TAGS
        + i32(-(2**31))
        + NO_TAGS
    )
    check_response(60, 0, body, wire)


def test_init_producer_id_v2_response() -> None:
    body = {"throttle_time_ms": 0, "error_code": 0, "producer_id": 1000, "producer_epoch": 0}
    wire = i32(7) + NO_TAGS + i32(0) + i16(0) + i64(1000) + i16(0) + NO_TAGS
    check_response(22, 2, body, wire)


def test_sasl_handshake_v1_is_never_flexible() -> None:
    check_request(17, 1, {"mechanism": "PLAIN"}, req_header_v1(17, 1, 7, "cli") + string("PLAIN"))
    wire = i32(7) + i16(0) + i32(1) + string("PLAIN")
    check_response(17, 1, {"error_code": 0, "mechanisms": ["PLAIN"]}, wire)


# -- every API, every version -----------------------------------------------------------------

CASES = [
    (message, version)
    for info in REGISTRY.values()
    for message in (info.request, info.response)
    for version in range(info.min_version, info.max_version + 1)
]


def _case_id(case: tuple[Message, int]) -> str:
    return f"{case[0].name}-v{case[1]}"


def test_registry_covers_the_required_versions() -> None:
    required = {
        ApiKey.API_VERSIONS: (0, 4),
        ApiKey.METADATA: (0, 12),
        ApiKey.PRODUCE: (0, 11),
        ApiKey.FETCH: (4, 17),
        ApiKey.LIST_OFFSETS: (0, 9),
        ApiKey.CREATE_TOPICS: (2, 7),
        ApiKey.DELETE_TOPICS: (1, 6),
        ApiKey.CREATE_PARTITIONS: (0, 3),
        ApiKey.DELETE_RECORDS: (0, 2),
        ApiKey.DESCRIBE_CONFIGS: (1, 4),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
        ApiKey.ALTER_CONFIGS: (0, 2),
        ApiKey.DESCRIBE_CLUSTER: (0, 1),
        ApiKey.INIT_PRODUCER_ID: (0, 5),
        ApiKey.FIND_COORDINATOR: (0, 6),
        ApiKey.JOIN_GROUP: (0, 9),
        ApiKey.SYNC_GROUP: (0, 5),
        ApiKey.HEARTBEAT: (0, 4),
        ApiKey.LEAVE_GROUP: (0, 5),
        ApiKey.OFFSET_COMMIT: (2, 9),
        ApiKey.OFFSET_FETCH: (1, 9),
        ApiKey.LIST_GROUPS: (0, 5),
        ApiKey.DESCRIBE_GROUPS: (0, 6),
        ApiKey.DELETE_GROUPS: (0, 2),
        ApiKey.OFFSET_DELETE: (0, 0),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
        ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
        ApiKey.SASL_HANDSHAKE: (0, 1),
    }
    for key, (low, high) in required.items():
        info = REGISTRY[key]
        assert info.min_version <= low and high <= info.max_version, key.name
        assert info.request.api_key == info.response.api_key == key
    for served, (low, high) in SUPPORTED.items():
        info = REGISTRY[ApiKey(served)]
        assert info.min_version <= low <= high <= info.max_version, served


def test_first_flexible_versions() -> None:
    expected = {
        ApiKey.API_VERSIONS: 3,
        ApiKey.METADATA: 9,
        ApiKey.PRODUCE: 9,
        ApiKey.FETCH: 12,
        ApiKey.LIST_OFFSETS: 6,
        ApiKey.OFFSET_COMMIT: 8,
        ApiKey.OFFSET_FETCH: 6,
        ApiKey.JOIN_GROUP: 6,
        ApiKey.DESCRIBE_CLUSTER: 0,
        ApiKey.SASL_HANDSHAKE: None,
        ApiKey.OFFSET_DELETE: None,
    }
    for key, flexible in expected.items():
        assert REGISTRY[key].flexible_version == flexible, key.name


@pytest.mark.parametrize(("message", "version"), CASES, ids=[_case_id(c) for c in CASES])
def test_round_trip(message: Message, version: int) -> None:
    @settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(message_strategy(message, version))
    def check(value: dict[str, Any]) -> None:
        data = encode(message, version, value)
        assert normalise(decode(message, version, data)) == normalise(value)

    check()


# -- kafka-python as an independent implementation ---------------------------------------------


def _kafka_python_classes() -> dict[tuple[int, str], Any]:
    from kafka.protocol.api_message import ApiMessage

    # Importing the packages registers their message classes.
    for module in ("admin", "consumer", "metadata", "producer", "sasl"):
        __import__(f"kafka.protocol.{module}")

    def subclasses(cls: Any) -> list[Any]:
        found: list[Any] = []
        for sub in cls.__subclasses__():
            found += [sub, *subclasses(sub)]
        return found

    return {
        (cls.API_KEY, cls.type): cls
        for cls in subclasses(ApiMessage)
        if getattr(cls, "_class_version", None) is None and "_v" not in cls.__name__
    }


KAFKA_PYTHON = _kafka_python_classes()

SHARED = [
    (message, version)
    for message, version in CASES
    if (key := (message.api_key, "request" if message.name.endswith("Request") else "response"))
    in KAFKA_PYTHON
    and KAFKA_PYTHON[key]._valid_versions[0] <= version <= KAFKA_PYTHON[key]._valid_versions[1]
]


def test_kafka_python_shares_most_cases() -> None:
    assert len(SHARED) > 0.9 * len(CASES)


@pytest.mark.parametrize(("message", "version"), SHARED, ids=[_case_id(c) for c in SHARED])
def test_kafka_python_reads_and_rewrites_our_bytes(message: Message, version: int) -> None:
    """seglog encodes, kafka-python decodes and re-encodes: the same bytes; seglog reads them."""
    cls = KAFKA_PYTHON[
        (message.api_key, "request" if message.name.endswith("Request") else "response")
    ]

    @settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(message_strategy(message, version))
    def check(value: dict[str, Any]) -> None:
        if message.name == "ApiVersionsResponse":
            value["error_code"] = 0  # kafka-python reads any error answer as v0
        ours = encode(message, version, value)
        theirs = cls.decode(ours, version=version)
        theirs._header = None
        again = bytes(theirs.encode(version=version))
        assert again == ours
        assert normalise(decode(message, version, again)) == normalise(value)

    check()


def test_kafka_python_requests_decode() -> None:
    from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

    for version in (0, 3, 4):
        sw = {"client_software_name": "kp", "client_software_version": "3"} if version >= 3 else {}
        request = ApiVersionsRequest[version](**sw)
        request.with_header(correlation_id=5, client_id="kp")
        decoded = decode_request(request.encode(header=True), check_supported=False)
        assert decoded.header == (18, version, 5, "kp")
        assert decoded.body["client_software_name"] == sw.get("client_software_name", "")
    for version in (1, 4, 9, 12):
        topic = MetadataRequest[version].MetadataRequestTopic
        kw: dict[str, Any] = {"topics": [topic(name="a"), topic(name="b")]}
        if version >= 4:
            kw["allow_auto_topic_creation"] = False
        request = MetadataRequest[version](**kw)
        request.with_header(correlation_id=7, client_id="kp")
        decoded = decode_request(request.encode(header=True))
        assert decoded.header == (3, version, 7, "kp")
        assert [t["name"] for t in decoded.body["topics"]] == ["a", "b"]
        assert decoded.body["allow_auto_topic_creation"] is (version < 4)


def test_kafka_python_produce_and_fetch_requests_decode() -> None:
    from kafka.protocol.consumer import FetchRequest
    from kafka.protocol.producer import ProduceRequest

    for version in (3, 7, 9, 11):
        req = ProduceRequest[version]
        partition = req.TopicProduceData.PartitionProduceData(index=1, records=RECORDS)
        topic = req.TopicProduceData(name="t", partition_data=[partition])
        kw: dict[str, Any] = {"acks": -1, "timeout_ms": 100, "topic_data": [topic]}
        request = req(transactional_id=None, **kw)
        request.with_header(correlation_id=3, client_id="kp")
        decoded = decode_request(request.encode(header=True), check_supported=False)
        data = decoded.body["topic_data"][0]["partition_data"][0]
        assert data["index"] == 1 and bytes(data["records"]) == RECORDS
    for version in (4, 11, 12):
        req = FetchRequest[version]
        partition = req.FetchTopic.FetchPartition(
            partition=0, fetch_offset=17, partition_max_bytes=1024
        )
        request = req(
            replica_id=-1,
            max_wait_ms=100,
            min_bytes=1,
            topics=[req.FetchTopic(topic="t", partitions=[partition])],
        )
        request.with_header(correlation_id=4, client_id="kp")
        decoded = decode_request(request.encode(header=True))
        got = decoded.body["topics"][0]
        assert got["topic"] == "t" and got["partitions"][0]["fetch_offset"] == 17


def test_kafka_python_reads_our_fetch_responses() -> None:
    from kafka.protocol.consumer import FetchResponse

    partition = {
        "partition_index": 0,
        "error_code": 0,
        "high_watermark": 9,
        "records": RECORDS,
        "aborted_transactions": None,
    }
    body = {"responses": [{"topic": "t", "partitions": [partition]}]}
    for version in (4, 7, 11, 12):
        data = joined(encode_response(1, version, 3, body))
        theirs = FetchResponse.decode(data, version=version, header=True)
        got = theirs.responses[0].partitions[0]
        assert theirs.responses[0].topic == "t" and got.high_watermark == 9
        assert bytes(got.records) == RECORDS
