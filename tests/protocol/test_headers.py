"""Request and response headers: versions, unsupported requests, whole messages."""

from __future__ import annotations

import struct

import pytest

from seglog.protocol import (
    ApiKey,
    DecodeError,
    RecordsRef,
    UnknownApiKeyError,
    UnsupportedVersionError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    peek_header,
    request_header_version,
    response_correlation_id,
    response_header_version,
    unsupported_api_versions_response,
)
from seglog.protocol.api_keys import REGISTRY, SUPPORTED, api_versions_entries
from seglog.protocol.headers import REQUEST_HEADER, RESPONSE_HEADER
from seglog.protocol.schema import decode_from, encode
from tests.protocol.strategies import joined


def test_header_versions() -> None:
    assert request_header_version(ApiKey.METADATA, 8) == 1
    assert request_header_version(ApiKey.METADATA, 9) == 2
    assert request_header_version(ApiKey.API_VERSIONS, 3) == 2
    assert request_header_version(ApiKey.SASL_HANDSHAKE, 1) == 1  # never flexible
    assert request_header_version(7, 0) == 0  # ControlledShutdown v0
    assert response_header_version(ApiKey.METADATA, 8) == 0
    assert response_header_version(ApiKey.METADATA, 9) == 1
    assert response_header_version(ApiKey.DESCRIBE_CLUSTER, 0) == 1
    # ApiVersions responses use header v0 at every version.
    for version in range(5):
        assert response_header_version(ApiKey.API_VERSIONS, version) == 0
    for key, info in REGISTRY.items():
        for version in range(info.min_version, info.max_version + 1):
            flexible = info.flexible_version is not None and version >= info.flexible_version
            assert request_header_version(key, version) == (2 if flexible else 1)


def test_request_header_v2_keeps_the_int16_client_id_and_skips_tags() -> None:
    body = b"\x03sw" + b"\x021" + b"\x00"
    head = struct.pack(">hhih", 18, 3, 9, 4) + b"abcd"
    # Header tagged fields: one unknown tag (7) of two bytes; it is skipped.
    wire = head + b"\x01\x07\x02zz" + body
    request = decode_request(memoryview(wire))
    assert request.header == (18, 3, 9, "abcd")
    assert request.body == {"client_software_name": "sw", "client_software_version": "1"}
    assert request.api.name == "ApiVersions"


def test_header_descriptions_agree_with_the_fast_path() -> None:
    wire = encode_request(ApiKey.METADATA, 12, 11, "client", {"topics": None})
    value, pos = decode_from(REQUEST_HEADER, 2, memoryview(wire), 0)
    assert value == {
        "request_api_key": 3,
        "request_api_version": 12,
        "correlation_id": 11,
        "client_id": "client",
    }
    assert encode(REQUEST_HEADER, 2, value) == wire[:pos]
    assert encode(REQUEST_HEADER, 1, {**value, "client_id": None}) == wire[:8] + b"\xff\xff"
    assert encode(RESPONSE_HEADER, 1, {"correlation_id": 1}) == b"\x00\x00\x00\x01\x00"
    assert encode(RESPONSE_HEADER, 0, {"correlation_id": 1}) == b"\x00\x00\x00\x01"


def test_unknown_api_key_carries_the_correlation_id() -> None:
    wire = struct.pack(">hhih", 999, 0, 77, -1)
    with pytest.raises(UnknownApiKeyError) as err:
        decode_request(memoryview(wire))
    assert (err.value.api_key, err.value.correlation_id) == (999, 77)
    assert isinstance(err.value, UnsupportedVersionError)


def test_unsupported_version_carries_the_correlation_id() -> None:
    wire = struct.pack(">hhih", ApiKey.FETCH, 2, 78, 2) + b"id"
    with pytest.raises(UnsupportedVersionError) as err:
        decode_request(memoryview(wire))
    assert (err.value.api_key, err.value.api_version) == (ApiKey.FETCH, 2)
    assert (err.value.correlation_id, err.value.client_id) == (78, "id")
    assert err.value.kafka_error == "UNSUPPORTED_VERSION"
    # Described but not served (every described API is served now: a table without it).
    wire = encode_request(ApiKey.SASL_HANDSHAKE, 0, 5, None, {})
    with pytest.raises(UnsupportedVersionError, match="supported: none"):
        decode_request(memoryview(wire), supported={})
    assert decode_request(memoryview(wire), check_supported=False).header.api_key == 17
    served: dict[int, tuple[int, int]] = {ApiKey.SASL_HANDSHAKE: (0, 1)}
    assert decode_request(memoryview(wire), supported=served).body["mechanism"] == ""


def test_unsupported_api_versions_answer_is_v0() -> None:
    low, high = SUPPORTED[ApiKey.API_VERSIONS]
    data = joined(unsupported_api_versions_response(31))
    assert data == struct.pack(">ihi", 31, 35, 1) + struct.pack(">hhh", 18, low, high)
    framed = joined(unsupported_api_versions_response(31, framed=True))
    assert framed == struct.pack(">i", len(data)) + data
    # A client that asked v99 reads it whatever version it thinks it asked.
    correlation, body = decode_response(ApiKey.API_VERSIONS, 3, memoryview(data))
    assert correlation == 31 and body["error_code"] == 35
    assert body["api_keys"] == [{"api_key": 18, "min_version": low, "max_version": high}]
    everything = unsupported_api_versions_response(1, SUPPORTED)
    _, body = decode_response(ApiKey.API_VERSIONS, 0, joined(everything))
    assert body["api_keys"] == api_versions_entries()


def test_api_versions_entries() -> None:
    rows = api_versions_entries()
    assert [r["api_key"] for r in rows] == sorted(SUPPORTED)
    assert {"api_key": 0, "min_version": 0, "max_version": SUPPORTED[0][1]} in rows
    everything = api_versions_entries(
        {k: (i.min_version, i.max_version) for k, i in REGISTRY.items()}
    )
    assert len(everything) == len(REGISTRY)


def test_truncated_and_malformed_headers() -> None:
    for wire in (b"", b"\x00\x12\x00", struct.pack(">hhi", 18, 0, 1) + b"\x00", b"\x00" * 9):
        with pytest.raises(DecodeError):
            decode_request(memoryview(wire))
    with pytest.raises(DecodeError, match="client id"):
        decode_request(memoryview(struct.pack(">hhih", 18, 0, 1, 5) + b"ab"))
    with pytest.raises(DecodeError, match="UTF-8"):
        decode_request(memoryview(struct.pack(">hhih", 18, 0, 1, 1) + b"\xff"))
    with pytest.raises(DecodeError):
        decode_request(memoryview(struct.pack(">hhih", 18, 0, 1, -2)))
    assert peek_header(memoryview(struct.pack(">hhih", 1, 4, 2, -1))).client_id is None


def test_request_bodies_may_carry_trailing_bytes() -> None:
    wire = encode_request(ApiKey.METADATA, 12, 1, "c", {"topics": []}) + b"\x00\x00\x00"
    assert decode_request(memoryview(wire)).body["topics"] == []


def test_framed_request_and_response() -> None:
    body = {"throttle_time_ms": 0, "error_code": 0, "producer_id": 5, "producer_epoch": 1}
    for version in (0, 2, 4):
        chunks = encode_response(ApiKey.INIT_PRODUCER_ID, version, 9, body, framed=True)
        data = joined(chunks)
        assert struct.unpack_from(">i", data)[0] == len(data) - 4
        assert response_correlation_id(memoryview(data[4:])) == 9
        correlation, decoded = decode_response(ApiKey.INIT_PRODUCER_ID, version, data[4:])
        assert correlation == 9 and decoded == body
    framed = encode_request(ApiKey.METADATA, 1, 2, "c", {"topics": None}, framed=True)
    assert framed[:4] == struct.pack(">i", len(framed) - 4)
    assert framed[4:] == encode_request(ApiKey.METADATA, 1, 2, "c", {"topics": None})


def test_framed_response_counts_records_holes() -> None:
    ref = RecordsRef(1 << 20)
    partition = {"partition_index": 0, "records": ref}
    body = {"responses": [{"topic": "t", "partitions": [partition]}]}
    chunks = encode_response(ApiKey.FETCH, 12, 3, body, framed=True)
    assert ref in chunks
    head = joined(chunks[:1])
    assert struct.unpack_from(">i", head)[0] == sum(len(c) for c in chunks) - 4
    with pytest.raises(TypeError):
        encode_request(
            ApiKey.PRODUCE, 9, 1, None, {"topic_data": [{"partition_data": [{"records": ref}]}]}
        )


def test_encoding_an_undescribed_api_is_a_caller_error() -> None:
    with pytest.raises(ValueError):
        encode_response(999, 0, 1, {})
    with pytest.raises(ValueError):
        encode_request(999, 0, 1, None, {})
    with pytest.raises(ValueError):
        decode_response(999, 0, b"\x00\x00\x00\x01")
